package bench

import (
	"bytes"
	"io"
	"sync"
)

// syncWriter serialises writes from the child's stdout and stderr copiers.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w.Len() > 1<<20 { // keep the last MiB at most
		s.w.Reset()
	}
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

var _ io.Writer = (*syncWriter)(nil)
