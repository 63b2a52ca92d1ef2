package transport

// The storage identity in the handshake (issue 20, known gap 4: the seed's #1281 window;
// seeds/upgrades-and-compatibility.txt, "Storage identities during a roll";
// docs/internal-transport.md, "Storage identity"): StorageHello/StorageHelloOk (32/33)
// carry each end's identity, and every answer a connection carries is attributed to the
// identity its listener named at the handshake, never a later one.

import (
	"encoding/hex"
	"errors"
)

// StorageID is a broker's storage identity as the handshake carries it: the 16 bytes of
// seglog.StorageID (the identity of its data directory: renewed after an unclean stop under
// periodic/none fsync, new after a wiped data dir). The zero value is unknown: a peer that
// predates StorageHello, or one that has not set its own yet.
type StorageID [16]byte

// IsZero reports whether id is unknown.
func (id StorageID) IsZero() bool { return id == StorageID{} }

// String is id in lower-case hex (32 digits), "" when unknown (the control plane's form of
// a registered storage identity).
func (id StorageID) String() string {
	if id.IsZero() {
		return ""
	}
	return hex.EncodeToString(id[:])
}

// SetStorageID sets the local storage identity this broker sends in StorageHello and
// answers in StorageHelloOk, from the next handshake on (connections already up keep the
// identity they were opened under). The broker sets it once its run-state is begun
// (seglog.BeginRun), before it serves. Safe for concurrent use.
func (c *Credentials) SetStorageID(id StorageID) {
	c.mu.Lock()
	c.storageID = id
	c.mu.Unlock()
}

// StorageID is the local storage identity set by SetStorageID (zero: unknown).
func (c *Credentials) StorageID() StorageID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.storageID
}

// errOlderPeer: the listener refused StorageHello (UnsupportedKind, or the older build's
// close with CodeMalformed "first frame is not Hello"); the dialler dials once more with
// Hello and the peer's identity stays unknown.
var errOlderPeer = errors.New("transport: the peer predates StorageHello")

// PeerStorageID is the storage identity the peer named in StorageHelloOk on the connection
// that carried this request and its answer (zero: the peer predates StorageHello, or did not
// know its own). It is fixed when the request is written, so an answer is never attributed
// to an identity learned on a later connection.
func (p *Pending) PeerStorageID() StorageID { return p.peer }
