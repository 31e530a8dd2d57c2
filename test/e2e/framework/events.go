package framework

import (
	"cmp"
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EventsOf returns the Events in ns about the object of that kind and
// name whose reason is one of reasons (any, when none is given), in the
// order they were made: by their time (EventTime, which Tend's recorder
// sets to the microsecond), then by creation.
func EventsOf(ctx context.Context, c client.Reader, ns, kind, name string, reasons ...string) ([]corev1.Event, error) {
	var list corev1.EventList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var evs []corev1.Event
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == kind && ev.InvolvedObject.Name == name && (len(reasons) == 0 || slices.Contains(reasons, ev.Reason)) {
			evs = append(evs, ev)
		}
	}
	slices.SortFunc(evs, func(a, b corev1.Event) int {
		return cmp.Or(a.EventTime.Compare(b.EventTime.Time), a.CreationTimestamp.Compare(b.CreationTimestamp.Time))
	})
	return evs, nil
}
