package ring

import (
	"os"
	"testing"
	"time"
)

func TestMeasureDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("writes about 20 MiB")
	}
	forEachBackend(t, 16, func(t *testing.T, r Ring) {
		dir := t.TempDir()
		lim, err := MeasureDisk(r, dir, 40*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if lim.Backend != r.Backend() || lim.Dir != dir {
			t.Fatalf("limits describe %q on %q", lim.Backend, lim.Dir)
		}
		if lim.SeqWriteQD1 <= 0 || lim.SeqWriteQD8 <= 0 || lim.SyncPerSec <= 0 {
			t.Fatalf("non-positive figures: %+v", lim)
		}
		if lim.FdatasyncP50 <= 0 || lim.FdatasyncP99 < lim.FdatasyncP50 {
			t.Fatalf("percentiles out of order: %+v", lim)
		}
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) != 0 {
			t.Fatalf("scratch file left behind: %v %v", entries, err)
		}
		// The ring is left usable.
		if got := run(t, r, Op{Code: OpNop, UserData: 1}); got[1].Res != 0 {
			t.Fatalf("nop after MeasureDisk: %+v", got)
		}
	})
}
