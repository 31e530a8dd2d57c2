package rbac

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/tend-dev/tend/internal/scheme"
	"github.com/tend-dev/tend/internal/webhook"
)

// root is the repository, from this package's directory.
const root = "../.."

// managerNamespace stands for the namespace the manager runs in, which
// config/default sets on every namespaced object (and so on the Roles of
// config/rbac, whatever namespace they say).
const managerNamespace = "<the manager's namespace>"

// libraryNeed is a right that code outside the repository needs when the
// manager calls into it: code this check does not parse. Each applies
// only while the program refers to the function named by pkg and fn, and
// each was read from the library's source at the version given (empty:
// a Kubernetes API contract that does not change with versions); another
// version fails the test until someone reads the library again.
type libraryNeed struct {
	module, version string
	pkg, fn         string
	why             string
	rights          []right
}

func libraryNeeds() []libraryNeed {
	leases := func(verbs ...string) []right {
		var out []right
		for _, v := range verbs {
			out = append(out, right{Group: "coordination.k8s.io", Resource: "leases", Verb: v, Namespace: managerNamespace})
		}
		return out
	}
	// cert-controller's rotator reads through an informer cache of its
	// own (its Secret in the webhook's namespace, and the CRDs it injects
	// the CA into), and updates both through the manager's client
	// (pkg/rotator: addNamespacedCache, ReconcileWH.ensureCerts,
	// CertRotator.writeSecret).
	opts := webhook.DefaultOptions()
	var rotator []right
	for _, v := range []string{"list", "watch"} {
		rotator = append(rotator,
			right{Resource: "secrets", Verb: v, Namespace: managerNamespace},
			right{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Verb: v})
	}
	rotator = append(rotator, right{Resource: "secrets", Verb: "update", Namespace: managerNamespace, Name: opts.CertSecret})
	for _, crd := range webhook.CRDNames() {
		rotator = append(rotator, right{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Verb: "update", Name: crd})
	}
	return []libraryNeed{{
		module: "github.com/open-policy-agent/cert-controller", version: "v0.16.0",
		pkg: "github.com/open-policy-agent/cert-controller/pkg/rotator", fn: "AddRotator",
		why: "the webhook's certificate rotator", rights: rotator,
	}, {
		// client-go's LeaseLock gets, creates and updates the Lease, in
		// the manager's namespace unless --leader-election-namespace says
		// otherwise, and records a core Event on it at each change of
		// leader (controller-runtime gives it GetEventRecorderFor's
		// recorder).
		pkg: "sigs.k8s.io/controller-runtime/pkg/leaderelection", fn: "NewResourceLock",
		why: "leader election's Lease and its Events",
		rights: append(leases("get", "create", "update"),
			right{Resource: "events", Verb: "create", Namespace: managerNamespace},
			right{Resource: "events", Verb: "patch", Namespace: managerNamespace}),
	}, {
		// The metrics endpoint asks the apiserver who the caller is and
		// whether it may get /metrics.
		pkg: "sigs.k8s.io/controller-runtime/pkg/metrics/filters", fn: "WithAuthenticationAndAuthorization",
		why: "the metrics endpoint's authentication and authorization",
		rights: []right{
			{Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create"},
			{Group: "authorization.k8s.io", Resource: "subjectaccessreviews", Verb: "create"},
		},
	}}
}

// namespacedKinds are resources that the manager reads or writes only in
// its own namespace, whatever namespace the controllers watch: the
// leader-election Lease, which the write fence reads.
var namespacedKinds = map[string]bool{"coordination.k8s.io/leases": true}

// TestRoleGrantsWhatTheCodeCalls compares the rights that the manager's
// code needs, found by reading its calls (calls_test.go), with the RBAC
// of config/rbac: every right the code needs must be granted to the
// manager's ServiceAccount, and every verb of the generated role
// (config/rbac/role.yaml, from the +kubebuilder:rbac markers) must be
// needed by some call; so must every verb of the other roles bound to it.
func TestRoleGrantsWhatTheCodeCalls(t *testing.T) {
	t.Parallel()
	prog, err := load(root, "./cmd/tend")
	if err != nil {
		t.Fatal(err)
	}
	a := newAnalysis(prog, scheme.Scheme)
	a.run()
	for _, lib := range libraryNeeds() {
		ref := a.refsTo(lib.pkg, lib.fn)
		if len(ref) == 0 {
			continue
		}
		if lib.version != "" && prog.versions[lib.module] != lib.version {
			t.Errorf("%s is at %s, but libraryNeeds lists what %s needs at %s: read %s's calls again and update its rights and version",
				lib.module, prog.versions[lib.module], lib.why, lib.version, lib.pkg)
		}
		a.need(fmt.Sprintf("%s: %s (%s.%s)", ref[0], lib.why, lib.pkg, lib.fn), lib.rights...)
	}
	for _, i := range a.issues {
		t.Errorf("the check cannot follow a call: %s", i)
	}
	needs := map[right][]string{}
	for r, why := range a.needs {
		if namespacedKinds[r.Group+"/"+r.Resource] && r.Namespace == "" {
			r.Namespace = managerNamespace
		}
		needs[r] = append(needs[r], why...)
	}

	byRole := readRBAC(t)
	var granted []right
	for _, rights := range byRole {
		granted = append(granted, rights...)
	}
	for _, r := range sortedRights(needs) {
		if !slices.ContainsFunc(granted, func(g right) bool { return g.covers(r) }) {
			t.Errorf("no role of config/rbac grants the manager %s, which it needs for:\n\t%s", r, strings.Join(uniq(needs[r]), "\n\t"))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(byRole)) {
		for _, g := range byRole[key] {
			used := false
			for r := range needs {
				used = used || g.covers(r)
			}
			if !used {
				how := "drop it"
				if strings.Contains(key, "role.yaml") {
					how = "drop it from its +kubebuilder:rbac marker"
				}
				t.Errorf("%s grants %s, which no call needs: %s", key, g, how)
			}
		}
	}
	if t.Failed() || testing.Verbose() {
		var b strings.Builder
		for _, r := range sortedRights(needs) {
			fmt.Fprintf(&b, "%s:\n\t%s\n", r, strings.Join(uniq(needs[r]), "\n\t"))
		}
		t.Logf("The rights the code needs, and why:\n%s", b.String())
	}
}

// refsTo are where the program refers to pkgPath.name.
func (a *analysis) refsTo(pkgPath, name string) []string {
	var out []string
	for fn, at := range a.refs {
		if isFunc(fn, pkgPath, name) {
			for _, p := range at {
				if rel, err := filepath.Rel(a.prog.root, p.Filename); err == nil {
					p.Filename = rel
				}
				out = append(out, p.String())
			}
		}
	}
	sort.Strings(out)
	return out
}

// readRBAC reads config/rbac: the rights of every role bound to the
// manager's ServiceAccount, by "Kind/name in file".
func readRBAC(t *testing.T) map[string][]right {
	t.Helper()
	dir := filepath.Join(root, "config", "rbac")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type role struct {
		rules     []rbacv1.PolicyRule
		namespace string
		file      string
	}
	roles := map[string]role{} // "Role/name" or "ClusterRole/name" → its rules
	var generatedRoles []string
	bound := map[string]bool{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---")) {
			var head struct {
				Kind     string
				Metadata struct{ Name, Namespace string }
			}
			if err := yaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			switch head.Kind {
			case "Role", "ClusterRole":
				var r rbacv1.ClusterRole
				if err := yaml.UnmarshalStrict(doc, &r); err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				key := head.Kind + "/" + head.Metadata.Name
				ns := ""
				if head.Kind == "Role" {
					ns = managerNamespace
				}
				roles[key] = role{rules: r.Rules, namespace: ns, file: filepath.Base(file)}
				if filepath.Base(file) == "role.yaml" {
					generatedRoles = append(generatedRoles, key)
				}
			case "RoleBinding", "ClusterRoleBinding":
				var b rbacv1.RoleBinding
				if err := yaml.UnmarshalStrict(doc, &b); err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				for _, s := range b.Subjects {
					if s.Kind == rbacv1.ServiceAccountKind && s.Name == "manager" {
						bound[b.RoleRef.Kind+"/"+b.RoleRef.Name] = true
					}
				}
			}
		}
	}
	if len(generatedRoles) == 0 {
		t.Fatalf("config/rbac/role.yaml has no role")
	}
	expand := func(r role) []right {
		var out []right
		for _, rule := range r.rules {
			if len(rule.NonResourceURLs) > 0 {
				continue
			}
			names := rule.ResourceNames
			if len(names) == 0 {
				names = []string{""}
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						for _, n := range names {
							out = append(out, right{Group: g, Resource: res, Verb: v, Namespace: r.namespace, Name: n})
						}
					}
				}
			}
		}
		return out
	}
	for _, key := range generatedRoles {
		if !bound[key] {
			t.Errorf("config/rbac binds %s, of role.yaml, to no ServiceAccount manager", key)
		}
	}
	out := map[string][]right{}
	for key := range bound {
		r, ok := roles[key]
		if !ok {
			t.Errorf("config/rbac binds the manager to %s, which it does not define", key)
		}
		out[key+" in config/rbac/"+r.file] = expand(r)
	}
	return out
}

func sortedRights(m map[right][]string) []right {
	out := make([]right, 0, len(m))
	for r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func uniq(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
