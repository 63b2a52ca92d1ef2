//go:build felixdeps

// Package deps pins the project's chosen third-party modules in go.mod while
// the packages that use them are being written. It is excluded from every
// build by its build tag and is removed once each module has a real importer.
package deps

import (
	_ "github.com/HdrHistogram/hdrhistogram-go"
	_ "github.com/VictoriaMetrics/metrics"
	_ "github.com/golang-jwt/jwt/v5"
	_ "github.com/klauspost/crc32"
	_ "github.com/quic-go/quic-go"
	_ "github.com/rogpeppe/go-internal/testscript"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/cobra"
	_ "golang.org/x/sys/unix"
)
