package sim

import "fmt"

// FlipByte returns a copy of b with one byte, at a position drawn from r,
// XORed with a non-zero mask drawn from r, and a note "byte I ^0xMM" for the
// trace. b itself is not modified (a duplicate of the message may still be in
// flight). An empty b is returned as is, with the note "empty".
//
// Any checksum worth its name catches a single flipped byte, so a receiver
// that decodes the result must reject it: that is what a corruption fault
// tests.
func FlipByte(b []byte, r *Rand) ([]byte, string) {
	if len(b) == 0 {
		return b, "empty"
	}
	out := append([]byte(nil), b...)
	i := r.IntN(len(out))
	mask := byte(1 + r.IntN(255))
	out[i] ^= mask
	return out, fmt.Sprintf("byte %d ^%#02x", i, mask)
}

// corruptDefault is Config.Corrupt for M = []byte: FlipByte. For any other
// M it reports false, and the simulator refuses to corrupt.
func corruptDefault[M any](msg M, r *Rand) (M, string, bool) {
	b, ok := any(msg).([]byte)
	if !ok {
		return msg, "", false
	}
	out, note := FlipByte(b, r)
	return any(out).(M), note, true
}
