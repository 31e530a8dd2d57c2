package agent

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/tend-dev/tend/internal/agentapi"
)

// WriteResultFile writes r to path, whole or not at all (a temporary file
// and a rename), for a later step of the same pod (--result-file).
func WriteResultFile(path string, r agentapi.Result) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'))
}

// ReadResultFile reads a Result that WriteResultFile wrote. Its errors wrap
// ErrInvalid: a later step cannot run without it.
func ReadResultFile(path string) (agentapi.Result, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return agentapi.Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var r agentapi.Result
	if err := json.Unmarshal(raw, &r); err != nil {
		return agentapi.Result{}, fmt.Errorf("%w: %s holds no result: %w", ErrInvalid, path, err)
	}
	return r, nil
}
