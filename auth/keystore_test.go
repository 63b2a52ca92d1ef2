package auth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"felix/internal/vfs/vfstest"
)

var errInjected = errors.New("injected fault")

// newFaultFS is the shared fault FS (vfstest.FaultFS, which replaced this file's faultFS)
// failing its n-th operation (0-based, counting every FS and File call) with errInjected;
// n < 0 never fails. Fault model: the failed call has no effect, except a failed write,
// which writes half its bytes first (a torn write).
func newFaultFS(n int) *vfstest.FaultFS {
	f := &vfstest.FaultFS{}
	if n >= 0 {
		f.FailNth(n, errInjected)
	}
	return f
}

func TestKeyStorePersistsAndReopens(t *testing.T) {
	f := newFixture(t)
	kid2, err := f.keys.Rotate("ta")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := f.keys.Keys("ta")
	if err := f.keys.RemoveKey(info[0].Kid); err != nil {
		t.Fatal(err)
	}
	path := KeyStorePath(f.dir)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("keys.json mode %v, want 0600", st.Mode().Perm())
	}
	if dst, _ := os.Stat(filepath.Dir(path)); dst.Mode().Perm() != 0o700 {
		t.Fatalf("auth dir mode %v, want 0700", dst.Mode().Perm())
	}
	reopened, err := OpenKeyStore(f.dir, KeyStoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := reopened.Tenants(); !reflect.DeepEqual(got, []string{"ta", "tb"}) {
		t.Fatalf("tenants %v", got)
	}
	before, _ := f.keys.Keys("ta")
	after, _ := reopened.Keys("ta")
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("keys changed across reopen:\n%+v\n%+v", before, after)
	}
	if after[0].State != KeyRemoved || after[0].Public != nil || after[1].State != KeyActive || after[1].Kid != kid2 {
		t.Fatalf("states %+v", after)
	}
	if strings.Contains(readFile(t, path), `"seed": null`) {
		t.Fatal("removed key left a null seed field")
	}
	// A token issued from the reopened store verifies against the original one.
	token, err := NewIssuer(reopened, f.clock, nil).Issue("ta", "bob", []string{"cache.read:cache:ta/n/*"}, 1e9)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.verifier.Verify(token); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestKeyStoreErrors(t *testing.T) {
	f := newFixture(t)
	if _, err := f.keys.CreateTenant("ta"); !errors.Is(err, ErrTenantExists) {
		t.Errorf("duplicate tenant: %v", err)
	}
	if _, err := f.keys.CreateTenant("a/b"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad tenant name: %v", err)
	}
	if _, err := f.keys.Rotate("nope"); !errors.Is(err, ErrUnknownTenant) {
		t.Errorf("rotate unknown: %v", err)
	}
	if err := f.keys.RemoveKey("nope"); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("remove unknown: %v", err)
	}
	if _, err := f.keys.Keys("nope"); !errors.Is(err, ErrUnknownTenant) {
		t.Errorf("keys unknown: %v", err)
	}
	if _, err := f.keys.JWKS("nope"); !errors.Is(err, ErrUnknownTenant) {
		t.Errorf("jwks unknown: %v", err)
	}
}

func TestKeyStoreRejectsCorruptFiles(t *testing.T) {
	seed := base64.StdEncoding.EncodeToString(make([]byte, 32))
	kid := strings.Repeat("ab", 16)
	key := func(kid, state, seed string) string {
		return `{"kid":"` + kid + `","created":"2026-01-01T00:00:00Z","state":"` + state + `","seed":"` + seed + `"}`
	}
	tenant := func(id string, keys ...string) string {
		return `{"id":"` + id + `","created":"2026-01-01T00:00:00Z","keys":[` + strings.Join(keys, ",") + `]}`
	}
	doc := func(tenants ...string) string { return `{"version":1,"tenants":[` + strings.Join(tenants, ",") + `]}` }
	good := doc(tenant("t", key(kid, "active", seed)))
	for name, content := range map[string]string{
		"not json":         "{",
		"version":          `{"version":2,"tenants":[]}`,
		"bad tenant":       doc(tenant("a/b", key(kid, "active", seed))),
		"repeated tenant":  doc(tenant("t", key(kid, "active", seed)), tenant("t", key(strings.Repeat("cd", 16), "active", seed))),
		"bad kid":          doc(tenant("t", key("xyz", "active", seed))),
		"upper-case kid":   doc(tenant("t", key(strings.ToUpper(kid), "active", seed))),
		"repeated kid":     doc(tenant("t", key(kid, "active", seed)), tenant("u", key(kid, "active", seed))),
		"short seed":       doc(tenant("t", key(kid, "active", "AAAA"))),
		"removed has seed": doc(tenant("t", key(kid, "active", seed), key(strings.Repeat("cd", 16), "removed", seed))),
		"unknown state":    doc(tenant("t", key(kid, "sleeping", seed))),
		"no active key":    doc(tenant("t", key(kid, "verify-only", seed))),
		"two active keys":  doc(tenant("t", key(kid, "active", seed), key(strings.Repeat("cd", 16), "active", seed))),
	} {
		if _, err := decodeStoreFile([]byte(content)); !errors.Is(err, ErrCorruptKeyStore) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := decodeStoreFile([]byte(good)); err != nil {
		t.Fatalf("good document refused: %v", err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "auth"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(KeyStorePath(dir), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenKeyStore(dir, KeyStoreOptions{}); !errors.Is(err, ErrCorruptKeyStore) {
		t.Fatalf("open corrupt: %v", err)
	}
}

func TestJWKSDocument(t *testing.T) {
	f := newFixture(t)
	if _, err := f.keys.Rotate("ta"); err != nil {
		t.Fatal(err)
	}
	infos, _ := f.keys.Keys("ta")
	if err := f.keys.RemoveKey(infos[0].Kid); err != nil {
		t.Fatal(err)
	}
	if _, err := f.keys.Rotate("ta"); err != nil {
		t.Fatal(err)
	}
	doc, err := f.keys.JWKS("ta")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(doc)
	var generic struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	if len(generic.Keys) != 2 {
		t.Fatalf("want the verify-only and the active key, got %s", raw)
	}
	for i, k := range generic.Keys {
		x, err := base64.RawURLEncoding.DecodeString(k["x"])
		if err != nil || len(x) != 32 || strings.HasSuffix(k["x"], "=") {
			t.Fatalf("x %q: %v", k["x"], err)
		}
		if k["kty"] != "OKP" || k["alg"] != "EdDSA" || k["use"] != "sig" || k["crv"] != "Ed25519" || len(k) != 6 {
			t.Fatalf("key %v", k)
		}
		if now, _ := f.keys.Keys("ta"); k["kid"] != now[i+1].Kid {
			t.Fatalf("key %d is %s, want the store's key %d (oldest verifying first)", i, k["kid"], i+1)
		}
		pub, err := f.keys.VerificationKey("ta", k["kid"])
		if err != nil || string(pub) != string(x) {
			t.Fatalf("JWKS x does not match the store: %v", err)
		}
	}
}

// Every mutation either completes or leaves memory unchanged, and keys.json is always the
// old or the new document, whichever operation fails (docs/auth.md, fault model).
func TestKeyStoreSurvivesAnyFailurePoint(t *testing.T) {
	for n := 0; ; n++ {
		dir := t.TempDir()
		ks, err := OpenKeyStore(dir, KeyStoreOptions{Rand: seededRand(t, 3)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ks.CreateTenant("ta"); err != nil {
			t.Fatal(err)
		}
		oldFile := readFile(t, KeyStorePath(dir))
		oldKeys, _ := ks.Keys("ta")

		faulty := newFaultFS(n)
		ks.opts.FS = faulty
		_, err = ks.Rotate("ta")
		if err == nil {
			if faulty.Calls() <= n {
				if n < 6 { // create, write, sync, close, rename, sync dir
					t.Fatalf("only %d failure points reached", n)
				}
				return // the workload no longer reaches op n: every point was tried
			}
			t.Fatalf("op %d failed but Rotate succeeded", n)
		}
		if !errors.Is(err, errInjected) {
			t.Fatalf("op %d: foreign error %v", n, err)
		}
		if keys, _ := ks.Keys("ta"); !reflect.DeepEqual(keys, oldKeys) {
			t.Fatalf("op %d: memory changed after a failed Rotate", n)
		}
		reopened, err := OpenKeyStore(dir, KeyStoreOptions{})
		if err != nil {
			t.Fatalf("op %d: store does not reopen: %v", n, err)
		}
		keys, _ := reopened.Keys("ta")
		onDisk := readFile(t, KeyStorePath(dir))
		if onDisk != oldFile && len(keys) != 2 {
			t.Fatalf("op %d: file is neither old nor new: %s", n, onDisk)
		}
	}
}
