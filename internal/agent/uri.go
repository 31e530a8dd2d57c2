package agent

import (
	"fmt"
	"path"
	"strings"
)

// Location is where an artifact is: an S3 object or a file.
type Location struct {
	// URI is the location as given: s3://bucket/key or file:///path.
	URI string
	// Bucket and Key name an S3 object; both are empty for a file.
	Bucket, Key string
	// Path is a file's absolute path; empty for an S3 object.
	Path string
}

// IsS3 tells whether the location is an S3 object.
func (l Location) IsS3() bool { return l.Bucket != "" }

// String returns the URI.
func (l Location) String() string { return l.URI }

const (
	s3Scheme   = "s3://"
	fileScheme = "file://"
	// maxKeyLen is S3's limit on a key, in bytes.
	maxKeyLen = 1024
)

// ParseURI reads an artifact's location: s3://bucket/key, where the key is
// taken as it is (no percent-decoding, as podspec builds it), or
// file:///absolute/path, clean, with no host. Its errors wrap ErrInvalid.
func ParseURI(uri string) (Location, error) {
	switch {
	case strings.HasPrefix(uri, s3Scheme):
		bucket, key, ok := strings.Cut(strings.TrimPrefix(uri, s3Scheme), "/")
		if !ok || key == "" {
			return Location{}, fmt.Errorf("%w: %q: an S3 URI is s3://bucket/key, with a key", ErrInvalid, uri)
		}
		if err := checkBucket(bucket); err != nil {
			return Location{}, fmt.Errorf("%w: %q: %w", ErrInvalid, uri, err)
		}
		if len(key) > maxKeyLen {
			return Location{}, fmt.Errorf("%w: %q: the key is longer than S3's %d bytes", ErrInvalid, uri, maxKeyLen)
		}
		if strings.HasSuffix(key, "/") {
			return Location{}, fmt.Errorf("%w: %q: the key ends with /, as a folder's does, not a file's", ErrInvalid, uri)
		}
		return Location{URI: uri, Bucket: bucket, Key: key}, nil
	case strings.HasPrefix(uri, fileScheme):
		p := strings.TrimPrefix(uri, fileScheme)
		if !strings.HasPrefix(p, "/") {
			return Location{}, fmt.Errorf("%w: %q: a file URI is file:///absolute/path, with no host", ErrInvalid, uri)
		}
		if p == "/" || strings.HasSuffix(p, "/") || path.Clean(p) != p {
			return Location{}, fmt.Errorf("%w: %q: the path must be a clean path to a file (no .., no //, no trailing /)", ErrInvalid, uri)
		}
		return Location{URI: uri, Path: p}, nil
	}
	return Location{}, fmt.Errorf("%w: %q: the URI must start with s3:// or file://", ErrInvalid, uri)
}

// checkBucket applies S3's naming rules for general purpose buckets that
// a URI can break: 3 to 63 lower-case letters, digits, dots and hyphens,
// starting and ending with a letter or a digit.
func checkBucket(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket name %q must be 3 to 63 characters long", b)
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && c != '.' && c != '-' {
			return fmt.Errorf("bucket name %q may hold only lower-case letters, digits, dots and hyphens", b)
		}
		if (i == 0 || i == len(b)-1) && !alnum {
			return fmt.Errorf("bucket name %q must start and end with a letter or a digit", b)
		}
	}
	return nil
}
