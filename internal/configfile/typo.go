package configfile

import (
	"sort"
	"strings"
)

// Typo is a FELIX_* variable of the environment that no Felix program reads but that is
// within MaxTypoDistance edits of a known one.
type Typo struct {
	Name    string // the variable as set
	Closest string // the known variable it is nearest to
}

// MaxTypoDistance is the largest edit distance (insertions, deletions, substitutions and
// swaps of neighbours) at which an unknown variable is reported as a typo of a known one.
// Farther ones are left alone: they may belong to another tool sharing the environment.
const MaxTypoDistance = 3

// Typos returns, sorted by name, the FELIX_* variables of environ ("NAME=value" entries,
// os.Environ) that are not in known (this program's variables) nor in also (other Felix
// programs' variables that share the environment, e.g. the CLI's FELIX_SERVER) but are
// close to one in known.
func Typos(environ []string, known, also []string) []Typo {
	isKnown := map[string]bool{}
	for _, k := range known {
		isKnown[k] = true
	}
	for _, k := range also {
		isKnown[k] = true
	}
	var out []Typo
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "FELIX_") || isKnown[name] {
			continue
		}
		best, bestD := "", MaxTypoDistance+1
		for _, k := range known {
			if d := distance(name, k); d < bestD || (d == bestD && k < best) {
				best, bestD = k, d
			}
		}
		if bestD <= MaxTypoDistance {
			out = append(out, Typo{Name: name, Closest: best})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// distance is the optimal-string-alignment edit distance of a and b (bytes).
func distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
