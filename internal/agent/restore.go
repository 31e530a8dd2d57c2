package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tend-dev/tend/internal/agentapi"
)

// The names inside a member's data directory that a restore uses.
const (
	// RestoreDir is where etcdutl snapshot restore writes, between
	// prepare and install: <data-dir>/.tend-restore.
	RestoreDir = ".tend-restore"
	// RestoredMarker records the id of the restore that installed the
	// data: <data-dir>/.tend-restored.
	RestoredMarker = ".tend-restored"
	// ReplacedDir holds the member data that an in-place restore
	// replaces, from prepare until install: <data-dir>/.tend-replaced.
	ReplacedDir = ".tend-replaced"
	// memberDir is etcd's data, under the data directory.
	memberDir = "member"
)

// Prepare readies dataDir for etcdutl snapshot restore into
// <dataDir>/.tend-restore: it removes what an earlier attempt left there,
// and refuses, as terminal, a dataDir whose member directory holds data
// that the restore id did not install. A dataDir that this id already
// installed is fine: the pod is a retry, and Install will find its work
// done.
//
// With replace (an in-place restore of an existing cluster), member data
// that id did not install is moved aside to <dataDir>/.tend-replaced
// instead, where it stays until Install succeeds.
func Prepare(dataDir, id string, replace bool) (agentapi.Result, error) {
	r := agentapi.Result{Op: agentapi.OpPrepare}
	if err := checkRestoreArgs(dataDir, id); err != nil {
		return r, err
	}
	err := checkMember(dataDir, id)
	if err != nil && replace && errors.Is(err, ErrRefused) {
		err = moveAside(dataDir)
	}
	if err != nil {
		return r, err
	}
	if err := os.RemoveAll(filepath.Join(dataDir, RestoreDir)); err != nil {
		return r, fmt.Errorf("removing a leftover restore: %w", err)
	}
	return r, nil
}

// moveAside moves dataDir's member data to <dataDir>/.tend-replaced, in
// place of what an earlier restore left there, and forgets which restore
// installed it.
func moveAside(dataDir string) error {
	replaced := filepath.Join(dataDir, ReplacedDir)
	if err := os.RemoveAll(replaced); err != nil {
		return fmt.Errorf("removing older replaced data: %w", err)
	}
	if err := os.Mkdir(replaced, 0o700); err != nil {
		return fmt.Errorf("making %s: %w", replaced, err)
	}
	if err := os.Rename(filepath.Join(dataDir, memberDir), filepath.Join(replaced, memberDir)); err != nil {
		return fmt.Errorf("moving the replaced data aside: %w", err)
	}
	if err := os.Remove(filepath.Join(dataDir, RestoredMarker)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the replaced data's restore marker: %w", err)
	}
	return syncDir(dataDir)
}

// Install moves the restored <dataDir>/.tend-restore/member to
// <dataDir>/member. It records id in <dataDir>/.tend-restored first, so
// that a pod that is retried after the move finds its own work done; the
// move is a rename on one volume, so the member directory is either
// absent or whole. Member data that id did not install is refused, as
// terminal. Data that Prepare moved aside is removed once the restored
// data is in place.
func Install(dataDir, id string, _ bool) (agentapi.Result, error) {
	r := agentapi.Result{Op: agentapi.OpInstall}
	if err := checkRestoreArgs(dataDir, id); err != nil {
		return r, err
	}
	member := filepath.Join(dataDir, memberDir)
	installed, err := installedBy(dataDir)
	if err != nil {
		return r, err
	}
	if exists(member) {
		if installed != id {
			return r, refuseMember(dataDir, installed, id)
		}
		// Done before: clean up what a retry of the restore left.
		return r, removeLeftovers(dataDir)
	}
	restored := filepath.Join(dataDir, RestoreDir, memberDir)
	fi, err := os.Stat(restored)
	if err != nil {
		return r, fmt.Errorf("no restored data to install at %s (did etcdutl snapshot restore run?): %w", restored, err)
	}
	if !fi.IsDir() {
		return r, fmt.Errorf("%w: %s is not a directory", ErrInvalid, restored)
	}
	if err := writeFileAtomic(filepath.Join(dataDir, RestoredMarker), []byte(id+"\n")); err != nil {
		return r, fmt.Errorf("recording the restore: %w", err)
	}
	if err := os.Rename(restored, member); err != nil {
		return r, fmt.Errorf("installing the restored data: %w", err)
	}
	if err := syncDir(dataDir); err != nil {
		return r, err
	}
	return r, removeLeftovers(dataDir)
}

// removeLeftovers removes the restore's working copy and the data it
// replaced.
func removeLeftovers(dataDir string) error {
	for _, dir := range []string{RestoreDir, ReplacedDir} {
		if err := os.RemoveAll(filepath.Join(dataDir, dir)); err != nil {
			return err
		}
	}
	return nil
}

func checkRestoreArgs(dataDir, id string) error {
	if dataDir == "" || !filepath.IsAbs(dataDir) {
		return fmt.Errorf("%w: the data directory %q must be an absolute path", ErrInvalid, dataDir)
	}
	if id == "" || strings.ContainsAny(id, "\n\r") {
		return fmt.Errorf("%w: the restore id %q must be one non-empty line", ErrInvalid, id)
	}
	fi, err := os.Stat(dataDir)
	if err != nil {
		return fmt.Errorf("the data directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrInvalid, dataDir)
	}
	return nil
}

// checkMember refuses member data that id did not install.
func checkMember(dataDir, id string) error {
	if !exists(filepath.Join(dataDir, memberDir)) {
		return nil
	}
	installed, err := installedBy(dataDir)
	if err != nil {
		return err
	}
	if installed != id {
		return refuseMember(dataDir, installed, id)
	}
	return nil
}

func refuseMember(dataDir, installed, id string) error {
	if installed == "" {
		return fmt.Errorf("%w: %s already holds etcd data that no restore installed; it must be emptied before restore %s", ErrRefused, dataDir, id)
	}
	return fmt.Errorf("%w: %s holds etcd data that restore %s installed, not restore %s", ErrRefused, dataDir, installed, id)
}

// installedBy returns the id in dataDir's marker, or "" when there is none.
func installedBy(dataDir string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(dataDir, RestoredMarker))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(bytes.TrimSpace(raw)), nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
