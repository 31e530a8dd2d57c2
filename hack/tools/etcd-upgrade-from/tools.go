//go:build tools

// Package tools pins the etcd commands of the version that upgrades start
// from. etcd v3.5 keeps its server's main package in the root module, which
// the Go proxy does not serve at the newest v3.5 patch, so cmd/etcd holds the
// same three-line main.
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/etcdutl/v3"
	_ "go.etcd.io/etcd/server/v3/etcdmain"
)
