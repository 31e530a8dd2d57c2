package etcdserver

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/tend-dev/tend/internal/testing/repo"
)

// DirEnv names the environment variable that points the harness at a
// directory holding etcd and etcdutl, instead of hack/toolchain.sh.
const DirEnv = "TEND_ETCD_DIR"

// Binaries are the paths of the etcd programs that the harness runs.
type Binaries struct {
	// Etcd is the server.
	Etcd string
	// Etcdutl works on snapshots and data directories offline.
	Etcdutl string
}

var (
	toolchainOnce sync.Once
	toolchainBins Binaries
	toolchainErr  error
)

// FindBinaries returns the programs in $TEND_ETCD_DIR when it is set, and
// otherwise asks hack/toolchain.sh, which builds them from the pinned modules
// when its cache lacks them. It fails when a program is missing or cannot be
// run: the tests must not go on without etcd.
func FindBinaries() (Binaries, error) {
	var b Binaries
	if dir := os.Getenv(DirEnv); dir != "" {
		b = Binaries{Etcd: filepath.Join(dir, "etcd"), Etcdutl: filepath.Join(dir, "etcdutl")}
	} else {
		toolchainOnce.Do(func() { toolchainBins, toolchainErr = fromToolchain() })
		if toolchainErr != nil {
			return Binaries{}, toolchainErr
		}
		b = toolchainBins
	}
	for _, p := range []string{b.Etcd, b.Etcdutl} {
		fi, err := os.Stat(p)
		if err != nil {
			return Binaries{}, fmt.Errorf("etcd binary: %w (set %s to a directory with etcd and etcdutl, or unset it to use hack/toolchain.sh)", err, DirEnv)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return Binaries{}, fmt.Errorf("etcd binary %s is not an executable file", p)
		}
	}
	return b, nil
}

// fromToolchain runs hack/toolchain.sh etcd etcdutl from the repository root.
func fromToolchain() (Binaries, error) {
	root, err := repo.Root()
	if err != nil {
		return Binaries{}, fmt.Errorf("%s is unset and %w", DirEnv, err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(root, "hack", "toolchain.sh"), "etcd", "etcdutl")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return Binaries{}, fmt.Errorf("%s is unset and hack/toolchain.sh etcd etcdutl failed: %w\n%s", DirEnv, err, stderr.String())
	}
	paths := strings.Fields(stdout.String())
	if len(paths) != 2 {
		return Binaries{}, fmt.Errorf("hack/toolchain.sh etcd etcdutl printed %q, not two paths", stdout.String())
	}
	return Binaries{Etcd: paths[0], Etcdutl: paths[1]}, nil
}
