package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epoch is the time stamp of every file, of the image and of its history, so
// that the same inputs give the same digest.
var epoch = time.Unix(0, 0).UTC()

// Spec describes an image built FROM scratch: one layer holding Files, Dirs
// and Symlinks (parent directories are added with mode 0755), and the
// runtime settings of its configuration.
type Spec struct {
	// Tags are the fully qualified names the image is imported under.
	Tags       []string
	Files      []File
	Dirs       []Dir
	Symlinks   []Symlink
	Entrypoint []string
	Cmd        []string
	User       string
	WorkingDir string
	Env        []string
	Labels     map[string]string
}

// File is a local file copied into the image.
type File struct {
	// Source is the path on this machine.
	Source string
	// Path is the path in the image.
	Path string
	// Mode is the permission bits; negative takes Source's.
	Mode int64
}

// Dir is an empty directory of the image.
type Dir struct {
	Path string
	Mode int64
}

// Symlink is a symbolic link of the image.
type Symlink struct {
	Path   string
	Target string
}

// entry is one member of the layer's tar stream.
type entry struct {
	hdr    tar.Header
	source string // for a regular file
}

// Build assembles the image that spec describes. The layer is kept in a file
// under tmpDir, which must outlive every use of the image.
func Build(spec Spec, tmpDir string) (v1.Image, error) {
	for _, t := range spec.Tags {
		if err := checkTag(t); err != nil {
			return nil, err
		}
	}
	if len(spec.Tags) == 0 {
		return nil, errors.New("at least one -tag is required")
	}
	entries, err := layerEntries(spec)
	if err != nil {
		return nil, err
	}
	layerFile, err := writeLayerTar(entries, tmpDir)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return os.Open(layerFile) },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("reading the layer: %w", err)
	}
	cfg := &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		Config: v1.Config{
			Entrypoint: spec.Entrypoint,
			Cmd:        spec.Cmd,
			User:       spec.User,
			WorkingDir: spec.WorkingDir,
			Env:        spec.Env,
			Labels:     spec.Labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "hack/cluster/imagebuild"},
	})
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	return img, nil
}

// checkTag accepts fully qualified names only, such as
// docker.io/library/busybox:1.35.0: containerd stores the name as given, and
// kubelet looks images up by their normalized, fully qualified name.
func checkTag(t string) error {
	first, rest, ok := strings.Cut(t, "/")
	if !ok || !strings.ContainsAny(first, ".:") && first != "localhost" {
		return fmt.Errorf("tag %q: want a fully qualified name such as docker.io/library/busybox:1.35.0", t)
	}
	if i := strings.LastIndex(rest, ":"); i < 0 || strings.Contains(rest[i:], "/") {
		return fmt.Errorf("tag %q has no tag part (:TAG)", t)
	}
	return nil
}

// layerEntries lists the tar members of the layer, parent directories
// included, in the order they are written.
func layerEntries(spec Spec) ([]entry, error) {
	byPath := map[string]entry{}
	add := func(e entry) error {
		name := strings.TrimPrefix(path.Clean("/"+e.hdr.Name), "/")
		if name == "" {
			return fmt.Errorf("cannot add the root directory")
		}
		e.hdr.Name = name
		if old, ok := byPath[name]; ok && (old.hdr.Typeflag != tar.TypeDir || e.hdr.Typeflag != tar.TypeDir) {
			return fmt.Errorf("%s is given twice", "/"+name)
		}
		byPath[name] = e
		return nil
	}
	for _, f := range spec.Files {
		st, err := os.Stat(f.Source)
		if err != nil {
			return nil, err
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file", f.Source)
		}
		mode := f.Mode
		if mode < 0 {
			mode = int64(st.Mode().Perm())
		}
		if err := add(entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: f.Path, Mode: mode, Size: st.Size()}, source: f.Source}); err != nil {
			return nil, err
		}
	}
	for _, d := range spec.Dirs {
		if err := add(entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: d.Path, Mode: d.Mode}}); err != nil {
			return nil, err
		}
	}
	for _, s := range spec.Symlinks {
		if err := add(entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: s.Path, Linkname: s.Target, Mode: 0o777}}); err != nil {
			return nil, err
		}
	}
	// Parent directories that were not given explicitly.
	for name := range byPath {
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if _, ok := byPath[dir]; !ok {
				byPath[dir] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755}}
			}
		}
	}
	names := make([]string, 0, len(byPath))
	for name := range byPath {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]entry, 0, len(names))
	for _, name := range names {
		e := byPath[name]
		if e.hdr.Typeflag == tar.TypeDir {
			e.hdr.Name += "/"
		}
		e.hdr.ModTime = epoch
		e.hdr.Format = tar.FormatPAX
		out = append(out, e)
	}
	return out, nil
}

// writeLayerTar writes the uncompressed layer to a file in dir and returns
// its name.
func writeLayerTar(entries []entry, dir string) (name string, err error) {
	f, err := os.CreateTemp(dir, "layer-*.tar")
	if err != nil {
		return "", err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	tw := tar.NewWriter(f)
	for _, e := range entries {
		hdr := e.hdr
		if err := tw.WriteHeader(&hdr); err != nil {
			return "", fmt.Errorf("writing %s: %w", hdr.Name, err)
		}
		if e.source == "" {
			continue
		}
		if err := copyFile(tw, e.source, hdr.Size); err != nil {
			return "", err
		}
	}
	return f.Name(), tw.Close()
}

func copyFile(w io.Writer, name string, size int64) error {
	src, err := os.Open(name)
	if err != nil {
		return err
	}
	defer src.Close()
	n, err := io.Copy(w, src)
	if err != nil {
		return fmt.Errorf("copying %s: %w", name, err)
	}
	if n != size {
		return fmt.Errorf("%s changed size while it was copied", name)
	}
	return nil
}

// WriteLayout writes img as an OCI image layout tarball with one index entry
// per tag, annotated with the names that containerd imports it under, and
// returns the manifest digest.
func WriteLayout(out string, img v1.Image, tags []string) (string, error) {
	manifest, err := img.RawManifest()
	if err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return "", err
	}
	configDigest, err := img.ConfigName()
	if err != nil {
		return "", err
	}
	layers, err := img.Layers()
	if err != nil {
		return "", err
	}

	index := ociIndex{SchemaVersion: 2, MediaType: string(types.OCIImageIndex)}
	for _, name := range importNames(tags, digest.String()) {
		annotations := map[string]string{"io.containerd.image.name": name}
		if !strings.Contains(name, "@") {
			annotations["org.opencontainers.image.ref.name"] = name[strings.LastIndex(name, ":")+1:]
		}
		index.Manifests = append(index.Manifests, ociDescriptor{
			MediaType:   string(types.OCIManifestSchema1),
			Digest:      digest.String(),
			Size:        int64(len(manifest)),
			Annotations: annotations,
			Platform:    &ociPlatform{Architecture: runtime.GOARCH, OS: "linux"},
		})
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return "", err
	}

	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp) // a no-op once renamed
	tw := tar.NewWriter(f)
	write := func(name string, r io.Reader, size int64) error {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: epoch, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		n, err := io.Copy(tw, r)
		if err == nil && n != size {
			err = fmt.Errorf("%s: wrote %d bytes, want %d", name, n, size)
		}
		return err
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return "", err
		}
	}
	layout := []byte(`{"imageLayoutVersion":"1.0.0"}`)
	if err := write("oci-layout", bytes.NewReader(layout), int64(len(layout))); err != nil {
		return "", err
	}
	if err := write("index.json", bytes.NewReader(indexJSON), int64(len(indexJSON))); err != nil {
		return "", err
	}
	if err := write(blobName(digest), bytes.NewReader(manifest), int64(len(manifest))); err != nil {
		return "", err
	}
	if err := write(blobName(configDigest), bytes.NewReader(config), int64(len(config))); err != nil {
		return "", err
	}
	for _, l := range layers {
		if err := writeLayer(write, l); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return digest.String(), os.Rename(tmp, out)
}

// importNames lists the names the image is imported under: each tag, then
// REPOSITORY@DIGEST once per repository. containerd's CRI resolves an image
// reference only by the names of its image records (a pull by tag records
// both), so a pod that pins the digest needs the second kind.
func importNames(tags []string, digest string) []string {
	names := slices.Clone(tags)
	seen := map[string]bool{}
	for _, t := range tags {
		repo := t[:strings.LastIndex(t, ":")]
		if !seen[repo] {
			seen[repo] = true
			names = append(names, repo+"@"+digest)
		}
	}
	return names
}

func writeLayer(write func(string, io.Reader, int64) error, l v1.Layer) error {
	d, err := l.Digest()
	if err != nil {
		return err
	}
	size, err := l.Size()
	if err != nil {
		return err
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	return write(blobName(d), rc, size)
}

func blobName(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// The OCI image layout's index.json, with the fields this tool writes.
type ociIndex struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     string          `json:"mediaType"`
	Manifests     []ociDescriptor `json:"manifests"`
}

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *ociPlatform      `json:"platform,omitempty"`
}

type ociPlatform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}
