package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/tend-dev/tend/internal/aws"
)

// folder keeps the objects of an archive under one location: the keys
// under an S3 prefix, or the files under a directory. Objects are written
// once and never replaced: a write where an object is fails with
// errExists, so two writers can never both think they wrote one name.
type folder interface {
	// putNew writes name, recording owner, unless something is there.
	putNew(ctx context.Context, name string, data []byte, owner string) error
	// get reads name; ErrNotFound when it is not there.
	get(ctx context.Context, name string) ([]byte, error)
	// head reads at most the first n bytes of name; ErrNotFound when it
	// is not there.
	head(ctx context.Context, name string, n int64) ([]byte, error)
	// list returns the names under dir, sorted.
	list(ctx context.Context, dir string) ([]string, error)
	// remove deletes name; nothing there is done already.
	remove(ctx context.Context, name string) error
	// String is the folder's location.
	String() string
}

// errExists: an object is where a write would have put one.
var errExists = errors.New("an object is there already")

// openFolder returns the folder at loc (a URI without a trailing slash,
// which names the folder itself).
func openFolder(ctx context.Context, loc Location, o S3Options) (folder, error) {
	if !loc.IsS3() {
		return dirFolder{dir: loc.Path}, nil
	}
	if len(loc.Key)+len("/"+segmentName(0)) > maxKeyLen {
		return nil, fmt.Errorf("%w: %q: the prefix leaves no room under S3's %d bytes for the segments' keys", ErrInvalid, loc.URI, maxKeyLen)
	}
	st, err := openStore(ctx, loc, o)
	if err != nil {
		return nil, err
	}
	s := st.(*s3Store)
	return s3Folder{loc: loc, client: s.client}, nil
}

// s3Folder is the keys under <key>/ in a bucket.
type s3Folder struct {
	loc    Location
	client *s3.Client
}

func (f s3Folder) String() string { return f.loc.URI }

func (f s3Folder) key(name string) string { return f.loc.Key + "/" + name }

func (f s3Folder) putNew(ctx context.Context, name string, data []byte, owner string) error {
	_, err := f.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        &f.loc.Bucket,
		Key:           awssdk.String(f.key(name)),
		Body:          bytes.NewReader(data),
		ContentLength: awssdk.Int64(int64(len(data))),
		ContentType:   awssdk.String("application/octet-stream"),
		Metadata:      map[string]string{ownerKey: owner},
		IfNoneMatch:   awssdk.String("*"),
	})
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode() == "PreconditionFailed" || apiErr.ErrorCode() == "ConditionalRequestConflict") {
		return fmt.Errorf("writing %s/%s: %w", f.loc, name, errExists)
	}
	if err != nil {
		return fmt.Errorf("writing %s/%s: %w", f.loc, name, err)
	}
	return nil
}

func (f s3Folder) get(ctx context.Context, name string) ([]byte, error) {
	return f.read(ctx, name, nil)
}

func (f s3Folder) head(ctx context.Context, name string, n int64) ([]byte, error) {
	return f.read(ctx, name, awssdk.String(fmt.Sprintf("bytes=0-%d", n-1)))
}

// read reads name, or the range of it that rng names.
func (f s3Folder) read(ctx context.Context, name string, rng *string) ([]byte, error) {
	out, err := f.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &f.loc.Bucket, Key: awssdk.String(f.key(name)), Range: rng})
	if aws.Classify(err) == aws.NotFound {
		return nil, fmt.Errorf("%w: %s/%s", ErrNotFound, f.loc, name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", f.loc, name, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", f.loc, name, err)
	}
	return data, nil
}

func (f s3Folder) remove(ctx context.Context, name string) error {
	_, err := f.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &f.loc.Bucket, Key: awssdk.String(f.key(name))})
	if err != nil && aws.Classify(err) != aws.NotFound {
		return fmt.Errorf("deleting %s/%s: %w", f.loc, name, err)
	}
	return nil
}

func (f s3Folder) list(ctx context.Context, dir string) ([]string, error) {
	prefix := f.key(dir) + "/"
	var names []string
	pages := s3.NewListObjectsV2Paginator(f.client, &s3.ListObjectsV2Input{Bucket: &f.loc.Bucket, Prefix: &prefix})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing %s/%s: %w", f.loc, dir, err)
		}
		for _, o := range page.Contents {
			name := strings.TrimPrefix(awssdk.ToString(o.Key), prefix)
			if name != "" && !strings.Contains(name, "/") {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

// dirFolder is the files under a directory, on a volume.
type dirFolder struct {
	dir string
}

func (f dirFolder) String() string { return "file://" + f.dir }

// putNew writes a temporary file, syncs it and links it to its name, which
// fails when the name is taken; the link, unlike a rename, never replaces.
func (f dirFolder) putNew(_ context.Context, name string, data []byte, _ string) (err error) {
	p := filepath.Join(f.dir, filepath.FromSlash(name))
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(p)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("writing %s: %w", p, errExists)
		}
		return err
	}
	return syncDir(dir)
}

func (f dirFolder) get(_ context.Context, name string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(f.dir, filepath.FromSlash(name)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, path.Join(f.dir, name))
	}
	return data, err
}

func (f dirFolder) remove(_ context.Context, name string) error {
	p := filepath.Join(f.dir, filepath.FromSlash(name))
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return syncDir(filepath.Dir(p))
}

func (f dirFolder) head(_ context.Context, name string, n int64) ([]byte, error) {
	file, err := os.Open(filepath.Join(f.dir, filepath.FromSlash(name)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, path.Join(f.dir, name))
	}
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return io.ReadAll(io.LimitReader(file, n))
}

func (f dirFolder) list(_ context.Context, dir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(f.dir, filepath.FromSlash(dir)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}
