package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/tend-dev/tend/internal/aws"
)

// s3Store keeps an artifact as an S3 object, with its owner in the
// object's metadata.
type s3Store struct {
	loc         Location
	client      *s3.Client
	partSize    int64
	concurrency int
}

func (s *s3Store) stat(ctx context.Context) (stored, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.loc.Bucket, Key: &s.loc.Key})
	if aws.Classify(err) == aws.NotFound {
		return stored{}, nil
	}
	if err != nil {
		return stored{}, fmt.Errorf("reading the metadata of %s: %w", s.loc, err)
	}
	return stored{Exists: true, Owner: out.Metadata[ownerKey], Version: awssdk.ToString(out.ETag)}, nil
}

// create streams what is written to the object by a multipart upload (a
// single PutObject when it fits in one part), holding no more than the
// upload's parts in memory: the upload runs in a goroutine of its own and
// reads from a pipe, and completes only when commit closes the pipe, never
// on an abort. The write is conditional: on no object when there was none,
// on the same ETag when there was one of the owner, so that an object that
// someone wrote in the meantime is never replaced; the store then refuses
// the upload with PreconditionFailed, and a retry finds out whose it is. A
// failed multipart upload is aborted here, not by the SDK: the SDK aborts
// with the upload's context, which a SIGTERM or the deadline has ended, and
// the parts would stay, billed and out of sight of any listing of objects.
func (s *s3Store) create(ctx context.Context, owner string, prev stored) (upload, error) {
	pr, pw := io.Pipe()
	in := &s3.PutObjectInput{
		Bucket:      &s.loc.Bucket,
		Key:         &s.loc.Key,
		Body:        pr,
		ContentType: awssdk.String("application/octet-stream"),
		Metadata:    map[string]string{ownerKey: owner},
	}
	if prev.Exists {
		in.IfMatch = awssdk.String(prev.Version)
	} else {
		in.IfNoneMatch = awssdk.String("*")
	}
	// feature/s3/manager is deprecated for feature/s3/transfermanager, which
	// is still v0 (its API may change in any release); the manager is still
	// released with the SDK and does what we need.
	//nolint:staticcheck // SA1019, see above.
	uploader := manager.NewUploader(s.client, func(u *manager.Uploader) {
		u.PartSize = s.partSize
		u.Concurrency = s.concurrency
		u.LeavePartsOnError = true // abortMultipart drops them
	})
	u := &s3Upload{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(u.done)
		out, err := uploader.Upload(ctx, in) //nolint:staticcheck // SA1019, as NewUploader.
		if err != nil {
			u.err = s.explain("uploading to", err)
			var failed manager.MultiUploadFailure
			if errors.As(err, &failed) && failed.UploadID() != "" {
				if abortErr := s.abortMultipart(ctx, failed.UploadID()); abortErr != nil {
					// Whether a retry can help is the upload's failure's
					// call, not the cleanup's: %v, not %w.
					u.err = fmt.Errorf("%w; and its parts stay in the bucket until the upload is aborted (aws s3api abort-multipart-upload): %v", u.err, abortErr) //nolint:errorlint // the cleanup's error must not classify the step
					u.partsLeft = true
				}
			}
			// The writer sees why the store stopped reading.
			_ = pr.CloseWithError(u.err)
			return
		}
		u.etag = awssdk.ToString(out.ETag)
		_ = pr.CloseWithError(errStopped)
	}()
	return u, nil
}

type s3Upload struct {
	pw   *io.PipeWriter
	done chan struct{}
	etag string // set before done is closed
	err  error  // set before done is closed
	// partsLeft is true when the failed upload's parts could not be
	// aborted; set before done is closed.
	partsLeft bool
}

func (u *s3Upload) Write(p []byte) (int, error) { return u.pw.Write(p) }

func (u *s3Upload) commit(fileMeta) (string, error) {
	_ = u.pw.Close() // the upload's io.EOF
	<-u.done
	return u.etag, u.err
}

func (u *s3Upload) abort(cause error) error {
	_ = u.pw.CloseWithError(cause)
	<-u.done
	if u.err != nil && (!errors.Is(u.err, cause) || u.partsLeft) {
		return u.err
	}
	return nil
}

// abortTimeout bounds the abort of a failed multipart upload, which runs
// after the step's context ended: well within the 30s that a pod has
// between SIGTERM and SIGKILL.
const abortTimeout = 20 * time.Second

// abortMultipart aborts the multipart upload id of the object, with a
// context of its own: the upload's may have ended, and with it the
// upload. An upload that is not there (completed, or aborted already)
// counts as aborted.
func (s *s3Store) abortMultipart(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.loc.Bucket, Key: &s.loc.Key, UploadId: &id})
	var apiErr smithy.APIError
	if err == nil || (errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchUpload") || aws.Classify(err) == aws.NotFound {
		return nil
	}
	return fmt.Errorf("aborting the multipart upload %s of %s: %w", id, s.loc, err)
}

func (s *s3Store) open(ctx context.Context, version string) (io.ReadCloser, int64, error) {
	in := &s3.GetObjectInput{Bucket: &s.loc.Bucket, Key: &s.loc.Key}
	if version != "" {
		in.IfMatch = awssdk.String(version)
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		return nil, 0, s.explain("reading", err)
	}
	size := int64(-1)
	if out.ContentLength != nil {
		size = *out.ContentLength
	}
	return out.Body, size, nil
}

func (s *s3Store) remove(ctx context.Context, owner string) error {
	st, err := s.stat(ctx)
	if err != nil || !st.Exists {
		return err
	}
	if err := checkOwner(s.loc, st, owner); err != nil {
		return err
	}
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.loc.Bucket, Key: &s.loc.Key})
	if err != nil && aws.Classify(err) != aws.NotFound {
		return fmt.Errorf("deleting %s: %w", s.loc, err)
	}
	return nil
}

// explain wraps an error of a call about the object: a missing object or
// bucket is ErrNotFound, which no retry fixes; a lost conditional write
// says what it means.
func (s *s3Store) explain(doing string, err error) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "PreconditionFailed" {
		return fmt.Errorf("%s %s: the object changed since it was checked (another writer?): %w", doing, s.loc, err)
	}
	if aws.Classify(err) == aws.NotFound {
		return fmt.Errorf("%w: %s %s: %w", ErrNotFound, doing, s.loc, err)
	}
	return fmt.Errorf("%s %s: %w", doing, s.loc, err)
}
