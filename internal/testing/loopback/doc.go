// Package loopback is for tests that start servers on 127.0.0.1: it finds
// ports that are free, and reads the servers' HTTP endpoints.
//
// It is for tests only. It must not bind or reach anything but the loopback
// address, and a free port it returns is only a hint: another process may
// take it before the caller binds it.
package loopback
