package eventratelimit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadInline: an AdmissionConfiguration with the Configuration inline,
// upstream's keys, and other plugins' entries reported as ignored.
func TestLoadInline(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "admission.yaml", `
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  path: podsecurity.yaml
- name: EventRateLimit
  configuration:
    apiVersion: eventratelimit.admission.k8s.io/v1alpha1
    kind: Configuration
    limits:
    - type: Server
      qps: 5000
      burst: 20000
    - type: Namespace
      qps: 50
      burst: 100
      cacheSize: 2000
    - type: User
      qps: 10
      burst: 50
    - type: SourceAndObject
      qps: 1
      burst: 10
`)
	c, ignored, err := LoadAdmissionConfigFile(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []Limit{
		{Type: ServerLimitType, QPS: 5000, Burst: 20000},
		{Type: NamespaceLimitType, QPS: 50, Burst: 100, CacheSize: 2000},
		{Type: UserLimitType, QPS: 10, Burst: 50},
		{Type: SourceAndObjectLimitType, QPS: 1, Burst: 10},
	}
	if diff := cmp.Diff(want, c.Limits); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"PodSecurity"}, ignored); diff != "" {
		t.Errorf("ignored (-want +got):\n%s", diff)
	}
}

// TestLoadPath: the Configuration in its own file, named relative to the
// AdmissionConfiguration's directory, as upstream resolves it.
func TestLoadPath(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "eventconfig.yaml", `apiVersion: eventratelimit.admission.k8s.io/v1alpha1
kind: Configuration
limits:
- {type: Namespace, qps: 50, burst: 100, cacheSize: 2000}
- {type: User, qps: 10, burst: 50}
`)
	p := writeFile(t, dir, "admission.yaml", `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: EventRateLimit
  path: eventconfig.yaml
`)
	c, _, err := LoadAdmissionConfigFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Limits) != 2 || c.Limits[1] != (Limit{Type: UserLimitType, QPS: 10, Burst: 50}) {
		t.Errorf("limits %+v", c.Limits)
	}
}

// TestLoadErrors: bad files are refused with upstream's validation
// messages or a message naming what is wrong.
func TestLoadErrors(t *testing.T) {
	const head = "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n"
	const cfg = "- name: EventRateLimit\n  configuration:\n    apiVersion: eventratelimit.admission.k8s.io/v1alpha1\n    kind: Configuration\n"
	cases := []struct {
		name, file, want string
	}{
		{"no entry", head + "- name: PodSecurity\n  path: x.yaml\n", "no EventRateLimit plugin entry"},
		{"entry without config", head + "- name: EventRateLimit\n", "limits: Invalid value: null: must not be empty"},
		{"empty limits", head + cfg + "    limits: []\n", "limits: Invalid value: []: must not be empty"},
		{"bad type", head + cfg + "    limits: [{type: Pod, qps: 1, burst: 1}]\n", `limits[0].type: Unsupported value: "Pod"`},
		{"zero qps", head + cfg + "    limits: [{type: Server, burst: 1}]\n", "limits[0].qps: Invalid value: 0: must be positive"},
		{"zero burst", head + cfg + "    limits: [{type: Server, qps: 1}]\n", "limits[0].burst: Invalid value: 0: must be positive"},
		{"negative cache", head + cfg + "    limits: [{type: User, qps: 1, burst: 1, cacheSize: -1}]\n", "limits[0].cacheSize: Invalid value: -1: must not be negative"},
		{"misspelt key", head + cfg + "    limits: [{type: User, qsp: 1, burst: 1}]\n", `unknown field "qsp"`},
		{"wrong kind", head + "- name: EventRateLimit\n  configuration:\n    apiVersion: v1\n    kind: Pod\n", `found apiVersion "v1", kind "Pod"`},
		{"missing path", head + "- name: EventRateLimit\n  path: nothere.yaml\n", "nothere.yaml: no such file"},
		{"not an AdmissionConfiguration", "apiVersion: v1\nkind: Pod\n", "no kind \"Pod\" is registered"},
		{"unknown top-level field", head + cfg + "    limits: [{type: User, qps: 1, burst: 1}]\nextra: 1\n", `unknown field "extra"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "admission.yaml", c.file)
			_, _, err := LoadAdmissionConfigFile(p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
			if c.name == "no entry" && !errors.Is(err, ErrNoPluginEntry) {
				t.Errorf("error %v is not ErrNoPluginEntry", err)
			}
		})
	}
}
