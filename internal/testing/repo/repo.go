package repo

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
)

// Root finds the directory of Tend's go.mod above the working directory,
// which go test sets to the package's directory.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(mod, []byte("module github.com/tend-dev/tend\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of github.com/tend-dev/tend above the working directory")
		}
		dir = parent
	}
}
