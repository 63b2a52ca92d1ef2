package proto

import (
	"errors"
	"testing"
)

// StorageHello/StorageHelloOk round-trip; a Hello body read as StorageHello lacks the
// identity (ErrIncomplete) and a StorageHello read as Hello has trailing bytes, so neither
// relabelling is accepted; the numbers are assigned once (docs/internal-protocol.md).
func TestStorageHelloKinds(t *testing.T) {
	if KindStorageHello != 32 || KindStorageHelloOk != 33 || KindStorageHello.String() != "StorageHello" ||
		KindStorageHelloOk.String() != "StorageHelloOk" {
		t.Fatal("storage hello kinds are assigned once: 32 and 33")
	}
	id := [StorageIDSize]byte{1, 2, 3, 15: 0xff}
	for _, m := range []InternalMessage{&StorageHello{CorrelationID: 7, NodeID: []byte("n1"), StorageID: id},
		&StorageHelloOk{CorrelationID: 7, NodeID: []byte("n2"), StorageID: id}} {
		body, err := m.AppendBody(nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeInternal(m.Kind(), body)
		if err != nil {
			t.Fatalf("%v: %v", m.Kind(), err)
		}
		switch g := got.(type) {
		case *StorageHello:
			if g.CorrelationID != 7 || string(g.NodeID) != "n1" || g.StorageID != id {
				t.Fatalf("decoded %+v", g)
			}
		case *StorageHelloOk:
			if g.CorrelationID != 7 || string(g.NodeID) != "n2" || g.StorageID != id {
				t.Fatalf("decoded %+v", g)
			}
		default:
			t.Fatalf("%v decoded as %T", m.Kind(), got)
		}
		if _, err := DecodeInternal(m.Kind(), body[:len(body)-1]); !errors.Is(err, ErrIncomplete) {
			t.Fatalf("%v one byte short: %v, want ErrIncomplete", m.Kind(), err)
		}
		if _, err := DecodeInternal(KindHello, body); !errors.Is(err, ErrTrailingBytes) {
			t.Fatalf("%v read as Hello: %v, want ErrTrailingBytes", m.Kind(), err)
		}
	}
	old, _ := (&Hello{CorrelationID: 1, NodeID: []byte("n1")}).AppendBody(nil)
	if _, err := DecodeInternal(KindStorageHello, old); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Hello read as StorageHello: %v, want ErrIncomplete", err)
	}
	if _, err := (&StorageHello{NodeID: []byte{0xff}}).AppendBody(nil); err == nil {
		t.Fatal("a node id that is not UTF-8 was encoded")
	}
}
