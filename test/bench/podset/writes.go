package podset

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// Request is one series of the apiserver's apiserver_request_total counter:
// the requests served for one verb, resource and response code.
type Request struct {
	// Verb is the metric's verb: POST, PUT, PATCH, DELETE, APPLY for writes.
	Verb string
	// Group is the API group, "" for the core group.
	Group       string
	Resource    string
	Subresource string
	Code        string
}

// Target returns "resource" or "resource/subresource".
func (r Request) Target() string {
	if r.Subresource == "" {
		return r.Resource
	}
	return r.Resource + "/" + r.Subresource
}

// IsWrite reports whether the request changes, or tries to change, stored
// state.
func (r Request) IsWrite() bool {
	switch r.Verb {
	case "POST", "PUT", "PATCH", "DELETE", "APPLY":
		return true
	}
	return false
}

// Requests counts requests by series. The counts are cumulative from the
// apiserver's start; Sub gives a window's.
type Requests map[Request]float64

// Sample is one series of a metric in Prometheus' text format.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// ParseSamples returns the series of the metric called name in text, a
// /metrics page in Prometheus' text format.
func ParseSamples(text, name string) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(rest, "{"):
			rest = rest[1:]
		case strings.HasPrefix(rest, " "):
			rest = "}" + rest
		default:
			continue // a longer name with this one as prefix
		}
		labels, value, err := splitSample(rest)
		if err != nil {
			return nil, fmt.Errorf("parsing %q: %w", line, err)
		}
		out = append(out, Sample{Labels: labels, Value: value})
	}
	return out, sc.Err()
}

// Sum adds up the series of samples whose labels include match.
func Sum(samples []Sample, match map[string]string) float64 {
	sum := 0.0
next:
	for _, s := range samples {
		for k, v := range match {
			if s.Labels[k] != v {
				continue next
			}
		}
		sum += s.Value
	}
	return sum
}

// ParseRequests reads apiserver_request_total from the apiserver's /metrics
// text.
func ParseRequests(text string) (Requests, error) {
	samples, err := ParseSamples(text, "apiserver_request_total")
	if err != nil {
		return nil, err
	}
	out := Requests{}
	for _, s := range samples {
		l := s.Labels
		r := Request{Verb: l["verb"], Group: l["group"], Resource: l["resource"], Subresource: l["subresource"], Code: l["code"]}
		out[r] += s.Value
	}
	return out, nil
}

// splitSample parses `k="v",k2="v2"} 12` (the part after the metric name's
// brace) into its labels and value.
func splitSample(s string) (map[string]string, float64, error) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, ", ")
		if strings.HasPrefix(s, "}") {
			s = s[1:]
			break
		}
		key, rest, ok := strings.Cut(s, "=")
		if !ok || !strings.HasPrefix(rest, `"`) {
			return nil, 0, fmt.Errorf("no label value after %q", key)
		}
		// Values are Go-quoted strings in the text format.
		end := 1
		for ; end < len(rest); end++ {
			if rest[end] == '\\' {
				end++
				continue
			}
			if rest[end] == '"' {
				break
			}
		}
		if end >= len(rest) {
			return nil, 0, fmt.Errorf("unterminated value of label %q", key)
		}
		value, err := strconv.Unquote(rest[:end+1])
		if err != nil {
			return nil, 0, fmt.Errorf("label %q: %w", key, err)
		}
		labels[strings.TrimSpace(key)] = value
		s = rest[end+1:]
	}
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, 0, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return nil, 0, err
	}
	return labels, v, nil
}

// Sub returns the requests served after before was taken.
func (r Requests) Sub(before Requests) Requests {
	out := Requests{}
	for k, v := range r {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Sum adds up the series that keep accepts.
func (r Requests) Sum(keep func(Request) bool) float64 {
	sum := 0.0
	for k, v := range r {
		if keep(k) {
			sum += v
		}
	}
	return sum
}

// ByResource adds up the series that keep accepts by resource
// ("pods", "podsets/status", …).
func (r Requests) ByResource(keep func(Request) bool) map[string]float64 {
	out := map[string]float64{}
	for k, v := range r {
		if keep(k) {
			out[k.Target()] += v
		}
	}
	return out
}

// Writer says who, in the benchmark's cluster, sends a write request. The
// apiserver's counter has no client label, so the resource decides: each
// resource is written by one party within a measured window.
type Writer int

const (
	// WriterController is the controller under test: it creates and deletes
	// pods, writes its set's status and records Events.
	WriterController Writer = iota
	// WriterKubelet is kwok standing in for kubelets: pod status, node
	// status and node Leases.
	WriterKubelet
	// WriterHarness is the benchmark itself: namespaces, and the sets it
	// creates (which ControllerWrites subtracts by count).
	WriterHarness
)

// WriterOf says who writes r in the benchmark's cluster.
func WriterOf(r Request) Writer {
	switch {
	case r.Resource == "pods" && r.Subresource == "status",
		r.Resource == "nodes", r.Resource == "leases":
		return WriterKubelet
	case r.Resource == "namespaces":
		return WriterHarness
	default:
		return WriterController
	}
}

// ControllerWrites are the writes of the controller under test in a window,
// by kind.
type ControllerWrites struct {
	// Pods are creates, deletes and patches of pods (not their status).
	Pods float64
	// Status are writes of the sets' status subresource.
	Status float64
	// Events are Events recorded, core and events.k8s.io, created or patched.
	Events float64
	// Other are the rest: writes to the sets themselves (beyond the
	// harness's creates), Services, …
	Other float64
	// Conflicts are the writes among these refused with 409 Conflict.
	Conflicts float64
}

// Total is every write the controller sent.
func (w ControllerWrites) Total() float64 { return w.Pods + w.Status + w.Events + w.Other }

// Controller sorts a window's write requests of the controller under test.
// setResource is "podsets" or "replicasets"; harnessCreates is how many sets
// the benchmark itself created in the window, subtracted from Other.
func (r Requests) Controller(setResource string, harnessCreates int) ControllerWrites {
	var w ControllerWrites
	for k, v := range r {
		if !k.IsWrite() || WriterOf(k) != WriterController {
			continue
		}
		if k.Code == "409" {
			w.Conflicts += v
		}
		switch {
		case k.Resource == "pods" && k.Subresource == "":
			w.Pods += v
		case k.Resource == setResource && k.Subresource == "status":
			w.Status += v
		case k.Resource == "events":
			w.Events += v
		default:
			w.Other += v
		}
	}
	w.Other -= float64(harnessCreates)
	return w
}
