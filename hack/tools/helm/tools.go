//go:build tools

// Package tools pins Helm, which lints, renders and installs the chart.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
