package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"felix/auth"
)

func (a *app) tokenCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Issue tokens; list, rotate and revoke signing keys", RunE: groupRunE}
	cmd.AddCommand(a.tokenIssue())
	cmd.AddCommand(a.tokenKeyCommands()...) // tokenkeys.go
	return cmd
}

// tokenIssue is `felix token issue`: auth.IssueToken over the broker's data dir
// (spec/auth.md §3.1 claims; docs/auth.md). It needs read access to <data>/auth/keys.json,
// so it runs on the broker's host; nothing is written.
func (a *app) tokenIssue() *cobra.Command {
	var (
		dataDir, subject string
		perms            []string
		ttl              time.Duration
	)
	cmd := &cobra.Command{
		Use:   "issue --subject NAME --perm ACTION:OBJECT [--perm ...]",
		Short: "Sign a token for a tenant (uses --tenant) with the broker's key store",
		Long: `Sign a token with the tenant's active key from DATA_DIR/auth/keys.json.
Permissions are ACTION:OBJECT strings of spec/auth.md, for example
  stream.publish:stream:default/default/orders
  stream.subscribe:namespace:default/default
  cache.write:cache:default/default/*
The token is printed on stdout (--json: {"token","tenant","subject","expires_at"}).`,
		Args: nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if subject == "" {
				return usagef("--subject is required")
			}
			if len(perms) == 0 {
				return usagef("at least one --perm is required")
			}
			if _, err := os.Stat(auth.KeyStorePath(dataDir)); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return withKind(ErrNotFound, fmt.Errorf("no key store at %s (start the broker once with this data dir, or pass --data-dir)", auth.KeyStorePath(dataDir)))
				}
				return err
			}
			expires := time.Now().Add(ttl).UTC().Truncate(time.Second)
			token, err := auth.IssueToken(dataDir, a.tenant, subject, perms, ttl)
			switch {
			case errors.Is(err, auth.ErrInvalidPermission), errors.Is(err, auth.ErrInvalidName), errors.Is(err, auth.ErrInvalidTTL):
				return withKind(ErrUsage, err)
			case err != nil:
				return err
			}
			if a.jsonOut {
				a.printJSON(map[string]any{"token": token, "tenant": a.tenant, "subject": subject, "expires_at": expires.Format(time.RFC3339)})
				return nil
			}
			fmt.Fprintln(a.stdout, token)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", a.env("felix-data", "FELIX_DURABLE_STORAGE_DIR"), "the broker's data dir (FELIX_DURABLE_STORAGE_DIR)")
	f.StringVar(&subject, "subject", "", "the token's subject (sub claim)")
	f.StringArrayVar(&perms, "perm", nil, "a permission ACTION:OBJECT (repeatable)")
	f.DurationVar(&ttl, "ttl", 24*time.Hour, "lifetime of the token")
	return cmd
}
