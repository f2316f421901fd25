package exportconfig_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/export/exportconfig"
)

const valid = `
apiVersion: eventsd.kubevents.io/v1alpha1
kind: ExportConfiguration
sinks:
- name: slack-warnings
  filter:
    types: [Warning]
    updates: false
  batch:
    maxRecords: 20
    maxWait: 2s
  webhook:
    url: https://hooks.slack.example/services/T0/B0/XXXX
    format: slack
- name: collector
  filter:
    clusters: ["", east]
    deletions: true
  otlp:
    endpoint: 127.0.0.1:4317
    insecure: true
- name: archive
  file:
    path: %s
`

// TestDecodeAndBuild: a file with the three sink types decodes, and
// builds a sink of each with its filter and batching.
func TestDecodeAndBuild(t *testing.T) {
	path := filepath.Join(t.TempDir(), "export.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(valid, "%s", filepath.Join(t.TempDir(), "events.jsonl"), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := exportconfig.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	specs, err := c.Build(exportconfig.BuildOptions{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, s := range specs {
			s.Sink.Close()
		}
	}()
	if len(specs) != 3 {
		t.Fatalf("%d sinks", len(specs))
	}
	for i, want := range []struct{ name, typ string }{{"slack-warnings", "webhook"}, {"collector", "otlp"}, {"archive", "file"}} {
		if specs[i].Name != want.name || specs[i].Type != want.typ {
			t.Errorf("sink %d = %s/%s, want %s/%s", i, specs[i].Name, specs[i].Type, want.name, want.typ)
		}
	}
	if s := specs[0]; s.MaxBatch != 20 || s.MaxWait != 2*time.Second || s.Filter.Updates == nil || *s.Filter.Updates || s.Filter.Types[0] != "Warning" {
		t.Errorf("slack-warnings spec = %+v", s)
	}
	if !specs[1].Filter.Deletions {
		t.Error("collector: deletions not read")
	}
	if c := specs[1].Filter.Clusters; len(c) != 2 || c[0] != "" || c[1] != "east" {
		t.Errorf("collector: clusters %q, want the root and east", c)
	}
}

// TestDecodeErrors name the sink and field at fault.
func TestDecodeErrors(t *testing.T) {
	head := "apiVersion: eventsd.kubevents.io/v1alpha1\nkind: ExportConfiguration\n"
	for _, tc := range []struct{ name, body, want string }{
		{"no sinks", head + "sinks: []\n", "sinks: Required value"},
		{"no type", head + "sinks:\n- name: a\n", "sinks[0]: Required value: one of webhook, otlp or file"},
		{"two types", head + "sinks:\n- name: a\n  file: {path: /tmp/x}\n  otlp: {endpoint: 'h:1', insecure: true}\n", "sinks[0]: Forbidden: only one of webhook, otlp or file"},
		{"bad name", head + "sinks:\n- name: A_b\n  file: {path: /tmp/x}\n", `sinks[0].name: Invalid value: "A_b"`},
		{"duplicate name", head + "sinks:\n- name: a\n  file: {path: /tmp/x}\n- name: a\n  file: {path: /tmp/y}\n", "sinks[1].name: Duplicate value"},
		{"bad type filter", head + "sinks:\n- name: a\n  filter: {types: [Error]}\n  file: {path: /tmp/x}\n", `sinks[0].filter.types[0]: Unsupported value: "Error"`},
		{"bad cluster", head + "sinks:\n- name: a\n  filter: {clusters: [east, East_1]}\n  file: {path: /tmp/x}\n", `sinks[0].filter.clusters[1]: Invalid value: "East_1"`},
		{"cluster twice", head + "sinks:\n- name: a\n  filter: {clusters: [east, east]}\n  file: {path: /tmp/x}\n", `sinks[0].filter.clusters[1]: Duplicate value`},
		{"sink's own field", head + "sinks:\n- name: a\n  webhook: {url: 'ftp://x'}\n", "sinks[0].webhook.url"},
		{"unknown field", head + "sinks:\n- name: a\n  fliter: {}\n  file: {path: /tmp/x}\n", `unknown field "sinks[0].fliter"`},
		{"wrong kind", "apiVersion: eventsd.kubevents.io/v1alpha1\nkind: RetentionConfiguration\nsinks: []\n", `want apiVersion eventsd.kubevents.io/v1alpha1, kind ExportConfiguration`},
		{"negative batch", head + "sinks:\n- name: a\n  batch: {maxRecords: -1}\n  file: {path: /tmp/x}\n", "sinks[0].batch.maxRecords: Invalid value: -1"},
		{"wrong type", head + "sinks:\n- name: a\n  file: {path: /tmp/x}\n- name: b\n  webhook: {url: 'https://x', headers: {X-Flag: true}}\n",
			"decoding ExportConfiguration: sinks[1].webhook.headers[X-Flag]: Invalid value: true: want a string"},
		{"wrong type in a filter", head + "sinks:\n- name: a\n  filter: {types: Warning}\n  file: {path: /tmp/x}\n",
			`decoding ExportConfiguration: sinks[0].filter.types: Invalid value: "Warning": want a list`},
	} {
		_, err := exportconfig.Decode([]byte(tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

// TestBuildClosesOnError: a sink that cannot be built fails Build naming
// it, and the sinks built before it are closed.
func TestBuildClosesOnError(t *testing.T) {
	dir := t.TempDir()
	notADir := filepath.Join(dir, "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	body := "apiVersion: eventsd.kubevents.io/v1alpha1\nkind: ExportConfiguration\nsinks:\n" +
		"- name: good\n  file: {path: " + filepath.Join(dir, "ok.jsonl") + "}\n" +
		"- name: bad\n  file: {path: " + filepath.Join(notADir, "x.jsonl") + "}\n"
	c, err := exportconfig.Decode([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Build(exportconfig.BuildOptions{}); err == nil || !strings.Contains(err.Error(), `sink "bad"`) {
		t.Errorf("Build = %v, want an error naming sink \"bad\"", err)
	}
}
