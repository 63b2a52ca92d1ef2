package configfile

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseFlatMapping(t *testing.T) {
	data := "---\n# broker\nquic_bind: 0.0.0.0:5000\nlog_level: \"debug\" # quoted\n" +
		"FELIX_READY_FILE: '/tmp/it''s.json'\nservice_instance_id:\nurl: http://h:1/x#frag   # comment\n"
	got, err := Parse("f.yml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{"quic_bind", "0.0.0.0:5000", 3}, {"log_level", "debug", 4}, {"FELIX_READY_FILE", "/tmp/it's.json", 5},
		{"service_instance_id", "", 6}, {"url", "http://h:1/x#frag", 7}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestParseRefusesWhatIsNotASetting(t *testing.T) {
	for name, data := range map[string]string{
		"nested":      "broker:\n  quic_bind: x\n",
		"list":        "peers:\n- a\n",
		"flow":        "peers: [a, b]\n",
		"anchor":      "a: &x 1\n",
		"block":       "a: |\n",
		"no colon":    "quic_bind 1\n",
		"no blank":    "quic_bind:1\n",
		"second doc":  "a: 1\n---\nb: 2\n",
		"open quote":  "a: \"x\n",
		"after quote": "a: \"x\" y\n",
		"map value":   "a: b: c\n",
	} {
		_, err := Parse("f.yml", []byte(data))
		var se *SyntaxError
		if !errors.As(err, &se) || se.Line == 0 || !strings.Contains(err.Error(), "f.yml:") {
			t.Errorf("%s: %v, want a *SyntaxError naming the line", name, err)
		}
	}
	if _, err := Parse("f.yml", []byte("a: 1\na: 2\n")); !errors.Is(err, ErrDuplicate) {
		t.Errorf("duplicate: %v", err)
	}
}

func TestTyposNameTheClosestKnownVariable(t *testing.T) {
	known := []string{"FELIX_QUIC_BIND", "FELIX_DURABLE_FSYNC_MODE", "FELIX_AUTH"}
	env := []string{"FELIX_QUIC_BND=1", "FELIX_DURABLE_FSNYC_MODE=none", "FELIX_AUTH=on", "FELIX_SERVER=x",
		"FELIX_SOMETHING_ELSE_ENTIRELY=1", "PATH=/bin", "FELIX_AUHT=off"}
	got := Typos(env, known, []string{"FELIX_SERVER"})
	want := []Typo{{"FELIX_AUHT", "FELIX_AUTH"}, {"FELIX_DURABLE_FSNYC_MODE", "FELIX_DURABLE_FSYNC_MODE"}, {"FELIX_QUIC_BND", "FELIX_QUIC_BIND"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
