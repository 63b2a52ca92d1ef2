package auth

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParsePermissionAccepts(t *testing.T) {
	for _, perm := range []string{
		"stream.publish:stream:t1/payments/orders",
		"stream.subscribe:stream:t1/payments/*",
		"cache.read:cache:t1/ns/c",
		"cache.write:cache:t1/ns/*",
		"stream.manage:stream:t1/ns/*",
		"cache.manage:cache:t1/ns/c",
		"ns.manage:namespace:t1/payments",
		"ns.manage:namespace:t1/*",
		"tenant.manage:tenant:t1",
		"rbac.view:tenant:t1",
		"rbac.policy.manage:tenant:t1",
		"rbac.assignment.manage:tenant:t1",
	} {
		p, err := ParsePermission("t1", perm)
		if err != nil {
			t.Errorf("%s: %v", perm, err)
			continue
		}
		if p.String() != perm {
			t.Errorf("round trip %q -> %q", perm, p.String())
		}
	}
}

func TestParsePermissionRejects(t *testing.T) {
	for _, perm := range []string{
		"",
		"stream.publish",
		"stream.fly:stream:t1/ns/s",
		"tenant.manage:tenant:*",
		"stream.publish:stream:*",
		"stream.publish:stream:*/*",
		"cache.read:cache:*",
		"cache.read:cache:*/*",
		"stream.publish:stream:t1/*",
		"stream.publish:stream:t1/*/*",
		"stream.publish:stream:t1/ns/or*",
		"stream.publish:stream:t2/ns/s",     // cross-tenant
		"tenant.manage:tenant:t2",           // cross-tenant
		"ns.manage:namespace:t2/*",          // cross-tenant
		"stream.publish:cache:t1/ns/c",      // wrong family
		"cache.read:stream:t1/ns/s",         // wrong family
		"tenant.manage:namespace:t1/ns",     // wrong family
		"stream.publish:stream:t1/ns/s/x",   // too many segments
		"stream.publish:stream:t1/ns",       // too few
		"stream.publish:stream:t1//s",       // empty name
		"stream.publish:stream:t1/ns/a b",   // space
		"ns.manage:namespace:t1/*/x",        // too many
		"stream.publish:stream:t1/ns/a:b",   // colon in a name
		"tenant.manage:tenant:t1/x",         // tenant with a path
		"rbac.view:tenant:",                 // empty tenant
		"stream.publish:stream:t1/ns/\x01x", // control byte
	} {
		_, err := ParsePermission("t1", perm)
		var pe *PermissionError
		if !errors.Is(err, ErrInvalidPermission) || !errors.As(err, &pe) || pe.Permission != perm {
			t.Errorf("%q: got %v, want *PermissionError", perm, err)
		}
	}
	if _, err := ParsePermissions("t1", nil); !errors.Is(err, ErrInvalidPermission) {
		t.Errorf("empty list: %v", err)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"stream:t/ns/s", "stream:t/ns/s", true},
		{"stream:t/ns/s", "stream:t/ns/s2", false},
		{"stream:t/ns/*", "stream:t/ns/s", true},
		{"stream:t/ns/*", "stream:t/ns2/s", false},
		{"stream:t/*", "stream:t/ns/s", true}, // '*' crosses '/'
		{"stream:t/*", "stream:t2/ns/s", false},
		{"*", "anything/at/all", true},
		{"*", "", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"a*b*c", "abc", true},
		{"a*bc", "abcbc", true},
		{"a**", "a", true},
		{"stream:*/ns/*", "stream:t/ns/s", true},
		{"stream:*/ns/*", "stream:t/other/s", false},
		{"", "", true},
		{"", "x", false},
	} {
		if got := globMatch(c.pattern, []byte(c.s)); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}

func principalWith(tenant string, perms ...string) *Principal {
	now := time.Unix(1000, 0)
	return newPrincipal(tenant, "alice", now, now.Add(time.Hour), perms)
}

func TestAllowChecksActionAndObject(t *testing.T) {
	p := principalWith("t1",
		"stream.publish:stream:t1/payments/orders",
		"stream.subscribe:stream:t1/payments/*",
		"cache.read:cache:t1/sessions/*",
	)
	cases := []struct {
		action          Action
		tenant, ns, obj string
		want            error
	}{
		{ActionStreamPublish, "t1", "payments", "orders", nil},
		{ActionStreamPublish, "t1", "payments", "refunds", ErrForbidden},
		{ActionStreamSubscribe, "t1", "payments", "refunds", nil},
		{ActionStreamSubscribe, "t1", "other", "refunds", ErrForbidden},
		{ActionCacheRead, "t1", "sessions", "s", nil},
		{ActionCacheWrite, "t1", "sessions", "s", ErrForbidden}, // missing permission
		{ActionStreamPublish, "t2", "payments", "orders", ErrTenantMismatch},
		{ActionStreamManage, "t1", "payments", "orders", ErrForbidden},
		{Action(0), "t1", "payments", "orders", ErrForbidden},
		{Action(200), "t1", "payments", "orders", ErrForbidden},
		// A '/' in a name must not let "payments/*" reach another namespace.
		{ActionStreamSubscribe, "t1", "payments/x", "y", ErrForbidden},
		{ActionStreamSubscribe, "t1", "payments", "x/y", ErrForbidden},
		{ActionStreamSubscribe, "t1", "", "x", ErrForbidden},
		{ActionStreamSubscribe, "t1", "payments", "", ErrForbidden},
	}
	for _, c := range cases {
		if got := p.Allow(c.action, c.tenant, c.ns, c.obj); got != c.want {
			t.Errorf("Allow(%v, %q, %q, %q) = %v, want %v", c.action, c.tenant, c.ns, c.obj, got, c.want)
		}
	}
	var nobody *Principal
	if err := nobody.Allow(ActionStreamPublish, "t1", "payments", "orders"); err != ErrUnauthorized {
		t.Errorf("nil principal: %v", err)
	}
}

func TestAllowInheritance(t *testing.T) {
	admin := principalWith("t1", AdminPermissions("t1")...)
	for a := ActionStreamPublish; a < actionLimit; a++ {
		ns, obj := "ns", "o"
		switch a.kind() {
		case kindTenant:
			ns, obj = "", ""
		case kindNamespace:
			obj = ""
		}
		if err := admin.Allow(a, "t1", ns, obj); err != nil {
			t.Errorf("tenant admin %v: %v", a, err)
		}
		if err := admin.Allow(a, "t2", ns, obj); err != ErrTenantMismatch {
			t.Errorf("tenant admin %v in t2: %v", a, err)
		}
	}

	nsAdmin := principalWith("t1", "ns.manage:namespace:t1/payments")
	for _, a := range []Action{ActionStreamPublish, ActionStreamSubscribe, ActionStreamManage, ActionCacheRead, ActionCacheWrite, ActionCacheManage} {
		if err := nsAdmin.Allow(a, "t1", "payments", "x"); err != nil {
			t.Errorf("ns admin %v in its namespace: %v", a, err)
		}
		if err := nsAdmin.Allow(a, "t1", "paymentsx", "x"); err != ErrForbidden {
			t.Errorf("ns admin %v in another namespace: %v", a, err)
		}
	}
	if err := nsAdmin.Allow(ActionTenantManage, "t1", "", ""); err != ErrForbidden {
		t.Errorf("ns.manage must not imply tenant.manage: %v", err)
	}
	// The manage actions never imply rbac (spec/auth.md §2).
	onlyManage := principalWith("t1", "tenant.manage:tenant:t1")
	for _, a := range []Action{ActionRBACView, ActionRBACPolicyManage, ActionRBACAssignmentManage} {
		if err := onlyManage.Allow(a, "t1", "", ""); err != ErrForbidden {
			t.Errorf("tenant.manage implied %v: %v", a, err)
		}
	}
}

func TestAllowIgnoresUnparsablePerms(t *testing.T) {
	p := principalWith("t1", "garbage", "stream.fly:stream:t1/a/b", ":", "")
	if err := p.Allow(ActionStreamPublish, "t1", "a", "b"); err != ErrForbidden {
		t.Fatalf("unparsable perms granted something: %v", err)
	}
}

func TestAllowDoesNotAllocate(t *testing.T) {
	p := principalWith("t1", "stream.subscribe:stream:t1/other/*", "stream.publish:stream:t1/payments/*")
	allocs := testing.AllocsPerRun(100, func() {
		if p.Allow(ActionStreamPublish, "t1", "payments", "orders") != nil {
			t.Fatal("refused")
		}
	})
	if allocs != 0 {
		t.Fatalf("Allow allocates %.1f times per call", allocs)
	}
}

func TestCheckExpiry(t *testing.T) {
	p := principalWith("t1", "tenant.manage:tenant:t1")
	if err := p.CheckExpiry(p.Expires.Add(Leeway)); err != nil {
		t.Fatalf("within leeway: %v", err)
	}
	if err := p.CheckExpiry(p.Expires.Add(Leeway + time.Second)); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("past leeway: %v", err)
	}
	if err := allowAllPrincipal.CheckExpiry(time.Unix(1<<40, 0)); err != nil {
		t.Fatalf("allow-all expired: %v", err)
	}
}

func TestValidName(t *testing.T) {
	for s, want := range map[string]bool{
		"a": true, "orders-2026.v1_x": true, "ünïcode": true, strings.Repeat("x", 255): true,
		"": false, strings.Repeat("x", 256): false, "a/b": false, "a*": false, "a:b": false,
		"a b": false, "a\x7f": false, "\xff": false, ".": false, "..": false, "...": true, ".a": true,
	} {
		if got := ValidName(s); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestWireText(t *testing.T) {
	for err, want := range map[error]string{
		ErrForbidden:                   "forbidden",
		ErrTenantMismatch:              "tenant mismatch",
		ErrUnauthorized:                "auth required",
		tokenErr("token expired", nil): "auth required",
		errors.New("disk on fire"):     "",
		permErr("x", "bad"):            "",
	} {
		if got := WireText(err); got != want {
			t.Errorf("WireText(%v) = %q, want %q", err, got, want)
		}
	}
	if ErrForbidden.Error() != "forbidden" || ErrTenantMismatch.Error() != "tenant mismatch" || ErrUnauthorized.Error() != "auth required" {
		t.Fatal("sentinel texts drifted from the v1 wire texts")
	}
}

func TestActionNames(t *testing.T) {
	for a := ActionStreamPublish; a < actionLimit; a++ {
		back, ok := ParseAction(a.String())
		if !ok || back != a {
			t.Errorf("%v does not round-trip", a)
		}
	}
	if _, ok := ParseAction("stream.*"); ok {
		t.Error("wildcard action parsed")
	}
	if CacheOpAction(true) != ActionCacheRead || CacheOpAction(false) != ActionCacheWrite {
		t.Error("CacheOpAction")
	}
}
