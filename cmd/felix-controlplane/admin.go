package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"felix/cluster/meta/rest"
)

const adminUsage = `usage: felix-controlplane admin [--url URL] [--token TOKEN] COMMAND
  features                          list fleet features: enabled, supported by, lacking
  features finalize NAME [--dry-run] enable NAME (one-way); --dry-run names the brokers lacking it
  brokers                           registered brokers: storage id, state, missing features
  members                           control-plane members: level, which one leads
  placement [TENANT/NS/NAME]        each shard's leader, followers and generation (one stream or cache)
URL defaults to FELIX_CONTROLPLANE_URL, else http://FELIX_CONTROLPLANE_BIND; the token to
FELIX_CONTROLPLANE_ADMIN_TOKEN, else FELIX_CONTROLPLANE_DATA_DIR's admin-token file.
`

// adminClient is the REST client of the admin commands.
type adminClient struct {
	base, token string
	http        *http.Client
}

// admin runs `felix-controlplane admin ...` (issue 17 item 7; seed "Runbook:
// rolling out a fleet feature"); 0 on success, 1 on a refusal or failure, 2
// on bad usage.
func admin(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	u := fs.String("url", "", "control-plane REST base URL")
	tok := fs.String("token", "", "admin token")
	fs.Usage = func() { fmt.Fprint(stderr, adminUsage) }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c := &adminClient{base: *u, token: *tok, http: &http.Client{Timeout: 30 * time.Second}}
	c.defaults(lookup)
	rest := fs.Args()
	var err error
	switch {
	case len(rest) == 1 && rest[0] == "features":
		err = c.features(stdout)
	case len(rest) >= 3 && rest[0] == "features" && rest[1] == "finalize":
		dry, name, ok := finalizeArgs(rest[2:])
		if !ok {
			fmt.Fprint(stderr, adminUsage)
			return 2
		}
		err = c.finalize(stdout, name, dry)
	case len(rest) == 1 && rest[0] == "brokers":
		err = c.brokers(stdout)
	case len(rest) == 1 && rest[0] == "members":
		err = c.members(stdout)
	case (len(rest) == 1 || len(rest) == 2) && rest[0] == "placement":
		err = c.placement(stdout, rest[1:])
	default:
		fmt.Fprint(stderr, adminUsage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "felix-controlplane admin:", err)
		return 1
	}
	return 0
}

func finalizeArgs(args []string) (dry bool, name string, ok bool) {
	for _, a := range args {
		switch {
		case a == "--dry-run" || a == "-dry-run":
			dry = true
		case name == "" && !strings.HasPrefix(a, "-"):
			name = a
		default:
			return false, "", false
		}
	}
	return dry, name, name != ""
}

func (c *adminClient) defaults(lookup func(string) (string, bool)) {
	env := func(k, def string) string {
		if v, ok := lookup(k); ok && v != "" {
			return v
		}
		return def
	}
	if c.base == "" {
		c.base = env("FELIX_CONTROLPLANE_URL", "http://"+env("FELIX_CONTROLPLANE_BIND", "127.0.0.1:8443"))
	}
	if c.token == "" {
		c.token = env("FELIX_CONTROLPLANE_ADMIN_TOKEN", "")
	}
	if c.token == "" {
		if data, err := os.ReadFile(filepath.Join(env("FELIX_CONTROLPLANE_DATA_DIR", "felix-controlplane-data"), rest.TokenFile)); err == nil {
			c.token = strings.TrimSpace(string(data))
		}
	}
}

// errorBody is the REST error body as the admin commands read it.
type errorBody struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Detail  map[string]any `json:"detail"`
}

// do sends one request and decodes a 2xx JSON answer into out; an error
// answer becomes an error with the control plane's message.
func (c *adminClient) do(method, path string, out any) error {
	req, err := http.NewRequest(method, strings.TrimRight(c.base, "/")+path, nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e errorBody
		if json.Unmarshal(data, &e) != nil || e.Message == "" {
			return fmt.Errorf("%s %s: %s", method, path, resp.Status)
		}
		if l, ok := e.Detail["lacking"].([]any); ok && len(l) > 0 {
			return fmt.Errorf("%s (%d): %s; lacking brokers: %v", e.Code, resp.StatusCode, e.Message, l)
		}
		return fmt.Errorf("%s (%d): %s", e.Code, resp.StatusCode, e.Message)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

func (c *adminClient) features(w io.Writer) error {
	var fs []rest.FeatureView
	if err := c.do("GET", "/v1/fleet/features", &fs); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FEATURE\tENABLED\tSUPPORTED BY\tLACKING\tNEEDS")
	for _, f := range fs {
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\n", f.Name, f.Enabled, list(f.SupportedBy), list(f.Lacking), list(f.Prerequisites))
	}
	return tw.Flush()
}

func (c *adminClient) finalize(w io.Writer, name string, dry bool) error {
	path := "/v1/fleet/features/" + url.PathEscape(name) + "/finalize"
	if dry {
		path += "?dry_run=1"
	}
	var body rest.FinalizeBody
	if err := c.do("POST", path, &body); err != nil {
		return err
	}
	if dry {
		_, err := fmt.Fprintf(w, "dry run: %s can be finalized (no live or draining broker lacks it)\n", name)
		return err
	}
	_, err := fmt.Fprintf(w, "finalized %s (one-way)\n", name)
	return err
}

func (c *adminClient) brokers(w io.Writer) error {
	var bs []rest.BrokerView
	if err := c.do("GET", "/v1/brokers", &bs); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTORAGE ID\tSTATE\tCLIENT ADDR\tINTERNAL ADDR\tINCARNATION\tMISSING")
	for _, b := range bs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", b.NodeID, orDash(b.StorageID), b.State, orDash(b.ClientAddr),
			orDash(b.InternalAddr), b.Incarnation, list(b.Missing))
	}
	return tw.Flush()
}

func (c *adminClient) members(w io.Writer) error {
	var mb rest.MembersBody
	if err := c.do("GET", "/v1/members", &mb); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tADDRESS\tLEADER\tLEVEL")
	for _, m := range mb.Members {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\n", m.ID, m.Address, m.Leader, m.Level)
	}
	fmt.Fprintf(tw, "floor %d\n", mb.Floor)
	return tw.Flush()
}

func list(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// placement prints GET /v1/snapshot's assignments, of one stream or cache
// (tenant/ns/name) when asked.
func (c *adminClient) placement(w io.Writer, only []string) error {
	var snap rest.SnapshotBody
	if err := c.do("GET", "/v1/snapshot", &snap); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tSHARD\tLEADER\tFOLLOWERS\tGENERATION")
	for _, a := range snap.Assignments {
		name := a.TenantID + "/" + a.Namespace + "/" + a.Name
		if len(only) == 1 && only[0] != name {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\n", a.Kind, name, a.Shard, a.Leader, list(a.Followers), a.Generation)
	}
	return tw.Flush()
}
