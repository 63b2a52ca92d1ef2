package transport

// The server-side dispatcher: one Handler per request kind.

import (
	"context"
	"fmt"
	"sync"

	"felix/proto"
)

// Dispatcher routes each decoded request to the Handler registered for its kind; its Handle
// method is the Handler given to Listener.Serve, and the listener writes the answer with the
// request's correlation id. A kind nobody registered is answered UnsupportedKind (the stream
// goes on, as for a kind the codec does not know). Safe for concurrent use; handlers may be
// registered while serving.
type Dispatcher struct {
	mu       sync.RWMutex
	handlers map[proto.Kind]Handler
}

// NewDispatcher returns a Dispatcher with no handler registered.
func NewDispatcher() *Dispatcher { return &Dispatcher{handlers: map[proto.Kind]Handler{}} }

// Register makes h answer the requests of kind, replacing any previous handler. Answer kinds
// (HelloOk, Error, …) may be registered but peers never send them as requests. A nil h
// unregisters kind.
func (d *Dispatcher) Register(kind proto.Kind, h Handler) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if h == nil {
		delete(d.handlers, kind)
		return
	}
	d.handlers[kind] = h
}

// Handle answers req with the handler of its kind, or UnsupportedKind when there is none. It
// has the Handler signature: pass d.Handle to Listener.Serve.
func (d *Dispatcher) Handle(ctx context.Context, peer string, req proto.InternalMessage) proto.InternalMessage {
	d.mu.RLock()
	h := d.handlers[req.Kind()]
	d.mu.RUnlock()
	if h == nil {
		return &proto.UnsupportedKind{CorrelationID: req.Correlation(), RefusedKind: req.Kind()}
	}
	return h(ctx, peer, req)
}

// Kinds lists the registered kinds (for logs and tests), in no particular order.
func (d *Dispatcher) Kinds() []proto.Kind {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]proto.Kind, 0, len(d.handlers))
	for k := range d.handlers {
		out = append(out, k)
	}
	return out
}

// String names the registered kinds.
func (d *Dispatcher) String() string { return fmt.Sprintf("transport.Dispatcher%v", d.Kinds()) }
