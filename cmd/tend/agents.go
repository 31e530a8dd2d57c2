package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/tend-dev/tend/internal/agent"
	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/podspec"
)

// The agents are the steps of Tend's backup, restore, roll and recovery Jobs,
// and the check before a member's etcd starts:
//
//	tend backup          --connection-dir --client-tls-dir --to=URI [--s3-*] --compression --owner [--result-file] [--timeout]
//	tend fetch           (--from=URI --compression [--sha256] | --from-result=FILE) [--s3-*] --out [--timeout]
//	tend verify          --local-endpoint --connection-dir --client-tls-dir --backup-result=FILE [--timeout]  (env ETCD_ROOT_PASSWORD)
//	tend restore prepare --data-dir --id [--replace]
//	tend restore install --data-dir --id
//	tend artifact delete --uri=URI [--s3-*] --owner [--timeout]
//	tend check           --connection-dir --client-tls-dir --version=vX.Y.Z [--timeout]  (env ETCD_ROOT_PASSWORD)
//	tend recover         --endpoint=http://127.0.0.1:2379 --member=NAME [--timeout]  (env ETCD_ROOT_PASSWORD)
//	tend join-check      --data-dir --name --peer-url --initial-cluster --state=new|existing [--peer-tls-dir] [--timeout]
//	tend replay          --from=URI [--s3-*] --owner --local-endpoint [--to-revision=N|--to-time=T] [--verify --connection-dir --client-tls-dir] [--out=FILE] [--timeout]
//	tend prune           --archive=URI [--s3-*] --owner --before-revision=N [--timeout]
//
// tend join-check is not a Job's step but the init container of every
// etcd member pod, given the member's own etcd flags: it exits 0 when the
// data directory holds etcd data, when the state is new, or when a peer's
// member list shows that the member with --peer-url has never started (a
// learner just added) or does not exist; and 1 when that member has run
// before and so lost its data, which must not rejoin under its old ID, or
// when no peer answered.
//
// Each writes its agentapi.Result to --termination-message-path, also when it
// fails, and exits with agentapi.ExitOK, ExitFailed (a retry may help) or
// ExitTerminal. The logic is internal/agent's; this file only reads flags.

// rootPasswordEnv holds the root password of a cluster with auth on, for
// tend verify, tend check and tend recover.
const rootPasswordEnv = "ETCD_ROOT_PASSWORD"

// agentStep is one agent command: its flags, bound to a FlagSet, and what
// it runs once they are parsed.
type agentStep struct {
	op      string
	timeout time.Duration // the default of --timeout; 0: the step has none
	bind    func(fs *flag.FlagSet) func(ctx context.Context, log logr.Logger) (agentapi.Result, error)
}

// agentSteps maps "backup", "restore prepare" and so on to their steps.
var agentSteps = map[string]agentStep{
	"backup":          {op: agentapi.OpBackup, timeout: time.Hour, bind: bindBackup},
	"fetch":           {op: agentapi.OpFetch, timeout: time.Hour, bind: bindFetch},
	"verify":          {op: agentapi.OpVerify, timeout: 30 * time.Minute, bind: bindVerify},
	"restore prepare": {op: agentapi.OpPrepare, bind: bindRestore(agent.Prepare)},
	"restore install": {op: agentapi.OpInstall, bind: bindRestore(agent.Install)},
	"artifact delete": {op: agentapi.OpDelete, timeout: 10 * time.Minute, bind: bindDelete},
	"check":           {op: agentapi.OpCheck, timeout: 5 * time.Minute, bind: bindCheck},
	"recover":         {op: agentapi.OpRecover, timeout: 3 * time.Minute, bind: bindRecover},
	"join-check":      {op: agentapi.OpJoinCheck, timeout: 20 * time.Second, bind: bindJoinCheck},
	"replay":          {op: agentapi.OpReplay, timeout: 2 * time.Hour, bind: bindReplay},
	"prune":           {op: agentapi.OpPrune, timeout: 10 * time.Minute, bind: bindPrune},
}

// runAgent runs the agent command name (backup, fetch, verify, restore,
// artifact, check, recover, join-check, replay, prune) with args, and returns its exit code.
func runAgent(name string, args []string, stderr io.Writer) int {
	command := name
	if name == "restore" || name == "artifact" {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			fmt.Fprintf(stderr, "tend %s: a subcommand is required: %s\n", name, subcommands(name))
			return agentapi.ExitTerminal
		}
		command, args = name+" "+args[0], args[1:]
	}
	step, ok := agentSteps[command]
	if !ok {
		fmt.Fprintf(stderr, "tend %s: unknown subcommand; want %s\n", command, subcommands(name))
		return agentapi.ExitTerminal
	}

	fs := flag.NewFlagSet("tend "+command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	terminationPath := fs.String("termination-message-path", agentapi.TerminationMessagePath,
		"where to write the step's result, as the container's terminationMessagePath")
	timeout := step.timeout
	if timeout > 0 {
		fs.DurationVar(&timeout, "timeout", step.timeout, "how long the whole step may take; every call to etcd and S3 ends by then")
	}
	run := step.bind(fs)

	log := zap.New(zap.WriteTo(stderr)).WithName(step.op)
	var started time.Time // when the step's work began, once the flags are read
	finish := func(r agentapi.Result, err error) int {
		r.Op = step.op
		r = agent.Failed(r, err)
		if !started.IsZero() {
			r.DurationSeconds = time.Since(started).Seconds()
		}
		code := agent.ExitCode(err)
		if err != nil {
			log.Error(err, "The step failed", "terminal", r.Terminal)
		}
		msg, encErr := r.Encode()
		if encErr == nil {
			encErr = os.WriteFile(*terminationPath, msg, 0o600)
		}
		if encErr != nil {
			log.Error(encErr, "Cannot write the result", "path", *terminationPath)
			if code == agentapi.ExitOK {
				// The controller would see a step that said nothing.
				code = agentapi.ExitFailed
			}
		}
		fmt.Fprintf(stderr, "%s\n", msg)
		return code
	}

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return agentapi.ExitOK
		}
		return finish(agentapi.Result{}, fmt.Errorf("%w: %w", agent.ErrInvalid, err))
	}
	if fs.NArg() > 0 {
		return finish(agentapi.Result{}, fmt.Errorf("%w: unexpected arguments %q", agent.ErrInvalid, fs.Args()))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	} else if step.timeout > 0 {
		return finish(agentapi.Result{}, fmt.Errorf("%w: --timeout must be positive", agent.ErrInvalid))
	}
	started = time.Now()
	return finish(run(ctx, log))
}

func subcommands(name string) string {
	var subs []string
	for command := range agentSteps {
		if sub, ok := strings.CutPrefix(command, name+" "); ok {
			subs = append(subs, sub)
		}
	}
	slices.Sort(subs)
	return strings.Join(subs, " or ")
}

// bindS3 binds the flags of an S3 store, as podspec's Location.Args gives
// them.
func bindS3(fs *flag.FlagSet) *agent.S3Options {
	o := &agent.S3Options{}
	fs.StringVar(&o.Endpoint, "s3-endpoint", "", "the S3 endpoint, for S3-compatible stores (default: AWS, or AWS_ENDPOINT_URL)")
	fs.StringVar(&o.Region, "s3-region", "", "the bucket's region (default: AWS_REGION)")
	fs.BoolVar(&o.ForcePathStyle, "s3-force-path-style", false, "address the bucket in the path, as most S3-compatible stores want")
	return o
}

// bindCluster binds the flags of the live cluster's connection files.
func bindCluster(fs *flag.FlagSet) (connectionDir, clientTLSDir *string) {
	connectionDir = fs.String("connection-dir", podspec.ConnectionDir, "the cluster's connection ConfigMap, mounted (endpoints, ca.crt)")
	clientTLSDir = fs.String("client-tls-dir", podspec.ClientTLSDir, "the cluster's client certificate Secret, mounted (tls.crt, tls.key, ca.crt)")
	return connectionDir, clientTLSDir
}

func bindBackup(fs *flag.FlagSet) func(context.Context, logr.Logger) (agentapi.Result, error) {
	connectionDir, clientTLSDir := bindCluster(fs)
	s3 := bindS3(fs)
	to := fs.String("to", "", "where the backup goes: s3://bucket/key or file:///path")
	compression := fs.String("compression", string(agent.None), "None, Gzip or Zstd")
	owner := fs.String("owner", "", "the EtcdBackup's UID, recorded with the artifact; another owner's is never replaced")
	resultFile := fs.String("result-file", "", "also write the result here, for a later step of the pod")
	return func(ctx context.Context, log logr.Logger) (agentapi.Result, error) {
		cfg, err := agent.LoadConnection(*connectionDir, *clientTLSDir)
		if err != nil {
			return agentapi.Result{}, err
		}
		r, err := agent.Backup(ctx, agent.BackupOptions{
			Etcd: cfg, To: *to, S3: *s3, Compression: agent.Compression(*compression), Owner: *owner, Log: log,
		})
		if err == nil && *resultFile != "" {
			err = agent.WriteResultFile(*resultFile, r)
		}
		return r, err
	}
}

func bindFetch(fs *flag.FlagSet) func(context.Context, logr.Logger) (agentapi.Result, error) {
	s3 := bindS3(fs)
	from := fs.String("from", "", "the artifact: s3://bucket/key or file:///path")
	fromResult := fs.String("from-result", "", "a backup's --result-file: its artifact's URI, compression and SHA-256")
	compression := fs.String("compression", "", "None (the default), Gzip or Zstd; with --from only")
	sha := fs.String("sha256", "", "the stored bytes' hex SHA-256, checked when given; with --from only")
	out := fs.String("out", "", "the snapshot file to write")
	return func(ctx context.Context, log logr.Logger) (agentapi.Result, error) {
		o := agent.FetchOptions{From: *from, S3: *s3, Compression: agent.Compression(*compression), SHA256: *sha, Out: *out, Log: log}
		if *fromResult != "" {
			if *from != "" || *compression != "" || *sha != "" {
				return agentapi.Result{}, fmt.Errorf("%w: --from-result gives the artifact: --from, --compression and --sha256 go without it", agent.ErrInvalid)
			}
			b, err := agent.ReadResultFile(*fromResult)
			if err != nil {
				return agentapi.Result{}, err
			}
			if b.Op != agentapi.OpBackup || b.Error != "" || b.Artifact == nil {
				return agentapi.Result{}, fmt.Errorf("%w: %s is not the result of a backup that succeeded", agent.ErrInvalid, *fromResult)
			}
			o.From, o.Compression, o.SHA256 = b.Artifact.URI, agent.Compression(b.Artifact.Compression), b.Artifact.SHA256
		}
		return agent.Fetch(ctx, o)
	}
}

func bindVerify(fs *flag.FlagSet) func(context.Context, logr.Logger) (agentapi.Result, error) {
	connectionDir, clientTLSDir := bindCluster(fs)
	local := fs.String("local-endpoint", "http://127.0.0.1:2379", "the client URL of the etcd on the restored snapshot")
	backupResult := fs.String("backup-result", "", "the backup step's --result-file")
	return func(ctx context.Context, log logr.Logger) (agentapi.Result, error) {
		cfg, err := agent.LoadConnection(*connectionDir, *clientTLSDir)
		if err != nil {
			return agentapi.Result{}, err
		}
		if *backupResult == "" {
			return agentapi.Result{}, fmt.Errorf("%w: --backup-result is required", agent.ErrInvalid)
		}
		b, err := agent.ReadResultFile(*backupResult)
		if err != nil {
			return agentapi.Result{}, err
		}
		// The backup's result was written when its file had been read
		// back: the verification's time runs from there.
		var since time.Time
		if fi, err := os.Stat(*backupResult); err == nil {
			since = fi.ModTime()
		}
		return agent.Verify(ctx, agent.VerifyOptions{
			Local: *local, RootPassword: os.Getenv(rootPasswordEnv), Live: cfg, Backup: b, Since: since, Log: log,
		})
	}
}

func bindCheck(fs *flag.FlagSet) func(context.Context, logr.Logger) (agentapi.Result, error) {
	connectionDir, clientTLSDir := bindCluster(fs)
	version := fs.String("version", "", "the etcd version every member must run, such as v3.6.16; the cluster version must be its minor's, 3.6.0")
	return func(ctx context.Context, log logr.Logger) (agentapi.Result, error) {
		cfg, err := agent.LoadConnection(*connectionDir, *clientTLSDir)
		if err != nil {
			return agentapi.Result{}, err
		}
		return agent.Check(ctx, agent.CheckOptions{
			Etcd: cfg, RootPassword: os.Getenv(rootPasswordEnv), Version: *version, Log: log,
		})
	}
}

func bindRecover(fs *flag.FlagSet) func(context.Context, logr.Logger) (agentapi.Result, error) {
	endpoint := fs.String("endpoint", "http://127.0.0.1:2379", "the plain-HTTP client URL of the etcd that runs with --force-new-cluster beside the step")
	member := fs.String("member", "", "the surviving member's name, its etcd's --name")
	return func(ctx context.Context, log logr.Logger) (agentapi.Result, error) {
		return agent.Recover(ctx, agent.RecoverOptions{
			Endpoint: *endpoint, Member: *member, RootPassword: os.Getenv(rootPasswordEnv), Log: log,
		})
	}
}

func bindJoinCheck(fs *flag.FlagSet) func(context.Context, logr.Logger) (agentapi.Result, error) {
	dataDir := fs.String("data-dir", "/var/lib/etcd", "the member's data directory, etcd's --data-dir")
	name := fs.String("name", "", "the member's name, etcd's --name")
	peerURL := fs.String("peer-url", "", "the member's peer URL, etcd's --initial-advertise-peer-urls: the member list knows it by this")
	initialCluster := fs.String("initial-cluster", "", "etcd's --initial-cluster, name=peerURL,...: the peers asked for the member list")
	state := fs.String("state", "", "etcd's --initial-cluster-state: new or existing")
	peerTLSDir := fs.String("peer-tls-dir", "", "the peer certificate Secret, mounted (tls.crt, tls.key, ca.crt); empty: the peers speak plain HTTP")
	return func(ctx context.Context, log logr.Logger) (agentapi.Result, error) {
		return agent.JoinCheck(ctx, agent.JoinCheckOptions{
			DataDir: *dataDir, Name: *name, PeerURL: *peerURL, InitialCluster: *initialCluster,
			State: *state, PeerTLSDir: *peerTLSDir, Log: log,
		})
	}
}

func bindRestore(step func(dataDir, id string, replace bool) (agentapi.Result, error)) func(*flag.FlagSet) func(context.Context, logr.Logger) (agentapi.Result, error) {
	return func(fs *flag.FlagSet) func(context.Context, logr.Logger) (agentapi.Result, error) {
		dataDir := fs.String("data-dir", "/var/lib/etcd", "the member's data directory, on its volume")
		id := fs.String("id", "", "the restore's id; a retry of the same restore finds its work done")
		replace := fs.Bool("replace", false, "prepare: move member data that another restore (or none) installed aside, for an in-place restore; install removes it")
		return func(context.Context, logr.Logger) (agentapi.Result, error) {
			return step(*dataDir, *id, *replace)
		}
	}
}

func bindDelete(fs *flag.FlagSet) func(context.Context, logr.Logger) (agentapi.Result, error) {
	s3 := bindS3(fs)
	uri := fs.String("uri", "", "the artifact: s3://bucket/key or file:///path")
	owner := fs.String("owner", "", "the EtcdBackup's UID: only what it wrote is deleted")
	return func(ctx context.Context, log logr.Logger) (agentapi.Result, error) {
		return agent.Delete(ctx, agent.DeleteOptions{URI: *uri, S3: *s3, Owner: *owner, Log: log})
	}
}
