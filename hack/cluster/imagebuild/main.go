// Command imagebuild builds a container image FROM scratch out of local files
// and writes it as an OCI image layout tarball that `ctr images import`
// loads, one name per -tag. It downloads nothing and runs no container.
//
// The image is reproducible: every file has the same owner (0:0), the same
// modification time and a fixed order, so the same inputs give the same
// digest. It prints the manifest digest, which is the digest a pod spec can
// pin (name@sha256:...).
//
//	imagebuild -out busybox.tar -tag docker.io/library/busybox:1.35.0 \
//	    -file /bin/busybox=/bin/busybox -symlink /bin/sh=busybox -cmd '["sh"]'
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "imagebuild: %v\n", err)
		os.Exit(1)
	}
}

// run parses the flags, builds the image, writes the tarball and prints the
// manifest digest on stdout.
func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	var (
		spec Spec
		out  string
	)
	fs.StringVar(&out, "out", "", "Tarball to write (an OCI image layout).")
	fs.Func("tag", "Name of the image, such as docker.io/library/busybox:1.35.0; repeatable.", func(v string) error {
		spec.Tags = append(spec.Tags, v)
		return nil
	})
	fs.Func("file", "SRC=DST[:MODE]: copy the local file SRC to DST, with octal MODE (default: SRC's mode); repeatable.", func(v string) error {
		f, err := parseFile(v)
		spec.Files = append(spec.Files, f)
		return err
	})
	fs.Func("symlink", "DST=TARGET: a symbolic link at DST pointing to TARGET; repeatable.", func(v string) error {
		dst, target, ok := strings.Cut(v, "=")
		if !ok || dst == "" || target == "" {
			return fmt.Errorf("want DST=TARGET, got %q", v)
		}
		spec.Symlinks = append(spec.Symlinks, Symlink{Path: dst, Target: target})
		return nil
	})
	fs.Func("dir", "DST[:MODE]: an empty directory, with octal MODE (default 0755); repeatable.", func(v string) error {
		d, err := parseDir(v)
		spec.Dirs = append(spec.Dirs, d)
		return err
	})
	fs.Func("entrypoint", `The entrypoint as a JSON array, such as '["/tend"]'.`, jsonList(&spec.Entrypoint))
	fs.Func("cmd", `The default arguments as a JSON array, such as '["sh"]'.`, jsonList(&spec.Cmd))
	fs.StringVar(&spec.User, "user", "", "The user (and group) the image runs as, such as 65532:65532.")
	fs.StringVar(&spec.WorkingDir, "workdir", "", "The working directory.")
	fs.Func("env", "K=V: an environment variable; repeatable.", func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("want K=V, got %q", v)
		}
		spec.Env = append(spec.Env, v)
		return nil
	})
	fs.Func("label", "K=V: an image label; repeatable.", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok {
			return fmt.Errorf("want K=V, got %q", v)
		}
		if spec.Labels == nil {
			spec.Labels = map[string]string{}
		}
		spec.Labels[k] = val
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if out == "" {
		return errors.New("-out is required")
	}
	tmp, err := os.MkdirTemp("", "imagebuild-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	img, err := Build(spec, tmp)
	if err != nil {
		return err
	}
	digest, err := WriteLayout(out, img, spec.Tags)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, digest)
	return err
}

func parseFile(v string) (File, error) {
	src, rest, ok := strings.Cut(v, "=")
	if !ok || src == "" || rest == "" {
		return File{}, fmt.Errorf("want SRC=DST[:MODE], got %q", v)
	}
	dst, mode, err := pathMode(rest)
	return File{Source: src, Path: dst, Mode: mode}, err
}

func parseDir(v string) (Dir, error) {
	dst, mode, err := pathMode(v)
	if mode < 0 {
		mode = 0o755
	}
	return Dir{Path: dst, Mode: mode}, err
}

// pathMode splits "PATH[:MODE]"; a missing MODE is -1.
func pathMode(v string) (string, int64, error) {
	p, m, ok := strings.Cut(v, ":")
	if !ok {
		return p, -1, nil
	}
	mode, err := strconv.ParseInt(m, 8, 32)
	if err != nil {
		return "", 0, fmt.Errorf("mode of %s: %w", p, err)
	}
	return p, mode, nil
}

func jsonList(dst *[]string) func(string) error {
	return func(v string) error {
		if err := json.Unmarshal([]byte(v), dst); err != nil {
			return fmt.Errorf("want a JSON array of strings, got %q: %w", v, err)
		}
		return nil
	}
}
