package sim

import (
	"math/bits"
	"time"
)

// Rand is the simulator's seeded pseudo-random generator: the PCG-DXSM
// generator of math/rand/v2 (rand.NewPCG), reimplemented here bit for bit
// because this package is pure (tidy_test.go forbids importing math/rand and
// math/rand/v2 in pure packages, whatever the source). TestRandMatchesMathRand
// checks that NewRandPCG(a, b) yields exactly the sequence of
// rand.New(rand.NewPCG(a, b)) for Uint64, Uint64N, IntN, Int64N and Float64.
//
// A Rand is not safe for concurrent use. The zero value is a valid generator
// (PCG state 0, 0) but every constructor of this package seeds explicitly.
type Rand struct {
	hi uint64
	lo uint64
}

// randStream is the second PCG seed word NewRand uses: "flxsim" in ASCII.
const randStream = 0x666c7873696d

// NewRand returns a generator seeded from one 64-bit seed; the same seed
// always yields the same sequence (PCG state seed, 0x666c7873696d).
func NewRand(seed uint64) *Rand {
	return &Rand{hi: seed, lo: randStream}
}

// NewRandPCG returns a generator with the PCG state (seed1, seed2), the same
// as math/rand/v2's rand.NewPCG(seed1, seed2).
func NewRandPCG(seed1, seed2 uint64) *Rand {
	return &Rand{hi: seed1, lo: seed2}
}

// Fork returns a new generator seeded from two draws of r, so that a
// component (a node, a link) gets its own stream while every random choice
// still derives from r's seed. It advances r by two draws.
func (r *Rand) Fork() *Rand {
	return NewRandPCG(r.Uint64(), r.Uint64())
}

// DeriveSeed mixes a seed with up to a few small numbers (a link's ends, a
// run index) into a new seed with SplitMix64, so that derived streams are
// unrelated to each other and to the seed's own stream.
func DeriveSeed(seed uint64, parts ...uint64) uint64 {
	x := seed
	for _, p := range parts {
		x = splitMix(x ^ splitMix(p+0x9e3779b97f4a7c15))
	}
	return splitMix(x)
}

func splitMix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (r *Rand) next() (hi, lo uint64) {
	const (
		mulHi = 2549297995355413924
		mulLo = 4865540595714422341
		incHi = 6364136223846793005
		incLo = 1442695040888963407
	)
	hi, lo = bits.Mul64(r.lo, mulLo)
	hi += r.hi*mulLo + r.lo*mulHi
	lo, c := bits.Add64(lo, incLo, 0)
	hi, _ = bits.Add64(hi, incHi, c)
	r.lo = lo
	r.hi = hi
	return hi, lo
}

// Uint64 returns a uniformly distributed 64-bit value.
func (r *Rand) Uint64() uint64 {
	hi, lo := r.next()
	const cheapMul = 0xda942042e4dd58b5
	hi ^= hi >> 32
	hi *= cheapMul
	hi ^= hi >> 48
	hi *= (lo | 1)
	return hi
}

// Uint64N returns a uniform value in [0, n). It panics when n == 0.
func (r *Rand) Uint64N(n uint64) uint64 {
	if n == 0 {
		panic("sim: Uint64N(0)")
	}
	if n&(n-1) == 0 {
		return r.Uint64() & (n - 1)
	}
	hi, lo := bits.Mul64(r.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(r.Uint64(), n)
		}
	}
	return hi
}

// IntN returns a uniform value in [0, n). It panics when n <= 0.
func (r *Rand) IntN(n int) int {
	if n <= 0 {
		panic("sim: IntN of a non-positive bound")
	}
	return int(r.Uint64N(uint64(n)))
}

// Int64N returns a uniform value in [0, n). It panics when n <= 0.
func (r *Rand) Int64N(n int64) int64 {
	if n <= 0 {
		panic("sim: Int64N of a non-positive bound")
	}
	return int64(r.Uint64N(uint64(n)))
}

// Float64 returns a uniform value in [0.0, 1.0).
func (r *Rand) Float64() float64 {
	return float64(r.Uint64()<<11>>11) / (1 << 53)
}

// Chance reports true with probability percent/100 (percent in [0, 100]; at
// or below 0 it is always false and draws nothing, at or above 100 always
// true and draws nothing, so a fault set to 0% leaves the stream untouched).
func (r *Rand) Chance(percent float64) bool {
	if percent <= 0 {
		return false
	}
	if percent >= 100 {
		return true
	}
	return r.Float64()*100 < percent
}

// Duration returns a uniform duration in [0, max); 0 when max <= 0 (without a
// draw).
func (r *Rand) Duration(max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	return time.Duration(r.Int64N(int64(max)))
}
