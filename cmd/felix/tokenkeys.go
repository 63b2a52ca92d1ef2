package main

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"
)

// keyInfo is one signing key as the broker's GET /v1/tenants/{t}/keys shows it.
type keyInfo struct {
	Kid     string    `json:"kid"`
	State   string    `json:"state"`
	Created time.Time `json:"created"`
}

// tokenKeyCommands are `felix token keys`, `token rotate` and `token revoke KID` of
// --tenant over the broker's admin API (broker/admin_keys.go; tenant.manage on
// tenant:{t}), issue 23 item 10. A token carries no revocable id of its own: revoking is
// per signing key — every token that key signed is refused from then on, cached ones too —
// so the routine is rotate (new tokens get the new key), reissue, then revoke the old key.
func (a *app) tokenKeyCommands() []*cobra.Command {
	keysPath := func() string { return "/v1/tenants/" + url.PathEscape(a.tenant) + "/keys" }
	list := &cobra.Command{Use: "keys", Short: "List --tenant's signing keys (active, verify-only, removed)", Args: nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ks []keyInfo
			if err := a.adminJSON(cmd.Context(), http.MethodGet, keysPath(), nil, &ks); err != nil {
				return fmt.Errorf("signing keys of %s: %w", a.tenant, err)
			}
			a.printTable(len(ks), "KID\tSTATE\tCREATED", func(i int) (any, string) {
				return ks[i], ks[i].Kid + "\t" + ks[i].State + "\t" + ks[i].Created.Format(time.RFC3339)
			})
			return nil
		}}
	rotate := &cobra.Command{Use: "rotate", Short: "Make a new signing key for --tenant; the previous one keeps verifying until revoked",
		Args: nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var k keyInfo
			if err := a.adminJSON(cmd.Context(), http.MethodPost, keysPath()+"/rotate", nil, &k); err != nil {
				return fmt.Errorf("rotate the signing key of %s: %w", a.tenant, err)
			}
			a.done(k, "new signing key %s for tenant %s (the previous one verifies until `felix token revoke` of it)", k.Kid, a.tenant)
			return nil
		}}
	var previous bool
	revoke := &cobra.Command{Use: "revoke KID | --previous", Short: "Revoke every token signed by key KID of --tenant, or by all its verify-only keys (never the active key: rotate first)",
		Args: nArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kids := args
			if previous == (len(args) == 1) {
				return usagef("name one KID or pass --previous")
			}
			if previous {
				var ks []keyInfo
				if err := a.adminJSON(cmd.Context(), http.MethodGet, keysPath(), nil, &ks); err != nil {
					return fmt.Errorf("signing keys of %s: %w", a.tenant, err)
				}
				for _, k := range ks {
					if k.State == "verify-only" {
						kids = append(kids, k.Kid)
					}
				}
			}
			for _, kid := range kids {
				if err := a.adminJSON(cmd.Context(), http.MethodDelete, keysPath()+"/"+url.PathEscape(kid), nil, nil); err != nil {
					return fmt.Errorf("revoke key %s of %s: %w", kid, a.tenant, err)
				}
				a.done(map[string]any{"revoked": kid, "tenant": a.tenant}, "revoked signing key %s of tenant %s: tokens it signed are refused", kid, a.tenant)
			}
			if len(kids) == 0 {
				a.done(map[string]any{"revoked": nil, "tenant": a.tenant}, "no verify-only key to revoke in tenant %s", a.tenant)
			}
			return nil
		}}
	revoke.Flags().BoolVar(&previous, "previous", false, "revoke every verify-only (previous) key of --tenant")
	return []*cobra.Command{list, rotate, revoke}
}
