package core

import (
	"os"

	"felix/ring"
)

// The forced backend passes (make test-syscall: FELIX_IO_BACKEND=syscall go
// test ./core/...) reach every ring of core's tests through the test seam
// testIOBackend: the engine itself reads no environment.
func init() { testIOBackend = os.Getenv(ring.EnvBackend) }
