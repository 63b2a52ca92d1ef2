package auth

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxNameBytes bounds tenant, namespace, stream, cache and subject names in bytes. 255 is
// the largest principal the publisher-principal encoding can carry
// (spec/client-protocol.md §8.6, u8 length).
const MaxNameBytes = 255

// ValidName reports whether s may be used as a tenant, namespace, stream or cache name in an
// object string (spec/auth.md §1): 1..MaxNameBytes bytes of valid UTF-8, no control bytes or
// spaces, and none of '/', ':' or '*', which structure object strings and patterns.
func ValidName(s string) bool {
	if len(s) == 0 || s == "." || s == ".." || len(s) > MaxNameBytes || !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c == 0x7f || c == '/' || c == ':' || c == '*' {
			return false
		}
	}
	return true
}

// Permission is one validated "<action>:<object-pattern>" grant (spec/auth.md §3.1 perms).
type Permission struct {
	Action  Action
	Pattern string // object pattern, e.g. "stream:t1/payments/*"
}

// String returns the wire form "<action>:<object-pattern>".
func (p Permission) String() string { return p.Action.String() + ":" + p.Pattern }

// ParsePermission validates one permission string for a token of tenant, with the write
// rules of spec/auth.md §1:
//
//	tenant.manage, rbac.*     tenant:{tenant}                       (tenant:* rejected)
//	ns.manage                 namespace:{tenant}/{ns} | namespace:{tenant}/*
//	stream.*                  stream:{tenant}/{ns}/{s} | stream:{tenant}/{ns}/*
//	cache.*                   cache:{tenant}/{ns}/{c}  | cache:{tenant}/{ns}/*
//
// The object family must be the action's own. Errors: *PermissionError (errors.Is
// ErrInvalidPermission) for an unknown action, a malformed or cross-tenant object, or a
// wildcard anywhere other than the last segment.
func ParsePermission(tenant, perm string) (Permission, error) {
	actionText, pattern, ok := strings.Cut(perm, ":")
	if !ok {
		return Permission{}, permErr(perm, `want "<action>:<object-pattern>"`)
	}
	action, ok := ParseAction(actionText)
	if !ok {
		return Permission{}, permErr(perm, "unknown action")
	}
	kind := action.kind()
	rest, ok := strings.CutPrefix(pattern, kindPrefixes[kind])
	if !ok {
		return Permission{}, permErr(perm, action.String()+" applies to "+kindPrefixes[kind]+" objects")
	}
	if reason := checkObjectPattern(kind, tenant, rest); reason != "" {
		return Permission{}, permErr(perm, reason)
	}
	return Permission{Action: action, Pattern: pattern}, nil
}

// checkObjectPattern validates the part after "<kind>:" and returns "" or the reason it is
// refused.
func checkObjectPattern(kind objectKind, tenant, rest string) string {
	segments := strings.Split(rest, "/")
	want := segmentCounts[kind]
	if len(segments) != want {
		return "object has " + itoa(len(segments)) + " segments, want " + itoa(want)
	}
	if segments[0] == "*" {
		return "the tenant may not be a wildcard"
	}
	if segments[0] != tenant {
		return "object belongs to another tenant"
	}
	for i, segment := range segments[1:] {
		last := i == len(segments)-2
		if segment == "*" && last {
			continue
		}
		if !ValidName(segment) {
			return "segment " + quote(segment) + " is not a name (wildcards only as the whole last segment)"
		}
	}
	return ""
}

// segmentCounts is the number of '/'-separated segments after "<kind>:" per family.
var segmentCounts = [...]int{kindTenant: 1, kindNamespace: 2, kindStream: 3, kindCache: 3}

func itoa(n int) string { return strconv.Itoa(n) }

// ParsePermissions validates every string with ParsePermission and fails on the first bad
// one. An empty list is refused: a token that grants nothing is a mistake.
func ParsePermissions(tenant string, perms []string) ([]Permission, error) {
	if len(perms) == 0 {
		return nil, permErr("", "no permissions given")
	}
	out := make([]Permission, 0, len(perms))
	for _, perm := range perms {
		p, err := ParsePermission(tenant, perm)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// AdminPermissions is the bootstrap/admin grant for tenant: tenant.manage on tenant:{tenant}
// (which by spec/auth.md §2 inheritance covers namespace/stream/cache manage and every
// read/write action in the tenant) plus the three rbac actions, which no manage action
// implies.
func AdminPermissions(tenant string) []string {
	object := "tenant:" + tenant
	return []string{
		"tenant.manage:" + object,
		"rbac.view:" + object,
		"rbac.policy.manage:" + object,
		"rbac.assignment.manage:" + object,
	}
}

// grants is a token's effective permissions after §2 inheritance, indexed by action. Each
// entry is a glob pattern over canonical object strings (spec/auth.md §4).
type grants [actionLimit][]string

// add records perm (the verify path is lenient: a string that does not parse as
// "<action>:<pattern>" with a known action grants nothing, and patterns are taken as globs).
func (g *grants) add(perm string) {
	actionText, pattern, ok := strings.Cut(perm, ":")
	if !ok {
		return
	}
	action, ok := ParseAction(actionText)
	if !ok {
		return
	}
	g.grant(action, pattern)
	switch action {
	case ActionTenantManage:
		if base, ok := strings.CutPrefix(pattern, "tenant:"); ok {
			g.grant(ActionNamespaceManage, "namespace:"+base+"/*")
			g.inheritInside(base)
		}
	case ActionNamespaceManage:
		if base, ok := strings.CutPrefix(pattern, "namespace:"); ok {
			g.inheritInside(base)
		}
	}
}

// inheritInside grants stream/cache manage and read/write on everything under base ("T" or
// "T/ns"), spec/auth.md §2 inheritance.
func (g *grants) inheritInside(base string) {
	for _, a := range [...]Action{ActionStreamManage, ActionStreamPublish, ActionStreamSubscribe} {
		g.grant(a, "stream:"+base+"/*")
	}
	for _, a := range [...]Action{ActionCacheManage, ActionCacheRead, ActionCacheWrite} {
		g.grant(a, "cache:"+base+"/*")
	}
}

func (g *grants) grant(a Action, pattern string) {
	for _, have := range g[a] {
		if have == pattern {
			return
		}
	}
	g[a] = append(g[a], pattern)
}

// globMatch reports whether s matches pattern, where '*' matches any run of bytes including
// '/' and every other byte matches itself (spec/auth.md §4). It does not allocate.
func globMatch(pattern string, s []byte) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return string(s) == pattern
	}
	if len(s) < star || string(s[:star]) != pattern[:star] {
		return false
	}
	s = s[star:]
	pattern = pattern[star+1:]
	for {
		star = strings.IndexByte(pattern, '*')
		if star < 0 {
			return len(s) >= len(pattern) && string(s[len(s)-len(pattern):]) == pattern
		}
		at := indexOf(s, pattern[:star])
		if at < 0 {
			return false
		}
		s = s[at+star:]
		pattern = pattern[star+1:]
	}
}

// indexOf is bytes.Index for a string needle without converting it.
func indexOf(s []byte, needle string) int {
	for i := 0; i+len(needle) <= len(s); i++ {
		if string(s[i:i+len(needle)]) == needle {
			return i
		}
	}
	return -1
}
