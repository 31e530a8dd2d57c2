package moto

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	. "github.com/onsi/gomega"
)

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// defaultClient is what any code that trusts the SDK's default chain gets.
func defaultClient(t *testing.T) *sqs.Client {
	cfg, err := config.LoadDefaultConfig(callCtx(t))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return sqs.NewFromConfig(cfg)
}

func listQueues(t *testing.T, c *sqs.Client) []string {
	out, err := c.ListQueues(callCtx(t), &sqs.ListQueuesInput{})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return out.QueueUrls
}

// TestStartSealsTheDefaultChain shows that, after Start, the SDK's default
// chain reaches this server with the fake identity, whatever the environment
// said before.
func TestStartSealsTheDefaultChain(t *testing.T) {
	// What a developer's shell might hold: each would send the SDK
	// elsewhere or make LoadDefaultConfig fail.
	stray := map[string]string{
		"AWS_PROFILE":                         "nope",
		"AWS_ENDPOINT_URL_SQS":                "http://127.0.0.1:9",
		"AWS_SESSION_TOKEN":                   "stale",
		"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true",
		"AWS_REGION":                          "ap-south-1",
	}
	for k, v := range stray {
		t.Setenv(k, v)
	}

	t.Run("sealed", func(t *testing.T) {
		g := NewWithT(t)
		s := Start(t)
		for k := range stray {
			if _, own := s.Env()[k]; own {
				continue
			}
			_, set := os.LookupEnv(k)
			g.Expect(set).To(BeFalse(), k)
		}
		for k, v := range s.Env() {
			g.Expect(os.Getenv(k)).To(Equal(v), k)
		}

		cfg, err := config.LoadDefaultConfig(callCtx(t))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cfg.Region).To(Equal(Region))
		creds, err := cfg.Credentials.Retrieve(callCtx(t))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect([]string{creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken}).To(Equal([]string{AccessKeyID, SecretAccessKey, ""}))

		out, err := sqs.NewFromConfig(cfg).CreateQueue(callCtx(t), &sqs.CreateQueueInput{QueueName: awssdk.String("sealed")})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(*out.QueueUrl).To(Equal(s.URL + "/" + AccountID + "/sealed"))
	})

	// The test's environment comes back when it ends.
	g := NewWithT(t)
	for k, v := range stray {
		g.Expect(os.Getenv(k)).To(Equal(v), k)
	}
}

func TestReset(t *testing.T) {
	g := NewWithT(t)
	s := Start(t)
	c := defaultClient(t)
	for _, name := range []string{"a", "b"} {
		_, err := c.CreateQueue(callCtx(t), &sqs.CreateQueueInput{QueueName: awssdk.String(name)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(listQueues(t, c)).To(HaveLen(2))

	g.Expect(s.Reset()).To(Succeed())
	g.Expect(listQueues(t, c)).To(BeEmpty())
}

// TestStopKillsTheProcessGroup shows that Stop leaves no process and no
// listener behind.
func TestStopKillsTheProcessGroup(t *testing.T) {
	g := NewWithT(t)
	s := Start(t)
	pgid := s.Pid()
	g.Expect(syscall.Kill(-pgid, 0)).To(Succeed(), "the server's group is alive")

	g.Expect(s.Stop()).To(Succeed())
	g.Expect(syscall.Kill(-pgid, 0)).To(MatchError(syscall.ESRCH), "no process is left in the server's group")
	resp, err := http.Get(s.URL + "/moto-api/reset")
	if err == nil {
		resp.Body.Close()
	}
	g.Expect(err).To(HaveOccurred(), "nothing answers on the server's port")
	g.Expect(s.Stop()).To(Succeed(), "Stop is idempotent")
}

// TestStopReportsADeadServer shows that a server that died during the tests
// fails them rather than passing unnoticed.
func TestStopReportsADeadServer(t *testing.T) {
	g := NewWithT(t)
	s := New()
	g.Expect(s.start()).To(Succeed())
	g.Expect(syscall.Kill(s.Pid(), syscall.SIGKILL)).To(Succeed())
	<-s.exited
	g.Expect(s.Stop()).To(MatchError(ContainSubstring("died during the tests")))
}

// TestStartFailsLoudly shows that a missing or broken moto_server is an
// error that says what to do, never a skip.
func TestStartFailsLoudly(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "moto_server")
	NewWithT(t).Expect(os.WriteFile(broken, []byte("#!/bin/sh\necho 'no module named moto' >&2\nexit 1\n"), 0o755)).To(Succeed())

	tests := []struct {
		name    string
		env     map[string]string
		wantErr []string
	}{
		{
			name:    "not installed",
			env:     map[string]string{"MOTO_SERVER": "", "PATH": dir + "/nowhere", "PYENV_ROOT": dir},
			wantErr: []string{"moto_server is not in", "pip install 'moto[server]==5.2.1'"},
		},
		{
			name:    "not at $MOTO_SERVER",
			env:     map[string]string{"MOTO_SERVER": filepath.Join(dir, "missing")},
			wantErr: []string{"starting " + filepath.Join(dir, "missing")},
		},
		{
			name:    "exits at once",
			env:     map[string]string{"MOTO_SERVER": broken},
			wantErr: []string{"moto_server exited before answering", "no module named moto"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			s := New()
			err := s.start()
			g.Expect(err).To(HaveOccurred())
			for _, want := range tt.wantErr {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
			if errors.Is(err, errExited) {
				g.Expect(syscall.Kill(-s.Pid(), 0)).To(MatchError(syscall.ESRCH))
			}
		})
	}
}
