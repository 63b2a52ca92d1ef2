package auth

import "testing"

// BenchmarkVerify compares a cache hit (the per-stream hot path: one map lookup) with a
// full EdDSA verification. See docs/bench/auth.md.
func BenchmarkVerify(b *testing.B) {
	fx := newFixture(b)
	token := fx.issue(b, "ta", AdminPermissions("ta")...)
	b.Run("cached", func(b *testing.B) {
		if _, err := fx.verifier.Verify(token); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := fx.verifier.Verify(token); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("uncached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := fx.verifier.verify(token); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAllow is the per-operation permission check.
func BenchmarkAllow(b *testing.B) {
	fx := newFixture(b)
	scoped, err := fx.verifier.Verify(fx.issue(b, "ta",
		"stream.subscribe:stream:ta/other/*", "cache.read:cache:ta/ns/*", "stream.publish:stream:ta/payments/orders"))
	if err != nil {
		b.Fatal(err)
	}
	admin, err := fx.verifier.Verify(fx.issue(b, "ta", AdminPermissions("ta")...))
	if err != nil {
		b.Fatal(err)
	}
	for name, p := range map[string]*Principal{"exact": scoped, "inherited": admin} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := p.Allow(ActionStreamPublish, "ta", "payments", "orders"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("denied", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := scoped.Allow(ActionCacheWrite, "ta", "ns", "c"); err != ErrForbidden {
				b.Fatal(err)
			}
		}
	})
}
