package names

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// Limits of the names that Tend derives.
const (
	// Job is the longest Job name: the Job controller copies it into its
	// pods' job-name label, and a label value is at most 63 characters.
	Job = 63
	// EtcdBackup is the longest EtcdBackup name: its Jobs are named
	// <name>-backup and <name>-delete.
	EtcdBackup = 56
	// EtcdRestore is the longest EtcdRestore name: its Jobs are named
	// <name>-<member ordinal> and <name>-check.
	EtcdRestore = 52
)

// hashLen is the length of the hash that marks a cut name.
const hashLen = 8

// Child is parent followed by suffix, cut to at most limit characters: when
// the whole is longer, parent is cut and followed by "-" and a hash of the
// whole name, before suffix. Names that fit are left as they are, so
// objects made before a name was cut keep theirs. suffix must be shorter
// than limit by more than the hash.
func Child(parent, suffix string, limit int) string {
	whole := parent + suffix
	if len(whole) <= limit {
		return whole
	}
	keep := limit - len(suffix) - hashLen - 1
	if keep < 1 {
		panic(fmt.Sprintf("names: suffix %q leaves no room for a parent within %d characters", suffix, limit))
	}
	h := fnv.New32a()
	h.Write([]byte(whole))
	// A name ends its parts in a letter or digit: the cut must not leave a
	// dash or dot before the hash's dash.
	head := strings.TrimRight(parent[:keep], "-.")
	return fmt.Sprintf("%s-%08x%s", head, h.Sum32(), suffix)
}
