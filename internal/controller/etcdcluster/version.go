package etcdcluster

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// upgradePath is a minor-version upgrade that etcd supports, and what it
// needs first.
type upgradePath struct {
	fromMinor, toMinor int
	// minPatch is the lowest patch release of the older minor version
	// that may upgrade.
	minPatch int
	// noAuth: etcd cannot roll this upgrade with authentication on.
	noAuth bool
	// source is where etcd says so.
	source string
}

// upgradePaths are the minor-version upgrades Tend performs, as etcd's
// upgrade guides state them. A hop that is not here is refused: Tend's
// member builders know only these versions' settings.
var upgradePaths = []upgradePath{
	{fromMinor: 4, toMinor: 5, noAuth: true,
		source: "https://etcd.io/docs/v3.5/upgrades/upgrade_3_5/ (a rolling upgrade from 3.4 with auth enabled is not supported)"},
	{fromMinor: 5, toMinor: 6, minPatch: 32,
		source: "https://etcd.io/docs/v3.6/upgrades/upgrade_3_6/ (Upgrade checklists, Update 3.5: all members on 3.5.32 or later)"},
}

// etcdVersion is an etcd release's numbers, such as v3.6.16: the one
// type the package reads versions with (the spec's, the members').
type etcdVersion struct{ major, minor, patch int }

// parseVersion reads v3.6.16 or 3.6.16 (a pre-release suffix such as
// -rc.0 is ignored).
func parseVersion(v string) (etcdVersion, bool) {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) != 3 {
		return etcdVersion{}, false
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(strings.SplitN(p, "-", 2)[0])
		if err != nil {
			return etcdVersion{}, false
		}
		n[i] = x
	}
	return etcdVersion{n[0], n[1], n[2]}, true
}

func (v etcdVersion) String() string { return fmt.Sprintf("v%d.%d.%d", v.major, v.minor, v.patch) }

// checkUpgradePath allows moving members that run from (the oldest
// member's version) to the spec's version to: a patch change within a
// minor version, or one minor version up along upgradePaths from a recent
// enough patch. The error says which version to go to first.
func checkUpgradePath(from, to string, auth bool) error {
	f, ok1 := parseVersion(from)
	t, ok2 := parseVersion(to)
	if !ok1 || !ok2 {
		return fmt.Errorf("cannot read the versions %q and %q", from, to)
	}
	switch {
	case t.major != f.major:
		return fmt.Errorf("%s to %s changes the major version, which etcd does not support", f, t)
	case t.minor == f.minor:
		return nil
	case t.minor < f.minor:
		return fmt.Errorf("members run %s and etcd cannot downgrade a data directory to %s; restore a backup into a new cluster instead", f, t)
	case t.minor > f.minor+1:
		return fmt.Errorf("members run %s: upgrade to v%d.%d first, one minor version at a time", f, f.major, f.minor+1)
	}
	for _, p := range upgradePaths {
		if p.fromMinor != f.minor || p.toMinor != t.minor {
			continue
		}
		if f.patch < p.minPatch {
			return fmt.Errorf("members run %s: upgrade to v%d.%d.%d or later first, as etcd's upgrade guide requires (%s)",
				f, f.major, f.minor, p.minPatch, p.source)
		}
		if p.noAuth && auth {
			return fmt.Errorf("etcd cannot roll %s to %s with authentication on (%s)", f, t, p.source)
		}
		return nil
	}
	return fmt.Errorf("this Tend does not know the upgrade from v%d.%d to v%d.%d; use a Tend release that supports v%d.%d",
		f.major, f.minor, t.major, t.minor, t.major, t.minor)
}

// isMinorUpgrade tells whether moving from to to changes the minor version
// up.
func isMinorUpgrade(from, to string) bool {
	f, ok1 := parseVersion(from)
	t, ok2 := parseVersion(to)
	return ok1 && ok2 && (t.major > f.major || (t.major == f.major && t.minor > f.minor))
}

// compare orders v and o: -1, 0 or +1.
func (v etcdVersion) compare(o etcdVersion) int {
	return cmp.Or(cmp.Compare(v.major, o.major), cmp.Compare(v.minor, o.minor), cmp.Compare(v.patch, o.patch))
}

// minorOf is the minor number of a version such as v3.6.16; 0 when it
// cannot be read (the CRD's pattern guarantees the form).
func minorOf(version string) int {
	v, _ := parseVersion(version)
	return v.minor
}

// version is the spec's etcd version.
func version(c *etcdv1alpha1.EtcdCluster) string {
	if c.Spec.Version == "" {
		return etcdv1alpha1.DefaultVersion
	}
	return c.Spec.Version
}
