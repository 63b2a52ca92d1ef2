package broker

import (
	"container/list"
	"sync"

	"felix/netq"
)

// pendingConns lists the connections that have not authenticated yet, oldest first. At
// FELIX_MAX_CONNECTIONS the listener asks evictOldest to close the oldest of them so a new
// connection gets its slot (docs/operations.md, "Bounds"): idle unauthenticated connections
// can delay clients by at most one handshake, and the auth deadline closes them anyway.
type pendingConns struct {
	mu   sync.Mutex
	list list.List // of *connHandler
}

// add registers h as unauthenticated.
func (p *pendingConns) add(h *connHandler) {
	p.mu.Lock()
	h.pendingElem = p.list.PushBack(h)
	p.mu.Unlock()
}

// remove drops h (authenticated or ended); a no-op when it is not listed.
func (p *pendingConns) remove(h *connHandler) {
	p.mu.Lock()
	if h.pendingElem != nil {
		p.list.Remove(h.pendingElem)
		h.pendingElem = nil
	}
	p.mu.Unlock()
}

// evictOldest closes the oldest unauthenticated connection with netq.CodeAuthTimeout and
// releases its slot; it reports whether there was one (netq.Options.Evict).
func (s *Server) evictOldest() bool {
	p := &s.pending
	p.mu.Lock()
	e := p.list.Front()
	if e == nil {
		p.mu.Unlock()
		return false
	}
	h := e.Value.(*connHandler)
	p.list.Remove(e)
	h.pendingElem = nil
	p.mu.Unlock()
	s.m.authEvictions.Inc()
	_ = h.conn.CloseWithError(netq.CodeAuthTimeout, "auth timeout: evicted at the connection limit")
	h.conn.Release()
	return true
}
