// Package rbac checks the manager's RBAC (config/rbac) against its code.
// Its test reads the manager's packages (the closure of cmd/tend) with
// go/types and derives, from their calls of controller-runtime's client,
// builder, cache and controllerutil, the rights they need: a write is its
// verb on the object's resource (Status() and SubResource(...) on the
// subresource); a read through the manager's cache is list and watch (an
// informer), a read from the apiserver (GetAPIReader, client.New, and the
// kinds that manager.ReadThrough falls through for) is get or list;
// For, Owns, Watches and IndexField start informers; an owner reference
// that blocks deletion needs update on the owner's finalizers; Event
// recorders need create and patch on their Events API. Object types are
// mapped to resources through internal/scheme, an object of interface
// type is followed to what reaches it through parameters and local
// variables, and a reader's wrapper (a struct that embeds a client.Reader
// or client.Client) to the reader it embeds. What libraries the manager calls into need (the webhook's
// certificate rotator, leader election, the metrics endpoint's
// authentication) is listed by hand, and applies while the code calls
// them.
//
// The test fails when a role bound to the manager's ServiceAccount lacks
// a right that some call needs, when the generated role.yaml grants a verb
// that no call needs, and when a call is made in a way it cannot follow
// (an object of interface type from a map, a reader it cannot trace to the
// cache or the apiserver, another Kubernetes client): teach the analysis
// the new way, or make the call plain. testdata/fixture holds one call of
// each kind the analysis knows, and the rights each needs.
//
// It does not run anything: it reads code and YAML. It checks only the
// verbs of role.yaml for need; the hand-written roles of config/rbac
// (leader election, metrics authentication) are checked only for what
// they must grant.
package rbac
