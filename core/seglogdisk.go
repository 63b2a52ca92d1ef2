package core

import "fmt"

// newSeglogDisk opens the seglog disk of core id under cfg.DataDir.
func newSeglogDisk(cfg *Config, id int) (coreDisk, error) {
	return nil, fmt.Errorf("%w: durable storage: package seglog has no Disk yet", ErrNoDurableStorage)
}
