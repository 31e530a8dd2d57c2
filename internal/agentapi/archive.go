package agentapi

import "time"

// ArchiveState is what a running `tend archive` says of its archive, as
// JSON at its /status address: the archive's window as stored, how far
// behind the cluster it is, and whether it can go on.
type ArchiveState struct {
	// Phase is Starting, Archiving or Broken (the ArchivePhase constants).
	Phase string `json:"phase"`
	// Message says what the agent is doing, or why the archive broke and
	// what brings it back.
	Message string `json:"message,omitempty"`
	// Cause, when Broken, is why: Compacted (a new base backup brings the
	// archive back), Refused (another owner's archive, or another agent
	// writes to it: a person must look) or Corrupt.
	Cause string `json:"cause,omitempty"`
	// Location is the archive's URI; Owner the UID it is written for.
	Location string `json:"location"`
	Owner    string `json:"owner"`
	// BaseRevision is the revision of the base backup that the agent was
	// started from: the archive holds every revision after it that the
	// agent has stored.
	BaseRevision int64 `json:"baseRevision"`
	// FirstRevision and FirstTime are the oldest stored revision and when
	// it was received; zero before the first segment.
	FirstRevision int64     `json:"firstRevision,omitempty"`
	FirstTime     time.Time `json:"firstTime,omitzero"`
	// LastRevision is the newest revision in a durable segment, and
	// LastTime when it was received.
	LastRevision int64     `json:"lastRevision,omitempty"`
	LastTime     time.Time `json:"lastTime,omitzero"`
	// CompleteAt is the last time at which the agent knew that no revision
	// after LastRevision existed: a restore to any time up to it loses
	// nothing.
	CompleteAt time.Time `json:"completeAt,omitzero"`
	// LagSeconds is how old the oldest received revision that is not yet
	// durable is; 0 when every received revision is stored.
	LagSeconds float64 `json:"lagSeconds"`
	// Segments counts the archive's segments; Bytes the bytes this agent
	// wrote since it started.
	Segments int   `json:"segments"`
	Bytes    int64 `json:"bytes"`
	// Gaps are ranges of revisions after FirstRevision that no segment
	// holds: the archive was started again from a newer base.
	Gaps []ArchiveGap `json:"gaps,omitempty"`
}

// ArchiveGap is a range of revisions that the archive does not hold.
type ArchiveGap struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Reason says why: for example, the archive was started from a base
	// backup newer than its last segment.
	Reason string `json:"reason"`
}

// The phases of an archive.
const (
	ArchiveStarting  = "Starting"
	ArchiveArchiving = "Archiving"
	ArchiveBroken    = "Broken"
)

// The causes of a Broken archive.
const (
	ArchiveCauseCompacted = "Compacted"
	ArchiveCauseRefused   = "Refused"
	ArchiveCauseCorrupt   = "Corrupt"
)

// ArchiveStatusPath is where a `tend archive` serves its ArchiveState.
const ArchiveStatusPath = "/status"

// ArchiveStatusTimeout bounds a read of a `tend archive`'s state.
const ArchiveStatusTimeout = 5 * time.Second
