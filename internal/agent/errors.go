package agent

import (
	"errors"
	"io/fs"
	"syscall"

	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/aws"
	"github.com/tend-dev/tend/internal/etcd"
)

// Errors of the steps that no retry can fix: Terminal finds them with
// errors.Is, and the step exits with ExitTerminal.
var (
	// ErrInvalid: an argument or an input file is wrong.
	ErrInvalid = errors.New("invalid input")
	// ErrRefused: the artifact or data directory belongs to someone else,
	// or its owner is unknown; the step leaves it alone.
	ErrRefused = errors.New("refused")
	// ErrNotFound: the artifact to read is not there (nor its bucket).
	ErrNotFound = errors.New("artifact not found")
	// ErrChecksum: the stored bytes do not have the SHA-256 or the size
	// that they should.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrCorrupt: the stored bytes do not decompress.
	ErrCorrupt = errors.New("corrupt artifact")
	// ErrMismatch: the restored store differs from the live cluster at the
	// snapshot's revision.
	ErrMismatch = errors.New("restored store does not match the live cluster")
)

// Terminal tells whether a retry of the step cannot help: one of the
// package's errors above, an etcd or S3 error that their packages classify
// as Terminal (credentials, certificates, a bad request), or a file system
// that refuses the step's writes. Everything else, unknown errors
// included, may be retried.
func Terminal(err error) bool {
	if err == nil {
		return false
	}
	for _, kind := range []error{ErrInvalid, ErrRefused, ErrNotFound, ErrChecksum, ErrCorrupt, ErrMismatch, ErrDiverged} {
		if errors.Is(err, kind) {
			return true
		}
	}
	// Both classify a deadline as Transient, unless the error says more
	// (a certificate that etcd refused until the deadline).
	if etcd.Classify(err) == etcd.Terminal || aws.Classify(err) == aws.Terminal {
		return true
	}
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// ExitCode is the exit code of a step that ended with err.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return agentapi.ExitOK
	case Terminal(err):
		return agentapi.ExitTerminal
	}
	return agentapi.ExitFailed
}

// Failed returns r with err recorded: its message, and whether a retry can
// help (Terminal). A nil err leaves r as it is.
func Failed(r agentapi.Result, err error) agentapi.Result {
	if err != nil {
		r.Error = err.Error()
		r.Terminal = Terminal(err)
	}
	return r
}
