package etcd

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// B9 reads some of its timings from logs: what etcdctl measures itself,
// and the moments at which etcdutl says it began and ended, as the kubelet
// stamped those lines (etcdutl's own stamps have whole seconds only).

// etcdctlTook is the "took" of etcdctl snapshot save's "fetched snapshot"
// line: from the snapshot request, through writing the file, to its fsync.
// etcdctl logs JSON lines (etcd's logutil), the duration as a Go string.
func etcdctlTook(log string) (time.Duration, error) {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '{'); i >= 0 {
			line = line[i:]
		} else {
			continue
		}
		var entry struct {
			Msg  string `json:"msg"`
			Took string `json:"took"`
		}
		if json.Unmarshal([]byte(line), &entry) != nil || entry.Msg != "fetched snapshot" {
			continue
		}
		d, err := time.ParseDuration(entry.Took)
		if err != nil {
			return 0, fmt.Errorf("etcdctl's \"fetched snapshot\" line has took %q: %w", entry.Took, err)
		}
		return d, nil
	}
	return 0, fmt.Errorf("no \"fetched snapshot\" line with \"took\" in etcdctl's log:\n%s", log)
}

// stampedSpan reads a log fetched with the kubelet's timestamps (each line
// "<RFC 3339 time> <text>") and returns the stamps of the first line that
// holds from and of the first line after it that holds to.
func stampedSpan(log, from, to string) (start, end time.Time, err error) {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		stamp, text, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		want := from
		if !start.IsZero() {
			want = to
		}
		if !strings.Contains(text, want) {
			continue
		}
		at, perr := time.Parse(time.RFC3339Nano, stamp)
		if perr != nil {
			return time.Time{}, time.Time{}, fmt.Errorf("the line %q has no kubelet timestamp: %w", sc.Text(), perr)
		}
		if start.IsZero() {
			start = at
			continue
		}
		return start, at, nil
	}
	return time.Time{}, time.Time{}, fmt.Errorf("no line with %q followed by one with %q in the log:\n%s", from, to, log)
}

// The lines of etcdutl snapshot restore that open and close its work:
// copying and checking the snapshot, rewriting the membership, bumping the
// revision, and writing the WAL and the snap file.
const (
	etcdutlRestoring = "restoring snapshot"
	etcdutlRestored  = "restored snapshot"
)

// agentLogSeconds is the "seconds" of the first JSON line of an agent's log
// whose message is msg; ok is false when there is none.
func agentLogSeconds(log, msg string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.IndexByte(line, '{')
		if i < 0 {
			continue
		}
		var entry struct {
			Msg     string   `json:"msg"`
			Seconds *float64 `json:"seconds"`
		}
		if json.Unmarshal([]byte(line[i:]), &entry) == nil && entry.Msg == msg && entry.Seconds != nil {
			return *entry.Seconds, true
		}
	}
	return 0, false
}

// lastStamp is the kubelet's stamp of the last line of a log fetched with
// timestamps: for an agent, the line with its Result, written as it ends.
func lastStamp(log string) (time.Time, error) {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	stamp, _, _ := strings.Cut(lines[len(lines)-1], " ")
	at, err := time.Parse(time.RFC3339Nano, stamp)
	if err != nil {
		return time.Time{}, fmt.Errorf("the log's last line has no kubelet timestamp: %w; the log:\n%s", err, log)
	}
	return at, nil
}

// snapshotStatusSize is the totalSize that etcdutl snapshot status
// --write-out=json prints: the snapshot's database size in bytes.
func snapshotStatusSize(log string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var st struct {
			TotalSize int64 `json:"totalSize"`
		}
		if json.Unmarshal([]byte(line), &st) == nil && st.TotalSize > 0 {
			return st.TotalSize, nil
		}
	}
	return 0, fmt.Errorf("no JSON line with a totalSize in etcdutl snapshot status's output:\n%s", log)
}
