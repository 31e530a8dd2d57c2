package queue

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

// SQS attribute names, as the API spells them.
const (
	attrDelaySeconds                  = "DelaySeconds"
	attrVisibilityTimeout             = "VisibilityTimeout"
	attrMessageRetentionPeriod        = "MessageRetentionPeriod"
	attrMaximumMessageSize            = "MaximumMessageSize"
	attrReceiveMessageWaitTimeSeconds = "ReceiveMessageWaitTimeSeconds"
	attrFifoQueue                     = "FifoQueue"
	attrContentBasedDeduplication     = "ContentBasedDeduplication"
	attrSqsManagedSseEnabled          = "SqsManagedSseEnabled"
	attrPolicy                        = "Policy"
	attrRedrivePolicy                 = "RedrivePolicy"
	attrQueueArn                      = "QueueArn"
	attrKmsMasterKeyID                = "KmsMasterKeyId"
	attrKmsDataKeyReusePeriodSeconds  = "KmsDataKeyReusePeriodSeconds"
	attrDeduplicationScope            = "DeduplicationScope"
	attrFifoThroughputLimit           = "FifoThroughputLimit"
	attrRedriveAllowPolicy            = "RedriveAllowPolicy"

	// The depth, read at the poll with the other attributes.
	attrMessages         = "ApproximateNumberOfMessages"
	attrMessagesInFlight = "ApproximateNumberOfMessagesNotVisible"
	attrMessagesDelayed  = "ApproximateNumberOfMessagesDelayed"
)

// ownerTag marks a queue as managed by one Queue, "<namespace>/<name>", so
// that a pass that lost its status write still knows the queue is its own,
// and so that no other Queue adopts, changes or deletes it (otherOwner).
const ownerTag = "tend.dev/queue"

// desiredAttributes returns the SQS attributes that the spec declares, with
// dlqARN as the redrive target when the spec has a redrive, and sourceARNs
// as the sources that redriveAllowPolicy's references resolve to (nil when
// they are not known yet: the attribute is then left out). Attributes the
// spec leaves unset are absent: Tend leaves them as they are.
func desiredAttributes(spec *sqsv1alpha1.QueueSpec, dlqARN string, sourceARNs []string) map[string]string {
	attrs := map[string]string{}
	setInt := func(name string, v *int32) {
		if v != nil {
			attrs[name] = strconv.Itoa(int(*v))
		}
	}
	setBool := func(name string, v *bool) {
		if v != nil {
			attrs[name] = strconv.FormatBool(*v)
		}
	}
	setInt(attrDelaySeconds, spec.DelaySeconds)
	setInt(attrVisibilityTimeout, spec.VisibilityTimeout)
	setInt(attrMessageRetentionPeriod, spec.MessageRetentionPeriod)
	setInt(attrMaximumMessageSize, spec.MaximumMessageSize)
	setInt(attrReceiveMessageWaitTimeSeconds, spec.ReceiveMessageWaitTimeSeconds)
	setBool(attrContentBasedDeduplication, spec.ContentBasedDeduplication)
	setBool(attrSqsManagedSseEnabled, spec.SQSManagedSSEEnabled)
	setInt(attrKmsDataKeyReusePeriodSeconds, spec.KMSDataKeyReusePeriodSeconds)
	setString := func(name, v string) {
		if v != "" {
			attrs[name] = v
		}
	}
	setString(attrKmsMasterKeyID, spec.KMSMasterKeyID)
	setString(attrDeduplicationScope, spec.DeduplicationScope)
	setString(attrFifoThroughputLimit, spec.FIFOThroughputLimit)
	if p := spec.RedriveAllowPolicy; p != nil && (len(p.SourceQueueRefs) == 0 || sourceARNs != nil) {
		attrs[attrRedriveAllowPolicy] = redriveAllowPolicy(p.RedrivePermission, sourceARNs)
	}
	if spec.Policy != nil {
		attrs[attrPolicy] = string(spec.Policy.Raw)
	}
	if spec.Redrive != nil {
		attrs[attrRedrivePolicy] = redrivePolicy(dlqARN, spec.Redrive.MaxReceiveCount)
	}
	return attrs
}

// createAttributes are the attributes of CreateQueue: the declared ones, and
// FifoQueue, which only a create may set.
func createAttributes(spec *sqsv1alpha1.QueueSpec, dlqARN string, sourceARNs []string) map[string]string {
	attrs := desiredAttributes(spec, dlqARN, sourceARNs)
	if spec.FIFOQueue {
		attrs[attrFifoQueue] = "true"
	}
	return attrs
}

func redrivePolicy(arn string, maxReceiveCount int32) string {
	b, _ := json.Marshal(map[string]any{"deadLetterTargetArn": arn, "maxReceiveCount": maxReceiveCount})
	return string(b)
}

// redriveAllowPolicy is the attribute's JSON: the permission, and with
// byQueue the source queues' ARNs, sorted and without duplicates.
func redriveAllowPolicy(permission sqsv1alpha1.RedrivePermission, arns []string) string {
	doc := map[string]any{"redrivePermission": permission}
	if permission == sqsv1alpha1.RedrivePermissionByQueue {
		doc["sourceQueueArns"] = slices.Compact(slices.Sorted(slices.Values(arns)))
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

// sourceQueueARN is the ARN of the source queue named sqsName that may use
// the dead-letter queue of ARN dlqARN: SQS keeps a dead-letter queue in
// the account and region of its sources, so only the name differs. "" when
// dlqARN is not an SQS ARN.
func sourceQueueARN(dlqARN, sqsName string) string {
	i := strings.LastIndexByte(dlqARN, ':')
	if i < 0 || !strings.HasPrefix(dlqARN, "arn:") {
		return ""
	}
	return dlqARN[:i+1] + sqsName
}

// regionOf is the region in an SQS ARN (arn:PARTITION:sqs:REGION:ACCOUNT:NAME).
func regionOf(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" {
		return ""
	}
	return parts[3]
}

// messagesOf is the queue's depth from its attributes, nil when SQS gave
// none of it. A count that is not a number counts as 0.
func messagesOf(attrs map[string]string) *sqsv1alpha1.QueueMessages {
	n := func(name string) (int64, bool) {
		v, ok := attrs[name]
		i, _ := strconv.ParseInt(v, 10, 64)
		return i, ok
	}
	visible, ok1 := n(attrMessages)
	inFlight, ok2 := n(attrMessagesInFlight)
	delayed, ok3 := n(attrMessagesDelayed)
	if !ok1 && !ok2 && !ok3 {
		return nil
	}
	return &sqsv1alpha1.QueueMessages{Visible: visible, InFlight: inFlight, Delayed: delayed}
}

// reportedAttributes are the attributes that an observed Queue's status
// shows: all that SQS returned but the depth (status.messages) and the
// timestamps, which would rewrite the status for nothing.
func reportedAttributes(attrs map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range attrs {
		switch k {
		case attrMessages, attrMessagesInFlight, attrMessagesDelayed, "CreatedTimestamp", "LastModifiedTimestamp":
			continue
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// attributeChanges returns the desired attributes whose observed value
// differs, compared by meaning: JSON documents as documents, numbers as
// numbers. It is what SetQueueAttributes must send; nil when nothing drifted.
func attributeChanges(desired, observed map[string]string) map[string]string {
	var changes map[string]string
	for _, name := range slices.Sorted(maps.Keys(desired)) {
		want, got := desired[name], observed[name]
		if sameAttribute(name, want, got) {
			continue
		}
		if changes == nil {
			changes = map[string]string{}
		}
		changes[name] = want
	}
	return changes
}

func sameAttribute(name, want, got string) bool {
	switch name {
	case attrPolicy, attrRedrivePolicy:
		return sameJSON(want, got)
	case attrRedriveAllowPolicy:
		return sameJSON(want, sortedSources(got))
	default:
		return want == got
	}
}

// sortedSources returns a RedriveAllowPolicy document with its
// sourceQueueArns sorted, as Tend writes them, so that SQS's order does not
// count; other text is returned as it is.
func sortedSources(doc string) string {
	var v map[string]any
	if json.Unmarshal([]byte(doc), &v) != nil {
		return doc
	}
	arns, ok := v["sourceQueueArns"].([]any)
	if !ok {
		return doc
	}
	strs := make([]string, 0, len(arns))
	for _, a := range arns {
		s, ok := a.(string)
		if !ok {
			return doc
		}
		strs = append(strs, s)
	}
	v["sourceQueueArns"] = slices.Compact(slices.Sorted(slices.Values(strs)))
	b, _ := json.Marshal(v)
	return string(b)
}

// sameJSON says whether two JSON documents mean the same. Numbers compare by
// value and a number equals its decimal string, because SQS hands back
// RedrivePolicy's maxReceiveCount as either. Text that is not JSON compares
// as text.
func sameJSON(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return a == b
	}
	return reflect.DeepEqual(normalizeJSON(va), normalizeJSON(vb))
}

func normalizeJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = normalizeJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalizeJSON(e)
		}
		return out
	case string:
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
		return v
	default:
		return v
	}
}

// desiredTags returns the queue's tags as the spec declares them, plus the
// owner tag. With spec.tags unset, only the owner tag is Tend's business.
func desiredTags(q *sqsv1alpha1.Queue) map[string]string {
	tags := maps.Clone(q.Spec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[ownerTag] = ownerValue(q)
	return tags
}

func ownerValue(q *sqsv1alpha1.Queue) string { return q.Namespace + "/" + q.Name }

// tagChanges returns the tags to set and the keys to remove so that observed
// becomes desired. Keys absent from desired are removed only when the spec
// declares its tags (manageAll); otherwise foreign tags are left alone.
func tagChanges(desired, observed map[string]string, manageAll bool) (set map[string]string, remove []string) {
	for k, v := range desired {
		if got, ok := observed[k]; !ok || got != v {
			if set == nil {
				set = map[string]string{}
			}
			set[k] = v
		}
	}
	if manageAll {
		for k := range observed {
			if _, ok := desired[k]; !ok {
				remove = append(remove, k)
			}
		}
		slices.Sort(remove)
	}
	return set, remove
}
