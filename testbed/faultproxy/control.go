package faultproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// maxControlBody bounds a control request body: 64 KiB.
const maxControlBody = 64 << 10

// Handler returns the control API over HTTP (JSON in and out; errors are {"error": "..."}):
//
//	GET  /links        → Snapshot: seed, addresses, sessions, both links' faults and counters
//	GET  /links/{dir}  → LinkState of "to-server" or "to-client" ("both": Snapshot)
//	PUT  /links/{dir}  ← a Faults document (see Faults); replaces the link's faults ("both": each);
//	                   → the new state as for GET
//	POST /reset        → clears both links' faults and releases queued datagrams (Proxy.Reset); → Snapshot
//	GET  /changes      → []Change, oldest first
//
// A malformed body, an unknown field, an out-of-range value or an unknown link is 400; a body over
// 64 KiB is 413; a wrong method is 405, an unknown path 404; a Host header that is not loopback
// (DNS rebinding) is 403; a closed proxy is 503.
func (p *Proxy) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /links", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, p.Snapshot())
	})
	mux.HandleFunc("GET /links/{dir}", func(w http.ResponseWriter, r *http.Request) {
		d, err := ParseDirection(r.PathValue("dir"))
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, p.state(d))
	})
	mux.HandleFunc("PUT /links/{dir}", p.handlePut)
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, r *http.Request) {
		if err := p.update(Both, "http "+r.RemoteAddr+" reset", true, func(Faults) Faults { return Faults{} }); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, p.Snapshot())
	})
	mux.HandleFunc("GET /changes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, p.Changes())
	})
	for path, allow := range map[string]string{"/links": "GET", "/links/{dir}": "GET, PUT", "/reset": "POST", "/changes": "GET"} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "faultproxy: " + r.Method + " " + path + ": use " + allow})
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "faultproxy: no such path " + r.URL.Path})
	})
	return loopbackHostOnly(mux)
}

func (p *Proxy) handlePut(w http.ResponseWriter, r *http.Request) {
	d, err := ParseDirection(r.PathValue("dir"))
	if err != nil {
		writeError(w, err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxControlBody))
	if err != nil {
		writeError(w, err)
		return
	}
	f, err := ParseFaults(body)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := p.update(d, "http "+r.RemoteAddr, false, func(Faults) Faults { return f }); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p.state(d))
}

// state is the answer for one direction: a LinkState, or the Snapshot for Both.
func (p *Proxy) state(d Direction) any {
	if d == Both {
		return p.Snapshot()
	}
	return LinkState{Link: d, Faults: p.links[d].get(), Stats: p.links[d].stats()}
}

// loopbackHostOnly refuses requests whose Host is not a loopback name, so a web page reached by
// DNS rebinding cannot drive the proxy.
func loopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if !isLoopbackHost(host) {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "faultproxy: Host " + r.Host + " is not loopback"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isLoopbackHost reports whether host is "localhost" or a loopback IP literal.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// writeError maps an error to its status: bad input 400, too large 413, closed 503, else 500.
func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		status = http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrInvalidFaults), errors.Is(err, ErrUnknownLink):
		status = http.StatusBadRequest
	case errors.Is(err, ErrClosed):
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// ServeControl serves Handler over HTTP on addr ("host:port"), which must name a loopback IP or
// "localhost" (never an empty or wildcard host); it returns the bound address. The server stops at
// Close. Errors: ErrNotLoopback, ErrClosed, or the listen error.
func (p *Proxy) ServeControl(addr string) (net.Addr, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: control address %q: %v", ErrConfig, addr, err)
	}
	if !isLoopbackHost(host) {
		return nil, fmt.Errorf("%w: control address %q (want 127.0.0.1, ::1 or localhost)", ErrNotLoopback, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: control listen %s: %w", addr, err)
	}
	if a, ok := ln.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("%w: control bound to %v", ErrNotLoopback, ln.Addr())
	}
	srv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 5 * time.Second}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ln.Close()
		return nil, ErrClosed
	}
	p.servers = append(p.servers, srv)
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		_ = srv.Serve(ln)
	}()
	return ln.Addr(), nil
}
