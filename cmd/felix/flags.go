package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Bounds of flag values the broker would refuse or misread (docs/cli.md: a bad flag
// value is exit 2, before anything is sent).
const (
	maxShardCount = 4096 // --shards of stream/cache create: 1..4096 shards
	maxShardIndex = 4095 // --shard: shards are numbered 0..4095
	// maxRecordsPerPoll bounds group poll --max: a group's max records per poll is
	// 1..10 000 (docs/groups.md, "Settings"), so a larger --max could never be honoured.
	maxRecordsPerPoll = 10000
)

// checkRange refuses an integer flag value outside min..max as a usage error (exit 2)
// naming the flag and the allowed range.
func checkRange(flag string, v, min, max int64) error {
	if v < min || v > max {
		return usagef("--%s %d: want %d..%d", flag, v, min, max)
	}
	return nil
}

// checkNonNegative refuses a negative integer flag value (usage error naming the flag).
func checkNonNegative(flag string, v int64) error {
	if v < 0 {
		return usagef("--%s %d: must not be negative (0..%d)", flag, v, maxInt64)
	}
	return nil
}

// checkDuration refuses a negative duration flag value (usage error naming the flag).
func checkDuration(flag string, d time.Duration) error {
	if d < 0 {
		return usagef("--%s %s: must not be negative (0 or more, e.g. 500ms, 2s)", flag, d)
	}
	return nil
}

const maxInt64 = int64(^uint64(0) >> 1)

// parseBoolValue reads a boolean setting the way the broker does (spec/config.md
// preamble): 1/true/yes/on and 0/false/no/off, any case, surrounding blanks ignored.
func parseBoolValue(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("want true/false (1/0, yes/no, on/off)")
}

// checkServerAddr refuses a --server that is not host:port with a port 1..65535
// (usage error): such an address can never be dialled, so it is not "unavailable".
func checkServerAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("--server %q: want host:port (FELIX_SERVER; e.g. 127.0.0.1:5000): %v", addr, err)
	}
	if host == "" || strings.ContainsAny(host, " \t\r\n/") {
		return usagef("--server %q: want host:port with a host name or IP address (FELIX_SERVER)", addr)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return usagef("--server %q: the port must be 1..65535 (FELIX_SERVER)", addr)
	}
	return nil
}

// plural returns "1 record" or "N records" (noun is the singular).
func plural[T ~int | ~int64 | ~uint32 | ~uint64](n T, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
