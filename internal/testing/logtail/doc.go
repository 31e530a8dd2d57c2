// Package logtail keeps the end of a child process's output, so that a test
// harness (moto, etcd) can show it when the process fails.
//
// It is for tests only. It keeps a bounded number of bytes, however much the
// process writes, and it knows nothing about the processes it serves: it does
// not parse, filter or print what it keeps.
package logtail
