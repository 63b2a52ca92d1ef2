package meta

// Held is one stream or cache a broker holds data for: Kind "stream" or
// "cache", its catalog name and the incarnation its data belongs to.
type Held struct {
	Kind        string
	TenantID    string
	Namespace   string
	Name        string
	Incarnation uint64
}

// Removals is the broker side's rule for a loaded snapshot (issue 17 item 2:
// "A broker never deletes data because a name is absent from a snapshot:
// only a tombstone removes"): of held, the entries whose data may go, those
// with a tombstone at or above their incarnation and no live stream or cache
// of that name at their incarnation. A name merely absent from s is kept.
func Removals(s *State, held []Held) []Held {
	var out []Held
	for _, h := range held {
		key := h.TenantID + "/" + h.Namespace + "/" + h.Name
		tomb, ok := s.tombstones.get(h.Kind + "/" + key)
		if !ok || tomb.Incarnation < h.Incarnation {
			continue
		}
		if h.Kind == "stream" {
			if st, live := s.streams.get(key); live && st.Incarnation == h.Incarnation {
				continue
			}
		} else if c, live := s.caches.get(key); live && c.Incarnation == h.Incarnation {
			continue
		}
		out = append(out, h)
	}
	return out
}
