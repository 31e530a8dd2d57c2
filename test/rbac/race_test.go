//go:build race

package rbac

// raceBuild: this test runs with the race detector (see load).
const raceBuild = true
