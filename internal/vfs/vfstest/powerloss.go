package vfstest

import "os"

// track starts remembering path's content at a writable open (TrackSyncs):
// on its first open, or again when it is truncated by O_TRUNC.
func (f *FaultFS) track(path string, flag int) error {
	f.mu.Lock()
	_, ok := f.synced[path]
	f.mu.Unlock()
	if ok && flag&os.O_TRUNC == 0 {
		return nil
	}
	return f.snapshot(path)
}

// snapshot records path's current content as its durable content.
func (f *FaultFS) snapshot(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.synced == nil {
		f.synced = map[string][]byte{}
	}
	f.synced[path] = b
	return nil
}

// PowerLoss models losing power now (TrackSyncs must be set): every tracked
// file still present goes back to its content as of its last Datasync (or
// open); writes not fdatasync'd since are lost. Removals and renames are kept
// (the worst case for a log that deletes files before its new data is
// durable). It acts on the OS file system directly.
func (f *FaultFS) PowerLoss() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for path, b := range f.synced {
		if _, err := os.Stat(path); err != nil {
			continue // removed: stays removed
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
