package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/etcd"
)

// The archive's layout under its location:
//
//	archive.json                   who owns it: {"owner": UID, "createdAt": time}
//	segments/<first revision>.seg  the segments, named by their first
//	                               revision, 20 digits, so that names sort
//	                               as revisions do
//
// A segment starts where the one before it ended, or right after a base
// backup's revision when the archive starts again from a newer base; its
// name is written once (a conditional create), so two agents can never
// both store a segment that starts at one revision, and the segments never
// overlap.
const (
	archiveManifest = "archive.json"
	segmentsDir     = "segments"
	segmentSuffix   = ".seg"
)

// segmentName is the name of the segment that starts at first.
func segmentName(first int64) string {
	return fmt.Sprintf("%s/%020d%s", segmentsDir, first, segmentSuffix)
}

// segmentFirst reads the first revision from a listed segment's name.
func segmentFirst(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(strings.TrimPrefix(name, segmentsDir+"/"), segmentSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	first, err := strconv.ParseInt(digits, 10, 64)
	return first, err == nil && first > 0
}

// archiveManifestDoc is archive.json.
type archiveManifestDoc struct {
	Owner     string    `json:"owner"`
	CreatedAt time.Time `json:"createdAt"`
}

// ArchiveOptions are what `tend archive` needs.
type ArchiveOptions struct {
	// Etcd reaches the live cluster (LoadConnection).
	Etcd etcd.Config
	// To is the archive's location: s3://bucket/prefix or file:///dir.
	To string
	S3 S3Options
	// Owner is the EtcdCluster's UID: the archive is refused when another
	// owner's is there.
	Owner string
	// BaseRevision is the revision of the base backup: the archive holds
	// every revision after it. An archive whose segments go further on
	// goes on from its last segment.
	BaseRevision int64
	// PruneBefore, when positive, is the revision of the oldest base
	// backup that the archive's retention keeps: once the archive runs,
	// the segments that hold no revision after it are deleted, as
	// Prune does.
	PruneBefore int64
	// Compression of the segments.
	Compression Compression
	// MaxAge and MaxBytes bound a segment: it is written once its oldest
	// revision was received MaxAge ago, or once it holds MaxBytes.
	MaxAge   time.Duration
	MaxBytes int
	// Clock tells the time; nil is the real clock.
	Clock clock.WithTicker
	// Log receives progress; the zero Logger discards it.
	Log logr.Logger
}

// The archive's timings.
const (
	// archiveCallTimeout bounds one call to etcd or the store.
	archiveCallTimeout = 30 * time.Second
	// archiveRetry is the pause before the watch is opened again after it
	// or a write failed.
	archiveRetry = 2 * time.Second
	// archiveStopTimeout bounds the writing of what was received when the
	// agent is stopped: within the 30 s a pod has after SIGTERM.
	archiveStopTimeout = 20 * time.Second
)

// Archiver writes a cluster's changes to its archive. Its State may be read
// while Run runs.
type Archiver struct {
	o      ArchiveOptions
	folder folder

	mu    sync.Mutex
	state agentapi.ArchiveState
	// pending are the revisions received and not yet stored, and
	// pendingBytes their size.
	pending      []ArchivedRevision
	pendingBytes int
	// completeAt is when the watch last said that nothing came after the
	// last received revision.
	completeAt time.Time
	// leaseTTLs are the granted TTLs of the leases seen, so that each
	// lease is looked up once (only follow uses it).
	leaseTTLs map[int64]int64
	// skipThrough is the last revision stored: one up to it that the watch
	// brings (a segment another agent stored reaches past what this one
	// received) is dropped.
	skipThrough int64
}

// maxLeaseTTLs bounds leaseTTLs: past it, the map starts again empty.
const maxLeaseTTLs = 100_000

// NewArchiver checks o and returns its Archiver. Its errors wrap
// ErrInvalid.
func NewArchiver(o ArchiveOptions) (*Archiver, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if err := checkOwnerValue(o.Owner); err != nil {
		return nil, err
	}
	if o.BaseRevision <= 0 {
		return nil, fmt.Errorf("%w: the base backup's revision must be positive", ErrInvalid)
	}
	if o.MaxAge <= 0 || o.MaxBytes <= 0 {
		return nil, fmt.Errorf("%w: a segment's age and size limits must be positive", ErrInvalid)
	}
	if _, err := o.Compression.compressor(nil); err != nil {
		return nil, err
	}
	loc, err := ParseURI(o.To)
	if err != nil {
		return nil, err
	}
	a := &Archiver{o: o}
	a.state = agentapi.ArchiveState{
		Phase: agentapi.ArchiveStarting, Message: "Reading the archive", Location: loc.URI,
		Owner: o.Owner, BaseRevision: o.BaseRevision,
	}
	return a, nil
}

// State returns what the archive holds and how far behind it is, now.
func (a *Archiver) State() agentapi.ArchiveState {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.state
	s.Gaps = append([]agentapi.ArchiveGap(nil), s.Gaps...)
	if len(a.pending) > 0 {
		s.LagSeconds = a.o.Clock.Since(a.pending[0].Time).Seconds()
	} else {
		s.CompleteAt = a.completeAt
	}
	return s
}

func (a *Archiver) setPhase(phase, msg string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.state.Phase, a.state.Message, a.state.Cause = phase, msg, ""
}

// setBroken says that the archive cannot go on, because of err.
func (a *Archiver) setBroken(err error) {
	cause := agentapi.ArchiveCauseRefused
	switch {
	case errors.Is(err, etcd.ErrCompacted):
		cause = agentapi.ArchiveCauseCompacted
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrChecksum):
		cause = agentapi.ArchiveCauseCorrupt
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.state.Phase, a.state.Message, a.state.Cause = agentapi.ArchiveBroken, err.Error(), cause
}

// Run archives until ctx ends, then stores what it received, and returns
// nil. It returns early with an error that no retry of its own can fix:
// the archive is another owner's (ErrRefused), a segment does not read
// (ErrCorrupt), or etcd compacted its history past the archive's last
// revision (etcd.ErrCompacted: the archive is broken until it starts again
// from a newer base backup). Another agent of the same archive beside it
// is no error: each segment's name is claimed once, and each agent goes
// on after the other's segments (flush). Every other failure (a member or
// the store that does not answer) is retried, the revisions received kept.
func (a *Archiver) Run(ctx context.Context) error {
	loc, _ := ParseURI(a.o.To)
	var err error
	if a.folder == nil {
		if a.folder, err = openFolder(ctx, loc, a.o.S3); err != nil {
			return err
		}
	}
	var next int64
	for {
		if next, err = a.open(ctx); err == nil {
			break
		}
		if cannotGoOn(err) {
			a.setBroken(err)
			return err
		}
		a.setPhase(agentapi.ArchiveStarting, fmt.Sprintf("Reading the archive; the last attempt failed: %v", err))
		select {
		case <-ctx.Done():
			return nil
		case <-a.o.Clock.After(archiveRetry):
		}
	}
	if a.o.PruneBefore > 0 {
		pctx, cancel := context.WithCancel(ctx)
		pruned := make(chan struct{})
		defer func() { cancel(); <-pruned }()
		go func() { defer close(pruned); a.prune(pctx) }()
	}
	cli, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	a.setPhase(agentapi.ArchiveArchiving, fmt.Sprintf("Archiving from revision %d", next))
	a.o.Log.Info("Archiving", "location", loc.URI, "from", next)
	for {
		// With a backlog that the store refused, read no more from etcd
		// until it is stored: memory stays bounded, and the lag says it.
		if err = a.storeBacklog(ctx); err == nil {
			next, err = a.follow(ctx, cli, next)
		}
		if ctx.Err() != nil {
			return a.stop(ctx)
		}
		switch {
		case errors.Is(err, etcd.ErrCompacted):
			// What was received is good: store it before saying so.
			_ = a.flush(ctx)
			err = fmt.Errorf("etcd compacted its history past revision %d, the next to archive: the archive cannot go on from its last segment; it needs a newer base backup: %w", next, err)
			a.setBroken(err)
			return err
		case cannotGoOn(err):
			a.setBroken(err)
			return err
		}
		a.o.Log.Info("Archiving stopped; trying again", "next", next, "error", err.Error())
		a.setPhase(agentapi.ArchiveArchiving, fmt.Sprintf("Archiving from revision %d; the last attempt failed: %v", next, err))
		select {
		case <-ctx.Done():
			return a.stop(ctx)
		case <-a.o.Clock.After(archiveRetry):
		}
	}
}

// cannotGoOn tells whether err is one that no retry fixes: another
// owner's archive, a damaged segment, or a bad option.
func cannotGoOn(err error) bool {
	return errors.Is(err, ErrRefused) || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrChecksum) || errors.Is(err, ErrInvalid)
}

// prune deletes the segments that only bases older than PruneBefore
// needed, beside the archiving, and keeps the state's first revision and
// count of segments true. A failure is logged and tried again a minute
// later: the segments stay until a prune gets through.
func (a *Archiver) prune(ctx context.Context) {
	for {
		err := a.pruneOnce(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		a.o.Log.Info("Pruning the archive failed; trying again", "before", a.o.PruneBefore, "error", err.Error())
		select {
		case <-ctx.Done():
			return
		case <-a.o.Clock.After(archivePruneRetry):
		}
	}
}

// archivePruneRetry is the pause after a prune failed.
const archivePruneRetry = time.Minute

func (a *Archiver) pruneOnce(ctx context.Context) error {
	names, err := withTimeout(ctx, func(ctx context.Context) ([]string, error) { return listSegments(ctx, a.folder) })
	if err != nil {
		return err
	}
	p, err := pruneSegments(ctx, a.folder, names, a.o.Owner, a.o.PruneBefore, func() {
		a.mu.Lock()
		a.state.Segments--
		a.mu.Unlock()
	})
	if err != nil {
		return err
	}
	// The oldest segment kept is the archive's first now; its header,
	// read only when the state is behind it, says when it was received.
	a.mu.Lock()
	known := a.state.FirstRevision
	a.mu.Unlock()
	if kept := names[p.Segments:]; len(kept) > 0 {
		if first, _ := segmentFirst(kept[0]); first > known {
			h, err := withTimeout(ctx, func(ctx context.Context) (segmentHeader, error) { return readHeader(ctx, a.folder, kept[0], a.o.Owner) })
			if err != nil {
				return err
			}
			a.mu.Lock()
			a.state.FirstRevision, a.state.FirstTime = h.First, h.FirstTime
			a.mu.Unlock()
		}
	}
	a.o.Log.Info("Pruned the archive", "before", a.o.PruneBefore, "segments", p.Segments, "through", p.Through, "kept", p.Kept)
	return nil
}

// maxBacklog is how many times a segment's size limit the revisions
// waiting for the store may take before the archiver stops reading more.
const maxBacklog = 4

// storeBacklog stores the pending revisions when they fill maxBacklog
// segments.
func (a *Archiver) storeBacklog(ctx context.Context) error {
	a.mu.Lock()
	backlog := a.pendingBytes >= maxBacklog*a.o.MaxBytes
	a.mu.Unlock()
	if !backlog {
		return nil
	}
	return a.flush(ctx)
}

// stop stores what was received, on a context of its own, when Run's
// ended.
func (a *Archiver) stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), archiveStopTimeout)
	defer cancel()
	if err := a.flush(ctx); err != nil {
		return fmt.Errorf("storing the revisions received before the stop: %w", err)
	}
	return nil
}

// connect makes the etcd client.
func (a *Archiver) connect(ctx context.Context) (*etcd.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, archiveCallTimeout)
	defer cancel()
	return etcd.New(ctx, a.o.Etcd)
}

// open claims the archive for the owner, or finds it the owner's, and
// returns the revision to archive next: after the last segment's, or
// after the base backup's when that is newer.
func (a *Archiver) open(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, archiveCallTimeout)
	defer cancel()
	if err := claimArchive(ctx, a.folder, a.o.Owner, a.o.Clock.Now()); err != nil {
		return 0, err
	}
	names, err := listSegments(ctx, a.folder)
	if err != nil {
		return 0, err
	}
	next := a.o.BaseRevision + 1
	a.mu.Lock()
	defer a.mu.Unlock()
	a.state.Segments = len(names)
	if len(names) == 0 {
		return next, nil
	}
	first, err := readHeader(ctx, a.folder, names[0], a.o.Owner)
	if err != nil {
		return 0, err
	}
	last := first
	if len(names) > 1 {
		if last, err = readHeader(ctx, a.folder, names[len(names)-1], a.o.Owner); err != nil {
			return 0, err
		}
	}
	a.state.FirstRevision, a.state.FirstTime = first.First, first.FirstTime
	a.state.LastRevision, a.state.LastTime = last.Last, last.LastTime
	if last.Last >= a.o.BaseRevision {
		return last.Last + 1, nil
	}
	a.state.Gaps = append(a.state.Gaps, agentapi.ArchiveGap{
		From: last.Last + 1, To: a.o.BaseRevision,
		Reason: fmt.Sprintf("the archive started again from the base backup at revision %d", a.o.BaseRevision),
	})
	return next, nil
}

// claimArchive writes the archive's manifest for owner, or checks that the
// one there is owner's.
func claimArchive(ctx context.Context, f folder, owner string, now time.Time) error {
	raw, err := f.get(ctx, archiveManifest)
	if errors.Is(err, ErrNotFound) {
		doc, _ := json.Marshal(archiveManifestDoc{Owner: owner, CreatedAt: now.UTC()})
		err = f.putNew(ctx, archiveManifest, doc, owner)
		if err == nil {
			return nil
		}
		if errors.Is(err, errExists) {
			raw, err = f.get(ctx, archiveManifest)
		}
	}
	if err != nil {
		return err
	}
	_, err = checkManifest(f, raw, owner)
	return err
}

// checkManifest refuses an archive whose manifest is not owner's, and
// tells the owner it names. An empty owner takes any: a reader that was
// given the archive's location alone (a new cluster restored from a
// deleted one's archive) holds every segment to the manifest's owner.
func checkManifest(f folder, raw []byte, owner string) (string, error) {
	var m archiveManifestDoc
	if err := json.Unmarshal(raw, &m); err != nil || m.Owner == "" {
		return "", fmt.Errorf("%w: %s/%s does not name the archive's owner; leaving the archive alone", ErrRefused, f, archiveManifest)
	}
	if owner != "" && m.Owner != owner {
		return "", fmt.Errorf("%w: the archive at %s belongs to %s, not to %s (another cluster's archive, or an older cluster's of the same name); give this cluster a location of its own", ErrRefused, f, m.Owner, owner)
	}
	return m.Owner, nil
}

// openArchive opens the archive at uri for a reader (a replay, a prune):
// it refuses one that is not owner's (any, when owner is empty), and
// lists its segments. It tells the owner the manifest names.
func openArchive(ctx context.Context, uri string, o S3Options, owner string) (folder, string, []string, error) {
	loc, err := ParseURI(uri)
	if err != nil {
		return nil, "", nil, err
	}
	f, err := openFolder(ctx, loc, o)
	if err != nil {
		return nil, "", nil, err
	}
	raw, err := withTimeout(ctx, func(ctx context.Context) ([]byte, error) { return f.get(ctx, archiveManifest) })
	if err != nil {
		return nil, "", nil, fmt.Errorf("reading the archive's owner: %w", err)
	}
	owner, err = checkManifest(f, raw, owner)
	if err != nil {
		return nil, "", nil, err
	}
	names, err := withTimeout(ctx, func(ctx context.Context) ([]string, error) { return listSegments(ctx, f) })
	if err != nil {
		return nil, "", nil, err
	}
	return f, owner, names, nil
}

// listSegments lists the segments' names, in revision order.
func listSegments(ctx context.Context, f folder) ([]string, error) {
	names, err := f.list(ctx, segmentsDir)
	if err != nil {
		return nil, err
	}
	out := names[:0]
	for _, n := range names {
		if _, ok := segmentFirst(segmentsDir + "/" + n); ok {
			out = append(out, segmentsDir+"/"+n)
		}
	}
	return out, nil
}

// readHeader reads the header of the segment name, and refuses one that
// another owner wrote.
func readHeader(ctx context.Context, f folder, name, owner string) (segmentHeader, error) {
	// The header alone: a segment may hold hundreds of MiB.
	raw, err := f.head(ctx, name, segmentHeaderBytes)
	if err != nil {
		return segmentHeader{}, err
	}
	h, err := readSegmentHeader(bytes.NewReader(raw))
	if err != nil {
		return h, fmt.Errorf("%s/%s: %w", f, name, err)
	}
	if h.Owner != owner {
		return h, fmt.Errorf("%w: the segment %s/%s was written for %s, not for %s", ErrRefused, f, name, h.Owner, owner)
	}
	return h, nil
}

// follow watches from next on, keeps what arrives, stores segments as
// they fill or age, and returns the next revision to archive when the
// watch or a write fails, or ctx ends.
func (a *Archiver) follow(ctx context.Context, cli *etcd.Client, next int64) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := cli.Watch(ctx, next)
	if err != nil {
		return next, err
	}
	tick := a.o.Clock.NewTicker(tickOf(a.o.MaxAge))
	defer tick.Stop()
	asked := a.o.Clock.Now()
	for {
		select {
		case b, ok := <-w.C:
			if !ok {
				return next, w.Err()
			}
			now := a.o.Clock.Now()
			for _, r := range b.Revisions {
				if r.Revision < next {
					continue // delivered before the watch was opened again
				}
				if r.Revision != next {
					return next, fmt.Errorf("the watch delivered revision %d where %d was next", r.Revision, next)
				}
				if err := a.leaseTTLsOf(ctx, cli, r); err != nil {
					return next, err
				}
				a.receive(ArchivedRevision{Revision: r, Time: now})
				next++
			}
			if len(b.Revisions) == 0 && b.Through < next {
				a.mu.Lock()
				if len(a.pending) == 0 {
					a.completeAt = now
				}
				a.mu.Unlock()
			}
			if a.full() {
				if err := a.flush(ctx); err != nil {
					return next, err
				}
			}
		case <-tick.C():
			if a.due() {
				if err := a.flush(ctx); err != nil {
					return next, err
				}
			}
			// With nothing to store, ask the watch how far it has come, so
			// that the state can say the archive is complete up to now.
			if now := a.o.Clock.Now(); a.idle() && now.Sub(asked) >= a.o.MaxAge {
				asked = now
				pctx, cancel := context.WithTimeout(ctx, archiveCallTimeout)
				err := cli.Progress(pctx)
				cancel()
				if err != nil {
					return next, err
				}
			}
		case <-ctx.Done():
			return next, ctx.Err()
		}
	}
}

// leaseTTLsOf records in r's leased puts the TTL their lease was granted
// with, which a replay grants the lease with again.
func (a *Archiver) leaseTTLsOf(ctx context.Context, cli *etcd.Client, r etcd.Revision) error {
	for i := range r.Changes {
		ch := &r.Changes[i]
		if ch.Lease == 0 {
			continue
		}
		ttl, ok := a.leaseTTLs[ch.Lease]
		if !ok {
			var err error
			lctx, cancel := context.WithTimeout(ctx, archiveCallTimeout)
			ttl, err = cli.LeaseTTL(lctx, ch.Lease)
			cancel()
			if err != nil {
				return err
			}
			if a.leaseTTLs == nil || len(a.leaseTTLs) >= maxLeaseTTLs {
				a.leaseTTLs = map[int64]int64{}
			}
			a.leaseTTLs[ch.Lease] = ttl
		}
		ch.LeaseTTL = ttl
	}
	return nil
}

// tickOf is how often the archive looks whether a segment is due: a tenth
// of its age limit, between 100 ms and a second.
func tickOf(maxAge time.Duration) time.Duration {
	return min(max(maxAge/10, 100*time.Millisecond), time.Second)
}

func (a *Archiver) receive(r ArchivedRevision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.Revision.Revision <= a.skipThrough {
		return // stored already, by another agent
	}
	a.pending = append(a.pending, r)
	a.pendingBytes += revisionSize(r.Revision)
}

// revisionSize estimates what a revision takes in a segment.
func revisionSize(r etcd.Revision) int {
	n := 16
	for _, ch := range r.Changes {
		n += len(ch.Key) + len(ch.Value) + 8
	}
	return n
}

func (a *Archiver) full() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pendingBytes >= a.o.MaxBytes
}

func (a *Archiver) due() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.pending) > 0 && a.o.Clock.Since(a.pending[0].Time) >= a.o.MaxAge
}

func (a *Archiver) idle() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.pending) == 0
}

// flush stores the pending revisions as segments of at most MaxBytes
// each (a revision larger than that alone), oldest first. A write that
// fails leaves the revisions it held, and those after, pending. A segment
// that another agent of this archive stored first at the same revision is
// taken as stored: what it holds is dropped from pending, and the next
// segment starts after it.
func (a *Archiver) flush(ctx context.Context) error {
	for {
		a.mu.Lock()
		n, size := 0, 0
		for n < len(a.pending) && (n == 0 || size+revisionSize(a.pending[n].Revision) <= a.o.MaxBytes) {
			size += revisionSize(a.pending[n].Revision)
			n++
		}
		batch := a.pending[:n]
		a.mu.Unlock()
		if n == 0 {
			return nil
		}
		data, h, err := encodeSegment(a.o.Owner, batch, a.o.Compression)
		if err != nil {
			return err
		}
		there, err := a.put(ctx, h, data)
		if err != nil {
			return err
		}
		if there != nil {
			a.stored(*there, 0)
			a.o.Log.Info("Another agent of this archive stored the segment from this revision first (one that ran before this one and had not stopped yet, or one beside it); going on after it",
				"first", there.First, "last", there.Last)
			continue
		}
		a.stored(h, len(data))
		a.o.Log.V(1).Info("Stored a segment", "first", h.First, "last", h.Last, "changes", h.Changes, "bytes", len(data))
	}
}

// stored drops from pending the revisions that the stored segment h holds,
// and counts it in the state; written is what this agent wrote of it (0
// for another agent's, whose revisions the watch may still bring: they
// are dropped as they come).
func (a *Archiver) stored(h segmentHeader, written int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.skipThrough = max(a.skipThrough, h.Last)
	n, size := 0, 0
	for n < len(a.pending) && a.pending[n].Revision.Revision <= h.Last {
		size += revisionSize(a.pending[n].Revision)
		n++
	}
	a.pending = a.pending[n:]
	a.pendingBytes -= size
	if len(a.pending) == 0 {
		a.pending, a.pendingBytes = nil, 0
	}
	st := &a.state
	if st.FirstRevision == 0 {
		st.FirstRevision, st.FirstTime = h.First, h.FirstTime
	}
	st.LastRevision, st.LastTime = h.Last, h.LastTime
	st.Segments++
	st.Bytes += int64(written)
}

// put stores one segment. A segment at its name that holds the same
// revisions with the same checksum is this agent's own, from a write whose
// answer was lost: stored, and there is nil. Any other of the same owner
// was stored by another agent of this archive (a pod force-deleted, or cut
// off from the apiserver, runs on beside its successor for a while):
// names are claimed once, by conditional writes, so the two never store
// the same revision twice, and there is its header for the caller to go
// on after. A segment of another owner is refused.
func (a *Archiver) put(ctx context.Context, h segmentHeader, data []byte) (*segmentHeader, error) {
	ctx, cancel := context.WithTimeout(ctx, archiveCallTimeout)
	defer cancel()
	name := segmentName(h.First)
	err := a.folder.putNew(ctx, name, data, a.o.Owner)
	if !errors.Is(err, errExists) {
		return nil, err
	}
	there, err := readHeader(ctx, a.folder, name, a.o.Owner)
	switch {
	case err != nil:
		return nil, err
	case there.First != h.First || there.Last < there.First:
		return nil, fmt.Errorf("%w: the segment %s/%s says it holds revisions %d to %d", ErrCorrupt, a.folder, name, there.First, there.Last)
	case there.Last == h.Last && there.SHA256 == h.SHA256:
		return nil, nil
	}
	return &there, nil
}
