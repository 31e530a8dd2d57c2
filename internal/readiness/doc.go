// Package readiness writes the three conditions that tools outside Tend
// read to tell whether an object is done: Ready, Reconciling and Stalled,
// with the meaning that sigs.k8s.io/cli-utils' kstatus gives them (and so
// Helm's and Flux's waits, Argo CD's health and kubectl wait).
//
// Ready is always present, and True only when the pass that wrote it
// reconciled the object's latest generation and found nothing left to do.
// Reconciling is present only while True: Tend is working, or waiting for
// something that comes by itself. Stalled is present only while True:
// retrying cannot help until a person acts (an invalid spec, refused
// credentials, a failed backup). At most one of the two is present.
//
// Each controller decides the state from its own conditions, in a pure
// function beside its status; this package only writes the verdict. It
// must not decide anything about a kind, read the API, or keep state.
package readiness
