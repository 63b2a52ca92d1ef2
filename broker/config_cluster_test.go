package broker

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestClusterSettingsDefaultsAndPrint(t *testing.T) {
	cfg, _, err := LoadConfig([]string{"--internal-bind", "127.0.0.1:5001"},
		envOf(map[string]string{"FELIX_NODE_ID": "broker-1.felix.local", "FELIX_QUIC_BIND": "127.0.0.1:5000"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.InternalAdvertisedAddr != "127.0.0.1:5001" || cfg.AdvertisedAddr != "127.0.0.1:5000" {
		t.Fatalf("advertised defaults: internal %q client %q", cfg.InternalAdvertisedAddr, cfg.AdvertisedAddr)
	}
	if cfg.SourceOf("FELIX_INTERNAL_BIND") != SourceFlag || cfg.SourceOf("FELIX_NODE_ID") != SourceEnv {
		t.Fatal("sources")
	}
	var out bytes.Buffer
	cfg.PrintConfig(&out)
	for _, want := range []string{"FELIX_INTERNAL_BIND", "FELIX_NODE_ID", "broker-1.felix.local", "FELIX_INTERNAL_ADVERTISED_ADDR",
		"FELIX_ADVERTISED_ADDR", "FELIX_INTERNAL_TLS_CERT", "FELIX_INTERNAL_TLS_KEY", "FELIX_INTERNAL_TLS_CA", "--internal-bind"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--print-config misses %q", want)
		}
	}
	single, _, err := LoadConfig(nil, envOf(nil))
	if err != nil || single.InternalBind != "" || single.AdvertisedAddr != single.QUICBind {
		t.Fatalf("single-node defaults: %+v %v", single.ClusterConfig, err)
	}
}

func TestClusterSettingsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		env  map[string]string
		want []string
	}{
		"node id not a DNS name": {map[string]string{"FELIX_NODE_ID": "broker_1"}, []string{"FELIX_NODE_ID", "DNS name"}},
		"node id an IP":          {map[string]string{"FELIX_NODE_ID": "10.0.0.1"}, []string{"FELIX_NODE_ID"}},
		"bind without node id":   {map[string]string{"FELIX_INTERNAL_BIND": ":5001"}, []string{"FELIX_NODE_ID"}},
		"bind on the client port": {map[string]string{"FELIX_INTERNAL_BIND": "0.0.0.0:5000", "FELIX_NODE_ID": "b1"},
			[]string{"FELIX_INTERNAL_BIND", "FELIX_QUIC_BIND", "5000"}},
		"bad advertised addr": {map[string]string{"FELIX_ADVERTISED_ADDR": "nohost"}, []string{"FELIX_ADVERTISED_ADDR"}},
		"tls cert alone": {map[string]string{"FELIX_INTERNAL_TLS_CERT": "/c.pem"},
			[]string{"FELIX_INTERNAL_TLS_KEY", "FELIX_INTERNAL_TLS_CA", "missing"}},
		"tls ca missing": {map[string]string{"FELIX_INTERNAL_TLS_CERT": "/c.pem", "FELIX_INTERNAL_TLS_KEY": "/k.pem"},
			[]string{"FELIX_INTERNAL_TLS_CA missing"}},
	} {
		_, _, err := LoadConfig(nil, envOf(tc.env))
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %q", name, err, w)
			}
		}
	}
	if _, _, err := LoadConfig(nil, envOf(map[string]string{"FELIX_INTERNAL_BIND": "127.0.0.1:0", "FELIX_QUIC_BIND": "127.0.0.1:0", "FELIX_NODE_ID": "b1"})); err != nil {
		t.Fatalf("port 0 on both roles picks two ports: %v", err)
	}
}
