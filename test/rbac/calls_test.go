package rbac

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tend-dev/tend/internal/scheme"
)

// Import paths whose functions the analysis knows.
const (
	clientPkg         = "sigs.k8s.io/controller-runtime/pkg/client"
	builderPkg        = "sigs.k8s.io/controller-runtime/pkg/builder"
	sourcePkg         = "sigs.k8s.io/controller-runtime/pkg/source"
	cachePkg          = "sigs.k8s.io/controller-runtime/pkg/cache"
	controllerutilPkg = "sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metav1Pkg         = "k8s.io/apimachinery/pkg/apis/meta/v1"
	tendManagerPkg    = "github.com/tend-dev/tend/internal/manager"
)

// otherClient says whether fn belongs to a Kubernetes client other than
// controller-runtime's, whose calls this check does not read: a call of
// one is an issue.
func otherClient(fn *types.Func) bool {
	path := fn.Pkg().Path()
	for _, p := range []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/dynamic", "k8s.io/client-go/metadata", "k8s.io/client-go/scale"} {
		if (path == p || strings.HasPrefix(path, p+"/")) && !strings.HasPrefix(path, "k8s.io/client-go/kubernetes/scheme") {
			return true
		}
	}
	if path != "k8s.io/client-go/rest" {
		return false
	}
	switch recv := fn.Type().(*types.Signature).Recv(); {
	case recv != nil:
		switch recvName(recv.Type()) {
		case "RESTClient", "Request", "Result":
			return true
		}
	case strings.Contains(fn.Name(), "RESTClient"):
		return true
	}
	return false
}

// right is one verb on one resource ("pods", or "pods/status" for a
// subresource) of one API group; Namespace and Name narrow it, empty for
// every namespace and every name.
type right struct {
	Group, Resource, Verb string
	Namespace, Name       string
}

func (r right) String() string {
	s := fmt.Sprintf("%s %s", r.Verb, r.Resource)
	if r.Group != "" {
		s = fmt.Sprintf("%s %s.%s", r.Verb, r.Resource, r.Group)
	}
	if r.Name != "" {
		s += " named " + r.Name
	}
	if r.Namespace != "" {
		s += " in namespace " + r.Namespace
	}
	return s
}

// covers says whether a grant of g allows what r asks for.
func (g right) covers(r right) bool {
	return g.Group == r.Group && g.Resource == r.Resource && g.Verb == r.Verb &&
		(g.Namespace == "" || g.Namespace == r.Namespace) && (g.Name == "" || g.Name == r.Name)
}

// reads says how a reader reads: from the manager's cache (an informer,
// which lists and watches), from the apiserver (get, list), or from the
// cache and then, for some kinds that the cache holds only Tend's objects
// of, from the apiserver (manager.ReadThrough).
type reads struct {
	cached, live bool
	// liveGets are the types, as typeKey, whose Gets fall through to the
	// apiserver.
	liveGets map[string]bool
}

func (r *reads) add(o reads) {
	r.cached = r.cached || o.cached
	r.live = r.live || o.live
	for k := range o.liveGets {
		if r.liveGets == nil {
			r.liveGets = map[string]bool{}
		}
		r.liveGets[k] = true
	}
}

// site is an expression and where it is: its package and the top-level
// declaration around it.
type site struct {
	p    *pkg
	decl ast.Decl
	expr ast.Expr
	// tuple, when expr is a call of several results, is 1 + the index of
	// the result meant.
	tuple int
	// elem says that expr is one element of a variadic parameter.
	elem bool
}

// analysis derives, from the calls in a program, the rights its code
// needs. Whatever it cannot follow it reports in issues, so that a new
// way of calling the API fails the test rather than going unseen.
type analysis struct {
	prog   *program
	kinds  map[string][]schema.GroupVersionKind // typeKey → its kinds in the scheme
	needs  map[right][]string                   // → the calls that need it
	issues []string
	client *types.Package // controller-runtime's client package
	// scope, when set, limits run to the packages it accepts.
	scope func(path string) bool

	callers map[*types.Func][]site           // function → its static calls (expr: *ast.CallExpr)
	refs    map[*types.Func][]token.Position // function → every mention, calls included
	fields  map[*types.Var][]site            // struct field → values stored in it
	lits    map[*ast.FuncLit]site            // function literal → the field it is stored in (expr: the key or selector)
}

func newAnalysis(prog *program, scheme *runtime.Scheme) *analysis {
	a := &analysis{
		prog:    prog,
		kinds:   map[string][]schema.GroupVersionKind{},
		needs:   map[right][]string{},
		callers: map[*types.Func][]site{},
		refs:    map[*types.Func][]token.Position{},
		fields:  map[*types.Var][]site{},
		lits:    map[*ast.FuncLit]site{},
	}
	for gvk, t := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		k := t.PkgPath() + "." + t.Name()
		a.kinds[k] = append(a.kinds[k], gvk)
	}
	a.each(a.index)
	return a
}

// each calls f on every node of the program, with where it is.
func (a *analysis) each(f func(p *pkg, decl ast.Decl, n ast.Node)) {
	for _, p := range a.prog.pkgs {
		for _, file := range p.files {
			for _, decl := range file.Decls {
				ast.Inspect(decl, func(n ast.Node) bool {
					if n != nil {
						f(p, decl, n)
					}
					return true
				})
			}
		}
	}
}

// pos is where p is, its file named from the repository's root.
func (a *analysis) pos(p token.Pos) string {
	at := a.prog.fset.Position(p)
	if rel, err := filepath.Rel(a.prog.root, at.Filename); err == nil {
		at.Filename = rel
	}
	return at.String()
}

func (a *analysis) need(why string, rs ...right) {
	for _, r := range rs {
		a.needs[r] = append(a.needs[r], why)
	}
}

func (a *analysis) issue(at token.Pos, format string, args ...any) {
	a.issues = append(a.issues, a.pos(at)+": "+fmt.Sprintf(format, args...))
}

// index records every function's static calls and mentions, every value
// stored in a struct field, and where each function literal is stored.
func (a *analysis) index(p *pkg, decl ast.Decl, n ast.Node) {
	switch n := n.(type) {
	case *ast.Ident:
		obj := p.info.Uses[n]
		if obj != nil && obj.Pkg() != nil && obj.Pkg().Path() == clientPkg {
			a.client = obj.Pkg()
		}
		if fn, ok := obj.(*types.Func); ok {
			a.refs[fn.Origin()] = append(a.refs[fn.Origin()], a.prog.fset.Position(n.Pos()))
		}
	case *ast.CallExpr:
		if fn := callee(p.info, n); fn != nil {
			a.callers[fn] = append(a.callers[fn], site{p: p, decl: decl, expr: n})
		}
	case *ast.CompositeLit:
		t := p.info.TypeOf(n)
		if t == nil {
			return
		}
		st, ok := t.Underlying().(*types.Struct)
		if !ok {
			return
		}
		for i, elt := range n.Elts {
			if kv, ok := elt.(*ast.KeyValueExpr); ok {
				key, _ := kv.Key.(*ast.Ident)
				if field, ok := p.info.Uses[key].(*types.Var); ok && field.IsField() {
					a.store(field, site{p: p, decl: decl, expr: kv.Value}, key)
				}
			} else if i < st.NumFields() {
				a.store(st.Field(i), site{p: p, decl: decl, expr: elt}, elt)
			}
		}
	case *ast.AssignStmt:
		for i, lhs := range n.Lhs {
			sel, ok := ast.Unparen(lhs).(*ast.SelectorExpr)
			if !ok {
				continue
			}
			if s, ok := p.info.Selections[sel]; ok && s.Kind() == types.FieldVal {
				a.store(s.Obj().(*types.Var), assigned(p, decl, n, i), sel)
			}
		}
	}
}

// assigned is the value that an assignment gives to its i-th left-hand
// side.
func assigned(p *pkg, decl ast.Decl, as *ast.AssignStmt, i int) site {
	if len(as.Lhs) != len(as.Rhs) {
		return site{p: p, decl: decl, expr: as.Rhs[0], tuple: i + 1}
	}
	return site{p: p, decl: decl, expr: as.Rhs[i]}
}

func (a *analysis) store(field *types.Var, value site, at ast.Expr) {
	a.fields[field] = append(a.fields[field], value)
	if lit, ok := ast.Unparen(value.expr).(*ast.FuncLit); ok {
		a.lits[lit] = site{p: value.p, decl: value.decl, expr: at}
	}
}

// callee is the function or method that call calls statically, generic
// ones as declared; nil for calls of function values and conversions.
func callee(info *types.Info, call *ast.CallExpr) *types.Func {
	fun := ast.Unparen(call.Fun)
	switch f := fun.(type) {
	case *ast.IndexExpr:
		fun = f.X
	case *ast.IndexListExpr:
		fun = f.X
	}
	var id *ast.Ident
	switch f := fun.(type) {
	case *ast.Ident:
		id = f
	case *ast.SelectorExpr:
		id = f.Sel
	default:
		return nil
	}
	if fn, ok := info.Uses[id].(*types.Func); ok {
		return fn.Origin()
	}
	return nil
}

// isFunc says whether fn is the function pkgPath.name, or the method
// pkgPath.Type.name when name is "Type.name".
func isFunc(fn *types.Func, pkgPath, name string) bool {
	if fn == nil || fn.Pkg() == nil || fn.Pkg().Path() != pkgPath {
		return false
	}
	if recv := fn.Type().(*types.Signature).Recv(); recv != nil {
		return recvName(recv.Type())+"."+fn.Name() == name
	}
	return fn.Name() == name
}

func recvName(t types.Type) string {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		return n.Obj().Name()
	}
	return ""
}

// run records what every call of the program needs.
func (a *analysis) run() {
	a.each(func(p *pkg, decl ast.Decl, n ast.Node) {
		if a.scope != nil && !a.scope(p.path) {
			return
		}
		if call, ok := n.(*ast.CallExpr); ok {
			a.call(site{p: p, decl: decl, expr: call})
		}
	})
}

// call records what one call needs.
func (a *analysis) call(s site) {
	call := s.expr.(*ast.CallExpr)
	fn := callee(s.p.info, call)
	if fn == nil || fn.Pkg() == nil {
		return
	}
	path := fn.Pkg().Path()
	recv := ""
	if r := fn.Type().(*types.Signature).Recv(); r != nil {
		recv = recvName(r.Type())
	}
	pos := call.Pos()
	if sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr); ok {
		pos = sel.Sel.Pos() // in a chain of calls, the method's name
	}
	at := a.pos(pos)
	// objects are the types of argument i, of which there are none when
	// only calls through an interface reach it: in a client's wrapper,
	// which the calls of the interface account for.
	objects := func(i int) []string {
		if i >= len(call.Args) {
			a.issue(pos, "%s has no argument %d", fn.FullName(), i)
			return nil
		}
		return a.objectTypes(site{p: s.p, decl: s.decl, expr: call.Args[i]})
	}
	needEach := func(why string, ks []string, sub string, verbs ...string) {
		for _, k := range ks {
			for _, v := range verbs {
				a.needKind(why, k, sub, v, pos)
			}
		}
	}
	if otherClient(fn) {
		a.issue(pos, "a call of %s, a client whose calls this check does not read", fn.FullName())
		return
	}
	switch {
	case path == clientPkg && recv == "Reader":
		i := 2 // Get(ctx, key, obj)
		if fn.Name() == "List" {
			i = 1 // List(ctx, list)
		}
		ks := objects(i)
		if len(ks) == 0 {
			return
		}
		r := a.readerOf(s, call)
		for _, k := range ks {
			a.read(at, fn.Name(), k, r, pos)
		}
	case path == clientPkg && recv == "WithWatch" && fn.Name() == "Watch":
		needEach(at+" Watch", objects(1), "", "watch")
	case path == clientPkg && recv == "Writer":
		ks := objects(1)
		if len(ks) == 0 {
			return
		}
		verb := map[string]string{"Create": "create", "Update": "update", "Patch": "patch", "Delete": "delete", "DeleteAllOf": "deletecollection"}[fn.Name()]
		if verb == "" {
			a.issue(pos, "a Writer.%s call, which this check does not know", fn.Name())
			return
		}
		needEach(at+" "+fn.Name(), ks, "", verb)
	case path == clientPkg && (recv == "SubResourceWriter" || recv == "SubResourceReader"):
		ks := objects(1)
		if len(ks) == 0 {
			return
		}
		sub := a.subresource(s, call)
		verb := map[string]string{"Create": "create", "Update": "update", "Patch": "patch", "Get": "get"}[fn.Name()]
		if verb == "" {
			a.issue(pos, "a %s.%s call, which this check does not know", recv, fn.Name())
			return
		}
		if sub != "" {
			needEach(at+" "+sub+" "+fn.Name(), ks, sub, verb)
		}
	case path == clientPkg && recv == "FieldIndexer" && fn.Name() == "IndexField":
		needEach(at+" IndexField (an informer)", objects(1), "", "list", "watch")
	case path == cachePkg && recv == "Informers" && fn.Name() == "GetInformer":
		needEach(at+" GetInformer", objects(1), "", "list", "watch")
	case path == builderPkg && recv == "TypedBuilder" &&
		(fn.Name() == "For" || fn.Name() == "Owns" || fn.Name() == "Watches" || fn.Name() == "WatchesMetadata"):
		needEach(at+" builder "+fn.Name()+" (an informer)", objects(0), "", "list", "watch")
	case path == sourcePkg && (fn.Name() == "Kind" || fn.Name() == "TypedKind"):
		needEach(at+" source.Kind (an informer)", objects(1), "", "list", "watch")
	case path == controllerutilPkg && (fn.Name() == "CreateOrUpdate" || fn.Name() == "CreateOrPatch"):
		ks := objects(2)
		r := a.readsOf(site{p: s.p, decl: s.decl, expr: call.Args[1]}, map[types.Object]bool{})
		for _, k := range ks {
			a.read(at, fn.Name()+"'s Get", k, r, pos)
		}
		needEach(at+" "+fn.Name(), ks, "", "create")
		if fn.Name() == "CreateOrUpdate" {
			needEach(at+" "+fn.Name(), ks, "", "update")
		} else {
			needEach(at+" "+fn.Name(), ks, "", "patch")
			needEach(at+" "+fn.Name()+" (its status)", ks, "status", "patch")
		}
	case path == controllerutilPkg && fn.Name() == "SetControllerReference",
		path == metav1Pkg && fn.Name() == "NewControllerRef":
		// The reference blocks the owner's deletion, which the apiserver
		// allows only to who may update the owner's finalizers
		// (OwnerReferencesPermissionEnforcement).
		needEach(at+" "+fn.Name()+" (blockOwnerDeletion)", objects(0), "finalizers", "update")
	case strings.HasPrefix(path, "sigs.k8s.io/controller-runtime/") && fn.Name() == "GetEventRecorder":
		a.need(at+" GetEventRecorder (events.k8s.io/v1 Events)",
			right{Group: "events.k8s.io", Resource: "events", Verb: "create"},
			right{Group: "events.k8s.io", Resource: "events", Verb: "patch"})
	case strings.HasPrefix(path, "sigs.k8s.io/controller-runtime/") && fn.Name() == "GetEventRecorderFor":
		a.need(at+" GetEventRecorderFor (core v1 Events)",
			right{Resource: "events", Verb: "create"},
			right{Resource: "events", Verb: "patch"})
	}
}

// read records what a Get or List of k through r needs.
func (a *analysis) read(at, what, k string, r reads, pos token.Pos) {
	verb := "list"
	if what == "Get" || strings.HasSuffix(what, "'s Get") {
		verb = "get"
	}
	if !r.cached && !r.live {
		a.issue(pos, "a %s through a reader that this check cannot follow to the cache or the apiserver", what)
		return
	}
	if r.cached {
		a.needKind(at+" "+what+" from the cache (an informer)", k, "", "list", pos)
		a.needKind(at+" "+what+" from the cache (an informer)", k, "", "watch", pos)
	}
	if r.live {
		a.needKind(at+" "+what+" from the apiserver", k, "", verb, pos)
	}
	if verb == "get" && r.liveGets[k] {
		a.needKind(at+" "+what+" read through to the apiserver", k, "", "get", pos)
	}
}

// needKind records that the verb on the resource of Go type k (a typeKey),
// or on its subresource sub, is needed.
func (a *analysis) needKind(why, k, sub, verb string, pos token.Pos) {
	gvr, ok := a.resource(k, pos)
	if !ok {
		return
	}
	res := gvr.Resource
	if sub != "" {
		res += "/" + sub
	}
	a.need(why+" of "+k[strings.LastIndex(k, "/")+1:], right{Group: gvr.Group, Resource: res, Verb: verb})
}

// resource maps a Go type to its resource through the scheme, a list
// type to its items' resource.
func (a *analysis) resource(k string, pos token.Pos) (schema.GroupVersionResource, bool) {
	gvks := a.kinds[k]
	if len(gvks) == 0 {
		a.issue(pos, "the type %s is not in the manager's scheme", k)
		return schema.GroupVersionResource{}, false
	}
	gvk := gvks[0]
	for _, other := range gvks[1:] {
		if other.Group != gvk.Group || other.Kind != gvk.Kind {
			a.issue(pos, "the type %s is more than one kind: %v", k, gvks)
			return schema.GroupVersionResource{}, false
		}
	}
	if strings.HasSuffix(k, "List") {
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return plural, true
}

// typeKey names a named type, or the type a pointer points to, as
// reflect does: "k8s.io/api/core/v1.Pod".
func typeKey(t types.Type) (string, bool) {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	if !ok || n.Obj().Pkg() == nil {
		return "", false
	}
	return n.Obj().Pkg().Path() + "." + n.Obj().Name(), true
}

// untyped are the object types whose kind is set at run time.
var untyped = map[string]bool{
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured.Unstructured":     true,
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured.UnstructuredList": true,
	"k8s.io/apimachinery/pkg/apis/meta/v1.PartialObjectMetadata":         true,
	"k8s.io/apimachinery/pkg/apis/meta/v1.PartialObjectMetadataList":     true,
}

// objectTypes are the concrete types that the object argument s may have:
// its static type, or, where that is an interface, the types of what
// reaches it through parameters and local variables.
func (a *analysis) objectTypes(s site) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range a.concrete(s, map[types.Object]bool{}) {
		k, ok := typeKey(t)
		if !ok {
			a.issue(s.expr.Pos(), "an object of type %s, which has no kind", t)
			continue
		}
		if untyped[k] {
			a.issue(s.expr.Pos(), "an object of type %s, whose kind is set at run time: this check cannot tell its resource", k)
			continue
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

func (a *analysis) concrete(s site, seen map[types.Object]bool) []types.Type {
	t := s.p.info.TypeOf(s.expr)
	if tuple, ok := t.(*types.Tuple); ok && s.tuple > 0 {
		t = tuple.At(s.tuple - 1).Type()
	}
	if t == nil {
		a.issue(s.expr.Pos(), "an expression without a type")
		return nil
	}
	if !types.IsInterface(t) {
		return []types.Type{t}
	}
	var out []types.Type
	for _, v := range a.sources(s, seen) {
		out = append(out, a.concrete(v, seen)...)
	}
	return out
}

// sources are the expressions whose values an expression of interface
// type may hold: for a parameter, the arguments of every call of its
// function; for a local variable, what is assigned to it, or the elements
// it ranges over. Anything else is an issue.
func (a *analysis) sources(s site, seen map[types.Object]bool) []site {
	id, ok := ast.Unparen(s.expr).(*ast.Ident)
	if !ok {
		a.issue(s.expr.Pos(), "a value of interface type from %s, which this check cannot follow", nodeString(s.expr))
		return nil
	}
	v, ok := s.p.info.Uses[id].(*types.Var)
	if !ok {
		a.issue(s.expr.Pos(), "a value of interface type from %s, which this check cannot follow", id.Name)
		return nil
	}
	if seen[v] {
		return nil
	}
	seen[v] = true
	if args, ok := a.paramArgs(s, v); ok {
		return args
	}
	var out []site
	found := false
	ast.Inspect(s.decl, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, lhs := range n.Lhs {
				if l, ok := lhs.(*ast.Ident); ok && varOf(s.p, l) == v {
					found = true
					out = append(out, assigned(s.p, s.decl, n, i))
				}
			}
		case *ast.ValueSpec:
			for i, name := range n.Names {
				if varOf(s.p, name) == v && i < len(n.Values) {
					found = true
					out = append(out, site{p: s.p, decl: s.decl, expr: n.Values[i]})
				}
			}
		case *ast.RangeStmt:
			if l, ok := n.Value.(*ast.Ident); ok && varOf(s.p, l) == v {
				found = true
				out = append(out, a.elements(site{p: s.p, decl: s.decl, expr: n.X}, seen)...)
			}
		}
		return true
	})
	if !found {
		a.issue(s.expr.Pos(), "a value of interface type from %s, which this check cannot follow", id.Name)
	}
	return out
}

func varOf(p *pkg, id *ast.Ident) *types.Var {
	if v, ok := p.info.Defs[id].(*types.Var); ok {
		return v
	}
	v, _ := p.info.Uses[id].(*types.Var)
	return v
}

// elements are the expressions whose values a range over s yields: the
// elements of a slice literal, or of what a slice variable is assigned.
func (a *analysis) elements(s site, seen map[types.Object]bool) []site {
	switch x := ast.Unparen(s.expr).(type) {
	case *ast.CompositeLit:
		var out []site
		for _, e := range x.Elts {
			if kv, ok := e.(*ast.KeyValueExpr); ok {
				e = kv.Value
			}
			out = append(out, site{p: s.p, decl: s.decl, expr: e})
		}
		return out
	case *ast.Ident:
		var out []site
		for _, src := range a.sources(s, seen) {
			if src.elem {
				out = append(out, src)
				continue
			}
			out = append(out, a.elements(src, seen)...)
		}
		return out
	}
	a.issue(s.expr.Pos(), "a range over %s, which this check cannot follow", nodeString(s.expr))
	return nil
}

// paramArgs returns, when v is a parameter of the function declared at s,
// the matching argument of each of its calls. A function that is also
// used as a value, or that nothing calls, is an issue, unless it is a
// method of a client's wrapper (its callers call the client interface).
func (a *analysis) paramArgs(s site, v *types.Var) ([]site, bool) {
	if litOf(s.decl, v) != nil {
		a.issue(v.Pos(), "a value from a parameter of a function literal, which this check cannot follow")
		return nil, true
	}
	fd, ok := s.decl.(*ast.FuncDecl)
	if !ok {
		return nil, false
	}
	obj, ok := s.p.info.Defs[fd.Name].(*types.Func)
	if !ok {
		return nil, false
	}
	sig := obj.Type().(*types.Signature)
	idx := -1
	for i := range sig.Params().Len() {
		if sig.Params().At(i) == v {
			idx = i
		}
	}
	if idx < 0 {
		return nil, false
	}
	calls := a.callers[obj]
	if a.isClientWrapper(obj) {
		return nil, true
	}
	if len(calls) == 0 {
		a.issue(v.Pos(), "a value from parameter %s of %s, which nothing calls", v.Name(), obj.FullName())
		return nil, true
	}
	if len(a.refs[obj]) > len(calls) {
		a.issue(v.Pos(), "a value from parameter %s of %s, which is also used as a function value, whose calls this check cannot follow", v.Name(), obj.FullName())
	}
	var out []site
	for _, c := range calls {
		call := c.expr.(*ast.CallExpr)
		if sig.Variadic() && idx == sig.Params().Len()-1 {
			var elems []site
			if call.Ellipsis.IsValid() {
				elems = a.elements(site{p: c.p, decl: c.decl, expr: call.Args[idx]}, map[types.Object]bool{})
			} else {
				for _, arg := range call.Args[idx:] {
					elems = append(elems, site{p: c.p, decl: c.decl, expr: arg})
				}
			}
			for _, e := range elems {
				e.elem = true
				out = append(out, e)
			}
			continue
		}
		out = append(out, site{p: c.p, decl: c.decl, expr: call.Args[idx]})
	}
	return out, true
}

// isClientWrapper says whether fn is a method by which its receiver type
// implements one of controller-runtime's client interfaces (a client that
// wraps another, such as the manager's write fence).
func (a *analysis) isClientWrapper(fn *types.Func) bool {
	recv := fn.Type().(*types.Signature).Recv()
	if recv == nil || a.client == nil {
		return false
	}
	for _, name := range []string{"Reader", "Writer", "SubResourceReader", "SubResourceWriter"} {
		iface := a.client.Scope().Lookup(name).Type().Underlying().(*types.Interface)
		has := false
		for i := range iface.NumMethods() {
			has = has || iface.Method(i).Name() == fn.Name()
		}
		if has && (types.Implements(recv.Type(), iface) || types.Implements(types.NewPointer(recv.Type()), iface)) {
			return true
		}
	}
	return false
}

// litOf is the function literal in decl that v is a parameter of.
func litOf(decl ast.Decl, v *types.Var) *ast.FuncLit {
	var out *ast.FuncLit
	ast.Inspect(decl, func(n ast.Node) bool {
		if lit, ok := n.(*ast.FuncLit); ok && lit.Type.Params != nil {
			for _, f := range lit.Type.Params.List {
				for _, name := range f.Names {
					if name.Pos() == v.Pos() {
						out = lit
					}
				}
			}
		}
		return out == nil
	})
	return out
}

// subresource is the subresource a SubResourceWriter or SubResourceReader
// call is on: the receiver must be X.Status() or X.SubResource("name").
func (a *analysis) subresource(s site, call *ast.CallExpr) string {
	sel := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if inner, ok := ast.Unparen(sel.X).(*ast.CallExpr); ok {
		fn := callee(s.p.info, inner)
		switch {
		case fn != nil && fn.Name() == "Status" && len(inner.Args) == 0:
			return "status"
		case fn != nil && fn.Name() == "SubResource" && len(inner.Args) == 1:
			if lit, ok := inner.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				name, _ := strconv.Unquote(lit.Value)
				return name
			}
		}
	}
	a.issue(call.Pos(), "a subresource call on %s: call it as X.Status().%s or X.SubResource(\"name\").%s", nodeString(sel.X), sel.Sel.Name, sel.Sel.Name)
	return ""
}

// readerOf is how the receiver of a Reader method call reads. A method
// promoted from an embedded field reads as that field does.
func (a *analysis) readerOf(s site, call *ast.CallExpr) reads {
	sel := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if selection := s.p.info.Selections[sel]; selection != nil && len(selection.Index()) > 1 {
		if field := embeddedField(selection); field != nil {
			return a.fieldReads(field, map[types.Object]bool{}, sel.Pos())
		}
	}
	return a.readsOf(site{p: s.p, decl: s.decl, expr: sel.X}, map[types.Object]bool{})
}

// embeddedField is the last embedded field on the path of a promoted
// method's selection: the client that the method is called on.
func embeddedField(sel *types.Selection) *types.Var {
	t := sel.Recv()
	var field *types.Var
	for _, i := range sel.Index()[:len(sel.Index())-1] {
		if p, ok := t.Underlying().(*types.Pointer); ok {
			t = p.Elem()
		}
		st, ok := t.Underlying().(*types.Struct)
		if !ok {
			return nil
		}
		field = st.Field(i)
		t = field.Type()
	}
	return field
}

func (a *analysis) fieldReads(field *types.Var, seen map[types.Object]bool, at token.Pos) reads {
	var r reads
	if seen[field] {
		return r
	}
	seen[field] = true
	if len(a.fields[field]) == 0 {
		a.issue(at, "a reader from the field %s, which nothing sets", field.Name())
	}
	for _, v := range a.fields[field] {
		r.add(a.readsOf(v, seen))
	}
	return r
}

// readsOf follows a reader expression to where it comes from: the
// manager's GetAPIReader or a client.New (the apiserver), its GetClient,
// its GetCache or a cache.New (a cache), manager.ReadThrough; through
// fields, parameters, local variables, and the parameters of function
// literals stored in a field.
func (a *analysis) readsOf(s site, seen map[types.Object]bool) reads {
	switch x := ast.Unparen(s.expr).(type) {
	case *ast.CallExpr:
		fn := callee(s.p.info, x)
		switch {
		case fn == nil:
		case fn.Name() == "GetAPIReader", isFunc(fn, clientPkg, "New"), isFunc(fn, clientPkg, "NewWithWatch"):
			return reads{live: true}
		case fn.Name() == "GetClient", fn.Name() == "GetCache", isFunc(fn, cachePkg, "New"):
			return reads{cached: true}
		case isFunc(fn, tendManagerPkg, "ReadThrough"):
			r := a.readsOf(site{p: s.p, decl: s.decl, expr: x.Args[0]}, seen)
			if r.liveGets == nil {
				r.liveGets = map[string]bool{}
			}
			for _, k := range x.Args[2:] {
				for _, t := range a.objectTypes(site{p: s.p, decl: s.decl, expr: k}) {
					r.liveGets[t] = true
				}
			}
			return r
		}
	case *ast.SelectorExpr:
		if sel, ok := s.p.info.Selections[x]; ok && sel.Kind() == types.FieldVal {
			return a.fieldReads(sel.Obj().(*types.Var), seen, x.Pos())
		}
	case *ast.CompositeLit:
		// A reader's wrapper, a struct that embeds one: the reader it is
		// given.
		if inner := embeddedReaders(s, x); len(inner) > 0 {
			var r reads
			for _, e := range inner {
				r.add(a.readsOf(e, seen))
			}
			return r
		}
	case *ast.Ident:
		v, ok := s.p.info.Uses[x].(*types.Var)
		if !ok || seen[v] {
			break
		}
		if lit := litOf(s.decl, v); lit != nil {
			return a.litParamReads(lit, v, seen)
		}
		var r reads
		for _, src := range a.sources(s, seen) {
			r.add(a.readsOf(src, seen))
		}
		return r
	}
	a.issue(s.expr.Pos(), "a reader from %s, which this check cannot follow to the cache or the apiserver", nodeString(s.expr))
	return reads{}
}

// embeddedReaders are the values that a struct literal gives to the
// fields of its type that embed a client.Reader or client.Client.
func embeddedReaders(s site, lit *ast.CompositeLit) []site {
	t := s.p.info.TypeOf(lit)
	if t == nil {
		return nil
	}
	st, ok := t.Underlying().(*types.Struct)
	if !ok {
		return nil
	}
	var out []site
	for i, elt := range lit.Elts {
		var field *types.Var
		if kv, ok := elt.(*ast.KeyValueExpr); ok {
			key, _ := kv.Key.(*ast.Ident)
			field, _ = s.p.info.Uses[key].(*types.Var)
			elt = kv.Value
		} else if i < st.NumFields() {
			field = st.Field(i)
		}
		if field == nil || !field.Embedded() {
			continue
		}
		if named, ok := field.Type().(*types.Named); ok && named.Obj().Pkg() != nil && named.Obj().Pkg().Path() == clientPkg &&
			(named.Obj().Name() == "Reader" || named.Obj().Name() == "Client") {
			out = append(out, site{p: s.p, decl: s.decl, expr: elt})
		}
	}
	return out
}

// litParamReads follows a reader parameter of a function literal that is
// stored in a struct field to the calls of that field.
func (a *analysis) litParamReads(lit *ast.FuncLit, v *types.Var, seen map[types.Object]bool) reads {
	seen[v] = true
	var field *types.Var
	if stored, ok := a.lits[lit]; ok {
		switch x := stored.expr.(type) {
		case *ast.Ident:
			field, _ = stored.p.info.Uses[x].(*types.Var)
		case *ast.SelectorExpr:
			if sel, ok := stored.p.info.Selections[x]; ok {
				field, _ = sel.Obj().(*types.Var)
			}
		}
	}
	idx, n := -1, 0
	for _, f := range lit.Type.Params.List {
		for _, name := range f.Names {
			if name.Pos() == v.Pos() {
				idx = n
			}
			n++
		}
	}
	var r reads
	calls := 0
	if field != nil {
		a.each(func(p *pkg, decl ast.Decl, n ast.Node) {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return
			}
			sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
			if !ok {
				return
			}
			if s, ok := p.info.Selections[sel]; ok && s.Kind() == types.FieldVal && s.Obj() == field && idx < len(call.Args) {
				calls++
				r.add(a.readsOf(site{p: p, decl: decl, expr: call.Args[idx]}, seen))
			}
		})
	}
	if calls == 0 {
		a.issue(v.Pos(), "a reader from a parameter of a function literal that is called from nowhere this check can find")
	}
	return r
}

func nodeString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return nodeString(x.X) + "." + x.Sel.Name
	case *ast.CallExpr:
		return nodeString(x.Fun) + "(…)"
	case *ast.StarExpr:
		return "*" + nodeString(x.X)
	case *ast.UnaryExpr:
		return x.Op.String() + nodeString(x.X)
	case *ast.ParenExpr:
		return "(" + nodeString(x.X) + ")"
	}
	return reflect.TypeOf(e).String()
}

// TestAnalysisFollowsCalls runs the analysis on testdata/fixture, whose
// calls say in comments what they need: it must find exactly those
// rights, and report the one call it cannot follow.
func TestAnalysisFollowsCalls(t *testing.T) {
	t.Parallel()
	prog, err := load(root, "./test/rbac/testdata/fixture")
	if err != nil {
		t.Fatal(err)
	}
	a := newAnalysis(prog, scheme.Scheme)
	a.scope = func(path string) bool { return strings.HasSuffix(path, "/testdata/fixture") }
	a.run()
	want := []string{
		"create poddisruptionbudgets.policy",
		"delete jobs.batch",
		"delete services",
		"get pods",
		"get secrets",
		"list configmaps",
		"list jobs.batch",
		"list poddisruptionbudgets.policy",
		"list replicasets.apps",
		"list secrets",
		"list statefulsets.apps",
		"patch configmaps/status",
		"update configmaps/finalizers",
		"update poddisruptionbudgets.policy",
		"watch configmaps",
		"watch poddisruptionbudgets.policy",
		"watch secrets",
		"watch statefulsets.apps",
	}
	var got []string
	for r := range a.needs {
		got = append(got, r.String())
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the fixture needs\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	if len(a.issues) != 1 || !strings.Contains(a.issues[0], "fixture.go") || !strings.Contains(a.issues[0], "cannot follow") {
		t.Errorf("the issues are %q, want the one of Untraceable", a.issues)
	}
}
