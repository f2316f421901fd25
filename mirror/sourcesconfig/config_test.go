package sourcesconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/mirror"
)

func TestDecode(t *testing.T) {
	c, err := Decode([]byte(`
apiVersion: eventsd.kubevents.io/v1alpha1
kind: SourcesConfiguration
sources:
- name: east
  kubeconfig: /etc/east.kubeconfig
  context: admin
  qps: 50
  burst: 100
  deletions: propagate
  eventTTL: 2h
  initialSync: list
- name: west
  inCluster: true
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sources) != 2 {
		t.Fatalf("sources: %+v", c.Sources)
	}
	east := c.Sources[0].WithDefaults()
	if east.Name != "east" || east.Kubeconfig != "/etc/east.kubeconfig" || east.Context != "admin" || east.QPS != 50 || east.Burst != 100 ||
		east.Deletions != mirror.DeletionsPropagate || east.TTL() != 2*time.Hour || east.InitialSync != mirror.InitialSyncList {
		t.Errorf("east: %+v", east)
	}
	west := c.Sources[1].WithDefaults()
	if !west.InCluster || west.QPS != DefaultQPS || west.Burst != DefaultBurst || west.Deletions != mirror.DeletionsKeep ||
		west.TTL() != mirror.DefaultSourceTTL || west.InitialSync != mirror.InitialSyncAuto {
		t.Errorf("west's defaults: %+v", west)
	}
}

func TestDecodeErrors(t *testing.T) {
	const head = "apiVersion: eventsd.kubevents.io/v1alpha1\nkind: SourcesConfiguration\n"
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"no sources", head + "sources: []\n", []string{"sources: Required value: at least one source"}},
		{"wrong kind", "apiVersion: eventsd.kubevents.io/v1alpha1\nkind: FoldConfiguration\nsources: []\n", []string{`want apiVersion eventsd.kubevents.io/v1alpha1, kind SourcesConfiguration`}},
		{"unknown field", head + "sources:\n- name: a\n  kubeconfig: k\n  kubeConfig: k\n", []string{`unknown field "sources[0].kubeConfig"`}},
		{"duplicate field", head + "sources:\n- name: a\n  name: b\n  kubeconfig: k\n", []string{`key "name" already set`}},
		{"bad name", head + "sources:\n- name: a\n  kubeconfig: k\n- name: East\n  kubeconfig: k\n", []string{`sources[1].name: Invalid value: "East": must consist of lower case`}},
		{"no name", head + "sources:\n- kubeconfig: k\n", []string{`sources[0].name: Required value`}},
		{"same name", head + "sources:\n- name: a\n  kubeconfig: k\n- name: a\n  inCluster: true\n", []string{`sources[1].name: Duplicate value: "a (also sources[0].name)"`}},
		{"neither", head + "sources:\n- name: a\n", []string{`sources[0].kubeconfig: Required value`}},
		{"both", head + "sources:\n- name: a\n  kubeconfig: k\n  inCluster: true\n", []string{`sources[0].inCluster: Invalid value: true: give kubeconfig or inCluster, not both`}},
		{"context in cluster", head + "sources:\n- name: a\n  inCluster: true\n  context: c\n", []string{`sources[0].context: Invalid value: "c"`}},
		{"negative qps", head + "sources:\n- name: a\n  kubeconfig: k\n  qps: -1\n  burst: -2\n", []string{`sources[0].qps: Invalid value: -1`, `sources[0].burst: Invalid value: -2`}},
		{"deletions", head + "sources:\n- name: a\n  kubeconfig: k\n  deletions: drop\n", []string{`sources[0].deletions: Unsupported value: "drop": supported values: "keep", "propagate"`}},
		{"initial sync", head + "sources:\n- name: a\n  kubeconfig: k\n  initialSync: stream\n", []string{`sources[0].initialSync: Unsupported value: "stream"`}},
		{"days", head + "sources:\n- name: a\n  kubeconfig: k\n  eventTTL: 1d\n", []string{`sources[0].eventTTL: Invalid value: "1d": use hours, e.g. 24h`}},
		{"negative ttl", head + "sources:\n- name: a\n  kubeconfig: k\n  eventTTL: -1h\n", []string{`sources[0].eventTTL: Invalid value: "-1h": must be positive`}},
		{"wrong type", head + "sources:\n- name: a\n  kubeconfig: k\n  inCluster: \"yes\"\n", []string{`sources[0].inCluster: Invalid value: "yes": want true or false`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			if err == nil {
				t.Fatal("decoded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

func TestLoadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sources.yaml")
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), "sources config: open "+path) {
		t.Errorf("a missing file: %v", err)
	}
	if err := os.WriteFile(path, []byte("kind: SourcesConfiguration\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), "sources config "+path+": decoding SourcesConfiguration") {
		t.Errorf("a bad file: %v", err)
	}
}
