//go:build tools

// Package tools pins local-path-provisioner, the local cluster's dynamic
// PersistentVolume provisioner.
package tools

import _ "github.com/rancher/local-path-provisioner"
