package moto

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tend-dev/tend/internal/testing/logtail"
	"github.com/tend-dev/tend/internal/testing/loopback"
)

// The fixed identity and place that every test sees.
const (
	Region          = "us-east-1"
	AccessKeyID     = "test"
	SecretAccessKey = "test"
	// AccountID is the account that moto puts in every ARN and queue URL.
	AccountID = "123456789012"
)

const (
	// startTimeout bounds how long a fresh moto_server may take to answer.
	startTimeout = 60 * time.Second
	// startAttempts is how many free ports are tried, in case another
	// process takes the port between our probe and moto's bind.
	startAttempts = 3
	// deadProxy is where moto_server's own outbound HTTP would go: nothing
	// listens there, so moto itself cannot reach the network.
	deadProxy = "http://127.0.0.1:9"
)

// Server is one moto_server process on 127.0.0.1.
type Server struct {
	// URL is the server's address, such as "http://127.0.0.1:40123".
	URL string

	cmd      *exec.Cmd
	exited   chan struct{}
	waitErr  error
	log      *logtail.Buffer
	stopOnce sync.Once
	stopErr  error
}

// New returns a Server that Run will start, for TestMain:
//
//	var server = moto.New()
//	func TestMain(m *testing.M) { os.Exit(server.Run(m)) }
func New() *Server { return &Server{} }

// Run starts the server, points the whole test process at it (see Env),
// runs the package's tests, stops the server, and returns the exit code for
// os.Exit.
func (s *Server) Run(m *testing.M) int {
	if err := s.start(); err != nil {
		fmt.Fprintf(os.Stderr, "moto: %v\n", err)
		return 1
	}
	for _, k := range strayAWSVars(s.Env()) {
		os.Unsetenv(k)
	}
	for k, v := range s.Env() {
		os.Setenv(k, v)
	}
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "moto: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Start starts a server for the calling test alone, points the environment
// at it for the test's duration (with t.Setenv, so the test cannot be
// parallel), and stops it when the test ends. The test fails at once when
// the server cannot start.
func Start(t testing.TB) *Server {
	t.Helper()
	s := New()
	if err := s.start(); err != nil {
		t.Fatalf("moto: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("moto: %v", err)
		}
	})
	for _, k := range strayAWSVars(s.Env()) {
		t.Setenv(k, "") // restores the old value at cleanup
		os.Unsetenv(k)
	}
	for k, v := range s.Env() {
		t.Setenv(k, v)
	}
	return s
}

// Env returns the environment that makes the SDK's default chain reach this
// server and nothing else: fake static credentials, region us-east-1, the
// server as AWS_ENDPOINT_URL for every service, and neither shared config
// files nor instance metadata. Run and Start set it, and unset every other
// AWS_ variable (AWS_PROFILE, AWS_ENDPOINT_URL_SQS, AWS_ROLE_ARN and the
// like). Pass it to a child process that must talk to the server.
func (s *Server) Env() map[string]string {
	return map[string]string{
		"AWS_ACCESS_KEY_ID":           AccessKeyID,
		"AWS_SECRET_ACCESS_KEY":       SecretAccessKey,
		"AWS_REGION":                  Region,
		"AWS_DEFAULT_REGION":          Region,
		"AWS_ENDPOINT_URL":            s.URL,
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_CONFIG_FILE":             os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
	}
}

// strayAWSVars lists the AWS_ variables of the process that keep is not
// setting.
func strayAWSVars(keep map[string]string) []string {
	var stray []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := keep[k]; !ok && strings.HasPrefix(strings.ToUpper(k), "AWS_") {
			stray = append(stray, k)
		}
	}
	return stray
}

// Reset drops every resource in the server (POST /moto-api/reset), so that
// a test starts from an empty account.
func (s *Server) Reset() error {
	return s.post("/moto-api/reset", "")
}

func (s *Server) post(path, body string) error {
	req, err := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/plain")
	if _, err := s.do(req); err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	return nil
}

// client talks to the server directly, never through a proxy.
var client = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
}

func (s *Server) do(req *http.Request) ([]byte, error) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	return body, nil
}

// Binary finds moto_server: $MOTO_SERVER, then PATH, then pyenv's shims.
func Binary() (string, error) {
	if p := os.Getenv("MOTO_SERVER"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("moto_server"); err == nil {
		return p, nil
	}
	root := os.Getenv("PYENV_ROOT")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".pyenv")
	}
	p := filepath.Join(root, "shims", "moto_server")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("moto_server is not in $MOTO_SERVER, PATH or %s: install moto 5.2.1 with pip install 'moto[server]==5.2.1'", filepath.Dir(p))
}

var errExited = errors.New("moto_server exited")

func (s *Server) start() error {
	bin, err := Binary()
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := s.launch(bin)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errExited) || attempt == startAttempts {
			return err
		}
	}
}

func (s *Server) launch(bin string) error {
	port, err := loopback.Port()
	if err != nil {
		return err
	}
	s.URL = "http://127.0.0.1:" + strconv.Itoa(port)
	s.log = logtail.New(64 << 10)
	s.exited = make(chan struct{})
	s.cmd = exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	s.cmd.Env = serverEnv()
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	// A group of its own, so that Stop kills everything it forked; and
	// SIGKILL when the thread that started it dies, so that a test binary
	// that crashes or times out leaves no server behind.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	started := make(chan error)
	go func() {
		// The parent-death signal follows the starting thread, not the
		// process: keep that thread alive until the server is reaped. The
		// thread is never unlocked, so it ends with this goroutine.
		runtime.LockOSThread()
		if err := s.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("starting %s: %w", bin, err)
	}
	if err := s.waitReady(); err != nil {
		s.kill()
		return err
	}
	return nil
}

// serverEnv is the test process's environment without its AWS_ settings and
// proxies, with moto's own outbound HTTP sent to a dead proxy.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch u := strings.ToUpper(k); {
		case strings.HasPrefix(u, "AWS_"), u == "HTTP_PROXY", u == "HTTPS_PROXY", u == "ALL_PROXY", u == "NO_PROXY":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"AWS_ACCESS_KEY_ID="+AccessKeyID, "AWS_SECRET_ACCESS_KEY="+SecretAccessKey,
		"AWS_DEFAULT_REGION="+Region,
		"HTTP_PROXY="+deadProxy, "HTTPS_PROXY="+deadProxy,
		"http_proxy="+deadProxy, "https_proxy="+deadProxy,
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
	)
}

// waitReady polls until the server answers as moto does, or fails when it
// exits or takes too long.
func (s *Server) waitReady() error {
	deadline := time.Now().Add(startTimeout)
	for {
		if s.answers() {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("%w before answering on %s (%s); its output:\n%s", errExited, s.URL, s.exitReason(), s.log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("moto_server did not answer on %s within %s; its output:\n%s", s.URL, startTimeout, s.log)
		}
	}
}

// answers tells whether moto, not some other process, serves s.URL: moto
// refuses a GET of its reset endpoint in its own words.
func (s *Server) answers() bool {
	resp, err := client.Get(s.URL + "/moto-api/reset")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusBadRequest && bytes.Contains(body, []byte("reset Moto"))
}

// Stop kills the server's process group and waits for the server to exit.
// It fails when the server had died before it was asked to stop.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		if s.cmd == nil || s.cmd.Process == nil {
			return
		}
		select {
		case <-s.exited:
			s.stopErr = fmt.Errorf("moto_server on %s died during the tests (%s); its output:\n%s", s.URL, s.exitReason(), s.log)
		default:
		}
		s.kill()
	})
	return s.stopErr
}

// exitReason says how the server ended; call it once s.exited is closed.
func (s *Server) exitReason() string {
	if s.waitErr == nil {
		return "exit status 0"
	}
	return s.waitErr.Error()
}

// kill sends SIGKILL to the process group and waits for the leader.
func (s *Server) kill() {
	select {
	case <-s.exited:
		// The leader is reaped: its id may belong to someone else now.
		return
	default:
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

// Pid is the server's process id, which is also its process group id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }
