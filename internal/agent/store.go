package agent

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"

	"github.com/tend-dev/tend/internal/aws"
)

// S3Options say how to reach the S3 store of s3:// URIs. Credentials come
// from the SDK's default chain: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
// and AWS_SESSION_TOKEN from the user's Secret, or a pod identity.
type S3Options struct {
	// Endpoint overrides the S3 endpoint, for S3-compatible stores.
	Endpoint string
	// Region of the bucket; empty takes AWS_REGION.
	Region string
	// ForcePathStyle addresses the bucket in the path.
	ForcePathStyle bool
	// PartSize and Concurrency shape a multipart upload: the upload holds
	// about (Concurrency+1)*PartSize bytes in memory. Zero takes
	// DefaultPartSize and DefaultConcurrency.
	PartSize    int64
	Concurrency int
}

const (
	// DefaultPartSize is an upload's part size: 10000 parts (S3's most)
	// make 80 GiB, far above etcd's largest database.
	DefaultPartSize = 8 << 20
	// DefaultConcurrency is how many parts go up at once.
	DefaultConcurrency = 4
	// s3QPS and s3Burst bound the agent's own calls to the store: an
	// upload sends about one call per part.
	s3QPS, s3Burst = 50, 50
	// responseHeaderTimeout is how long a request may wait for its answer
	// once sent: an upstream that swallows a part fails it long before the
	// step's deadline.
	responseHeaderTimeout = 2 * time.Minute
)

// ownerKey is the S3 user metadata (x-amz-meta-tend-owner) that names who
// wrote an object.
const ownerKey = "tend-owner"

// stored is what a store says of an artifact before writing or deleting it.
type stored struct {
	// Exists is false when there is nothing at the location.
	Exists bool
	// Owner is who wrote it; empty when unknown (someone other than Tend).
	Owner string
	// Version identifies the bytes now there: an S3 ETag; empty for files.
	Version string
}

// store keeps artifacts at one location.
type store interface {
	// stat says whether there is an artifact, and whose.
	stat(ctx context.Context) (stored, error)
	// create starts writing the artifact of owner, to replace prev (what
	// stat saw) and nothing else. Nothing is in place before the upload's
	// commit.
	create(ctx context.Context, owner string, prev stored) (upload, error)
	// open reads the artifact; version, when not empty, must still be the
	// one there. It returns the stored size when known, -1 otherwise.
	open(ctx context.Context, version string) (io.ReadCloser, int64, error)
	// remove deletes the artifact of owner, and its .meta.json.
	remove(ctx context.Context, owner string) error
}

// openStore returns the store of loc.
func openStore(ctx context.Context, loc Location, o S3Options) (store, error) {
	if !loc.IsS3() {
		return fileStore{path: loc.Path}, nil
	}
	limiters, err := aws.NewLimiters(aws.LimiterOptions{QPS: s3QPS, Burst: s3Burst, Wait: true})
	if err != nil {
		return nil, err
	}
	cfg, err := aws.LoadConfig(ctx, aws.Connection{Region: o.Region, EndpointURL: o.Endpoint, Limiters: limiters})
	if err != nil {
		return nil, err
	}
	client := aws.NewS3(cfg, aws.S3Options{UsePathStyle: o.ForcePathStyle, ResponseHeaderTimeout: responseHeaderTimeout})
	partSize, concurrency := o.PartSize, o.Concurrency
	if partSize == 0 {
		partSize = DefaultPartSize
	}
	if concurrency == 0 {
		concurrency = DefaultConcurrency
	}
	if partSize < manager.MinUploadPartSize {
		return nil, fmt.Errorf("%w: part size %d is below S3's %d", ErrInvalid, partSize, manager.MinUploadPartSize)
	}
	return &s3Store{loc: loc, client: client, partSize: partSize, concurrency: concurrency}, nil
}

// upload is an artifact being written.
type upload interface {
	io.Writer
	// commit puts what was written in place, with meta recorded beside it
	// when the store can (a file's .meta.json), and returns the new
	// version. Call it once the whole artifact was written without error.
	commit(meta fileMeta) (string, error)
	// abort drops what was written, because of cause, and returns the
	// store's own error when the store failed first or could not drop
	// it, nil otherwise.
	abort(cause error) error
}

// checkOwner refuses an artifact that someone else wrote, or whose writer
// is unknown.
func checkOwner(loc Location, s stored, owner string) error {
	switch {
	case !s.Exists || s.Owner == owner:
		return nil
	case s.Owner == "":
		return fmt.Errorf("%w: %s exists and was not written by Tend (it has no owner record); leaving it alone", ErrRefused, loc)
	}
	return fmt.Errorf("%w: %s was written by %s, not by %s; leaving it alone", ErrRefused, loc, s.Owner, owner)
}

// checkOwnerValue refuses an owner that cannot be recorded as S3 metadata,
// an HTTP header: it must be printable ASCII.
func checkOwnerValue(owner string) error {
	if owner == "" {
		return fmt.Errorf("%w: the owner is empty; give the EtcdBackup's UID", ErrInvalid)
	}
	if len(owner) > 256 {
		return fmt.Errorf("%w: the owner is longer than 256 bytes", ErrInvalid)
	}
	for _, c := range []byte(owner) {
		if c <= ' ' || c > '~' {
			return fmt.Errorf("%w: the owner %q holds a character other than printable ASCII", ErrInvalid, owner)
		}
	}
	return nil
}
