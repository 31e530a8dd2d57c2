package aws

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/testing/faultproxy"
	"github.com/tend-dev/tend/internal/testing/moto"
)

// nowhere is an endpoint where nothing listens.
const nowhere = "http://127.0.0.1:9"

func TestLoadConfigRejects(t *testing.T) {
	l := newLimiters(t)
	tests := []struct {
		name    string
		env     map[string]string
		conn    Connection
		wantErr string
	}{
		{name: "no limiters", conn: Connection{}, wantErr: "Connection.Limiters is nil"},
		{name: "endpoint without a scheme", conn: Connection{Limiters: l, EndpointURL: "sqs.example.com"}, wantErr: "must be http:// or https://"},
		{name: "endpoint of another scheme", conn: Connection{Limiters: l, EndpointURL: "ftp://example.com"}, wantErr: "must be http:// or https://"},
		{name: "endpoint without a host", conn: Connection{Limiters: l, EndpointURL: "http://"}, wantErr: "must be http:// or https://"},
		{name: "endpoint that does not parse", conn: Connection{Limiters: l, EndpointURL: "http://[::1"}, wantErr: "endpoint URL"},
		{name: "credentials without a secret", conn: Connection{Limiters: l, Credentials: &StaticCredentials{AccessKeyID: "AKID"}}, wantErr: "need both an access key id and a secret access key"},
		{name: "credentials without an id", conn: Connection{Limiters: l, Credentials: &StaticCredentials{SecretAccessKey: "s"}}, wantErr: "need both"},
		{name: "no region anywhere", env: map[string]string{"AWS_REGION": "", "AWS_DEFAULT_REGION": ""}, conn: Connection{Limiters: l}, wantErr: "no region"},
		{name: "a profile that does not exist", env: map[string]string{"AWS_PROFILE": "nope"}, conn: Connection{Limiters: l}, wantErr: "loading the default chain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := LoadConfig(callCtx(t), tt.conn)
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			g.Expect(errors.Is(err, ErrInvalidConfig)).To(BeTrue())
			g.Expect(Classify(err)).To(Equal(Terminal))
		})
	}
}

// TestLoadConfigEndpoints shows which endpoint and region a call really
// reaches, by whether the queue that it creates appears in moto and where.
func TestLoadConfigEndpoints(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		conn       Connection
		wantRegion string
	}{
		{
			name:       "the default chain, as moto.Env sets it",
			wantRegion: moto.Region,
		},
		{
			name:       "AWS_ENDPOINT_URL_SQS beats AWS_ENDPOINT_URL",
			env:        map[string]string{"AWS_ENDPOINT_URL": nowhere, "AWS_ENDPOINT_URL_SQS": server.URL},
			wantRegion: moto.Region,
		},
		{
			name:       "the connection's endpoint beats AWS_ENDPOINT_URL",
			env:        map[string]string{"AWS_ENDPOINT_URL": nowhere},
			conn:       Connection{EndpointURL: server.URL},
			wantRegion: moto.Region,
		},
		{
			name:       "the connection's endpoint beats AWS_ENDPOINT_URL_SQS",
			env:        map[string]string{"AWS_ENDPOINT_URL_SQS": nowhere},
			conn:       Connection{EndpointURL: server.URL},
			wantRegion: moto.Region,
		},
		{
			name:       "the connection's region beats AWS_REGION",
			conn:       Connection{Region: "eu-west-1"},
			wantRegion: "eu-west-1",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := callCtx(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			tt.conn.Limiters = newLimiters(t)
			name := fmt.Sprintf("endpoints-%d", i)
			_, err := newSQS(t, tt.conn).CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name})
			g.Expect(err).NotTo(HaveOccurred())

			observer := newSQS(t, Connection{
				Region: tt.wantRegion, EndpointURL: server.URL, Limiters: newLimiters(t),
				Credentials: &StaticCredentials{AccessKeyID: moto.AccessKeyID, SecretAccessKey: moto.SecretAccessKey},
			})
			url, err := observer.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name})
			g.Expect(err).NotTo(HaveOccurred(), "the queue is not in moto's %s", tt.wantRegion)
			attrs, err := observer.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
				QueueUrl: url.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
			})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(attrs.Attributes["QueueArn"]).To(Equal("arn:aws:sqs:" + tt.wantRegion + ":" + moto.AccountID + ":" + name))
		})
	}
}

// TestLoadConfigOneAttempt shows that a failed call is sent once, whatever
// the environment asks of the SDK's retryer.
func TestLoadConfigOneAttempt(t *testing.T) {
	t.Setenv("AWS_MAX_ATTEMPTS", "5")
	t.Setenv("AWS_RETRY_MODE", "adaptive")
	tests := []struct {
		mode faultproxy.Mode
		want Class
	}{
		{mode: faultproxy.ServerError, want: Transient},
		{mode: faultproxy.Unavailable, want: Transient},
		{mode: faultproxy.Throttle, want: Throttled},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			g := NewWithT(t)
			proxy := faultproxy.Start(t, server.URL)
			proxy.SetMode(tt.mode)
			_, err := newSQS(t, Connection{EndpointURL: proxy.URL(), Limiters: newLimiters(t)}).
				ListQueues(callCtx(t), &sqs.ListQueuesInput{})
			g.Expect(Classify(err)).To(Equal(tt.want))
			g.Expect(proxy.Total()).To(Equal(1))
		})
	}
}

// TestLoadConfigRequiresDeadline shows that a call without a deadline is
// refused before it is sent or takes a token.
func TestLoadConfigRequiresDeadline(t *testing.T) {
	g := NewWithT(t)
	proxy := faultproxy.Start(t, server.URL)
	l := newLimiters(t)
	c := newSQS(t, Connection{EndpointURL: proxy.URL(), Limiters: l})

	_, err := c.ListQueues(context.Background(), &sqs.ListQueuesInput{})
	g.Expect(err).To(MatchError(ErrNoDeadline))
	g.Expect(Classify(err)).To(Equal(Terminal))
	g.Expect(proxy.Total()).To(Equal(0))
	g.Expect(l.Stats(strings.ToLower(proxy.URL()))).To(Equal(Stats{}))
}

// TestLoadConfigCredentials runs a moto_server of its own with IAM checks on,
// to show that static credentials replace the environment's, and that moto's
// credential errors are Terminal.
func TestLoadConfigCredentials(t *testing.T) {
	authed := moto.Start(t)
	g := NewWithT(t)
	allowed, err := authed.CreateUser("allowed", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"sqs:*","Resource":"*"}]}`)
	g.Expect(err).NotTo(HaveOccurred())
	denied, err := authed.CreateUser("denied", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(authed.SetAuth(true)).To(Succeed())

	tests := []struct {
		name  string
		creds *StaticCredentials
		want  Class
		code  string // what moto says, in an XML body that the SDK cannot decode
	}{
		{name: "the environment's fake key is unknown", want: Terminal, code: "InvalidClientTokenId"},
		{name: "a wrong secret", creds: &StaticCredentials{AccessKeyID: allowed.AccessKeyID, SecretAccessKey: "wrong"}, want: Terminal, code: "SignatureDoesNotMatch"},
		{name: "a key without permission", creds: &StaticCredentials{AccessKeyID: denied.AccessKeyID, SecretAccessKey: denied.SecretAccessKey}, want: Terminal, code: "AccessDenied"},
		{name: "a key with permission", creds: &StaticCredentials{AccessKeyID: allowed.AccessKeyID, SecretAccessKey: allowed.SecretAccessKey}, want: None},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := callCtx(t)
			name := fmt.Sprintf("credentials-%d", i)
			c := newSQS(t, Connection{Credentials: tt.creds, Limiters: newLimiters(t)})
			_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name})
			g.Expect(Classify(err)).To(Equal(tt.want), "error: %v", err)
			if tt.code != "" {
				var undecoded *smithy.DeserializationError
				g.Expect(errors.As(err, &undecoded)).To(BeTrue(), "error: %v", err)
				g.Expect(string(undecoded.Snapshot)).To(ContainSubstring("<Code>" + tt.code + "</Code>"))
				return
			}
			_, err = c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: awssdk.String(name)})
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
}

func TestStaticCredentialsRedacted(t *testing.T) {
	creds := &StaticCredentials{AccessKeyID: "AKIDVISIBLE", SecretAccessKey: "s3cr3t-value", SessionToken: "t0ken-value"}
	conn := Connection{Credentials: creds}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		t.Run(format, func(t *testing.T) {
			g := NewWithT(t)
			for _, v := range []any{creds, *creds, conn, &conn} {
				out := fmt.Sprintf(format, v)
				g.Expect(out).NotTo(ContainSubstring("s3cr3t"))
				g.Expect(out).NotTo(ContainSubstring("t0ken"))
			}
			g.Expect(fmt.Sprintf(format, creds)).To(ContainSubstring("AKIDVISIBLE"))
		})
	}
}
