// Package repo finds Tend's work tree from a test, so that test harnesses can
// run hack/ scripts and read config/.
//
// It is for tests only: a binary must not depend on where the work tree is.
// It only finds the root, by the go.mod above the test's directory; it writes
// nothing there and leaves what to read to its callers.
package repo
