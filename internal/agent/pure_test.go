package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/smithy-go"
	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/aws"
	"github.com/tend-dev/tend/internal/etcd"
	"github.com/tend-dev/tend/internal/testing/etcdserver"
)

func TestParseURI(t *testing.T) {
	tests := []struct {
		uri     string
		want    Location
		wantErr string
	}{
		{uri: "s3://bucket/key.db", want: Location{URI: "s3://bucket/key.db", Bucket: "bucket", Key: "key.db"}},
		{uri: "s3://my.bucket-1/ns/backup.db.zst", want: Location{URI: "s3://my.bucket-1/ns/backup.db.zst", Bucket: "my.bucket-1", Key: "ns/backup.db.zst"}},
		{uri: "s3://bucket/a key with spaces%20and+signs", want: Location{URI: "s3://bucket/a key with spaces%20and+signs", Bucket: "bucket", Key: "a key with spaces%20and+signs"}},
		{uri: "file:///backup/db/name.db.gz", want: Location{URI: "file:///backup/db/name.db.gz", Path: "/backup/db/name.db.gz"}},
		{uri: "s3://bucket", wantErr: "with a key"},
		{uri: "s3://bucket/", wantErr: "with a key"},
		{uri: "s3://bucket/dir/", wantErr: "ends with /"},
		{uri: "s3://Bucket/key", wantErr: "lower-case"},
		{uri: "s3://b/key", wantErr: "3 to 63"},
		{uri: "s3://-bucket/key", wantErr: "start and end"},
		{uri: "s3://bucket/" + strings.Repeat("k", 1025), wantErr: "longer than S3's 1024"},
		{uri: "file://host/path", wantErr: "no host"},
		{uri: "file://relative", wantErr: "no host"},
		{uri: "file:///backup/../etc/passwd", wantErr: "clean path"},
		{uri: "file:///backup//x", wantErr: "clean path"},
		{uri: "file:///backup/", wantErr: "clean path"},
		{uri: "file:///", wantErr: "clean path"},
		{uri: "pvc://claim/path", wantErr: "s3:// or file://"},
		{uri: "", wantErr: "s3:// or file://"},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseURI(tt.uri)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ErrInvalid))
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				g.Expect(Terminal(err)).To(BeTrue())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
			g.Expect(got.IsS3()).To(Equal(tt.want.Bucket != ""))
		})
	}
}

func TestParseCompression(t *testing.T) {
	tests := []struct {
		in      string
		want    Compression
		wantErr bool
	}{
		{in: "None", want: None}, {in: "", want: None}, {in: "gzip", want: Gzip},
		{in: "Gzip", want: Gzip}, {in: "ZSTD", want: Zstd}, {in: "Zstd", want: Zstd},
		{in: "lz4", wantErr: true}, {in: "gz", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseCompression(tt.in)
			if tt.wantErr {
				g.Expect(err).To(MatchError(ErrInvalid))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// TestCompressionRoundTrip: what each compressor writes, its decompressor
// reads back whole.
func TestCompressionRoundTrip(t *testing.T) {
	data := bytes.Repeat([]byte("etcd key-value "), 100000)
	for _, c := range []Compression{None, Gzip, Zstd} {
		t.Run(string(c), func(t *testing.T) {
			g := NewWithT(t)
			var buf bytes.Buffer
			w, err := c.compressor(&buf)
			g.Expect(err).NotTo(HaveOccurred())
			_, err = w.Write(data)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(w.Close()).To(Succeed())
			if c != None {
				g.Expect(buf.Len()).To(BeNumerically("<", len(data)/10))
			}
			r, err := c.decompressor(&buf)
			g.Expect(err).NotTo(HaveOccurred())
			got, err := io.ReadAll(r)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Close()).To(Succeed())
			g.Expect(got).To(Equal(data))
		})
	}
}

func TestChooseMember(t *testing.T) {
	const leader = etcd.MemberID(1)
	m := func(id etcd.MemberID, rev int64, healthy bool) etcd.MemberStatus {
		s := etcd.MemberStatus{
			Member:   etcd.Member{ID: id, Name: fmt.Sprintf("m%d", id), ClientURLs: []string{fmt.Sprintf("https://m%d:2379", id)}},
			Endpoint: fmt.Sprintf("https://m%d:2379", id), Answered: healthy, Leader: leader, Revision: rev, Healthy: healthy,
		}
		if !healthy {
			s.Err = errors.New("connection refused")
		}
		return s
	}
	learner := m(4, 100, true)
	learner.IsLearner = true
	notStarted := m(5, 0, false)
	notStarted.Endpoint = ""
	tests := []struct {
		name     string
		statuses []etcd.MemberStatus
		want     etcd.MemberID
		wantErr  string
	}{
		{name: "the highest revision", statuses: []etcd.MemberStatus{m(1, 10, true), m(2, 12, true), m(3, 11, true)}, want: 2},
		{name: "the highest revision, even the leader", statuses: []etcd.MemberStatus{m(1, 12, true), m(2, 11, true)}, want: 1},
		{name: "of equals, a follower", statuses: []etcd.MemberStatus{m(1, 12, true), m(3, 12, true), m(2, 12, true)}, want: 2},
		{name: "an unhealthy member is skipped, however far ahead", statuses: []etcd.MemberStatus{m(1, 10, true), m(2, 99, false)}, want: 1},
		{name: "a learner is skipped", statuses: []etcd.MemberStatus{m(1, 10, true), learner}, want: 1},
		{name: "a member that has not started is skipped", statuses: []etcd.MemberStatus{notStarted, m(2, 3, true)}, want: 2},
		{name: "none healthy", statuses: []etcd.MemberStatus{m(1, 10, false), learner}, wantErr: "m1 (1): connection refused; m4 (4): a learner"},
		{name: "none at all", wantErr: "among 0 members"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ChooseMember(tt.statuses)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ErrNoMember))
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				g.Expect(Terminal(err)).To(BeFalse(), "a retry may find a healthy member")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.ID).To(Equal(tt.want))
		})
	}
}

func TestCheckOwner(t *testing.T) {
	loc := Location{URI: "s3://bucket/key"}
	tests := []struct {
		name    string
		stored  stored
		wantErr string
	}{
		{name: "nothing there", stored: stored{}},
		{name: "the same owner's", stored: stored{Exists: true, Owner: "uid-1"}},
		{name: "another owner's", stored: stored{Exists: true, Owner: "uid-2"}, wantErr: "written by uid-2, not by uid-1"},
		{name: "no owner's", stored: stored{Exists: true}, wantErr: "not written by Tend"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := checkOwner(loc, tt.stored, "uid-1")
			if tt.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ErrRefused))
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			g.Expect(ExitCode(err)).To(Equal(agentapi.ExitTerminal))
		})
	}
	for _, bad := range []string{"", "has space", "tab\there", "é", strings.Repeat("x", 257)} {
		NewWithT(t).Expect(checkOwnerValue(bad)).To(MatchError(ErrInvalid), "%q", bad)
	}
	NewWithT(t).Expect(checkOwnerValue("6b1d8e0a-1f2c-4b39-9d7e-0c1a2b3c4d5e")).To(Succeed())
}

// TestExitCode: which errors end a step for good, and which a retry may
// fix.
func TestExitCode(t *testing.T) {
	apiErr := func(code string) error {
		return fmt.Errorf("uploading: %w", &smithy.GenericAPIError{Code: code})
	}
	tests := []struct {
		name string
		err  error
		want int
	}{
		{name: "success", err: nil, want: agentapi.ExitOK},
		{name: "bad input", err: fmt.Errorf("x: %w", ErrInvalid), want: agentapi.ExitTerminal},
		{name: "another owner's artifact", err: fmt.Errorf("x: %w", ErrRefused), want: agentapi.ExitTerminal},
		{name: "checksum", err: fmt.Errorf("x: %w", ErrChecksum), want: agentapi.ExitTerminal},
		{name: "corrupt", err: fmt.Errorf("x: %w", ErrCorrupt), want: agentapi.ExitTerminal},
		{name: "mismatch", err: fmt.Errorf("x: %w", ErrMismatch), want: agentapi.ExitTerminal},
		{name: "not found", err: fmt.Errorf("x: %w", ErrNotFound), want: agentapi.ExitTerminal},
		{name: "etcd refused the credentials", err: fmt.Errorf("x: %w", etcd.ErrAuth), want: agentapi.ExitTerminal},
		{name: "etcd certificate", err: fmt.Errorf("x: %w", etcd.ErrCertificate), want: agentapi.ExitTerminal},
		{name: "etcd NOSPACE", err: rpctypes.ErrNoSpace, want: agentapi.ExitTerminal},
		{name: "etcd no leader", err: fmt.Errorf("x: %w", etcd.ErrNoLeader), want: agentapi.ExitFailed},
		{name: "etcd compacted", err: fmt.Errorf("x: %w", etcd.ErrCompacted), want: agentapi.ExitFailed},
		{name: "a cut snapshot", err: fmt.Errorf("x: %w", etcd.ErrSnapshotChecksum), want: agentapi.ExitFailed},
		{name: "no healthy member", err: fmt.Errorf("x: %w", ErrNoMember), want: agentapi.ExitFailed},
		{name: "S3 access denied", err: apiErr("AccessDenied"), want: agentapi.ExitTerminal},
		{name: "S3 invalid config", err: fmt.Errorf("x: %w", aws.ErrInvalidConfig), want: agentapi.ExitTerminal},
		{name: "S3 slow down", err: apiErr("SlowDown"), want: agentapi.ExitFailed},
		{name: "S3 internal error", err: apiErr("InternalError"), want: agentapi.ExitFailed},
		{name: "S3 lost a conditional write", err: apiErr("PreconditionFailed"), want: agentapi.ExitFailed},
		{name: "a deadline", err: fmt.Errorf("x: %w", context.DeadlineExceeded), want: agentapi.ExitFailed},
		{name: "a read-only volume", err: &fs.PathError{Op: "open", Path: "/backup/x", Err: fs.ErrPermission}, want: agentapi.ExitTerminal},
		{name: "anything else", err: errors.New("connection reset by peer"), want: agentapi.ExitFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(ExitCode(tt.err)).To(Equal(tt.want))
			r := Failed(agentapi.Result{Op: agentapi.OpBackup}, tt.err)
			g.Expect(r.Terminal).To(Equal(tt.want == agentapi.ExitTerminal))
			if tt.err != nil {
				g.Expect(r.Error).To(Equal(tt.err.Error()))
			}
		})
	}
}

// TestLoadConnection reads the files that a Job mounts, and refuses those
// that cannot make a connection.
func TestLoadConnection(t *testing.T) {
	pki, err := etcdserver.NewPKI(t.TempDir())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	ca, err := os.ReadFile(pki.CAFile)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	cert, err := os.ReadFile(pki.ClientCertFile)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	key, err := os.ReadFile(pki.ClientKeyFile)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	type files map[string]string
	tlsFiles := files{ClientCertFile: string(cert), ClientKeyFile: string(key), ClientCAFile: string(ca)}
	tests := []struct {
		name          string
		conn, tls     files
		wantEndpoints []string
		wantTLS       bool
		wantErr       string
	}{
		{
			name: "https, with the connection's CA",
			conn: files{ConnectionEndpointsFile: "https://a:2379, https://b:2379,\n", ConnectionCAFile: string(ca)}, tls: tlsFiles,
			wantEndpoints: []string{"https://a:2379", "https://b:2379"}, wantTLS: true,
		},
		{
			name: "https, with the client Secret's CA",
			conn: files{ConnectionEndpointsFile: "https://a:2379"}, tls: tlsFiles,
			wantEndpoints: []string{"https://a:2379"}, wantTLS: true,
		},
		{name: "http needs no certificates", conn: files{ConnectionEndpointsFile: "http://a:2379"}, wantEndpoints: []string{"http://a:2379"}},
		{name: "no endpoints file", conn: files{}, wantErr: "reading the cluster's endpoints"},
		{name: "no endpoints", conn: files{ConnectionEndpointsFile: " , "}, wantErr: "lists no endpoints"},
		{name: "no CA anywhere", conn: files{ConnectionEndpointsFile: "https://a:2379"}, tls: files{ClientCertFile: string(cert), ClientKeyFile: string(key)}, wantErr: "reading the members' CA"},
		{name: "a CA that is no PEM", conn: files{ConnectionEndpointsFile: "https://a:2379", ConnectionCAFile: "junk"}, tls: tlsFiles, wantErr: "holds no PEM certificate"},
		{name: "no client key", conn: files{ConnectionEndpointsFile: "https://a:2379", ConnectionCAFile: string(ca)}, tls: files{ClientCertFile: string(cert)}, wantErr: "loading the client certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			connDir, tlsDir := t.TempDir(), t.TempDir()
			for dir, fm := range map[string]files{connDir: tt.conn, tlsDir: tt.tls} {
				for name, content := range fm {
					g.Expect(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600)).To(Succeed())
				}
			}
			cfg, err := LoadConnection(connDir, tlsDir)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ErrInvalid))
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.Endpoints).To(Equal(tt.wantEndpoints))
			g.Expect(cfg.TLS != nil).To(Equal(tt.wantTLS))
			if tt.wantTLS {
				g.Expect(cfg.TLS.Certificates).To(HaveLen(1))
				g.Expect(cfg.TLS.RootCAs).NotTo(BeNil())
			}
		})
	}
}
