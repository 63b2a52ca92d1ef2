#!/usr/bin/env bash
# bench-commits.sh OLD NEW [COUNT]: the engine's acceptance benchmarks of two commits side by side in one
# invocation (issue 14: "no case slower than 0.95x of the old"). Builds each commit's core and client test
# binaries in a throw-away git worktree, then runs them in turn (old, new, old, new, ... COUNT rounds, default
# 8) so a drift of the machine's speed hits both alike, and prints benchstat's comparison (golang.org/x/perf,
# pinned). Cases: in-memory fanout 1 at 256 B x 64, durable on_commit 1 KiB x 64 (core), cache get through a
# real broker (client). Output files stay in $OUT (default /tmp/bench-commits).
set -euo pipefail
old=${1:?usage: bench-commits.sh OLD NEW [COUNT]} new=${2:?usage: bench-commits.sh OLD NEW [COUNT]}
count=${3:-8}
root=$(git rev-parse --show-toplevel)
out=${OUT:-/tmp/bench-commits}
benchstat="golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"
rm -rf "$out" && mkdir -p "$out"
mem_re='^BenchmarkPublishFanout$/^memory$/^cores=1$/^batch=64$/^fanout=1$/'
sync_re='^BenchmarkPublishFanout$/^on_commit$/^cores=1$/^batch=64$/^fanout=1$/'
client_re='^BenchmarkCacheGet$'
# build REV NAME: core.test at 256 B records, core-1k.test with the same benchmark at 1 KiB (one mechanical
# edit of the payload size, made alike in both commits' trees), client.test.
build() {
  local dir="$out/src-$2"
  git -C "$root" worktree add --detach -q "$dir" "$1"
  (cd "$dir" && go test -c -o "$out/core-$2.test" ./core && go test -c -o "$out/client-$2.test" ./client)
  sed -i 's/payload := make(\[\]byte, 256)/payload := make([]byte, 1024)/' "$dir/core/bench_test.go"
  grep -q 'make(\[\]byte, 1024)' "$dir/core/bench_test.go" || { echo "no payload line in $1" >&2; exit 1; }
  (cd "$dir" && go test -c -o "$out/core1k-$2.test" ./core)
  git -C "$root" worktree remove --force "$dir"
}
build "$old" old
build "$new" new
bench() { # bench BINARY REGEXP NAME [SUFFIX]: one run, names suffixed so the two core payloads stay apart
  "$1" -test.run '^$' -test.bench "$2" -test.benchmem -test.benchtime 1s -test.count 1 |
    grep "^Benchmark" | sed -E "s|^(Benchmark[^ \t]*)-([0-9]+)([ \t])|\1${4:-}-\2\3|" >>"$out/$3.txt"
}
run() { # run NAME
  (cd "$root/core" && bench "$out/core-$1.test" "$mem_re" "$1" /payload=256 &&
    bench "$out/core1k-$1.test" "$sync_re" "$1" /payload=1024)
  (cd "$root/client" && bench "$out/client-$1.test" "$client_re" "$1")
}
for i in $(seq "$count"); do
  run old
  run new
done
echo "old = $(git -C "$root" rev-parse --short "$old"), new = $(git -C "$root" rev-parse --short "$new"), $count rounds, $(nproc) cores"
go run "$benchstat" old="$out/old.txt" new="$out/new.txt"
# Round by round: the speed of new relative to old (old ns/op ÷ new ns/op; > 1 is faster), each
# round's pair measured back to back, then the median and the range over the rounds.
echo
echo "speed new/old per round (old ns/op / new ns/op): median [min, max]"
awk 'FNR == 1 { f++ } { n = $1; v = $3; if (f == 1) o[n, ++co[n]] = v; else w[n, ++cw[n]] = v; names[n] = 1 }
  END {
    for (n in names) {
      k = 0
      for (i = 1; i <= co[n] && i <= cw[n]; i++) r[++k] = o[n, i] / w[n, i]
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
      med = (k % 2) ? r[(k + 1) / 2] : (r[k / 2] + r[k / 2 + 1]) / 2
      printf "%-80s %.3f [%.3f, %.3f] (%d rounds)\n", n, med, r[1], r[k], k
    }
  }' "$out/old.txt" "$out/new.txt" | sort
