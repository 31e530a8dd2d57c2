package plugin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

// kind is one of Tend's kinds as the plugin names it on the command line.
type kind struct {
	// Name is the Kind, such as "EtcdCluster".
	Name string
	// aliases are the other words that name it: the plural, short names,
	// and the resource with its group, as kubectl accepts them.
	aliases []string
	newObj  func() client.Object
	newList func() client.ObjectList
}

var (
	kindPodSet = &kind{Name: "PodSet", aliases: []string{"podsets", "ps", "podsets.apps.tend.dev"},
		newObj: func() client.Object { return &appsv1alpha1.PodSet{} }, newList: func() client.ObjectList { return &appsv1alpha1.PodSetList{} }}
	kindEtcdCluster = &kind{Name: "EtcdCluster", aliases: []string{"etcdclusters", "etcd", "etcdclusters.etcd.tend.dev"},
		newObj: func() client.Object { return &etcdv1alpha1.EtcdCluster{} }, newList: func() client.ObjectList { return &etcdv1alpha1.EtcdClusterList{} }}
	kindQueue = &kind{Name: "Queue", aliases: []string{"queues", "queues.sqs.tend.dev"},
		newObj: func() client.Object { return &sqsv1alpha1.Queue{} }, newList: func() client.ObjectList { return &sqsv1alpha1.QueueList{} }}
	kindSchedule = &kind{Name: "EtcdBackupSchedule", aliases: []string{"etcdbackupschedules", "etcdbackupschedules.etcd.tend.dev"},
		newObj: func() client.Object { return &etcdv1alpha1.EtcdBackupSchedule{} }, newList: func() client.ObjectList { return &etcdv1alpha1.EtcdBackupScheduleList{} }}
)

// matches reports whether word names k.
func (k *kind) matches(word string) bool {
	word = strings.ToLower(word)
	return word == strings.ToLower(k.Name) || slices.Contains(k.aliases, word)
}

// kindNames lists kinds for a message: "PodSet, EtcdCluster or Queue".
func kindNames(kinds []*kind, conj string) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}

// target is one object the command works on.
type target struct {
	kind *kind
	obj  client.Object
}

// resolve finds what arg names among kinds in namespace ns: "kind/name",
// or a bare name that exactly one of the kinds has.
func resolve(ctx context.Context, c client.Reader, ns, arg string, kinds []*kind) (*target, error) {
	if word, name, ok := strings.Cut(arg, "/"); ok {
		for _, k := range kinds {
			if !k.matches(word) {
				continue
			}
			obj := k.newObj()
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
				if apierrors.IsNotFound(err) {
					return nil, fmt.Errorf("%s %q not found in namespace %q", k.Name, name, ns)
				}
				return nil, fmt.Errorf("reading %s %s/%s: %w", k.Name, ns, name, err)
			}
			return &target{kind: k, obj: obj}, nil
		}
		return nil, fmt.Errorf("%q is not a kind this command works on: it takes a %s", word, kindNames(kinds, "or"))
	}
	var found []*target
	for _, k := range kinds {
		obj := k.newObj()
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: arg}, obj)
		switch {
		case err == nil:
			found = append(found, &target{kind: k, obj: obj})
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		default:
			return nil, fmt.Errorf("reading %s %s/%s: %w", k.Name, ns, arg, err)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no %s named %q in namespace %q", kindNames(kinds, "or"), arg, ns)
	case 1:
		return found[0], nil
	}
	var which, kindsFound []string
	for _, t := range found {
		kindsFound = append(kindsFound, t.kind.Name)
		which = append(which, strings.ToLower(t.kind.Name)+"/"+arg)
	}
	return nil, fmt.Errorf("%q names a %s in namespace %q; say which: %s",
		arg, strings.Join(kindsFound, " and a "), ns, strings.Join(which, " or "))
}

// completeNames is a cobra completion of the names of kinds' objects in the
// command's namespace, bare for one kind and as kind/name for several.
func (o *options) completeNames(kinds ...*kind) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cs, err := o.clients()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns, err := o.namespace()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, k := range kinds {
			list := k.newList()
			if err := cs.List(cmd.Context(), list, client.InNamespace(ns)); err != nil {
				continue
			}
			_ = meta.EachListItem(list, func(obj runtime.Object) error {
				name := obj.(client.Object).GetName()
				if len(kinds) > 1 {
					name = strings.ToLower(k.Name) + "/" + name
				}
				out = append(out, name)
				return nil
			})
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

var kindBackup = &kind{Name: "EtcdBackup", aliases: []string{"etcdbackups", "etcdbackups.etcd.tend.dev"},
	newObj: func() client.Object { return &etcdv1alpha1.EtcdBackup{} }, newList: func() client.ObjectList { return &etcdv1alpha1.EtcdBackupList{} }}

// lowerKind is how kubectl prints a kind in "kind/name".
func lowerKind(k *kind) string {
	return strings.ToLower(k.Name) + "." + groupOf(k)
}

func groupOf(k *kind) string {
	switch k {
	case kindPodSet:
		return "apps.tend.dev"
	case kindQueue:
		return "sqs.tend.dev"
	}
	return "etcd.tend.dev"
}
