package proto

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// vectorsDir finds ../shared/vectors relative to the repo root (the directory holding
// go.mod). Missing: skip, or fail when CI=true.
func vectorsDir(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	v, err := findVectors(wd)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("vectors missing under CI=true: %v", err)
		}
		t.Skipf("vectors missing: %v", err)
	}
	return v
}

// findVectors walks up from start to the directory holding go.mod and returns
// <root>/../shared/vectors, or an error when either is missing.
func findVectors(start string) (string, error) {
	dir := start
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s", start)
		}
		dir = parent
	}
	v := filepath.Join(dir, "..", "shared", "vectors")
	if _, err := os.Stat(v); err != nil {
		return "", err
	}
	return v, nil
}

func TestFindVectors(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	sub := filepath.Join(repo, "proto")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := findVectors(sub); err == nil {
		t.Fatal("found vectors that do not exist")
	}
	want := filepath.Join(root, "shared", "vectors")
	if err := os.MkdirAll(want, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := findVectors(sub)
	if err != nil || filepath.Clean(got) != want {
		t.Fatalf("findVectors = %q, %v; want %q", got, err, want)
	}
}

type wireVector struct {
	Name         string   `json:"name"`
	Kind         string   `json:"kind"`
	Flags        *uint16  `json:"flags"`
	PayloadJSON  string   `json:"payload_json"`
	PayloadHex   string   `json:"payload_hex"`
	FrameHex     string   `json:"frame_hex"`
	Status       string   `json:"status"`
	RequestID    uint64   `json:"request_id"`
	Message      *string  `json:"message"`
	AckMode      string   `json:"ack_mode"`
	TenantID     string   `json:"tenant_id"`
	Namespace    string   `json:"namespace"`
	Stream       string   `json:"stream"`
	PayloadsUTF8 []string `json:"payloads_utf8"`
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("bad hex: %v", err)
	}
	return b
}

// TestVectorsFelixWire checks every vector file in felix-wire in both directions: decoding the
// frame gives the vector's fields, and encoding those fields gives the exact frame bytes.
func TestVectorsFelixWire(t *testing.T) {
	dir := filepath.Join(vectorsDir(t), "felix-wire")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors in %s: %v", dir, err)
	}
	sort.Strings(files)
	hexFiles, _ := filepath.Glob(filepath.Join(dir, "*.hex"))
	if len(hexFiles) != len(files) {
		t.Fatalf("%d .json vectors but %d .hex files", len(files), len(hexFiles))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var v wireVector
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatal(err)
			}
			hexFile, err := os.ReadFile(filepath.Join(dir, name+".hex"))
			if err != nil {
				t.Fatal(err)
			}
			frame := mustHex(t, string(hexFile))
			if !bytes.Equal(frame, mustHex(t, v.FrameHex)) {
				t.Fatalf("%s.hex differs from frame_hex", name)
			}
			checkVector(t, &v, frame)
			t.Logf("checked vector %s (kind %q, %d bytes)", filepath.Base(f), v.Kind, len(frame))
		})
	}
}

func checkVector(t *testing.T, v *wireVector, frame []byte) {
	h, err := DecodeHeader(frame, DefaultMaxFrameBytes)
	if err != nil {
		t.Fatal(err)
	}
	body := frame[HeaderSize:]
	if int(h.Length) != len(body) {
		t.Fatalf("length %d, body %d", h.Length, len(body))
	}
	if v.PayloadHex != "" && !bytes.Equal(body, mustHex(t, v.PayloadHex)) {
		t.Fatal("payload_hex differs from the frame body")
	}
	if v.Flags != nil && *v.Flags != h.Flags {
		t.Fatalf("flags %#x, vector %#x", h.Flags, *v.Flags)
	}
	switch v.Kind {
	case "", "json_message":
		checkJSONVector(t, v, h, body, frame)
	case "binary_acked_publish_batch":
		checkAckedPublishVector(t, v, h, body, frame)
	case "binary_publish_ack":
		checkPublishAckVector(t, v, h, body, frame)
	default:
		t.Fatalf("unknown vector kind %q", v.Kind)
	}
}

func checkJSONVector(t *testing.T, v *wireVector, h Header, body, frame []byte) {
	if h.Flags != 0 {
		t.Fatalf("json vector with flags %#x", h.Flags)
	}
	if string(body) != v.PayloadJSON {
		t.Fatal("payload_json differs from the frame body")
	}
	m, err := DecodeMessage(body)
	if err != nil {
		t.Fatal(err)
	}
	// Decoded fields must equal those of an independent generic JSON parse.
	var generic map[string]any
	if err := json.Unmarshal(body, &generic); err != nil {
		t.Fatal(err)
	}
	if string(m.Type()) != generic["type"] {
		t.Fatalf("type %q, vector %v", m.Type(), generic["type"])
	}
	again, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var fromStruct map[string]any
	if err := json.Unmarshal(again, &fromStruct); err != nil {
		t.Fatal(err)
	}
	for k, want := range generic {
		if k == "type" {
			continue
		}
		got := fromStruct[k]
		if !reflect.DeepEqual(got, want) {
			t.Errorf("field %s: decoded %v, vector %v", k, got, want)
		}
	}
	if enc := AppendMessage(nil, m); !bytes.Equal(enc, frame) {
		t.Fatalf("re-encoded frame differs:\n got %x\nwant %x", enc, frame)
	}
}

func checkAckedPublishVector(t *testing.T, v *wireVector, h Header, body, frame []byte) {
	layout, err := ClassifyFlags(h.Flags)
	if err != nil || layout != LayoutAckedPublishBatch {
		t.Fatalf("layout %v err %v", layout, err)
	}
	var b PublishBatch
	if err := DecodeAckedPublishBatch(body, h.Flags&FlagPublishIdempotent != 0, &b); err != nil {
		t.Fatal(err)
	}
	wantMode := map[string]AckMode{"per_message": AckPerMessage, "per_batch": AckPerBatch}[v.AckMode]
	if !b.Acked || b.RequestID != v.RequestID || b.AckMode != wantMode {
		t.Fatalf("prefix %+v, vector id %d mode %s", b, v.RequestID, v.AckMode)
	}
	if string(b.TenantID) != v.TenantID || string(b.Namespace) != v.Namespace || string(b.Stream) != v.Stream {
		t.Fatalf("names %q %q %q", b.TenantID, b.Namespace, b.Stream)
	}
	if len(b.Payloads) != len(v.PayloadsUTF8) {
		t.Fatalf("%d payloads, vector %d", len(b.Payloads), len(v.PayloadsUTF8))
	}
	want := PublishBatch{Acked: true, RequestID: v.RequestID, AckMode: wantMode,
		TenantID: []byte(v.TenantID), Namespace: []byte(v.Namespace), Stream: []byte(v.Stream)}
	for i, p := range v.PayloadsUTF8 {
		if string(b.Payloads[i]) != p {
			t.Fatalf("payload %d = %q, vector %q", i, b.Payloads[i], p)
		}
		want.Payloads = append(want.Payloads, []byte(p))
	}
	enc, err := AppendPublishBatch(nil, &want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, frame) {
		t.Fatalf("encoded %x\nwant    %x", enc, frame)
	}
}

func checkPublishAckVector(t *testing.T, v *wireVector, h Header, body, frame []byte) {
	if layout, err := ClassifyFlags(h.Flags); err != nil || layout != LayoutPublishAck {
		t.Fatalf("layout %v err %v", layout, err)
	}
	var a PublishAck
	if err := DecodePublishAck(body, &a); err != nil {
		t.Fatal(err)
	}
	if a.RequestID != v.RequestID {
		t.Fatalf("request_id %d, vector %d", a.RequestID, v.RequestID)
	}
	var enc []byte
	switch v.Status {
	case "ok":
		if a.Status != AckStatusOK || len(a.Message) != 0 || v.Message != nil {
			t.Fatalf("ok ack decoded as %+v", a)
		}
		enc = AppendPublishAckOK(nil, v.RequestID)
	case "error":
		if a.Status != AckStatusError || v.Message == nil || string(a.Message) != *v.Message {
			t.Fatalf("error ack decoded as %+v", a)
		}
		enc = AppendPublishAckError(nil, v.RequestID, *v.Message)
	default:
		t.Fatalf("unknown status %q", v.Status)
	}
	if !bytes.Equal(enc, frame) {
		t.Fatalf("encoded %x\nwant    %x", enc, frame)
	}
}
