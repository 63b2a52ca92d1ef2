// Command udpecho echoes every UDP datagram it receives on -addr back to its sender, after
// writing {"pid":N,"addr":"host:port"} to -ready (temp file + rename) once it is bound.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

func main() {
	addr := flag.String("addr", "", "UDP address to listen on")
	ready := flag.String("ready", "", "ready file")
	flag.Parse()
	pc, err := net.ListenPacket("udp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "udpecho:", err)
		os.Exit(1)
	}
	if *ready != "" {
		b, _ := json.Marshal(map[string]any{"pid": os.Getpid(), "addr": pc.LocalAddr().String()})
		tmp := filepath.Join(filepath.Dir(*ready), ".ready.tmp")
		if err := os.WriteFile(tmp, b, 0o644); err != nil || os.Rename(tmp, *ready) != nil {
			fmt.Fprintln(os.Stderr, "udpecho: ready file:", err)
			os.Exit(1)
		}
	}
	fmt.Println("listening on", pc.LocalAddr())
	buf := make([]byte, 64<<10)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "udpecho:", err)
			os.Exit(1)
		}
		pc.WriteTo(buf[:n], from)
	}
}
