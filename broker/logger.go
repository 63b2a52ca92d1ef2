package broker

import (
	"io"
	"log/slog"
	"os"
)

// NewLogger returns the broker's structured logger (log/slog): JSON when
// FELIX_LOG_FORMAT=json, text otherwise, at FELIX_LOG_LEVEL, with the instance id
// (FELIX_SERVICE_INSTANCE_ID, else the host name) on every line.
func NewLogger(cfg *Config, w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	switch cfg.LogLevel {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	instance := cfg.ServiceInstanceID
	if instance == "" {
		instance, _ = os.Hostname()
	}
	return slog.New(h).With("service", "felix-broker", "instance", instance)
}
