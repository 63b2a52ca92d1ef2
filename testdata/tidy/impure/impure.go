package impure

import (
	"math/rand"
	"os"
	clock "time"
)

func Bad() int {
	clock.Sleep(clock.Millisecond)
	_ = clock.Now()
	_, _ = os.ReadFile("x")
	return rand.Int()
}
