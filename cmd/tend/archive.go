package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/tend-dev/tend/internal/agent"
	"github.com/tend-dev/tend/internal/agentapi"
)

// tend archive is not a Job's step but a long-running agent, one pod per
// archived cluster:
//
//	tend archive --connection-dir --client-tls-dir --to=URI [--s3-*] --owner=UID --base-revision=N
//	             [--prune-before=N] [--compression] [--segment-max-age] [--segment-max-bytes] [--status-address]
//
// It serves its agentapi.ArchiveState as JSON at /status, its figures at
// /metrics and its health at /healthz (ready at /readyz once archiving). On
// SIGTERM it stores what it received and exits 0. When the archive cannot
// go on (another owner's, another writer, etcd compacted past it) it keeps
// serving its state, Broken with the reason, until it is stopped, and then
// exits with the code of its error: a restart would not help, a newer base
// backup (new flags) does.
func runArchive(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("tend archive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	connectionDir, clientTLSDir := bindCluster(fs)
	s3 := bindS3(fs)
	o := agent.ArchiveOptions{}
	fs.StringVar(&o.To, "to", "", "the archive's location: s3://bucket/prefix or file:///dir")
	fs.StringVar(&o.Owner, "owner", "", "the EtcdCluster's UID; an archive that another owner's manifest claims is refused")
	fs.Int64Var(&o.BaseRevision, "base-revision", 0, "the base backup's revision: the archive holds every revision after it")
	fs.Int64Var(&o.PruneBefore, "prune-before", 0, "the oldest kept base backup's revision: once archiving, delete the segments that hold no revision after it (0: keep every segment)")
	compression := fs.String("compression", string(agent.Zstd), "None, Gzip or Zstd")
	fs.DurationVar(&o.MaxAge, "segment-max-age", 10*time.Second, "store a segment once its oldest revision is this old")
	fs.IntVar(&o.MaxBytes, "segment-max-bytes", 8<<20, "store a segment once it holds this many bytes of changes")
	addr := fs.String("status-address", ":8080", "where to serve /status, /metrics, /healthz and /readyz")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return agentapi.ExitOK
		}
		return agentapi.ExitTerminal
	}
	log := zap.New(zap.WriteTo(stderr)).WithName("archive")
	fail := func(err error) int {
		log.Error(err, "Cannot archive")
		return agent.ExitCode(err)
	}
	if fs.NArg() > 0 {
		return fail(fmt.Errorf("%w: unexpected arguments %q", agent.ErrInvalid, fs.Args()))
	}
	var err error
	if o.Compression, err = agent.ParseCompression(*compression); err != nil {
		return fail(err)
	}
	if o.Etcd, err = agent.LoadConnection(*connectionDir, *clientTLSDir); err != nil {
		return fail(err)
	}
	o.S3, o.Log = *s3, log
	a, err := agent.NewArchiver(o)
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fail(fmt.Errorf("%w: serving the status on %s: %w", agent.ErrInvalid, *addr, err))
	}
	srv := &http.Server{Handler: archiveHandler(a), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err = a.Run(ctx)
	if err != nil && ctx.Err() == nil {
		log.Error(err, "The archive cannot go on; serving its state until stopped")
		<-ctx.Done()
	}
	if err != nil {
		return agent.ExitCode(err)
	}
	log.Info("Stopped", "lastRevision", a.State().LastRevision)
	return agentapi.ExitOK
}

// archiveHandler serves the archiver's state, figures and health.
func archiveHandler(a *agent.Archiver) http.Handler {
	reg := prometheus.NewRegistry()
	gauge := func(name, help string, value func(agentapi.ArchiveState) float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return value(a.State()) }))
	}
	gauge("tend_archive_lag_seconds", "How old the oldest received revision that is not yet stored is; 0 when all are stored.",
		func(s agentapi.ArchiveState) float64 { return s.LagSeconds })
	gauge("tend_archive_last_revision", "The newest revision in a stored segment.",
		func(s agentapi.ArchiveState) float64 { return float64(s.LastRevision) })
	gauge("tend_archive_first_revision", "The oldest revision in the archive.",
		func(s agentapi.ArchiveState) float64 { return float64(s.FirstRevision) })
	gauge("tend_archive_segments", "The archive's segments.",
		func(s agentapi.ArchiveState) float64 { return float64(s.Segments) })
	gauge("tend_archive_complete_timestamp_seconds", "The last time at which every revision was stored (Unix seconds); 0 while revisions wait.",
		func(s agentapi.ArchiveState) float64 {
			if s.CompleteAt.IsZero() {
				return 0
			}
			return float64(s.CompleteAt.UnixNano()) / 1e9
		})
	gauge("tend_archive_broken", "1 when the archive cannot go on from its last segment.",
		func(s agentapi.ArchiveState) float64 {
			if s.Phase == agentapi.ArchiveBroken {
				return 1
			}
			return 0
		})
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tend_archive_written_bytes_total", Help: "The bytes of segments this agent stored."},
		func() float64 { return float64(a.State().Bytes) }))

	mux := http.NewServeMux()
	mux.HandleFunc(agentapi.ArchiveStatusPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a.State())
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if s := a.State(); s.Phase != agentapi.ArchiveArchiving {
			http.Error(w, s.Phase+": "+s.Message, http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	return mux
}

func bindReplay(fs *flag.FlagSet) func(context.Context, logr.Logger) (agentapi.Result, error) {
	connectionDir, clientTLSDir := bindCluster(fs)
	s3 := bindS3(fs)
	from := fs.String("from", "", "the archive's location: s3://bucket/prefix or file:///dir")
	owner := fs.String("owner", "", "the UID the archive must belong to")
	local := fs.String("local-endpoint", "http://127.0.0.1:2379", "the client URL of the etcd on the restored base backup")
	toRevision := fs.Int64("to-revision", 0, "stop after this revision")
	toTime := fs.String("to-time", "", "stop after the last revision received at or before this time (RFC 3339)")
	verify := fs.Bool("verify", false, "compare the replayed store with the live cluster's at the revision reached")
	out := fs.String("out", "", "save the replayed store to this file as a snapshot, for etcdutl snapshot restore")
	return func(ctx context.Context, log logr.Logger) (agentapi.Result, error) {
		o := agent.ReplayOptions{From: *from, S3: *s3, Owner: *owner, Local: *local, RootPassword: os.Getenv(rootPasswordEnv), Out: *out, Log: log}
		if *toRevision != 0 && *toTime != "" {
			return agentapi.Result{}, fmt.Errorf("%w: give --to-revision or --to-time, not both", agent.ErrInvalid)
		}
		o.Target.Revision = *toRevision
		if *toTime != "" {
			t, err := time.Parse(time.RFC3339, *toTime)
			if err != nil {
				return agentapi.Result{}, fmt.Errorf("%w: --to-time: %w", agent.ErrInvalid, err)
			}
			o.Target.Time = t
		}
		if *verify {
			cfg, err := agent.LoadConnection(*connectionDir, *clientTLSDir)
			if err != nil {
				return agentapi.Result{}, err
			}
			o.Live = cfg
		}
		return agent.Replay(ctx, o)
	}
}

func bindPrune(fs *flag.FlagSet) func(context.Context, logr.Logger) (agentapi.Result, error) {
	s3 := bindS3(fs)
	archive := fs.String("archive", "", "the archive's location: s3://bucket/prefix or file:///dir")
	owner := fs.String("owner", "", "the UID the archive must belong to")
	before := fs.Int64("before-revision", 0, "the revision of the oldest base backup kept: segments whose every revision is at or below it go")
	return func(ctx context.Context, log logr.Logger) (agentapi.Result, error) {
		return agent.Prune(ctx, agent.PruneOptions{Archive: *archive, S3: *s3, Owner: *owner, Before: *before, Log: log})
	}
}
