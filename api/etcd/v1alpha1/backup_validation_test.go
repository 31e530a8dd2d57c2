package v1alpha1_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// These tests send EtcdBackups and EtcdBackupSchedules to a real
// apiserver: what the CRDs' schemas and CEL rules refuse, and the messages
// users read.

func s3Destination() etcdv1alpha1.BackupDestination {
	return etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "backups", Prefix: "etcd/"}}
}

func backup(ns string, mutate func(*etcdv1alpha1.EtcdBackup)) *etcdv1alpha1.EtcdBackup {
	b := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "backup-"},
		Spec: etcdv1alpha1.EtcdBackupSpec{
			ClusterRef:    etcdv1alpha1.ClusterReference{Name: "kv"},
			BackupOptions: etcdv1alpha1.BackupOptions{Destination: s3Destination()},
		},
	}
	if mutate != nil {
		mutate(b)
	}
	return b
}

func schedule(ns string, mutate func(*etcdv1alpha1.EtcdBackupSchedule)) *etcdv1alpha1.EtcdBackupSchedule {
	s := &etcdv1alpha1.EtcdBackupSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "schedule-"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
			ClusterRef:     etcdv1alpha1.ClusterReference{Name: "kv"},
			Schedule:       "0 3 * * *",
			BackupTemplate: etcdv1alpha1.BackupOptions{Destination: s3Destination()},
			Retention:      etcdv1alpha1.Retention{KeepLast: ptr.To[int32](7)},
		},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func TestBackupDefaults(t *testing.T) {
	g := NewWithT(t)
	b := backup(env.Namespace(t), nil)
	g.Expect(env.Client.Create(context.Background(), b)).To(Succeed())
	g.Expect(b.Spec.Compression).To(Equal(etcdv1alpha1.CompressionNone))
	g.Expect(b.Spec.Verify).To(Equal(ptr.To(true)))
	g.Expect(b.Spec.ArtifactPolicy).To(Equal(etcdv1alpha1.ArtifactDelete))
}

func TestBackupValidation(t *testing.T) {
	ns := env.Namespace(t)
	for _, tc := range []struct {
		name    string
		mutate  func(*etcdv1alpha1.EtcdBackup)
		wantErr string
	}{
		{name: "S3"},
		{name: "volume", mutate: func(b *etcdv1alpha1.EtcdBackup) {
			b.Spec.Destination = etcdv1alpha1.BackupDestination{Volume: &etcdv1alpha1.VolumeLocation{ClaimName: "backups", Path: "etcd/kv"}}
		}},
		{name: "both destinations", mutate: func(b *etcdv1alpha1.EtcdBackup) {
			b.Spec.Destination.Volume = &etcdv1alpha1.VolumeLocation{ClaimName: "backups"}
		}, wantErr: "set exactly one of s3 and volume: a backup goes to one place"},
		{name: "no destination", mutate: func(b *etcdv1alpha1.EtcdBackup) { b.Spec.Destination = etcdv1alpha1.BackupDestination{} },
			wantErr: "set exactly one of s3 and volume"},
		{name: "key and prefix", mutate: func(b *etcdv1alpha1.EtcdBackup) { b.Spec.Destination.S3.Key = "kv.db" },
			wantErr: "set key or prefix, not both"},
		{name: "a path out of the volume", mutate: func(b *etcdv1alpha1.EtcdBackup) {
			b.Spec.Destination = etcdv1alpha1.BackupDestination{Volume: &etcdv1alpha1.VolumeLocation{ClaimName: "backups", Path: "a/../../etc"}}
		}, wantErr: "path must stay inside the volume"},
		{name: "unknown compression", mutate: func(b *etcdv1alpha1.EtcdBackup) { b.Spec.Compression = "Brotli" },
			wantErr: `supported values: "None", "Gzip", "Zstd"`},
		{name: "name of 56 characters", mutate: func(b *etcdv1alpha1.EtcdBackup) { b.GenerateName, b.Name = "", strings.Repeat("b", 56) }},
		{name: "name too long for its Jobs", mutate: func(b *etcdv1alpha1.EtcdBackup) { b.GenerateName, b.Name = "", strings.Repeat("b", 57) },
			wantErr: "an EtcdBackup's name is at most 56 characters: its Jobs are named <name>-backup and <name>-delete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(context.Background(), backup(ns, tc.mutate))
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func TestBackupSpecIsImmutable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := backup(env.Namespace(t), nil)
	g.Expect(env.Client.Create(ctx, b)).To(Succeed())

	patch := client.MergeFrom(b.DeepCopy())
	b.Spec.Compression = etcdv1alpha1.CompressionZstd
	g.Expect(env.Client.Patch(ctx, b, patch)).To(MatchError(ContainSubstring(
		"an EtcdBackup's spec cannot change once created: create another EtcdBackup")))

	// Metadata still changes: the way out of a failed file deletion.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
	patch = client.MergeFrom(b.DeepCopy())
	b.Annotations = map[string]string{etcdv1alpha1.AnnotationKeepArtifact: "true"}
	g.Expect(env.Client.Patch(ctx, b, patch)).To(Succeed())
}

func TestScheduleValidation(t *testing.T) {
	ns := env.Namespace(t)
	line := func(s string) func(*etcdv1alpha1.EtcdBackupSchedule) {
		return func(sc *etcdv1alpha1.EtcdBackupSchedule) { sc.Spec.Schedule = etcdv1alpha1.CronSchedule(s) }
	}
	const (
		shape  = "the schedule must be five fields separated by spaces (minute hour day-of-month month day-of-week)"
		minute = "the minute, the first field of the schedule, takes *, numbers 0-59"
		hour   = "the hour, the second field of the schedule, takes *, numbers 0-23"
		dom    = "the day of the month, the third field of the schedule, takes * or ?, numbers 1-31"
		month  = "the month, the fourth field of the schedule, takes *, numbers 1-12 or JAN-DEC"
		dow    = "the day of the week, the fifth field of the schedule, takes * or ?, numbers 0-6 (0 is Sunday) or SUN-SAT"
		order  = "a range in the schedule goes from low to high, with numbers or names at both ends, such as 1-5 or MON-FRI"
	)
	for _, tc := range []struct {
		name    string
		mutate  func(*etcdv1alpha1.EtcdBackupSchedule)
		wantErr string
	}{
		{name: "daily at three", mutate: line("0 3 * * *")},
		{name: "lists, ranges, steps and names", mutate: line("*/15 0-6,12 1,15 jan-JUN/2 MON-fri")},
		{name: "single value with a step", mutate: line("5/20 * ? * ?")},
		{name: "leading zeros", mutate: line("05 07 01 01 00")},
		{name: "spaces between fields", mutate: line("0  3 * *  *")},
		{name: "a macro", mutate: line("@daily")},
		{name: "another macro", mutate: line("@annually")},
		{name: "four fields", mutate: line("0 3 * *"), wantErr: shape},
		{name: "six fields", mutate: line("0 0 3 * * *"), wantErr: shape},
		{name: "an unknown macro", mutate: line("@fortnightly"), wantErr: shape},
		{name: "@every is not cron", mutate: line("@every 1h"), wantErr: shape},
		{name: "a time zone in the line", mutate: line("CRON_TZ=UTC 0 3 * * *"), wantErr: shape},
		{name: "minute 60", mutate: line("60 3 * * *"), wantErr: minute},
		{name: "a word", mutate: line("daily 3 * * *"), wantErr: minute},
		{name: "hour 24", mutate: line("0 24 * * *"), wantErr: hour},
		{name: "step of zero", mutate: line("0 */0 * * *"), wantErr: hour},
		{name: "day 0", mutate: line("0 3 0 * *"), wantErr: dom},
		{name: "day 32", mutate: line("0 3 32 * *"), wantErr: dom},
		{name: "last day", mutate: line("0 3 L * *"), wantErr: dom},
		{name: "month 13", mutate: line("0 3 * 13 *"), wantErr: month},
		{name: "a month's full name", mutate: line("0 3 * january *"), wantErr: month},
		{name: "day of week 7", mutate: line("0 3 * * 7"), wantErr: dow},
		{name: "an empty list item", mutate: line("0 3 * * 1,,2"), wantErr: dow},
		{name: "a backward range", mutate: line("0 5-1 * * *"), wantErr: order},
		{name: "a backward range of names", mutate: line("0 3 * * FRI-MON"), wantErr: order},
		{name: "a backward range of months", mutate: line("0 3 * DEC-JAN *"), wantErr: order},
		{name: "a range from a number to a name", mutate: line("0 3 * * 1-FRI"), wantErr: order},
		{name: "the longest IANA time zone", mutate: func(sc *etcdv1alpha1.EtcdBackupSchedule) {
			sc.Spec.TimeZone = ptr.To("America/Argentina/ComodRivadavia")
		}},
		{name: "a time zone no IANA name is as long as", mutate: func(sc *etcdv1alpha1.EtcdBackupSchedule) { sc.Spec.TimeZone = ptr.To(strings.Repeat("b", 65)) },
			wantErr: "spec.timeZone: Too long"},
		{name: "a schedule's name of 45 characters", mutate: func(sc *etcdv1alpha1.EtcdBackupSchedule) { sc.GenerateName, sc.Name = "", strings.Repeat("s", 45) }},
		{name: "a schedule's name too long for its backups", mutate: func(sc *etcdv1alpha1.EtcdBackupSchedule) { sc.GenerateName, sc.Name = "", strings.Repeat("s", 46) },
			wantErr: "an EtcdBackupSchedule's name is at most 45 characters"},
		{name: "no retention rule", mutate: func(sc *etcdv1alpha1.EtcdBackupSchedule) { sc.Spec.Retention = etcdv1alpha1.Retention{} },
			wantErr: "spec.retention needs at least one rule (keepLast, keepHourly, keepDaily, keepWeekly or maxAge): without one, backups pile up for ever"},
		{name: "keep none", mutate: func(sc *etcdv1alpha1.EtcdBackupSchedule) { sc.Spec.Retention.KeepLast = ptr.To[int32](0) },
			wantErr: "spec.retention.keepLast in body should be greater than or equal to 1"},
		{name: "no days", mutate: func(sc *etcdv1alpha1.EtcdBackupSchedule) { sc.Spec.Retention.KeepDaily = ptr.To[int32](0) },
			wantErr: "spec.retention.keepDaily in body should be greater than or equal to 1"},
		{name: "maxAge alone", mutate: func(sc *etcdv1alpha1.EtcdBackupSchedule) {
			sc.Spec.Retention = etcdv1alpha1.Retention{MaxAge: &metav1.Duration{Duration: 720 * time.Hour}}
		}},
		{name: "maxAge too short", mutate: func(sc *etcdv1alpha1.EtcdBackupSchedule) {
			sc.Spec.Retention.MaxAge = &metav1.Duration{Duration: time.Second}
		}, wantErr: "spec.retention.maxAge must be at least 1m"},
		{name: "one key for every backup", mutate: func(sc *etcdv1alpha1.EtcdBackupSchedule) {
			sc.Spec.BackupTemplate.Destination.S3 = &etcdv1alpha1.S3Location{Bucket: "backups", Key: "kv.db"}
		}, wantErr: "spec.backupTemplate.destination.s3.key would name every backup's object alike: use prefix"},
		{name: "both destinations in the template", mutate: func(sc *etcdv1alpha1.EtcdBackupSchedule) {
			sc.Spec.BackupTemplate.Destination.Volume = &etcdv1alpha1.VolumeLocation{ClaimName: "backups"}
		}, wantErr: "set exactly one of s3 and volume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(context.Background(), schedule(ns, tc.mutate))
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

// The CEL rules must never let through a line that the controller's
// parser refuses: the apiserver's message is the one users read. Random
// lines built from cron's pieces, and some that are not, go to the
// apiserver (dry run); every line it accepts must parse.
func TestScheduleRulesAreNoLooserThanTheParser(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	rnd := rand.New(rand.NewPCG(1, 2))
	// Each field's own values, and values that fit no field or another.
	valid := [][]string{
		{"0", "5", "30", "59", "00"},
		{"0", "3", "12", "23", "07"},
		{"1", "15", "28", "31", "01"},
		{"1", "6", "12", "jan", "DEC", "Jun"},
		{"0", "3", "6", "MON", "fri", "Sun"},
	}
	wrong := []string{"60", "24", "32", "13", "7", "0", "007", "L", "W", "x", "", "january", "SAT", "JAN", "-1"}
	value := func(f int) string {
		switch rnd.IntN(24) {
		case 0:
			return wrong[rnd.IntN(len(wrong))]
		case 1, 2:
			return []string{"*", "?"}[rnd.IntN(2)]
		}
		return valid[f][rnd.IntN(len(valid[f]))]
	}
	item := func(f int) string {
		s := value(f)
		if rnd.IntN(3) == 0 {
			s += "-" + value(f)
		}
		if rnd.IntN(4) == 0 {
			s += "/" + []string{"0", "1", "2", "15", "100", "x"}[rnd.IntN(6)]
		}
		return s
	}
	field := func(f int) string {
		s := item(f)
		for rnd.IntN(4) == 0 {
			s += "," + item(f)
		}
		return s
	}
	accepted, refused := 0, 0
	for range 600 {
		n := 5
		if rnd.IntN(10) == 0 {
			n = 4 + rnd.IntN(3)
		}
		fields := make([]string, n)
		for i := range fields {
			fields[i] = field(i % 5)
		}
		line := strings.Join(fields, " ")
		err := env.Client.Create(context.Background(), schedule(ns, func(sc *etcdv1alpha1.EtcdBackupSchedule) { sc.Spec.Schedule = etcdv1alpha1.CronSchedule(line) }), client.DryRunAll)
		if err != nil {
			g.Expect(err).To(MatchError(ContainSubstring("spec.schedule")), line)
			refused++
			continue
		}
		accepted++
		_, perr := cron.ParseStandard(line)
		g.Expect(perr).NotTo(HaveOccurred(), "the apiserver accepted %q", line)
	}
	t.Logf("%d lines accepted, %d refused", accepted, refused)
	g.Expect(accepted).To(BeNumerically(">", 40), "the test must try lines that pass")
}
