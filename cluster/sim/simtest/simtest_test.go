package simtest

import (
	"strings"
	"testing"
)

func TestSeedFromEnvironment(t *testing.T) {
	t.Setenv(EnvSeed, "")
	if got := Seed(t, 5); got != 5 {
		t.Fatalf("Seed without %s = %d, want the fallback 5", EnvSeed, got)
	}
	t.Setenv(EnvSeed, "77")
	if got := Seed(t, 5); got != 77 {
		t.Fatalf("Seed with %s=77 = %d", EnvSeed, got)
	}
	if got := Seeds(t, 1, 10); len(got) != 1 || got[0] != 77 {
		t.Fatalf("Seeds with %s=77 = %v, want [77]", EnvSeed, got)
	}
}

func TestSeedsLoop(t *testing.T) {
	t.Setenv(EnvSeed, "")
	t.Setenv(EnvSeeds, "")
	if got := Seeds(t, 10, 3); len(got) != 3 || got[0] != 10 || got[2] != 12 {
		t.Fatalf("Seeds(10, 3) = %v", got)
	}
	t.Setenv(EnvSeeds, "5")
	if got := Seeds(t, 1, 3); len(got) != 5 {
		t.Fatalf("Seeds with %s=5 = %v", EnvSeeds, got)
	}
}

func TestReplayNamesTheTopLevelTest(t *testing.T) {
	t.Run("sub", func(t *testing.T) {
		got := Replay(t, 9)
		if !strings.Contains(got, "FELIX_TEST_SEED=9") || !strings.Contains(got, "'^TestReplayNamesTheTopLevelTest$'") {
			t.Fatalf("Replay = %q", got)
		}
	})
}
