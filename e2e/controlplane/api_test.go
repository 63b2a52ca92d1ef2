package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"felix/cluster/meta"
	"felix/testbed/history"
)

// The catalog the workload writes: streams of one namespace.
const (
	tenant    = "acme"
	namespace = "prod"
)

// streamsPath is the REST path of the namespace's streams.
const streamsPath = "/v1/tenants/" + tenant + "/namespaces/" + namespace + "/streams"

// entry names a stream in the history ("stream/NAME": one porcupine object per entry).
func entry(name string) string { return "stream/" + name }

// spec is what a create writes and a read compares: the create's unique max_size_bytes.
func spec(size int64) string { return fmt.Sprintf("max_size_bytes=%d", size) }

// api sends catalog operations to members' REST APIs and records each in the history.
type api struct {
	rec   *history.Recorder
	token string

	mu         sync.Mutex
	unexpected []string // answers no correct control plane gives (a 400, a 401, a bad body)
}

// answer is one REST answer: the status and the error body's code and message (or a
// transport error).
type answer struct {
	status        int
	code, message string
	body          []byte
	err           error
}

// do sends one request to m (the admin token on writes) and reads the answer.
func (a *api) do(ctx context.Context, m *member, method, path string, body any) answer {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return answer{err: err}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, m.base()+path, rd)
	if err != nil {
		return answer{err: err}
	}
	if method != http.MethodGet {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	ans := answer{status: resp.StatusCode}
	if ans.body, err = io.ReadAll(io.LimitReader(resp.Body, 4<<20)); err != nil {
		return answer{status: resp.StatusCode, err: err} // a truncated answer: indeterminate
	}
	if resp.StatusCode >= 300 {
		var e struct{ Code, Message string }
		if json.Unmarshal(ans.body, &e) == nil {
			ans.code, ans.message = e.Code, e.Message
		}
	}
	return ans
}

// error renders the answer as the history's error text.
func (ans answer) error() error {
	if ans.err != nil {
		return ans.err
	}
	return fmt.Errorf("%d %s: %s", ans.status, ans.code, ans.message)
}

// refusedDial reports a transport error that certainly sent nothing: the dial failed.
func refusedDial(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// definiteNotLeader are the 503 messages of a write that reached no Raft log: no leader
// known, a forwarded request on a non-leader, a leader's unknown URL, raft's ErrNotLeader
// and ErrLeadershipTransferInProgress (refused before the entry is dispatched), and a
// forward whose dial to the leader was refused. Every other NotLeader 503 (leadership
// lost while committing, a forward cut mid-way) may have been applied: indeterminate.
var definiteNotLeader = []string{
	"NotLeader: no leader elected", "NotLeader: a forwarded request reached a member that does not lead",
	"its REST address is not known here", "NotLeader: node is not the leader",
	"NotLeader: leadership transfer in progress", "connect: connection refused",
}

// writeFailure classifies a write answer that is neither of its kind's definite answers:
// Fail when the write certainly did nothing (a refused dial, a definite NotLeader, a
// state-machine refusal: 409, or the 503 of a placement refusal), else Info. A 400 or 401
// is a test bug, noted as unexpected.
func (a *api) writeFailure(what string, ans answer) history.Outcome {
	switch {
	case ans.err != nil && refusedDial(ans.err):
		return history.Fail
	case ans.err != nil:
		return history.Info
	case ans.status == http.StatusServiceUnavailable && strings.HasPrefix(ans.message, "NotLeader:"):
		for _, d := range definiteNotLeader {
			if strings.Contains(ans.message, d) {
				return history.Fail
			}
		}
		return history.Info
	case ans.status == http.StatusServiceUnavailable && ans.code == "unavailable", ans.status == http.StatusConflict:
		return history.Fail
	case ans.status >= 500:
		return history.Info // a propose timeout: the entry may commit later
	}
	a.note("%s: %d %s %s", what, ans.status, ans.code, ans.message)
	return history.Fail
}

func (a *api) note(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unexpected = append(a.unexpected, fmt.Sprintf(format, args...))
}

// complete records the outcome of p (ok with out, or the failure's text).
func complete(p *history.Pending, o history.Outcome, out history.Output, ans answer) {
	var err error
	if o != history.OK {
		err, out = ans.error(), history.Output{}
	}
	_ = p.Complete(o, out, err)
}

// create records a catalog-create of stream name with max_size_bytes size through m:
// 201 ok, 409 exists ok with found (it already existed).
func (a *api) create(ctx context.Context, process int, m *member, name string, size int64) history.Outcome {
	p := a.rec.Invoke(process, m.id, history.KindCatalogCreate, history.Input{Entry: entry(name), Spec: spec(size)})
	ans := a.do(ctx, m, http.MethodPost, streamsPath, map[string]any{"stream": name,
		"retention": map[string]any{"max_size_bytes": size}})
	o, out := history.OK, history.Output{}
	switch {
	case ans.err == nil && ans.status == http.StatusCreated:
	case ans.err == nil && ans.status == http.StatusConflict && ans.code == "exists":
		out.Found = true
	default:
		if ans.err == nil && ans.status == http.StatusConflict {
			a.note("create %s: 409 %s %s", name, ans.code, ans.message) // e.g. name_deleted: the setup failed
		}
		o = a.writeFailure("create "+name, ans)
	}
	complete(p, o, out, ans)
	return o
}

// remove records a catalog-delete of stream name through m: 204 ok found, 404 ok absent.
func (a *api) remove(ctx context.Context, process int, m *member, name string) history.Outcome {
	p := a.rec.Invoke(process, m.id, history.KindCatalogDelete, history.Input{Entry: entry(name)})
	ans := a.do(ctx, m, http.MethodDelete, streamsPath+"/"+name, nil)
	o, out := history.OK, history.Output{}
	switch {
	case ans.err == nil && ans.status == http.StatusNoContent:
		out.Found = true
	case ans.err == nil && ans.status == http.StatusNotFound && ans.code == "not_found":
	default:
		o = a.writeFailure("delete "+name, ans)
	}
	complete(p, o, out, ans)
	return o
}

// readOutcome classifies a read answer other than 200 and 404: every such read is left
// out by the checker, Info when it was cut, else Fail; a 400 or 401 is unexpected.
func (a *api) readOutcome(what string, ans answer) history.Outcome {
	switch {
	case ans.err != nil:
		return history.Info
	case ans.status >= 500:
		return history.Fail
	}
	a.note("%s: %d %s %s", what, ans.status, ans.code, ans.message)
	return history.Fail
}

// streamSpec is a stream row's spec (what its create wrote).
func streamSpec(s meta.Stream) string {
	if s.Retention.MaxSizeBytes == nil {
		return "max_size_bytes=none"
	}
	return spec(*s.Retention.MaxSizeBytes)
}

// get records a catalog-get of stream name through m: 200 found with its spec, 404 absent.
func (a *api) get(ctx context.Context, process int, m *member, name string) history.Outcome {
	p := a.rec.Invoke(process, m.id, history.KindCatalogGet, history.Input{Entry: entry(name)})
	ans := a.do(ctx, m, http.MethodGet, streamsPath+"/"+name, nil)
	o, out := history.OK, history.Output{}
	var s meta.Stream
	switch {
	case ans.err == nil && ans.status == http.StatusOK && json.Unmarshal(ans.body, &s) == nil && s.Stream == name:
		out.Found, out.Spec = true, streamSpec(s)
	case ans.err == nil && ans.status == http.StatusNotFound && ans.code == "not_found":
	default:
		o = a.readOutcome("get "+name, ans)
	}
	complete(p, o, out, ans)
	return o
}

// list reads the namespace's streams through m and records one catalog-get per name of
// names, each invoked before the request and completed after the answer (so each
// interval holds the read): found with its spec when the list has it, else absent.
func (a *api) list(ctx context.Context, process int, m *member, names []string) history.Outcome {
	ps := make([]*history.Pending, len(names))
	for i, n := range names {
		ps[i] = a.rec.Invoke(process, m.id+" list", history.KindCatalogGet, history.Input{Entry: entry(n)})
	}
	ans := a.do(ctx, m, http.MethodGet, streamsPath, nil)
	var rows []meta.Stream
	o := history.OK
	if ans.err != nil || ans.status != http.StatusOK || json.Unmarshal(ans.body, &rows) != nil {
		o = a.readOutcome("list", ans)
	}
	byName := map[string]meta.Stream{}
	for _, s := range rows {
		byName[s.Stream] = s
	}
	for i, n := range names {
		out := history.Output{}
		if s, ok := byName[n]; ok {
			out.Found, out.Spec = true, streamSpec(s)
		}
		complete(ps[i], o, out, ans)
	}
	return o
}
