package broker

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"felix/core"
	"felix/core/cache"
	"felix/core/groups"
	"felix/proto"
)

func TestErrorCodeCacheRefusalsAreNotRetryable(t *testing.T) {
	var logs bytes.Buffer
	srv := &Server{log: slog.New(slog.NewTextHandler(&logs, nil)), m: newServerMetrics(metrics.NewSet())}
	for _, e := range cacheRefusals {
		code, text := srv.errorCode(fmt.Errorf("shard 3: %w", e))
		if code != proto.CodeMalformed || code.Retryable() {
			t.Errorf("%v: code %q, want malformed", e, code)
		}
		if !strings.Contains(text, e.Error()) {
			t.Errorf("%v: text %q lost the reason", e, text)
		}
	}
	if code, _ := srv.errorCode(cache.ErrIndeterminate); code != proto.CodeIndeterminate {
		t.Errorf("indeterminate: %q", code)
	}
	for err, want := range map[error]proto.ErrorCode{
		core.ErrNoDurableStorage: proto.CodeMalformed, groups.ErrGroupIDCollision: proto.CodeMalformed,
		cache.ErrCorruptRecord: proto.CodeStorageFailed, groups.ErrCorrupt: proto.CodeStorageFailed,
		fmt.Errorf("shard 1: %w", core.ErrNotHere): proto.CodeShardUnavailable, core.ErrMoved: proto.CodeIndeterminate,
	} {
		if code, _ := srv.errorCode(err); code != want {
			t.Errorf("%v: %q, want %q", err, code, want)
		}
	}
	if logs.Len() != 0 {
		t.Fatalf("classified errors were logged: %s", logs.String())
	}
	code, _ := srv.errorCode(errors.New("something new"))
	if code == proto.CodeShardUnavailable || code.Retryable() {
		t.Errorf("unknown error answered %q (claims retryability)", code)
	}
	if !strings.Contains(logs.String(), "something new") || srv.m.unknownErrors.Get() != 1 {
		t.Errorf("unknown error not logged/counted: %q", logs.String())
	}
}
