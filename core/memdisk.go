package core

import (
	"fmt"
	"time"

	"felix/ring"
)

// memoryDisk is the coreDisk of an engine without Config.DataDir: it opens no
// logs and only waits on its ring, where Wake (an eventfd on the io_uring
// backend) ends the wait.
type memoryDisk struct {
	ring  ring.Ring
	reaps [8]ring.Completion
}

// newMemoryDisk creates the disk and its ring (on backend, Config.IOBackend);
// call it on the core goroutine (the ring's owner).
func newMemoryDisk(backend string) (*memoryDisk, error) {
	r, err := ring.New(ring.Options{Backend: backend, Entries: 8})
	if err != nil {
		return nil, fmt.Errorf("core: ring: %w", err)
	}
	return &memoryDisk{ring: r}, nil
}

func (d *memoryDisk) OpenLog(LogAddr, logOptions) (shardLog, error) {
	return nil, ErrNoDurableStorage
}
func (d *memoryDisk) RemoveLogs(ShardRef) error { return nil }
func (d *memoryDisk) Flush() error              { return nil }
func (d *memoryDisk) SyncAll() error            { return nil }
func (d *memoryDisk) Wake() error               { return d.ring.Wake() }
func (d *memoryDisk) Close() error              { return d.ring.Close() }

// Poll waits up to block for a Wake; it never sees completions (no ops).
func (d *memoryDisk) Poll(block time.Duration) error {
	minimum := 0
	if block > 0 {
		minimum = 1
	}
	_, err := d.ring.Wait(d.reaps[:], minimum, block)
	return err
}
