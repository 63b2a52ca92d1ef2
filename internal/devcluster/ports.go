package devcluster

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net"
	"strconv"
)

// FreeBasePort returns a base port whose whole layout for c (c.BasePort ignored) was free
// on 127.0.0.1 a moment ago: every port bound and released with its protocols. It tries
// up to 50 random bases in 20000..59000. Another process can still take a port before
// the cluster binds it; the child then fails to start and Start reports it.
func FreeBasePort(c Config) (int, error) {
	for range 50 {
		var b [2]byte
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		c.BasePort = 20000 + int(binary.BigEndian.Uint16(b[:]))%39000
		l, err := c.Layout()
		if err != nil {
			return 0, err
		}
		if _, ok := busyPort(l.Ports()); ok {
			return c.BasePort, nil
		}
	}
	return 0, errors.New("devcluster: no free base port found in 50 tries")
}

// busyPort reports whether every port can be bound with each of its protocols (ok), else
// the first one found that cannot.
func busyPort(ports map[int][]string) (port int, ok bool) {
	var closers []func() error
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	for port, protos := range ports {
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		for _, proto := range protos {
			switch proto {
			case "udp":
				pc, err := net.ListenPacket("udp", addr)
				if err != nil {
					return port, false
				}
				closers = append(closers, pc.Close)
			default: // "tcp"
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					return port, false
				}
				closers = append(closers, ln.Close)
			}
		}
	}
	return 0, true
}
