package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// fileMeta is a file artifact's record, <file>.meta.json beside it: who
// wrote it, and what.
type fileMeta struct {
	Owner       string      `json:"owner"`
	SHA256      string      `json:"sha256,omitempty"`
	SizeBytes   int64       `json:"sizeBytes,omitempty"`
	Compression Compression `json:"compression,omitempty"`
}

// metaSuffix names a file artifact's record.
const metaSuffix = ".meta.json"

// fileStore keeps an artifact as a file, on a volume.
type fileStore struct {
	path string
}

func (f fileStore) metaPath() string { return f.path + metaSuffix }

func (f fileStore) stat(context.Context) (stored, error) {
	var s stored
	raw, err := os.ReadFile(f.metaPath())
	switch {
	case err == nil:
		s.Exists = true
		var m fileMeta
		// A record that does not parse names no owner: refused.
		if json.Unmarshal(raw, &m) == nil {
			s.Owner = m.Owner
		}
	case !errors.Is(err, fs.ErrNotExist):
		return stored{}, fmt.Errorf("reading %s: %w", f.metaPath(), err)
	}
	if _, err := os.Lstat(f.path); err == nil {
		s.Exists = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return stored{}, err
	}
	return s, nil
}

// create writes under a temporary name in the file's folder; commit syncs
// it, writes the record, and renames the file into place, so that the file
// is either the old one or the whole new one. The owner is checked again
// right before the rename.
func (f fileStore) create(_ context.Context, owner string, _ stored) (upload, error) {
	dir := filepath.Dir(f.path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	return &fileUpload{f: f, owner: owner, tmp: tmp, w: bufio.NewWriterSize(tmp, 1<<20)}, nil
}

type fileUpload struct {
	f     fileStore
	owner string
	tmp   *os.File
	w     *bufio.Writer
}

func (u *fileUpload) Write(p []byte) (int, error) { return u.w.Write(p) }

func (u *fileUpload) abort(error) error {
	_ = u.tmp.Close()
	_ = os.Remove(u.tmp.Name())
	return nil
}

func (u *fileUpload) commit(meta fileMeta) (_ string, err error) {
	defer func() {
		if err != nil {
			_ = u.abort(err)
		}
	}()
	if err := u.w.Flush(); err != nil {
		return "", err
	}
	if err := u.tmp.Sync(); err != nil {
		return "", err
	}
	if err := u.tmp.Close(); err != nil {
		return "", err
	}
	now, err := u.f.stat(context.Background())
	if err != nil {
		return "", err
	}
	if err := checkOwner(Location{URI: "file://" + u.f.path}, now, u.owner); err != nil {
		return "", err
	}
	meta.Owner = u.owner
	raw, err := json.Marshal(meta)
	if err != nil {
		return "", err
	}
	if err := writeFileAtomic(u.f.metaPath(), raw); err != nil {
		return "", err
	}
	if err := os.Rename(u.tmp.Name(), u.f.path); err != nil {
		return "", err
	}
	return "", syncDir(filepath.Dir(u.f.path))
}

func (f fileStore) open(context.Context, string) (io.ReadCloser, int64, error) {
	file, err := os.Open(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("%w: %s", ErrNotFound, f.path)
	}
	if err != nil {
		return nil, 0, err
	}
	fi, err := file.Stat()
	if err != nil {
		_ = file.Close()
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		_ = file.Close()
		return nil, 0, fmt.Errorf("%w: %s is not a regular file", ErrInvalid, f.path)
	}
	return file, fi.Size(), nil
}

// remove deletes the file, then its record, so that a delete cut short
// leaves the record, and the owner, for its retry.
func (f fileStore) remove(ctx context.Context, owner string) error {
	s, err := f.stat(ctx)
	if err != nil || !s.Exists {
		return err
	}
	if err := checkOwner(Location{URI: "file://" + f.path}, s, owner); err != nil {
		return err
	}
	for _, p := range []string{f.path, f.metaPath()} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return syncDir(filepath.Dir(f.path))
}

// writeFileAtomic writes data to path through a synced temporary file and a
// rename.
func writeFileAtomic(path string, data []byte) error {
	return writeFileAtomicFrom(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// writeFileAtomicFrom writes what write writes to path through a synced
// temporary file beside it and a rename, so that path is either absent (or
// as it was) or whole.
func writeFileAtomicFrom(path string, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	buf := bufio.NewWriterSize(tmp, 1<<20)
	if err := write(buf); err != nil {
		return err
	}
	if err := buf.Flush(); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes the renames and removals in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
