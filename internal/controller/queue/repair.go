package queue

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

// repair sets the attributes and tags that drifted from the spec.
func (r *Reconciler) repair(ctx context.Context, api *sqs.Client, q *sqsv1alpha1.Queue, obs observed, dlqARN string, adopted bool) error {
	var changed []string
	sources, err := r.sourceARNs(ctx, q, obs.attrs[attrQueueArn])
	if err != nil {
		return err
	}
	if attrs := attributeChanges(desiredAttributes(&q.Spec, dlqARN, sources), obs.attrs); attrs != nil {
		if _, err := api.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &obs.url, Attributes: attrs}); err != nil {
			return fmt.Errorf("setting the attributes %s: %w", strings.Join(slices.Sorted(maps.Keys(attrs)), ", "), err)
		}
		changed = append(changed, slices.Sorted(maps.Keys(attrs))...)
	}
	set, remove := tagChanges(desiredTags(q), obs.tags, q.Spec.Tags != nil)
	if set != nil {
		if _, err := api.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: &obs.url, Tags: set}); err != nil {
			return fmt.Errorf("tagging the queue: %w", err)
		}
		changed = append(changed, "tags")
	}
	if remove != nil {
		if _, err := api.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: &obs.url, TagKeys: remove}); err != nil {
			return fmt.Errorf("removing the tags %s: %w", strings.Join(remove, ", "), err)
		}
		if set == nil {
			changed = append(changed, "tags")
		}
	}
	q.Status.QueueURL, q.Status.QueueARN = obs.url, obs.attrs[attrQueueArn]
	q.Status.Messages = messagesOf(obs.attrs)
	if len(changed) > 0 || adopted {
		now := metav1.NewTime(r.Clock.Now())
		q.Status.LastSyncTime = &now
	}
	// Changes are drift only when the last pass applied this generation:
	// after a failed pass (a terminal failure sets observedGeneration too)
	// they may be the spec's own.
	synced := meta.IsStatusConditionTrue(q.Status.Conditions, sqsv1alpha1.ConditionSynced)
	switch {
	case adopted:
		r.event(q, corev1.EventTypeNormal, "Adopted", "Adopt", "Adopted the existing SQS queue "+obs.url)
	case len(changed) > 0 && (q.Generation != q.Status.ObservedGeneration || !synced):
		r.event(q, corev1.EventTypeNormal, "Updated", "Update", "Applied the spec to "+strings.Join(changed, ", "))
	case len(changed) > 0:
		r.event(q, corev1.EventTypeWarning, "DriftRepaired", "Update",
			"Reverted changes made outside Kubernetes to "+strings.Join(changed, ", "))
	}
	return nil
}
