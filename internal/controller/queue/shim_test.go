package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// sqsShim is a real HTTP server on 127.0.0.1 in front of moto_server that
// adds what moto 5.2.1 lacks and real SQS has, so that the controller's
// calls for it can be proven against a server that acts on them:
//
//   - RedriveAllowPolicy: moto accepts it but never returns it from
//     GetQueueAttributes. The shim records every value set by CreateQueue
//     and SetQueueAttributes, and adds it to GetQueueAttributes' answers.
//   - StartMessageMoveTask and ListMessageMoveTasks: moto answers 500 (not
//     implemented). The shim records each request and carries the move out
//     on moto, as SQS does: it receives the dead-letter queue's messages,
//     sends each to the source queue whose RedrivePolicy names the
//     dead-letter queue, and deletes it.
//
// Every other request goes to moto as it is.
type sqsShim struct {
	*httptest.Server
	moto  *httputil.ReverseProxy
	api   *sqs.Client // straight to moto, for the moves
	mu    sync.Mutex
	allow map[string]string // queue URL path -> RedriveAllowPolicy
	calls []shimCall
	tasks map[string]moveTask // source ARN -> newest task
}

type shimCall struct {
	Operation string
	Body      map[string]any
}

type moveTask struct {
	Handle  string
	Status  string
	Moved   int64
	ToMove  int64
	Started int64
}

func startShim(t *testing.T, motoURL string, api *sqs.Client) *sqsShim {
	t.Helper()
	target, err := url.Parse(motoURL)
	if err != nil {
		t.Fatal(err)
	}
	s := &sqsShim{moto: httputil.NewSingleHostReverseProxy(target), api: api, allow: map[string]string{}, tasks: map[string]moveTask{}}
	s.Server = httptest.NewServer(s)
	t.Cleanup(s.Close)
	return s
}

// Calls returns the requests of an operation that the shim saw.
func (s *sqsShim) Calls(operation string) []shimCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []shimCall
	for _, c := range s.calls {
		if c.Operation == operation {
			out = append(out, c)
		}
	}
	return out
}

func (s *sqsShim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	raw, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(raw))
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	s.mu.Lock()
	s.calls = append(s.calls, shimCall{Operation: op, Body: body})
	s.mu.Unlock()
	str := func(k string) string { v, _ := body[k].(string); return v }
	attrs, _ := body["Attributes"].(map[string]any)
	switch op {
	case "StartMessageMoveTask":
		s.startMove(w, str("SourceArn"))
		return
	case "ListMessageMoveTasks":
		s.mu.Lock()
		task, ok := s.tasks[str("SourceArn")]
		s.mu.Unlock()
		results := []map[string]any{}
		if ok {
			results = append(results, map[string]any{"SourceArn": str("SourceArn"), "Status": task.Status,
				"ApproximateNumberOfMessagesMoved": task.Moved, "ApproximateNumberOfMessagesToMove": task.ToMove, "StartedTimestamp": task.Started})
		}
		writeJSON(w, map[string]any{"Results": results})
		return
	case "SetQueueAttributes":
		if v, ok := attrs["RedriveAllowPolicy"].(string); ok {
			s.mu.Lock()
			s.allow[pathOf(str("QueueUrl"))] = v
			s.mu.Unlock()
		}
	case "CreateQueue":
		if v, ok := attrs["RedriveAllowPolicy"].(string); ok {
			s.mu.Lock()
			s.allow["/"+strings.TrimPrefix(str("QueueName"), "/")] = v // keyed by name until the URL is known
			s.mu.Unlock()
		}
	case "GetQueueAttributes":
		rec := httptest.NewRecorder()
		s.moto.ServeHTTP(rec, r)
		out := rec.Body.Bytes()
		if rec.Code == http.StatusOK {
			var resp map[string]any
			if json.Unmarshal(out, &resp) == nil {
				s.mu.Lock()
				v, ok := s.allow[pathOf(str("QueueUrl"))]
				if !ok {
					v, ok = s.allow["/"+lastSegment(str("QueueUrl"))]
				}
				s.mu.Unlock()
				if a, isMap := resp["Attributes"].(map[string]any); ok && isMap {
					a["RedriveAllowPolicy"] = v
					out, _ = json.Marshal(resp)
				}
			}
		}
		for k, vs := range rec.Header() {
			if k != "Content-Length" {
				w.Header()[k] = vs
			}
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(out)
		return
	}
	s.moto.ServeHTTP(w, r)
}

// startMove moves every message of the dead-letter queue sourceARN to the
// queue whose RedrivePolicy names it, on moto, and records the task as
// COMPLETED.
func (s *sqsShim) startMove(w http.ResponseWriter, sourceARN string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dlqName := sourceARN[strings.LastIndexByte(sourceARN, ':')+1:]
	dlqURL, err := s.api.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &dlqName})
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	srcs, err := s.api.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: dlqURL.QueueUrl})
	if err != nil || len(srcs.QueueUrls) == 0 {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.sqs#InvalidParameterValue","message":"Source queue must be configured as a Dead Letter Queue."}`))
		return
	}
	var moved int64
	for {
		out, err := s.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: dlqURL.QueueUrl, MaxNumberOfMessages: 10})
		if err != nil || len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			if _, err := s.api.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &srcs.QueueUrls[0], MessageBody: m.Body}); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			_, _ = s.api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: dlqURL.QueueUrl, ReceiptHandle: m.ReceiptHandle})
			moved++
		}
	}
	handle := fmt.Sprintf("task-%d", time.Now().UnixNano())
	s.mu.Lock()
	s.tasks[sourceARN] = moveTask{Handle: handle, Status: "COMPLETED", Moved: moved, ToMove: moved, Started: time.Now().UnixMilli()}
	s.mu.Unlock()
	writeJSON(w, map[string]any{"TaskHandle": awssdk.String(handle)})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_ = json.NewEncoder(w).Encode(v)
}

func pathOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Path
}

func lastSegment(raw string) string { return raw[strings.LastIndexByte(raw, '/')+1:] }
