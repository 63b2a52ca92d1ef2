package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"felix/cluster/meta/rest"
)

const adminUsage = `usage: felix-controlplane admin [--url URL] [--token TOKEN] COMMAND
  features                          list fleet features: enabled, supported by, lacking
  features finalize NAME [--dry-run] enable NAME (one-way); --dry-run names the brokers lacking it
  brokers                           registered brokers: storage id, state, feed cursor, missing features
  members                           control-plane members: storage id, level, held, which one leads
  members add ID [ADDR] [--url URL] add a member (ID: NODE_ID, or NODE_ID/STORAGE_ID; ADDR its Raft address,
                                    default what it answers; URL its REST URL, default its PEER_URLS entry)
  members remove ID                 remove a member (a server id, or a node id naming one member)
  members transfer-leader ID        hand leadership to the member ID
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
	case len(rest) >= 2 && rest[0] == "members":
		var ok bool
		if ok, err = c.memberChange(stdout, rest[1:]); !ok {
			fmt.Fprint(stderr, adminUsage)
			return 2
		}
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
func (c *adminClient) do(method, path string, out any) error { return c.send(method, path, nil, out) }

// send is do with a JSON body (nil: none).
func (c *adminClient) send(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, strings.TrimRight(c.base, "/")+path, rd)
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
	fmt.Fprintln(tw, "NODE\tSTORAGE ID\tSTATE\tCLIENT ADDR\tINTERNAL ADDR\tINCARNATION\tFEED CURSOR\tMISSING")
	for _, b := range bs {
		cursor := "-" // an older broker, or none reported to the member since it started
		if b.FeedCursorSeen != nil {
			cursor = strconv.FormatUint(b.Cursor, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", b.NodeID, orDash(b.StorageID), b.State, orDash(b.ClientAddr),
			orDash(b.InternalAddr), b.Incarnation, cursor, list(b.Missing))
	}
	return tw.Flush()
}

func (c *adminClient) members(w io.Writer) error {
	var mb rest.MembersBody
	if err := c.do("GET", "/v1/members", &mb); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tNODE\tSTORAGE ID\tADDRESS\tLEADER\tLEVEL\tHELD\tANSWERED AS")
	for _, m := range mb.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%d\t%v\t%s\n", m.ID, m.NodeID, orDash(m.StorageID), m.Address, m.Leader, m.Level,
			m.Held, orDash(m.AnsweredAs))
	}
	fmt.Fprintf(tw, "floor %d (served by %s)\n", mb.Floor, orDash(mb.ServedBy))
	return tw.Flush()
}

// memberChange runs members add|remove|transfer-leader; ok false on bad
// usage.
func (c *adminClient) memberChange(w io.Writer, args []string) (ok bool, err error) {
	switch {
	case args[0] == "add" && len(args) >= 2:
		fs := flag.NewFlagSet("members add", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		u := fs.String("url", "", "the member's REST URL")
		pos := []string{}
		for more := args[1:]; len(more) > 0; more = fs.Args()[1:] {
			if fs.Parse(more) != nil {
				return false, nil
			}
			if fs.NArg() == 0 {
				break
			}
			pos = append(pos, fs.Arg(0))
		}
		if len(pos) < 1 || len(pos) > 2 {
			return false, nil
		}
		body := rest.AddMemberBody{ID: pos[0], URL: *u}
		if len(pos) == 2 {
			body.Address = pos[1]
		}
		var mv rest.MemberView
		if err := c.send("POST", "/v1/members", body, &mv); err != nil {
			return true, err
		}
		_, err := fmt.Fprintf(w, "added %s at %s (metadata level %d)\n", mv.ID, mv.Address, mv.Level)
		return true, err
	case args[0] == "remove" && len(args) == 2:
		if err := c.do("DELETE", "/v1/members/"+args[1], nil); err != nil {
			return true, err
		}
		_, err := fmt.Fprintf(w, "removed %s\n", args[1])
		return true, err
	case args[0] == "transfer-leader" && len(args) == 2:
		var lb rest.LeaderBody
		if err := c.send("POST", "/v1/members/leader", rest.LeaderBody{ID: args[1]}, &lb); err != nil {
			return true, err
		}
		_, err := fmt.Fprintf(w, "%s leads\n", lb.ID)
		return true, err
	}
	return false, nil
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
