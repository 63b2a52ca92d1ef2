package sim

import (
	"math/rand/v2"
	"testing"
)

// TestRandMatchesMathRand: Rand is math/rand/v2's PCG, bit for bit, through
// every method both have.
func TestRandMatchesMathRand(t *testing.T) {
	for _, seed := range [][2]uint64{{0, 0}, {1, 2}, {42, randStream}, {^uint64(0), 12345}} {
		ours := NewRandPCG(seed[0], seed[1])
		theirs := rand.New(rand.NewPCG(seed[0], seed[1]))
		for i := range 2000 {
			var a, b any
			switch i % 5 {
			case 0:
				a, b = ours.Uint64(), theirs.Uint64()
			case 1:
				n := uint64(i*7919 + 1)
				a, b = ours.Uint64N(n), theirs.Uint64N(n)
			case 2:
				a, b = ours.IntN(1<<i%40+3), theirs.IntN(1<<i%40+3)
			case 3:
				a, b = ours.Int64N(1<<62+int64(i)), theirs.Int64N(1<<62+int64(i))
			case 4:
				a, b = ours.Float64(), theirs.Float64()
			}
			if a != b {
				t.Fatalf("seed %v draw %d: ours %v, math/rand/v2 %v", seed, i, a, b)
			}
		}
	}
}

func TestRandHelpers(t *testing.T) {
	r := NewRand(1)
	if r.Chance(0) || !r.Chance(100) || r.Duration(0) != 0 {
		t.Fatal("Chance(0), Chance(100) or Duration(0) wrong")
	}
	before := *r
	r.Chance(0)
	r.Chance(100)
	r.Duration(-1)
	if *r != before {
		t.Fatal("a 0% or 100% chance, or an empty duration, drew from the stream")
	}
	hits := 0
	for range 10000 {
		if r.Chance(25) {
			hits++
		}
	}
	if hits < 2300 || hits > 2700 {
		t.Fatalf("Chance(25) hit %d of 10000", hits)
	}
	first, again := DeriveSeed(1, 2), DeriveSeed(1, 2)
	if DeriveSeed(1, 2, 3) == DeriveSeed(1, 3, 2) || first != again {
		t.Fatal("DeriveSeed is order-blind or not a function")
	}
	a, b := NewRand(9).Fork(), NewRand(9).Fork()
	if a.Uint64() != b.Uint64() {
		t.Fatal("Fork of equal generators differs")
	}
}
