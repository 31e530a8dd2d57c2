package agent

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/aws"
	"github.com/tend-dev/tend/internal/testing/moto"
)

// partSize is the smallest part S3 takes, for uploads of several parts.
const partSize = 5 << 20

// startUpload opens the S3 store of s3://bucket/key, on the S3 that opts
// reach, and starts an upload of two parts and part of a third, which it
// does not end: it returns once the store has both parts. ctx is the
// upload's.
func startUpload(ctx context.Context, t *testing.T, c *s3.Client, opts S3Options, bucket, key string) upload {
	t.Helper()
	g := NewWithT(t)
	opts.PartSize, opts.Concurrency = partSize, 1
	st, err := openStore(ctx, Location{URI: "s3://" + bucket + "/" + key, Bucket: bucket, Key: key}, opts)
	g.Expect(err).NotTo(HaveOccurred())
	up, err := st.create(ctx, "uid-1", stored{})
	g.Expect(err).NotTo(HaveOccurred())
	data := make([]byte, 2*partSize+1<<20)
	_, _ = rand.Read(data)
	written := make(chan error, 1)
	go func() {
		_, err := up.Write(data)
		written <- err
	}()
	g.Eventually(written).WithTimeout(time.Minute).Should(Receive(BeNil()))
	g.Eventually(func() (int, error) {
		uploads, err := multipartUploads(t, c, bucket)
		if err != nil || len(uploads) == 0 {
			return 0, err
		}
		parts, err := c.ListParts(stepCtx(t), &s3.ListPartsInput{Bucket: &bucket, Key: &key, UploadId: uploads[0].UploadId})
		if err != nil {
			return 0, err
		}
		return len(parts.Parts), nil
	}).WithTimeout(time.Minute).WithPolling(50*time.Millisecond).Should(Equal(2), "the store has the first two parts")
	return up
}

// multipartUploads lists the multipart uploads in bucket that were started
// and neither completed nor aborted: parts that S3 keeps, and bills, and
// that no listing of objects shows.
func multipartUploads(t *testing.T, c *s3.Client, bucket string) ([]types.MultipartUpload, error) {
	out, err := c.ListMultipartUploads(stepCtx(t), &s3.ListMultipartUploadsInput{Bucket: &bucket})
	if err != nil {
		return nil, err
	}
	return out.Uploads, nil
}

// TestS3UploadLeavesNoParts: an upload to S3 that does not complete aborts
// its multipart upload, whatever stopped it: the step cancelled (SIGTERM;
// its deadline ends the context alike), when the SDK's own abort, made
// with the upload's context, would fail; a snapshot cut short; a commit
// that another writer beat. No part stays in the bucket, and no object is
// there but the other writer's.
func TestS3UploadLeavesNoParts(t *testing.T) {
	t.Parallel()
	c := s3Client(t)
	tests := []struct {
		name string
		// stop ends the upload of bucket/key, started with ctx, as a step
		// would; cancel cancels ctx.
		stop func(t *testing.T, up upload, cancel context.CancelFunc, bucket, key string)
		// object is what is at the key afterwards; empty for nothing.
		object string
	}{{
		name: "the step is cancelled",
		stop: func(t *testing.T, up upload, cancel context.CancelFunc, _, _ string) {
			cancel()
			err := up.abort(context.Canceled)
			NewWithT(t).Expect(err == nil || errors.Is(err, context.Canceled)).To(BeTrue(), "%v", err)
		},
	}, {
		name: "the snapshot is cut",
		stop: func(t *testing.T, up upload, _ context.CancelFunc, _, _ string) {
			NewWithT(t).Expect(up.abort(errors.New("the member died"))).To(Succeed())
		},
	}, {
		name: "another writer wrote the object first",
		stop: func(t *testing.T, up upload, _ context.CancelFunc, bucket, key string) {
			putObject(t, bucket, key, []byte("another's"), nil)
			_, err := up.commit(fileMeta{})
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring("another writer")))
		},
		object: "another's",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			bucket := newBucket(t)
			ctx, cancel := context.WithCancel(stepCtx(t))
			t.Cleanup(cancel)
			up := startUpload(ctx, t, c, s3Opts(), bucket, "x.db")
			tt.stop(t, up, cancel, bucket, "x.db")
			g.Expect(multipartUploads(t, c, bucket)).To(BeEmpty(), "the parts are gone")
			if tt.object != "" {
				data, _ := getObject(t, bucket, "x.db")
				g.Expect(string(data)).To(Equal(tt.object))
				return
			}
			_, err := c.HeadObject(stepCtx(t), &s3.HeadObjectInput{Bucket: &bucket, Key: awssdk.String("x.db")})
			g.Expect(aws.Classify(err)).To(Equal(aws.NotFound), "no object: %v", err)
		})
	}
}

// TestS3UploadReportsPartsLeft: when the store refuses to abort a multipart
// upload, the step's error says so, with the upload's ID, and the parts
// stay; whether a retry can help is still the upload's failure's call.
func TestS3UploadReportsPartsLeft(t *testing.T) {
	g := NewWithT(t)
	own := moto.Start(t)
	admin, err := own.CreateUser("admin", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}`)
	g.Expect(err).NotTo(HaveOccurred())
	agent, err := own.CreateUser("agent", `{"Version":"2012-10-17","Statement":[`+
		`{"Effect":"Allow","Action":"s3:*","Resource":"*"},`+
		`{"Effect":"Deny","Action":"s3:AbortMultipartUpload","Resource":"*"}]}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(own.SetAuth(true)).To(Succeed())
	t.Cleanup(func() { _ = own.SetAuth(false) })

	l, err := aws.NewLimiters(aws.LimiterOptions{QPS: 1000, Burst: 1000})
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := aws.LoadConfig(stepCtx(t), aws.Connection{Region: moto.Region, EndpointURL: own.URL, Limiters: l,
		Credentials: &aws.StaticCredentials{AccessKeyID: admin.AccessKeyID, SecretAccessKey: admin.SecretAccessKey}})
	g.Expect(err).NotTo(HaveOccurred())
	c := aws.NewS3(cfg, aws.S3Options{UsePathStyle: true})
	bucket := "parts-left"
	_, err = c.CreateBucket(stepCtx(t), &s3.CreateBucketInput{Bucket: &bucket})
	g.Expect(err).NotTo(HaveOccurred())

	// The agent takes its credentials from the environment.
	t.Setenv("AWS_ACCESS_KEY_ID", agent.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", agent.SecretAccessKey)
	ctx, cancel := context.WithCancel(stepCtx(t))
	defer cancel()
	up := startUpload(ctx, t, c, S3Options{Endpoint: own.URL, Region: moto.Region, ForcePathStyle: true}, bucket, "x.db")
	uploads, err := multipartUploads(t, c, bucket)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(uploads).To(HaveLen(1))

	cancel()
	err = up.abort(context.Canceled)
	g.Expect(err).To(MatchError(context.Canceled))
	g.Expect(err).To(MatchError(ContainSubstring(*uploads[0].UploadId)))
	g.Expect(err).To(MatchError(ContainSubstring("AccessDenied")))
	g.Expect(ExitCode(err)).To(Equal(agentapi.ExitFailed), "%v", err)
	g.Expect(multipartUploads(t, c, bucket)).To(HaveLen(1), "the parts stay, as the error says")
}
