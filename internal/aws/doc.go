// Package aws is the floor under every call that Tend makes to an AWS API. It
// loads SDK configuration (the SDK's default chain, plus per-call overrides of
// region, endpoint and static credentials), builds S3 clients on it (NewS3:
// path-style addressing for S3-compatible stores), sends every call through a
// non-blocking token bucket shared per upstream endpoint, counts the calls,
// and classifies the errors that come back (SQS's and S3's) as NotFound,
// Terminal, Throttled or Transient, with a hint of when to retry. In the
// manager, every call but the reads first passes the leader-election fence
// (Connection.Gate, internal/fence): a process that lost its Lease sends no
// change upstream.
//
// It must not wait. SDK retries are off (one attempt per call), a call that
// finds no token fails at once with a *RateLimitedError, and a call without a
// deadline on its context is refused: the controller classifies the error and
// requeues instead of sleeping in a worker. The one exception is for one-shot
// agents, which ask for it: Limiters made with LimiterOptions.Wait let a call
// wait for its token, never past its context's deadline.
//
// It knows no CRD and no controller, reads no Kubernetes Secret (callers pass
// credentials in), and never logs or prints a secret.
package aws
