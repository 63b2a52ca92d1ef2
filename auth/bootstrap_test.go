package auth

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func bootstrapOpts(t testing.TB, dir string, clock *fakeClock, log *bytes.Buffer) BootstrapOptions {
	return BootstrapOptions{
		DataDir: dir,
		Logger:  slog.New(slog.NewTextHandler(log, nil)),
		Clock:   clock,
		Rand:    seededRand(t, 7),
	}
}

func TestBootstrapFirstStartAndRestart(t *testing.T) {
	dir, clock := t.TempDir(), newFakeClock()
	var log bytes.Buffer
	first, err := Bootstrap(bootstrapOpts(t, dir, clock, &log))
	if err != nil {
		t.Fatal(err)
	}
	if !first.FirstStart || !first.TokenWritten || first.Disabled {
		t.Fatalf("first start %+v", first)
	}
	path := filepath.Join(dir, AdminTokenFile)
	if first.AdminTokenPath != path || !strings.Contains(log.String(), path) {
		t.Fatalf("token path not reported: %q / log %s", first.AdminTokenPath, log.String())
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("admin.token mode %v, want 0600", st.Mode().Perm())
	}
	token := strings.TrimSpace(readFile(t, path))
	p, err := Authenticate(first.Verifier, DefaultTenant, token)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Expires.Equal(clock.Now().Add(DefaultAdminTokenTTL)) || p.Subject != AdminSubject {
		t.Fatalf("admin principal %+v", p)
	}
	for _, a := range []Action{ActionStreamPublish, ActionStreamSubscribe, ActionCacheRead, ActionCacheWrite, ActionStreamManage} {
		if err := p.Allow(a, DefaultTenant, DefaultNamespace, "anything"); err != nil {
			t.Errorf("admin %v: %v", a, err)
		}
	}
	kids, _ := first.Keys.Keys(DefaultTenant)

	// Restart: same key, same token file, nothing written.
	clock.Advance(24 * time.Hour)
	log.Reset()
	second, err := Bootstrap(bootstrapOpts(t, dir, clock, &log))
	if err != nil {
		t.Fatal(err)
	}
	if second.FirstStart || second.TokenWritten {
		t.Fatalf("restart rewrote state: %+v", second)
	}
	if again, _ := second.Keys.Keys(DefaultTenant); len(again) != 1 || again[0].Kid != kids[0].Kid {
		t.Fatalf("restart changed keys: %+v", again)
	}
	if strings.TrimSpace(readFile(t, path)) != token {
		t.Fatal("restart changed a valid token")
	}

	// Once the token expires, the next start writes a fresh one.
	clock.Advance(DefaultAdminTokenTTL)
	third, err := Bootstrap(bootstrapOpts(t, dir, clock, &log))
	if err != nil {
		t.Fatal(err)
	}
	fresh := strings.TrimSpace(readFile(t, path))
	if !third.TokenWritten || fresh == token {
		t.Fatal("expired admin token was not replaced")
	}
	if _, err := Authenticate(third.Verifier, DefaultTenant, fresh); err != nil {
		t.Fatal(err)
	}

	// A missing or damaged file is rewritten too.
	if err := os.WriteFile(path, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fourth, err := Bootstrap(bootstrapOpts(t, dir, clock, &log))
	if err != nil || !fourth.TokenWritten {
		t.Fatalf("damaged token not replaced: %v %+v", err, fourth)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if fifth, err := Bootstrap(bootstrapOpts(t, dir, clock, &log)); err != nil || !fifth.TokenWritten {
		t.Fatalf("missing token not replaced: %v", err)
	}
}

func TestBootstrapDisabledWarnsEveryStart(t *testing.T) {
	dir := t.TempDir()
	for start := 0; start < 2; start++ {
		var log bytes.Buffer
		opts := bootstrapOpts(t, dir, newFakeClock(), &log)
		opts.Disabled = true
		res, err := Bootstrap(opts)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Disabled || res.Keys != nil || !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), "FELIX_AUTH=off") {
			t.Fatalf("start %d: %+v, log %q", start, res, log.String())
		}
		p, err := res.Verifier.Verify("")
		if err != nil || p.Allow(ActionStreamPublish, "whoever", "ns", "s") != nil {
			t.Fatalf("disabled mode refused: %v", err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("disabled mode wrote %d entries into the data dir", len(entries))
	}
}

func TestBootstrapFailuresAreReported(t *testing.T) {
	for n := 0; ; n++ {
		dir := t.TempDir()
		var log bytes.Buffer
		opts := bootstrapOpts(t, dir, newFakeClock(), &log)
		faulty := newFaultFS(n)
		opts.FS = faulty
		_, err := Bootstrap(opts)
		if err == nil {
			if faulty.Calls() <= n {
				break
			}
			t.Fatalf("op %d failed but Bootstrap succeeded", n)
		}
		if !errors.Is(err, errInjected) {
			t.Fatalf("op %d: foreign error %v", n, err)
		}
		// Whatever failed, a clean restart reaches a working admin token.
		opts.FS = nil
		res, err := Bootstrap(opts)
		if err != nil {
			t.Fatalf("op %d: restart after fault: %v", n, err)
		}
		if _, err := Authenticate(res.Verifier, DefaultTenant, strings.TrimSpace(readFile(t, res.AdminTokenPath))); err != nil {
			t.Fatalf("op %d: admin token after restart: %v", n, err)
		}
	}
}

func TestDisabledFromEnv(t *testing.T) {
	for value, want := range map[string]bool{"": false, "on": false, "ON": false, "off": true, " Off ": true} {
		got, err := DisabledFromEnv(value)
		if err != nil || got != want {
			t.Errorf("%q: %v %v", value, got, err)
		}
	}
	for _, value := range []string{"0", "false", "of", "disabled"} {
		if _, err := DisabledFromEnv(value); !errors.Is(err, ErrInvalidSetting) {
			t.Errorf("%q: %v", value, err)
		}
	}
}

func TestIssueTokenForCLI(t *testing.T) {
	dir := t.TempDir()
	var log bytes.Buffer
	opts := bootstrapOpts(t, dir, newFakeClock(), &log)
	opts.Clock = nil // IssueToken uses the real clock
	res, err := Bootstrap(opts)
	if err != nil {
		t.Fatal(err)
	}
	token, err := IssueToken(dir, DefaultTenant, "ci-bot", []string{"stream.publish:stream:default/default/*"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Authenticate(res.Verifier, DefaultTenant, token)
	if err != nil {
		t.Fatal(err)
	}
	if p.Allow(ActionStreamPublish, DefaultTenant, DefaultNamespace, "s") != nil || p.Allow(ActionStreamSubscribe, DefaultTenant, DefaultNamespace, "s") != ErrForbidden {
		t.Fatal("scoped token has the wrong scope")
	}
	if _, err := IssueToken(dir, DefaultTenant, "x", []string{"tenant.manage:tenant:*"}, time.Hour); !errors.Is(err, ErrInvalidPermission) {
		t.Fatalf("wildcard tenant issued: %v", err)
	}
}
