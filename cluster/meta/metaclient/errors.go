package metaclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Sentinels of the typed errors (test with errors.Is).
var (
	// ErrGone matches a 410 answer of the change feed (*GoneError): the cursor
	// is older than what the control plane keeps, or ahead of its state (a
	// restore from an older snapshot); the broker reloads GET /v1/snapshot.
	ErrGone = errors.New("metaclient: change feed cursor gone")
	// ErrUnavailable matches a request no member answered (other than a 503
	// with Retry-After) before its context ended.
	ErrUnavailable = errors.New("metaclient: control plane unavailable")
	// ErrRefused matches a 409 (*RefusedError).
	ErrRefused = errors.New("metaclient: refused by the control plane")
)

// APIError is an answer other than 2xx: its status and the control plane's
// error body {code, message, leader, detail} (docs/controlplane.md, "REST and
// the command").
type APIError struct {
	Status  int
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Leader  string         `json:"leader,omitempty"`
	Detail  map[string]any `json:"detail,omitempty"`
}

// Error is "control plane: STATUS CODE: MESSAGE".
func (e *APIError) Error() string {
	return fmt.Sprintf("control plane: %d %s: %s", e.Status, e.Code, e.Message)
}

// RefusedError is a 409: the control plane refused the command (a
// registration lacking an enabled fleet feature, a finalize, a conflict).
// Message is the control plane's reason, verbatim (for a registration, the
// seed's "node … does not support fleet feature(s) …" text).
type RefusedError struct{ APIError }

// Is matches ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Unwrap gives the APIError.
func (e *RefusedError) Unwrap() error { return &e.APIError }

// GoneError is a 410 of the change feed; Epoch is the feed's current epoch
// (detail.epoch, 0 when absent).
type GoneError struct {
	APIError
	Epoch uint64
}

// Is matches ErrGone.
func (e *GoneError) Is(target error) bool { return target == ErrGone }

// Unwrap gives the APIError.
func (e *GoneError) Unwrap() error { return &e.APIError }

// answerError types a non-2xx answer: *RefusedError (409), *GoneError (410),
// else *APIError. A body that is not the error shape keeps its text (at most
// 200 bytes) as the message.
func answerError(resp *Response) error {
	e := APIError{Status: resp.Status}
	if err := json.Unmarshal(resp.Body, &e); err != nil || e.Code == "" {
		msg := string(resp.Body)
		if len(msg) > 200 {
			msg = msg[:200]
		}
		e = APIError{Status: resp.Status, Code: http.StatusText(resp.Status), Message: msg}
	}
	e.Status = resp.Status
	switch resp.Status {
	case http.StatusConflict:
		return &RefusedError{APIError: e}
	case http.StatusGone:
		g := &GoneError{APIError: e}
		if f, ok := e.Detail["epoch"].(float64); ok && f >= 0 {
			g.Epoch = uint64(f)
		}
		return g
	}
	return &e
}
