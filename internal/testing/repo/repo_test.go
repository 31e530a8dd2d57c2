package repo

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRootFindsTheModule(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "hack", "versions.env")); err != nil {
		t.Errorf("Root() = %s, which has no hack/versions.env: %v", root, err)
	}
	t.Chdir(t.TempDir())
	if _, err := Root(); err == nil {
		t.Error("Root() found a module above a temporary directory")
	}
}
