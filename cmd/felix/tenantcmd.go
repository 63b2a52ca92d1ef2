package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"felix/client"
)

// tenantInfo and namespaceInfo are the admin API's tenant and namespace objects
// (docs/operations.md, "Admin API": {"tenant_id","display_name"} and
// {"tenant_id","namespace","display_name"}).
type tenantInfo struct {
	TenantID    string `json:"tenant_id"`
	DisplayName string `json:"display_name,omitempty"`
}

type namespaceInfo struct {
	TenantID    string `json:"tenant_id"`
	Namespace   string `json:"namespace"`
	DisplayName string `json:"display_name,omitempty"`
}

// adminJSON sends one admin API request (path under the --admin base) with the resolved
// token within --timeout, decoding a 2xx answer into out; any other status is a
// *client.AdminError, classified like the SDK's admin calls (exit 2 for 400, 3 for 404,
// 4 for 401/403, 1 for 409, 8 for 500). The SDK's Admin has no tenant or namespace calls.
func (a *app) adminJSON(parent context.Context, method, path string, in, out any) error {
	token, err := a.resolveToken()
	if err != nil {
		return err
	}
	base, err := a.adminBase(parent)
	if err != nil {
		return err
	}
	var body io.Reader
	if in != nil {
		data, _ := json.Marshal(in)
		body = bytes.NewReader(data)
	}
	ctx, cancel := a.requestContext(parent)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return usagef("%s %s: %v", method, path, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return classify(fmt.Errorf("felix admin: %s %s: %w", method, path, err))
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode/100 != 2 {
		e := &client.AdminError{Status: resp.StatusCode}
		var eb struct{ Code, Message string }
		if json.Unmarshal(data, &eb) == nil {
			e.Code, e.Message = eb.Code, eb.Message
		} else {
			e.Message = strings.TrimSpace(string(data))
		}
		return classify(e)
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("admin answer of %s %s: %w", method, path, err)
		}
	}
	return nil
}

// tenantCommand is `felix tenant list | create T | describe T | delete T` (issue 23 item
// 10): the admin API's /v1/tenants (tenant.manage on tenant:default; a new tenant gets its
// signing key).
func (a *app) tenantCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "tenant", Short: "List, create, describe and delete tenants (admin API)", RunE: groupRunE}
	list := &cobra.Command{Use: "list", Short: "List the tenants", Args: nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ts []tenantInfo
			if err := a.adminJSON(cmd.Context(), http.MethodGet, "/v1/tenants", nil, &ts); err != nil {
				return fmt.Errorf("list tenants: %w", err)
			}
			a.printTable(len(ts), "TENANT\tDISPLAY NAME", func(i int) (any, string) {
				return ts[i], ts[i].TenantID + "\t" + ts[i].DisplayName
			})
			return nil
		}}
	var display string
	create := &cobra.Command{Use: "create TENANT [--display-name TEXT]", Short: "Create a tenant and its signing key", Args: nameArgs(1, 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var got tenantInfo
			if err := a.adminJSON(cmd.Context(), http.MethodPost, "/v1/tenants", tenantInfo{TenantID: args[0], DisplayName: display}, &got); err != nil {
				return fmt.Errorf("create tenant %s: %w", args[0], err)
			}
			a.done(got, "created tenant %s", got.TenantID)
			return nil
		}}
	create.Flags().StringVar(&display, "display-name", "", "display name (default: the id)")
	describe := &cobra.Command{Use: "describe TENANT", Short: "Show a tenant", Args: nameArgs(1, 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var got tenantInfo
			if err := a.adminJSON(cmd.Context(), http.MethodGet, "/v1/tenants/"+url.PathEscape(args[0]), nil, &got); err != nil {
				return fmt.Errorf("describe tenant %s: %w", args[0], err)
			}
			a.done(got, "tenant %s (%s)", got.TenantID, got.DisplayName)
			return nil
		}}
	cmd.AddCommand(list, create, describe, a.tenantDelete())
	return cmd
}

func (a *app) tenantDelete() *cobra.Command {
	var yes *bool
	cmd := &cobra.Command{Use: "delete TENANT [--yes]", Short: "Delete a tenant that has no namespaces (asks for its name unless --yes)",
		Args: nameArgs(1, 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !*yes {
				fmt.Fprintf(a.stderr, "Delete tenant %s? Type its name to confirm (or pass --yes): ", args[0])
				if err := a.readConfirmation("tenant", args[0]); err != nil {
					return err
				}
			}
			if err := a.adminJSON(cmd.Context(), http.MethodDelete, "/v1/tenants/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return fmt.Errorf("delete tenant %s: %w", args[0], err)
			}
			a.done(map[string]any{"deleted": "tenant", "tenant": args[0]}, "deleted tenant %s", args[0])
			return nil
		}}
	yes = addYesFlag(cmd)
	return cmd
}

// printTable prints n rows: under --json one object per row, else a header and the rows'
// tab-separated text.
func (a *app) printTable(n int, header string, row func(i int) (any, string)) {
	if a.jsonOut {
		for i := 0; i < n; i++ {
			v, _ := row(i)
			a.printJSON(v)
		}
		return
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for i := 0; i < n; i++ {
		_, text := row(i)
		fmt.Fprintln(tw, text)
	}
	tw.Flush()
}
