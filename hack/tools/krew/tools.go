//go:build tools

// Package tools pins krew, which installs kubectl-tend from its manifest.
package tools

import _ "sigs.k8s.io/krew/cmd/krew"
