//go:build !race

package rbac

// raceBuild: this test runs without the race detector (see load).
const raceBuild = false
