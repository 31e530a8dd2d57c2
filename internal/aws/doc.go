// Package aws is the floor under every call that Tend makes to an AWS API. It
// loads SDK configuration (the SDK's default chain, plus per-call overrides of
// region, endpoint and static credentials), sends every call through a
// non-blocking token bucket shared per upstream endpoint, counts the calls,
// and classifies the errors that come back as NotFound, Terminal, Throttled or
// Transient, with a hint of when to retry.
//
// It must not wait. SDK retries are off (one attempt per call), a call that
// finds no token fails at once with a *RateLimitedError, and a call without a
// deadline on its context is refused: the controller classifies the error and
// requeues instead of sleeping in a worker.
//
// It knows no CRD and no controller, reads no Kubernetes Secret (callers pass
// credentials in), and never logs or prints a secret.
package aws
