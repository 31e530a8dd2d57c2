package plugin

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	"github.com/tend-dev/tend/internal/podspec"
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
logs about the resource's namespace (by their namespace field). The values
of Secrets, of ConfigMaps (but the one in which Tend publishes how to reach
the resource) and of containers' environment variables, and kubectl's
last-applied-configuration annotation, are redacted unless --include-secrets
is given. What cannot be read (for want of RBAC, say) is
listed in errors.txt, and the rest is still written.`,
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
	cmd.Flags().BoolVar(&ro.includeSecrets, "include-secrets", false, "keep the values of Secrets, ConfigMaps and environment variables, and last-applied-configuration, in the report; they are redacted by default")
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

// reportData is what a report holds, as read from the cluster.
type reportData struct {
	root client.Object
	// objects are what root owns, transitively, and the backups, restores
	// and schedules that name it.
	objects []client.Object
	// events are their Events; nil when they could not be listed.
	events *corev1.EventList
	// logs are their pods' logs; managerLogs the manager pods' whole logs,
	// of which the archive keeps the lines of root's namespace.
	logs, managerLogs []logFile
	// errors say what could not be read.
	errors []string
}

// logFile is a log as it goes into the archive: name is its path under
// report/.
type logFile struct {
	name string
	data []byte
}

func (d *reportData) failed(what string, err error) {
	d.errors = append(d.errors, fmt.Sprintf("%s: %v", what, err))
}

func writeReport(ctx context.Context, cs *clients, t *target, ro reportOptions, w io.Writer) error {
	d := readReport(ctx, cs, t.obj, ro)
	return writeArchive(w, d, ro.includeSecrets, time.Now())
}

// readReport reads what the report of root holds. What it cannot read it
// lists in the errors, and goes on.
func readReport(ctx context.Context, cs *clients, root client.Object, ro reportOptions) *reportData {
	d := &reportData{root: root}
	ns := root.GetNamespace()

	// Whatever the resource owns, transitively; and the backups, restores
	// and schedules that name it.
	owners := map[types.UID]bool{root.GetUID(): true}
	var pods []*corev1.Pod
	lists := make([]client.ObjectList, 0, len(ownedKinds))
	for _, newList := range ownedKinds {
		list := newList()
		if err := cs.List(ctx, list, client.InNamespace(ns)); err != nil {
			d.failed(fmt.Sprintf("listing %T", list), err)
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
				d.objects = append(d.objects, obj)
				if p, ok := obj.(*corev1.Pod); ok {
					pods = append(pods, p)
				}
				return nil
			})
		}
	}

	var events corev1.EventList
	if err := cs.List(ctx, &events, client.InNamespace(ns)); err != nil {
		d.failed("listing Events", err)
	} else {
		d.events = &corev1.EventList{}
		for _, e := range events.Items {
			if owners[e.InvolvedObject.UID] {
				d.events.Items = append(d.events.Items, e)
			}
		}
	}

	for _, p := range pods {
		for _, c := range p.Spec.InitContainers {
			d.readLogs(ctx, cs, p, c.Name, ro.logLines, restartedIn(p.Status.InitContainerStatuses, c.Name))
		}
		for _, c := range p.Spec.Containers {
			d.readLogs(ctx, cs, p, c.Name, ro.logLines, restartedIn(p.Status.ContainerStatuses, c.Name))
		}
	}
	d.readManagerLogs(ctx, cs, ro)
	return d
}

// bundle is the archive being written.
type bundle struct {
	tw  *tar.Writer
	now time.Time
}

func (b *bundle) add(name string, data []byte) error {
	hdr := &tar.Header{Name: "report/" + name, Mode: 0o600, Size: int64(len(data)), ModTime: b.now}
	if err := b.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if _, err := b.tw.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// addObject writes obj as YAML, without managedFields and, unless
// includeSecrets, redacted (see reported).
func (b *bundle) addObject(obj, root client.Object, includeSecrets bool) error {
	obj = obj.DeepCopyObject().(client.Object)
	gvk, err := apiutil.GVKForObject(obj, scheme.Scheme)
	if err != nil {
		return fmt.Errorf("writing %s: %w", obj.GetName(), err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	obj.SetManagedFields(nil)
	u, err := reported(obj, root, includeSecrets)
	if err != nil {
		return fmt.Errorf("writing %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	data, err := yaml.Marshal(u)
	if err != nil {
		return fmt.Errorf("writing %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	return b.add(fmt.Sprintf("objects/%s-%s.yaml", gvk.Kind, obj.GetName()), data)
}

// reported is obj, a copy that it may change, as the report of root holds
// it. Unless includeSecrets, it is redacted: Secrets' values, ConfigMaps'
// (but the few readableKeys allows), environment variables' values and
// kubectl's last-applied-configuration become <redacted...>.
func reported(obj, root client.Object, includeSecrets bool) (map[string]any, error) {
	if !includeSecrets {
		redactTyped(obj, root)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	if !includeSecrets {
		redactEnv(u)
	}
	return u, nil
}

// redactTyped replaces, in obj, a Secret's values and a ConfigMap's (but
// those of readableKeys) by their length, and the annotation in which
// kubectl apply copies a whole object, Secrets' included, by <redacted>.
// redactEnv does the rest of the redaction.
func redactTyped(obj, root client.Object) {
	switch o := obj.(type) {
	case *corev1.Secret:
		RedactSecret(o)
	case *corev1.ConfigMap:
		redactConfigMap(o, readableKeys(o, root))
	}
	if a := obj.GetAnnotations(); a != nil {
		if _, ok := a[corev1.LastAppliedConfigAnnotation]; ok {
			a[corev1.LastAppliedConfigAnnotation] = "<redacted>"
		}
	}
}

func redactedLength(n int) string { return fmt.Sprintf("<redacted: %d bytes>", n) }

// RedactSecret replaces every value of s by its length, readable in
// stringData, and redacts the annotation that copies them (kubectl apply's
// last-applied-configuration).
func RedactSecret(s *corev1.Secret) {
	redacted := map[string]string{}
	for k, v := range s.Data {
		redacted[k] = redactedLength(len(v))
	}
	for k, v := range s.StringData {
		redacted[k] = redactedLength(len(v))
	}
	s.Data, s.StringData = nil, nil
	if len(redacted) > 0 {
		s.StringData = redacted
	}
	if _, ok := s.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		s.Annotations[corev1.LastAppliedConfigAnnotation] = "<redacted>"
	}
}

// redactConfigMap replaces by its length every value of cm but those of
// the keys in readable; binaryData's keys move to data, where a string can
// say so.
func redactConfigMap(cm *corev1.ConfigMap, readable []string) {
	for k, v := range cm.Data {
		if !slices.Contains(readable, k) {
			cm.Data[k] = redactedLength(len(v))
		}
	}
	for k, v := range cm.BinaryData {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[k] = redactedLength(len(v))
	}
	cm.BinaryData = nil
}

// readableKeys are the keys of cm that a report keeps, when cm is one of
// the ConfigMaps that Tend makes for root to publish how to reach it: an
// EtcdCluster's <name>-connection (its endpoints, its members' URLs, the
// CA that signed their certificates, the name of the client certificate's
// Secret, the version) and a Queue's <name>-queue (its name, URL and ARN).
// They hold no secret, by design, since any pod may mount them, and they
// are what a person needs to see why a client or a backup pod cannot
// reach the cluster. A ConfigMap is one of them only when root is its
// controller and it has the name Tend gives it; and only the keys Tend
// writes are kept, not the others or binaryData, which a ConfigMap Tend
// adopted may still hold. Every other ConfigMap, the user's in particular,
// is redacted.
func readableKeys(cm *corev1.ConfigMap, root client.Object) []string {
	ref := metav1.GetControllerOf(cm)
	if ref == nil || ref.UID != root.GetUID() {
		return nil
	}
	switch root.(type) {
	case *etcdv1alpha1.EtcdCluster:
		if cm.Name == root.GetName()+"-connection" {
			return []string{podspec.ConnectionEndpoint, podspec.ConnectionEndpoints, podspec.ConnectionCA,
				podspec.ConnectionClientSecret, podspec.ConnectionVersion}
		}
	case *sqsv1alpha1.Queue:
		// The keys internal/controller/queue's publish writes.
		if cm.Name == root.GetName()+"-queue" {
			return []string{"queueName", "queueURL", "queueARN"}
		}
	}
	return nil
}

// redactEnv replaces the value of every environment variable in obj, an
// object as unstructured holds it, by its length, and keeps its name and
// any valueFrom, which is a reference. It finds them by their shape, an
// env list of {name, value}, so that every container of every kind of
// object is covered: Pods, the templates of StatefulSets, Jobs and PodSets,
// and whatever a kind embeds a pod template in.
func redactEnv(obj any) {
	switch v := obj.(type) {
	case map[string]any:
		for k, field := range v {
			if vars, ok := field.([]any); ok && k == "env" {
				for _, ev := range vars {
					if ev, ok := ev.(map[string]any); ok {
						if value, ok := ev["value"].(string); ok {
							ev["value"] = redactedLength(len(value))
						}
					}
				}
				continue
			}
			redactEnv(field)
		}
	case []any:
		for _, item := range v {
			redactEnv(item)
		}
	}
}

// writeArchive writes d as a .tar.gz to w: the objects and Events,
// redacted unless includeSecrets, the pods' logs, the lines of the
// manager's logs about root's namespace, and errors.txt.
func writeArchive(w io.Writer, d *reportData, includeSecrets bool, now time.Time) error {
	gz := gzip.NewWriter(w)
	b := &bundle{tw: tar.NewWriter(gz), now: now}
	for _, obj := range append([]client.Object{d.root}, d.objects...) {
		if err := b.addObject(obj, d.root, includeSecrets); err != nil {
			return err
		}
	}
	if d.events != nil {
		items := make([]map[string]any, 0, len(d.events.Items))
		for i := range d.events.Items {
			e := d.events.Items[i].DeepCopy()
			e.ManagedFields = nil
			u, err := reported(e, d.root, includeSecrets)
			if err != nil {
				return fmt.Errorf("writing Event %s: %w", e.Name, err)
			}
			items = append(items, u)
		}
		data, err := yaml.Marshal(items)
		if err != nil {
			return fmt.Errorf("writing the Events: %w", err)
		}
		if err := b.add("events.yaml", data); err != nil {
			return err
		}
	}
	for _, l := range d.logs {
		if err := b.add(l.name, l.data); err != nil {
			return err
		}
	}
	for _, l := range d.managerLogs {
		if err := b.add(l.name, linesInNamespace(l.data, d.root.GetNamespace())); err != nil {
			return err
		}
	}
	if len(d.errors) > 0 {
		if err := b.add("errors.txt", []byte(strings.Join(d.errors, "\n")+"\n")); err != nil {
			return err
		}
	}
	if err := b.tw.Close(); err != nil {
		return fmt.Errorf("writing the archive: %w", err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("writing the archive: %w", err)
	}
	return nil
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

// readLogs reads a container's log, and its previous instance's when it
// restarted.
func (d *reportData) readLogs(ctx context.Context, cs *clients, p *corev1.Pod, container string, lines int64, previous bool) {
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
			d.failed("reading "+name, err)
			continue
		}
		d.logs = append(d.logs, logFile{name: name, data: data})
	}
}

// readManagerLogs reads each manager pod's log, whole.
func (d *reportData) readManagerLogs(ctx context.Context, cs *clients, ro reportOptions) {
	var pods corev1.PodList
	if err := cs.List(ctx, &pods, client.InNamespace(ro.operatorNS), managerLabels); err != nil {
		d.failed("listing the manager's pods in "+ro.operatorNS, err)
		return
	}
	if len(pods.Items) == 0 {
		d.failed("the manager's logs", fmt.Errorf("no manager pod in namespace %s (--operator-namespace)", ro.operatorNS))
	}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			name := fmt.Sprintf("logs/manager/%s/%s.log", p.Name, c.Name)
			data, err := cs.core.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
			if err != nil {
				d.failed("reading "+name, err)
				continue
			}
			d.managerLogs = append(d.managerLogs, logFile{name: name, data: data})
		}
	}
}

// linesInNamespace keeps the lines of the manager's log that are about
// namespace ns. The manager logs with controller-runtime's zap logger: a
// line is a JSON object, or with --zap-devel or --zap-encoder=console
// "TIME<tab>LEVEL<tab>MESSAGE<tab>{fields}". A line is about ns when its
// namespace field is ns, as every line of a reconcile of an object of ns
// has; or, when it has no namespace field, when an object it names is in
// ns (klog.KObj and types.NamespacedName are logged as {"name": ...,
// "namespace": ...}). Other lines, klog's text and stack traces, are left
// out: they may be of any namespace.
func linesInNamespace(log []byte, ns string) []byte {
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		// A line about ns holds it: a namespace needs no escaping in JSON.
		// This only saves decoding the other lines.
		if !bytes.Contains(line, []byte(ns)) || !logAbout(logFields(line), ns) {
			continue
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// logFields are the fields of a line of the manager's log, JSON or
// console, or nil when the line has none.
func logFields(line []byte) map[string]json.RawMessage {
	if !bytes.HasPrefix(line, []byte("{")) {
		// Console: the fields are last, after the last tab, which JSON
		// would have escaped within them.
		i := bytes.LastIndexByte(line, '\t')
		if i < 0 {
			return nil
		}
		line = line[i+1:]
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		return nil
	}
	return fields
}

// logAbout reports whether a log line's fields are about namespace ns: its
// namespace field, or without one, the namespace of an object it names.
func logAbout(fields map[string]json.RawMessage, ns string) bool {
	if raw, ok := fields["namespace"]; ok {
		var namespace string
		return json.Unmarshal(raw, &namespace) == nil && namespace == ns
	}
	for _, raw := range fields {
		var ref struct {
			Namespace string `json:"namespace"`
		}
		if json.Unmarshal(raw, &ref) == nil && ref.Namespace == ns {
			return true
		}
	}
	return false
}
