//go:build tools

// Package tools pins kwok, which simulates nodes for the benchmarks.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
