package broker

import (
	"net/http"
	"net/http/pprof"

	"felix/auth"
)

// registerPprof adds the Go profiler under /debug/pprof/ when FELIX_PPROF is on (issue 23
// item 7; off by default: a profile exposes the process's memory layout and command line,
// and a CPU profile or trace costs the broker while it runs). With auth on every profiler
// request needs a bearer token allowed tenant.manage on tenant:default (the admin token);
// the answers to a missing or refused one are the admin API's 401/403 JSON. Without
// FELIX_PPROF the paths are not registered at all (404).
func (s *Server) registerPprof(mux *http.ServeMux) {
	if !s.cfg.Pprof {
		return
	}
	gate := &Admin{Verifier: s.authRes.Verifier, Logger: s.log}
	guard := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if !gate.allow(w, r, auth.ActionTenantManage, auth.DefaultTenant, "", "") {
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("/debug/pprof/", guard(pprof.Index))
	mux.HandleFunc("/debug/pprof/cmdline", guard(pprof.Cmdline))
	mux.HandleFunc("/debug/pprof/profile", guard(pprof.Profile))
	mux.HandleFunc("/debug/pprof/symbol", guard(pprof.Symbol))
	mux.HandleFunc("/debug/pprof/trace", guard(pprof.Trace))
	s.log.Warn("FELIX_PPROF is on: /debug/pprof/ is served on the HTTP listener", "bind", s.cfg.MetricsBind,
		"needs_admin_token", s.cfg.Auth)
}
