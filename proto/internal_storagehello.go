package proto

// StorageHello and StorageHelloOk (32/33): the handshake carrying each end's storage identity
// (issue 20, known gap 4; seeds/upgrades-and-compatibility.txt, "Storage identities during a
// roll", the #1281 window). Additive: Hello/HelloOk (0/1) are frozen and still accepted.

// StorageIDSize is the size of a storage identity on the wire (seglog.StorageID).
const StorageIDSize = 16

// StorageHello (32) opens a connection like Hello (0) and carries the caller's storage
// identity: string node_id, then u8[16] storage_id (all zero: unknown). Answered by
// StorageHelloOk; a listener predating it answers UnsupportedKind or closes the connection,
// and the caller dials again with Hello.
type StorageHello struct {
	CorrelationID uint64
	NodeID        []byte
	StorageID     [StorageIDSize]byte
}

// StorageHelloOk (33) answers StorageHello: the peer's node id, then u8[16] storage_id, the
// identity of the peer's data directory for as long as this connection lasts (all zero:
// unknown).
type StorageHelloOk struct {
	CorrelationID uint64
	NodeID        []byte
	StorageID     [StorageIDSize]byte
}

// Kind implements InternalMessage.
func (*StorageHello) Kind() Kind { return KindStorageHello }

// Kind implements InternalMessage.
func (*StorageHelloOk) Kind() Kind { return KindStorageHelloOk }

// Correlation implements InternalMessage.
func (m *StorageHello) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *StorageHelloOk) Correlation() uint64 { return m.CorrelationID }

// AppendBody implements InternalMessage.
func (m *StorageHello) AppendBody(dst []byte) ([]byte, error) {
	return appendStorageHello(dst, m.CorrelationID, m.NodeID, &m.StorageID)
}

// AppendBody implements InternalMessage.
func (m *StorageHelloOk) AppendBody(dst []byte) ([]byte, error) {
	return appendStorageHello(dst, m.CorrelationID, m.NodeID, &m.StorageID)
}

func appendStorageHello(dst []byte, corr uint64, nodeID []byte, id *[StorageIDSize]byte) ([]byte, error) {
	out, err := appendChecked16(appendU64(dst, corr), nodeID)
	if err != nil {
		return dst, err
	}
	return append(out, id[:]...), nil
}

// decodeStorageHello reads the rest of a StorageHello or StorageHelloOk body.
func decodeStorageHello(kind Kind, corr uint64, c *cursor) (InternalMessage, bool, error) {
	node, err := c.str16("node_id")
	if err != nil {
		return nil, true, err
	}
	raw, err := c.bytes("storage_id", StorageIDSize)
	if err != nil {
		return nil, true, err
	}
	var id [StorageIDSize]byte
	copy(id[:], raw)
	if kind == KindStorageHelloOk {
		return &StorageHelloOk{CorrelationID: corr, NodeID: node, StorageID: id}, true, nil
	}
	return &StorageHello{CorrelationID: corr, NodeID: node, StorageID: id}, true, nil
}
