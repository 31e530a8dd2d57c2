// Package queue reconciles sqs.tend.dev Queues with real SQS queues.
//
// A pass observes the queue in SQS (two calls at steady state: its attributes
// and its tags), then creates it, repairs what drifted, or does nothing, and
// publishes its URL and ARN in status and in the ConfigMap <name>-queue.
// Every SQS call goes through internal/aws: one shared token bucket per
// endpoint, one attempt, a deadline, and classified errors; and every call
// that changes something (create, set attributes, tag, untag, delete)
// first passes the manager's leader-election fence (manager.GateOf), so
// that a manager that lost its Lease sends none. A pass never
// waits: a throttled or failed call ends the pass with a requeue, and steady
// state writes nothing to Kubernetes.
//
// Decisions (what to set, what drifted, may this queue be adopted) are pure
// functions in attributes.go and adoption.go, table-tested; reconcile.go only
// sequences them. Each concern has its file, and its tests beside it:
// observe.go reads the queue from SQS, create.go makes it, repair.go brings
// its attributes and tags back in line, publish.go writes the ConfigMap,
// delete.go deletes or retains it, status.go turns outcomes and errors into
// conditions and writes the status once per pass, and connection.go hands
// out the SQS clients, never one for an endpoint that the operator's
// allow-list (endpoints.go) does not allow. The package must not keep state
// between passes beyond caches that can be rebuilt.
package queue
