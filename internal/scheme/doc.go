// Package scheme holds the one runtime.Scheme that Tend's manager, agents and
// tests share: the built-in Kubernetes kinds plus every Tend API group, each
// registered once, in init.
//
// It registers types and nothing else. Nothing may add to Scheme after init
// (the manager's caches and clients read it concurrently), and it must not
// import Tend's controllers or agents: they import it.
package scheme
