package loopback

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// Port returns a TCP port on 127.0.0.1 that was free a moment ago. Another
// process may take it before the caller binds it; tests accept that.
func Port() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Addr is Port as "127.0.0.1:port".
func Addr() (string, error) {
	port, err := Port()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", port), nil
}

// TestPort is Port for a test, which it fails when none is free.
func TestPort(t testing.TB) int {
	t.Helper()
	port, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// TestAddr is Addr for a test, which it fails when none is free.
func TestAddr(t testing.TB) string {
	t.Helper()
	addr, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Get returns the body of url's answer, and an error that carries the
// status and body when the answer is not 200 OK.
func Get(url string) (string, error) {
	resp, err := http.Get(url) //nolint:gosec,noctx // a loopback URL the test built
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body), err
}
