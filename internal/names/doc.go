// Package names derives the names of the objects that Tend makes for
// another object, such as <cluster>-check-<revision>, so that each one fits
// its limit whatever the parent's name: a name that would be too long is
// cut and marked with a short hash of what it would have been, as
// Kubernetes does for the names it generates. The same inputs always give
// the same name, so a pass that comes back finds what an earlier one made.
//
// It knows no Kubernetes kind and reads nothing: it only computes names.
package names
