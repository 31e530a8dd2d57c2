package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// build runs the command with args and returns the digest it printed.
func build(t *testing.T, args ...string) string {
	t.Helper()
	var out strings.Builder
	if err := run(args, &out); err != nil {
		t.Fatalf("imagebuild %v: %v", args, err)
	}
	return strings.TrimSpace(out.String())
}

func TestBuildIsReproducible(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "app")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	args := func(out string) []string {
		return []string{"-out", out, "-tag", "example.com/app:v1", "-file", bin + "=/usr/bin/app",
			"-symlink", "/bin/app=../usr/bin/app", "-dir", "/tmp:1777", "-entrypoint", `["/usr/bin/app"]`, "-user", "65532:65532"}
	}
	first := build(t, args(filepath.Join(dir, "a.tar"))...)
	// A different modification time of the input must not change the image.
	if err := os.Chtimes(bin, time.Now(), time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	second := build(t, args(filepath.Join(dir, "b.tar"))...)
	if first != second || !strings.HasPrefix(first, "sha256:") {
		t.Fatalf("digests differ or are malformed: %q and %q", first, second)
	}
}

func TestLayoutNamesAndLayer(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "app")
	if err := os.WriteFile(bin, []byte("binary"), 0o700); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	digest := build(t, "-out", out, "-tag", "example.com/app:v1", "-tag", "example.com/app:latest",
		"-file", bin+"=/usr/local/bin/app:0755", "-dir", "/tmp:1777")

	blobs := readTar(t, out)
	var index ociIndex
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range index.Manifests {
		if m.Digest != digest {
			t.Errorf("index entry %s, want the printed digest %s", m.Digest, digest)
		}
		names = append(names, m.Annotations["io.containerd.image.name"])
	}
	if got, want := strings.Join(names, ","), "example.com/app:v1,example.com/app:latest,example.com/app@"+digest; got != want {
		t.Errorf("names %s", got)
	}
	if _, ok := blobs["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]; !ok {
		t.Errorf("the manifest blob is missing")
	}

	var manifest struct {
		Layers []struct{ Digest string }
	}
	if err := json.Unmarshal(blobs["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")], &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest.Layers) != 1 {
		t.Fatalf("%d layers, want 1", len(manifest.Layers))
	}
	layer := blobs["blobs/sha256/"+strings.TrimPrefix(manifest.Layers[0].Digest, "sha256:")]
	zr, err := gzip.NewReader(strings.NewReader(string(layer)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var members []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(epoch) {
			t.Errorf("%s: owner %d:%d time %v, want 0:0 at the epoch", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		members = append(members, h.Name+" "+os.FileMode(h.Mode).String())
	}
	want := []string{"tmp/ -rwxrwxrwx", "usr/ -rwxr-xr-x", "usr/local/ -rwxr-xr-x", "usr/local/bin/ -rwxr-xr-x", "usr/local/bin/app -rwxr-xr-x"}
	sort.Strings(members)
	if strings.Join(members, "|") != strings.Join(want, "|") {
		t.Errorf("layer members\n%s\nwant\n%s", strings.Join(members, "\n"), strings.Join(want, "\n"))
	}
}

func TestRejectsShortNames(t *testing.T) {
	for _, tag := range []string{"busybox:1.35", "tend", "docker.io/library/busybox"} {
		if err := checkTag(tag); err == nil {
			t.Errorf("checkTag(%q) accepted a name containerd would not find", tag)
		}
	}
	if err := checkTag("registry.k8s.io/pause:3.10.2"); err != nil {
		t.Error(err)
	}
}

// readTar returns the regular files of a tarball by name.
func readTar(t *testing.T, name string) map[string][]byte {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}
