package aws

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/testing/faultproxy"
	"github.com/tend-dev/tend/internal/testing/moto"
)

// newS3 returns a path-style S3 client on LoadConfig(conn), with generous
// buckets unless conn has its own.
func newS3(t *testing.T, conn Connection, opts S3Options) *s3.Client {
	t.Helper()
	if conn.Limiters == nil {
		conn.Limiters = newLimiters(t)
	}
	cfg, err := LoadConfig(callCtx(t), conn)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return NewS3(cfg, opts)
}

// newBucket creates a bucket named after the test in the shared moto.
func newBucket(t *testing.T, c *s3.Client) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", " ", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-") + "-b"
	_, err := c.CreateBucket(callCtx(t), &s3.CreateBucketInput{Bucket: &name})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return name
}

// TestS3RoundTrip writes and reads an object through NewS3's client, path
// style, as against an S3-compatible store, with its calls counted by the
// limiter of the endpoint.
func TestS3RoundTrip(t *testing.T) {
	g := NewWithT(t)
	ctx := callCtx(t)
	l := newLimiters(t)
	c := newS3(t, Connection{EndpointURL: server.URL, Limiters: l}, S3Options{UsePathStyle: true})
	bucket := newBucket(t, c)

	body := []byte("a snapshot, in a way")
	_, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &bucket, Key: awssdk.String("dir/object.db"), Body: bytes.NewReader(body),
		Metadata: map[string]string{"tend-owner": "uid-1"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: awssdk.String("dir/object.db")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(head.Metadata).To(HaveKeyWithValue("tend-owner", "uid-1"))
	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: awssdk.String("dir/object.db")})
	g.Expect(err).NotTo(HaveOccurred())
	data, err := io.ReadAll(got.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Body.Close()).To(Succeed())
	g.Expect(data).To(Equal(body))

	u, err := url.Parse(server.URL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.Stats(EndpointKey(u)).Sent).To(BeNumerically(">=", 4), "every call went through the limiter")
}

// TestS3ErrorClasses shows the classes of the answers that a real store
// (moto) gives to the calls that the backup agent makes.
func TestS3ErrorClasses(t *testing.T) {
	g := NewWithT(t)
	ctx := callCtx(t)
	c := newS3(t, Connection{EndpointURL: server.URL}, S3Options{UsePathStyle: true})
	bucket := newBucket(t, c)
	key := awssdk.String("present")
	_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: key, Body: strings.NewReader("x")})
	g.Expect(err).NotTo(HaveOccurred())
	missing := awssdk.String("missing")
	nobucket := awssdk.String("no-such-bucket-anywhere")

	tests := []struct {
		name string
		call func() error
		want Class
		code string // the store's error code
	}{
		{name: "GetObject of a missing key", want: NotFound, code: "NoSuchKey", call: func() error {
			_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: missing})
			return err
		}},
		{name: "HeadObject of a missing key", want: NotFound, code: "NotFound", call: func() error {
			_, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: missing})
			return err
		}},
		{name: "PutObject to a missing bucket", want: NotFound, code: "NoSuchBucket", call: func() error {
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: nobucket, Key: key, Body: strings.NewReader("x")})
			return err
		}},
		{name: "DeleteObject of a missing key is no error", want: None, call: func() error {
			_, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: missing})
			return err
		}},
		{name: "PutObject If-None-Match over an object", want: Transient, code: "PreconditionFailed", call: func() error {
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: key, Body: strings.NewReader("y"), IfNoneMatch: awssdk.String("*")})
			return err
		}},
		{name: "GetObject If-Match of another ETag", want: Transient, code: "PreconditionFailed", call: func() error {
			_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: key, IfMatch: awssdk.String(`"0123456789abcdef0123456789abcdef"`)})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			g := NewWithT(t)
			g.Expect(Classify(err)).To(Equal(tt.want), "%v", err)
			if tt.code != "" {
				var apiErr smithy.APIError
				g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
				g.Expect(apiErr.ErrorCode()).To(Equal(tt.code))
			}
		})
	}
}

// TestS3AccessDenied shows that a store refusing the caller's rights is
// Terminal, for every call the agent makes, HEAD (no body) included.
func TestS3AccessDenied(t *testing.T) {
	g := NewWithT(t)
	own := moto.Start(t)
	admin := newS3(t, Connection{EndpointURL: own.URL}, S3Options{UsePathStyle: true})
	bucket := newBucket(t, admin)
	_, err := admin.PutObject(callCtx(t), &s3.PutObjectInput{Bucket: &bucket, Key: awssdk.String("k"), Body: strings.NewReader("x")})
	g.Expect(err).NotTo(HaveOccurred())
	user, err := own.CreateUser("nobody", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(own.SetAuth(true)).To(Succeed())
	t.Cleanup(func() { _ = own.SetAuth(false) })

	c := newS3(t, Connection{EndpointURL: own.URL, Credentials: &StaticCredentials{AccessKeyID: user.AccessKeyID, SecretAccessKey: user.SecretAccessKey}}, S3Options{UsePathStyle: true})
	ctx := callCtx(t)
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: awssdk.String("k")})
	g.Expect(Classify(err)).To(Equal(Terminal), "%v", err)
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: awssdk.String("k")})
	g.Expect(Classify(err)).To(Equal(Terminal), "%v", err)
	g.Expect(IsCredentialError(err)).To(BeTrue())
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: awssdk.String("k2"), Body: strings.NewReader("x")})
	g.Expect(Classify(err)).To(Equal(Terminal), "%v", err)
}

// TestS3ResponseHeaderTimeout shows that a store that takes a request and
// never answers fails the call long before its deadline, as Transient.
func TestS3ResponseHeaderTimeout(t *testing.T) {
	g := NewWithT(t)
	proxy := faultproxy.Start(t, server.URL)
	c := newS3(t, Connection{EndpointURL: proxy.URL()}, S3Options{UsePathStyle: true, ResponseHeaderTimeout: 200 * time.Millisecond})
	proxy.SetMode(faultproxy.Hang)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: awssdk.String("b"), Key: awssdk.String("k")})
	g.Expect(err).To(MatchError(ContainSubstring("timeout awaiting response headers")))
	g.Expect(ctx.Err()).NotTo(HaveOccurred(), "the call ended before its deadline")
	g.Expect(Classify(err)).To(Equal(Transient))
}

// TestS3WithoutDeadline: the S3 client keeps LoadConfig's refusal.
func TestS3WithoutDeadline(t *testing.T) {
	g := NewWithT(t)
	c := newS3(t, Connection{EndpointURL: server.URL}, S3Options{UsePathStyle: true})
	_, err := c.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: awssdk.String("b"), Key: awssdk.String("k")})
	g.Expect(errors.Is(err, ErrNoDeadline)).To(BeTrue(), "%v", err)
}
