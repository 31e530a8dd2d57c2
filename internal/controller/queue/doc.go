// Package queue reconciles sqs.tend.dev Queues with real SQS queues.
//
// A pass observes the queue in SQS (two calls at steady state: its attributes,
// depth included, and its tags), then creates it, repairs what drifted, or
// does nothing, and publishes its URL, ARN and region in status and in the
// ConfigMap <name>-queue. A Queue with managementPolicy Observe is only read
// (observeonly.go): no call that changes the queue is ever made for it.
// Every SQS call goes through internal/aws: one shared token bucket per
// endpoint, one attempt, a deadline, and classified errors; and every call
// that changes something (create, set attributes, tag, untag, delete)
// first passes the manager's leader-election fence (manager.GateOf), so
// that a manager that lost its Lease sends none. A pass never
// waits: a throttled or failed call ends the pass with a requeue, and a
// steady pass over a queue whose depth did not change writes nothing to
// Kubernetes.
//
// Decisions (what to set, what drifted, may this queue be adopted) are pure
// functions in attributes.go and adoption.go, table-tested; reconcile.go only
// sequences them. Each concern has its file, and its tests beside it:
// observe.go reads the queue from SQS, create.go makes it, repair.go brings
// its attributes and tags back in line, publish.go writes the ConfigMap,
// delete.go deletes or retains it, redrive.go starts and follows the message
// move that the annotation sqs.tend.dev/redrive asks for (calls only while
// one is asked or runs), status.go turns outcomes and errors into
// conditions and writes the status once per pass, and connection.go hands
// out the SQS clients, never one for an endpoint that the operator's
// allow-list (endpoints.go) does not allow. A pass whose cached Queue is
// older than the controller's own last write of it waits instead of acting
// on the old status (internal/ownwrite). The package must not keep state
// between passes beyond caches that can be rebuilt.
package queue
