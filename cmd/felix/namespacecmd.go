package main

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
)

// namespaceCommand is `felix namespace list | create NS | delete NS` in --tenant (issue 23
// item 10): the admin API's /v1/tenants/{t}/namespaces (list: tenant.manage on tenant:{t};
// create and delete: ns.manage on namespace:{t}/{ns}; a namespace must be empty to delete).
func (a *app) namespaceCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "namespace", Short: "List, create and delete namespaces of --tenant (admin API)", RunE: groupRunE}
	base := func() string { return "/v1/tenants/" + url.PathEscape(a.tenant) + "/namespaces" }
	list := &cobra.Command{Use: "list", Short: "List the namespaces of --tenant", Args: nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ns []namespaceInfo
			if err := a.adminJSON(cmd.Context(), http.MethodGet, base(), nil, &ns); err != nil {
				return fmt.Errorf("list namespaces of %s: %w", a.tenant, err)
			}
			a.printTable(len(ns), "NAMESPACE\tDISPLAY NAME", func(i int) (any, string) {
				return ns[i], ns[i].Namespace + "\t" + ns[i].DisplayName
			})
			return nil
		}}
	var display string
	create := &cobra.Command{Use: "create NAMESPACE [--display-name TEXT]", Short: "Create a namespace in --tenant", Args: nameArgs(1, 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var got namespaceInfo
			in := namespaceInfo{TenantID: a.tenant, Namespace: args[0], DisplayName: display}
			if err := a.adminJSON(cmd.Context(), http.MethodPost, base(), in, &got); err != nil {
				return fmt.Errorf("create namespace %s/%s: %w", a.tenant, args[0], err)
			}
			a.done(got, "created namespace %s/%s", got.TenantID, got.Namespace)
			return nil
		}}
	create.Flags().StringVar(&display, "display-name", "", "display name (default: the name)")
	var yes *bool
	del := &cobra.Command{Use: "delete NAMESPACE [--yes]", Short: "Delete an empty namespace of --tenant (asks for its name unless --yes)",
		Args: nameArgs(1, 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !*yes {
				fmt.Fprintf(a.stderr, "Delete namespace %s/%s? Type its name to confirm (or pass --yes): ", a.tenant, args[0])
				if err := a.readConfirmation("namespace", args[0]); err != nil {
					return err
				}
			}
			if err := a.adminJSON(cmd.Context(), http.MethodDelete, base()+"/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return fmt.Errorf("delete namespace %s/%s: %w", a.tenant, args[0], err)
			}
			a.done(map[string]any{"deleted": "namespace", "tenant": a.tenant, "namespace": args[0]}, "deleted namespace %s/%s", a.tenant, args[0])
			return nil
		}}
	yes = addYesFlag(del)
	cmd.AddCommand(list, create, del)
	return cmd
}
