package plugin

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/scheme"
)

// reportOptions are report's flags.
type reportOptions struct {
	file           string
	includeSecrets bool
	logLines       int64
	operatorNS     string
}

func newReportCommand(o *options) *cobra.Command {
	var ro reportOptions
	cmd := &cobra.Command{
		Use:   "report (KIND/NAME | NAME)",
		Short: "Write a support bundle of an EtcdCluster, PodSet or Queue",
		Long: `Write a support bundle, a .tar.gz, of an EtcdCluster, PodSet or Queue:
the resource, every object it owns (and theirs), its EtcdBackups, EtcdRestores
and schedules, their Events, its pods' logs, and the lines of the manager's
logs that name the resource's namespace. Secret values are replaced by their
length unless --include-secrets is given. What cannot be read (for want of
RBAC, say) is listed in errors.txt, and the rest is still written.`,
		Example:           `  kubectl tend report etcdcluster/demo --file demo.tar.gz`,
		GroupID:           groupInspect,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeNames(statusKinds...),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cs, ns, err := o.clientsIn()
			if err != nil {
				return err
			}
			t, err := resolve(ctx, cs, ns, args[0], statusKinds)
			if err != nil {
				return err
			}
			if ro.file == "" {
				ro.file = fmt.Sprintf("tend-report-%s-%s-%s.tar.gz", strings.ToLower(t.kind.Name), t.obj.GetName(), time.Now().UTC().Format("20060102T150405Z"))
			}
			f, err := os.OpenFile(ro.file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return fmt.Errorf("creating the report: %w", err)
			}
			if err := writeReport(ctx, cs, t, ro, f); err != nil {
				_ = f.Close()
				_ = os.Remove(ro.file)
				return err
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("writing %s: %w", ro.file, err)
			}
			fmt.Fprintf(o.streams.Out, "report written to %s\n", ro.file)
			return nil
		},
	}
	cmd.Flags().StringVarP(&ro.file, "file", "f", "", "the archive to write (default tend-report-KIND-NAME-TIME.tar.gz); it must not exist")
	cmd.Flags().BoolVar(&ro.includeSecrets, "include-secrets", false, "keep Secrets' values in the report; they are redacted by default")
	cmd.Flags().Int64Var(&ro.logLines, "log-lines", 2000, "the last lines of each container's log to include")
	cmd.Flags().StringVar(&ro.operatorNS, "operator-namespace", defaultOperatorNamespace, "the namespace Tend's manager runs in")
	return cmd
}

// ownedKinds are the kinds whose objects the report collects when the
// resource owns them, directly or through another owned object.
var ownedKinds = []func() client.ObjectList{
	func() client.ObjectList { return &appsv1.StatefulSetList{} },
	func() client.ObjectList { return &batchv1.JobList{} },
	func() client.ObjectList { return &corev1.PodList{} },
	func() client.ObjectList { return &corev1.ServiceList{} },
	func() client.ObjectList { return &corev1.PersistentVolumeClaimList{} },
	func() client.ObjectList { return &corev1.ConfigMapList{} },
	func() client.ObjectList { return &corev1.SecretList{} },
	func() client.ObjectList { return &policyv1.PodDisruptionBudgetList{} },
	func() client.ObjectList { return &etcdv1alpha1.EtcdBackupList{} },
	func() client.ObjectList { return &etcdv1alpha1.EtcdRestoreList{} },
	func() client.ObjectList { return &etcdv1alpha1.EtcdBackupScheduleList{} },
}

// bundle is the archive being written.
type bundle struct {
	tw     *tar.Writer
	now    time.Time
	errors []string
}

func (b *bundle) add(name string, data []byte) error {
	hdr := &tar.Header{Name: "report/" + name, Mode: 0o600, Size: int64(len(data)), ModTime: b.now}
	if err := b.tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := b.tw.Write(data)
	return err
}

func (b *bundle) failed(what string, err error) {
	b.errors = append(b.errors, fmt.Sprintf("%s: %v", what, err))
}

// addObject writes obj as YAML, without managedFields and, unless
// includeSecrets, with a Secret's values redacted.
func (b *bundle) addObject(obj client.Object, includeSecrets bool) error {
	obj = obj.DeepCopyObject().(client.Object)
	gvk, err := apiutil.GVKForObject(obj, scheme.Scheme)
	if err != nil {
		return err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	obj.SetManagedFields(nil)
	if s, ok := obj.(*corev1.Secret); ok && !includeSecrets {
		RedactSecret(s)
	}
	data, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	return b.add(fmt.Sprintf("objects/%s-%s.yaml", gvk.Kind, obj.GetName()), data)
}

// RedactSecret replaces every value of s by its length, readable in
// stringData, and redacts the annotation that copies them (kubectl apply's
// last-applied-configuration).
func RedactSecret(s *corev1.Secret) {
	redacted := map[string]string{}
	for k, v := range s.Data {
		redacted[k] = fmt.Sprintf("<redacted: %d bytes>", len(v))
	}
	for k, v := range s.StringData {
		redacted[k] = fmt.Sprintf("<redacted: %d bytes>", len(v))
	}
	s.Data, s.StringData = nil, nil
	if len(redacted) > 0 {
		s.StringData = redacted
	}
	if _, ok := s.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		s.Annotations[corev1.LastAppliedConfigAnnotation] = "<redacted>"
	}
}

func writeReport(ctx context.Context, cs *clients, t *target, ro reportOptions, w io.Writer) error {
	gz := gzip.NewWriter(w)
	b := &bundle{tw: tar.NewWriter(gz), now: time.Now()}
	ns, root := t.obj.GetNamespace(), t.obj
	if err := b.addObject(root, ro.includeSecrets); err != nil {
		return err
	}

	// Whatever the resource owns, transitively; and the backups, restores
	// and schedules that name it.
	owners := map[types.UID]bool{root.GetUID(): true}
	var objects []client.Object
	var pods []*corev1.Pod
	lists := make([]client.ObjectList, 0, len(ownedKinds))
	for _, newList := range ownedKinds {
		list := newList()
		if err := cs.List(ctx, list, client.InNamespace(ns)); err != nil {
			b.failed(fmt.Sprintf("listing %T", list), err)
			continue
		}
		lists = append(lists, list)
	}
	seen := map[types.UID]bool{}
	for grew := true; grew; {
		grew = false
		for _, list := range lists {
			_ = apimeta.EachListItem(list, func(o runtime.Object) error {
				obj := o.(client.Object)
				if seen[obj.GetUID()] || !belongs(obj, owners, root) {
					return nil
				}
				seen[obj.GetUID()], owners[obj.GetUID()], grew = true, true, true
				objects = append(objects, obj)
				if p, ok := obj.(*corev1.Pod); ok {
					pods = append(pods, p)
				}
				return nil
			})
		}
	}
	for _, obj := range objects {
		if err := b.addObject(obj, ro.includeSecrets); err != nil {
			return err
		}
	}

	var events corev1.EventList
	if err := cs.List(ctx, &events, client.InNamespace(ns)); err != nil {
		b.failed("listing Events", err)
	} else {
		var own corev1.EventList
		for _, e := range events.Items {
			if owners[e.InvolvedObject.UID] {
				e.ManagedFields = nil
				own.Items = append(own.Items, e)
			}
		}
		data, err := yaml.Marshal(own.Items)
		if err != nil {
			return err
		}
		if err := b.add("events.yaml", data); err != nil {
			return err
		}
	}

	for _, p := range pods {
		for _, c := range p.Spec.InitContainers {
			b.addLogs(ctx, cs, p, c.Name, ro.logLines, restartedIn(p.Status.InitContainerStatuses, c.Name))
		}
		for _, c := range p.Spec.Containers {
			b.addLogs(ctx, cs, p, c.Name, ro.logLines, restartedIn(p.Status.ContainerStatuses, c.Name))
		}
	}
	b.addManagerLogs(ctx, cs, ro, ns)

	if len(b.errors) > 0 {
		if err := b.add("errors.txt", []byte(strings.Join(b.errors, "\n")+"\n")); err != nil {
			return err
		}
	}
	if err := b.tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// belongs reports whether obj is owned by one of owners, or is a backup,
// restore or schedule of the EtcdCluster root.
func belongs(obj client.Object, owners map[types.UID]bool, root client.Object) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if owners[ref.UID] {
			return true
		}
	}
	if _, ok := root.(*etcdv1alpha1.EtcdCluster); !ok {
		return false
	}
	switch o := obj.(type) {
	case *etcdv1alpha1.EtcdBackup:
		return o.Spec.ClusterRef.Name == root.GetName()
	case *etcdv1alpha1.EtcdRestore:
		return o.Spec.ClusterRef.Name == root.GetName()
	case *etcdv1alpha1.EtcdBackupSchedule:
		return o.Spec.ClusterRef.Name == root.GetName()
	}
	return false
}

func restartedIn(statuses []corev1.ContainerStatus, name string) bool {
	for _, s := range statuses {
		if s.Name == name {
			return s.RestartCount > 0
		}
	}
	return false
}

// addLogs adds a container's log, and its previous instance's when it
// restarted.
func (b *bundle) addLogs(ctx context.Context, cs *clients, p *corev1.Pod, container string, lines int64, previous bool) {
	for _, prev := range []bool{false, true} {
		if prev && !previous {
			continue
		}
		name := fmt.Sprintf("logs/%s/%s.log", p.Name, container)
		if prev {
			name = fmt.Sprintf("logs/%s/%s.previous.log", p.Name, container)
		}
		data, err := cs.core.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container, TailLines: &lines, Previous: prev}).DoRaw(ctx)
		if err != nil {
			b.failed("reading "+name, err)
			continue
		}
		if err := b.add(name, data); err != nil {
			b.failed("writing "+name, err)
		}
	}
}

// addManagerLogs adds the lines of each manager pod's log that name ns.
func (b *bundle) addManagerLogs(ctx context.Context, cs *clients, ro reportOptions, ns string) {
	var pods corev1.PodList
	if err := cs.List(ctx, &pods, client.InNamespace(ro.operatorNS), managerLabels); err != nil {
		b.failed("listing the manager's pods in "+ro.operatorNS, err)
		return
	}
	if len(pods.Items) == 0 {
		b.failed("the manager's logs", fmt.Errorf("no manager pod in namespace %s (--operator-namespace)", ro.operatorNS))
	}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			name := fmt.Sprintf("logs/manager/%s/%s.log", p.Name, c.Name)
			data, err := cs.core.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
			if err != nil {
				b.failed("reading "+name, err)
				continue
			}
			if err := b.add(name, linesNaming(data, ns)); err != nil {
				b.failed("writing "+name, err)
			}
		}
	}
}

// linesNaming keeps the log lines that name namespace ns: as a JSON
// "namespace" value or as ns/ in an object key.
func linesNaming(log []byte, ns string) []byte {
	var out bytes.Buffer
	quoted, key := `"`+ns+`"`, ns+"/"
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.Contains(line, []byte(quoted)) || bytes.Contains(line, []byte(key)) {
			out.Write(line)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}
