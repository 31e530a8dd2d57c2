//go:build tools

// Package tools pins CoreDNS, the local cluster's DNS server.
package tools

import _ "github.com/coredns/coredns"
