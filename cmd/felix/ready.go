package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// readyCommand is `felix ready [--wait D]`: GET {admin}/ready (docs/operations.md); with
// --wait it polls every 100 ms until the broker answers 200 or D passes. With several
// --admin URLs (a cluster) every one must answer 200. Not ready: exit 6.
func (a *app) readyCommand() *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "ready [--wait DURATION]",
		Short: "Check that the broker is ready (its /ready endpoint; every --admin URL when several); --wait polls until it is",
		Args:  nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			bases := a.adminURLs() // conn.go
			if len(bases) == 0 {
				return usagef("--admin is empty: want a URL[,URL...] (FELIX_ADMIN_URL)")
			}
			deadline := time.Now().Add(wait)
			hc := &http.Client{Timeout: 2 * time.Second}
			var last error
			for {
				if last = probeAll(ctx, hc, bases); last == nil {
					base := strings.Join(bases, ", ")
					a.done(map[string]any{"ready": true, "url": base}, "broker at %s is ready", base)
					return nil
				}
				if !time.Now().Before(deadline) || ctx.Err() != nil {
					return withKind(ErrUnavailable, fmt.Errorf("broker not ready: %w", last))
				}
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "keep polling for up to this long")
	return cmd
}

// probeAll is nil when every base's /ready answers 200, else the first failure.
func probeAll(ctx context.Context, hc *http.Client, bases []string) error {
	for _, b := range bases {
		if err := probeReady(ctx, hc, b+"/ready"); err != nil {
			return err
		}
	}
	return nil
}

func probeReady(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return withKind(ErrUsage, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered HTTP %d", url, resp.StatusCode)
	}
	return nil
}
