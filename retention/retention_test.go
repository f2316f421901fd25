package retention

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const example = `apiVersion: eventsd.kubevents.io/v1alpha1
kind: RetentionConfiguration
rules:
- name: warnings
  types: [Warning]
  ttl: 168h
- namespaces: [prod]
  ttl: 24h
- reasons: [BackOff, Failed]
  namespaces: [staging]
  ttl: 2h
- reportingControllers: [kubelet]
  ttl: 30m
`

func event(ns, typ, reason, controller, component string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e"},
		Type:       typ, Reason: reason, ReportingController: controller,
		Source: corev1.EventSource{Component: component},
	}
}

// decodePolicy is the policy of the configuration file doc, with
// defaultTTL.
func decodePolicy(t *testing.T, doc string, defaultTTL time.Duration) *Policy {
	t.Helper()
	c, err := Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPolicy(c, defaultTTL)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPolicyTTL: the first matching rule gives the TTL, each field
// matches, every non-empty list must match, and an event no rule matches
// gets the default.
func TestPolicyTTL(t *testing.T) {
	p := decodePolicy(t, example, time.Hour)
	for _, tc := range []struct {
		name     string
		ev       *corev1.Event
		ttl      time.Duration
		ruleName string
	}{
		{"type", event("default", "Warning", "X", "", ""), 168 * time.Hour, "warnings"},
		{"first rule wins over namespace", event("prod", "Warning", "X", "", ""), 168 * time.Hour, "warnings"},
		{"namespace", event("prod", "Normal", "X", "", ""), 24 * time.Hour, "1"},
		{"reason and namespace", event("staging", "Normal", "Failed", "", ""), 2 * time.Hour, "2"},
		{"reason without its namespace", event("default", "Normal", "Failed", "", ""), time.Hour, DefaultRuleName},
		{"namespace without its reason", event("staging", "Normal", "Started", "", ""), time.Hour, DefaultRuleName},
		{"reportingController", event("default", "Normal", "X", "kubelet", ""), 30 * time.Minute, "3"},
		{"source.component", event("default", "Normal", "X", "", "kubelet"), 30 * time.Minute, "3"},
		{"other controller", event("default", "Normal", "X", "scheduler", "scheduler"), time.Hour, DefaultRuleName},
		{"default", event("default", "Normal", "Started", "", ""), time.Hour, DefaultRuleName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttl, rule := p.TTL(tc.ev)
			if ttl != tc.ttl || rule != tc.ruleName {
				t.Fatalf("TTL = %v by rule %q, want %v by %q", ttl, rule, tc.ttl, tc.ruleName)
			}
		})
	}
	if got := strings.Join(p.RuleNames(), ","); got != "warnings,1,2,3,default" {
		t.Fatalf("RuleNames = %s", got)
	}
}

const fleetExample = `apiVersion: eventsd.kubevents.io/v1alpha1
kind: RetentionConfiguration
rules:
- name: east-warnings
  clusters: [east]
  types: [Warning]
  ttl: 720h
- name: root
  clusters: [""]
  ttl: 2h
- name: prod
  clusters: [east, west]
  namespaces: [prod]
  ttl: 24h
- name: any-backoff
  reasons: [BackOff]
  ttl: 48h
`

// TestPolicyClusterTTL: a rule naming clusters matches only their
// events, "" naming the root cluster; a rule without clusters matches
// every cluster's; TTL is the root cluster's; StoredTTL reads the cluster
// and the real namespace from a storage namespace.
func TestPolicyClusterTTL(t *testing.T) {
	p := decodePolicy(t, fleetExample, time.Hour)
	for _, tc := range []struct {
		name, cluster string
		ev            *corev1.Event
		ttl           time.Duration
		rule          string
	}{
		{"east's warning", "east", event("shop", "Warning", "X", "", ""), 720 * time.Hour, "east-warnings"},
		{"west's warning", "west", event("shop", "Warning", "X", "", ""), time.Hour, DefaultRuleName},
		{"root's warning", "", event("shop", "Warning", "X", "", ""), 2 * time.Hour, "root"},
		{"east's prod", "east", event("prod", "Normal", "X", "", ""), 24 * time.Hour, "prod"},
		{"west's prod", "west", event("prod", "Normal", "X", "", ""), 24 * time.Hour, "prod"},
		{"north's prod", "north", event("prod", "Normal", "X", "", ""), time.Hour, DefaultRuleName},
		{"north's backoff: a rule without clusters", "north", event("shop", "Normal", "BackOff", "", ""), 48 * time.Hour, "any-backoff"},
		{"root's backoff: the root rule first", "", event("shop", "Normal", "BackOff", "", ""), 2 * time.Hour, "root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if ttl, rule := p.ClusterTTL(tc.cluster, tc.ev); ttl != tc.ttl || rule != tc.rule {
				t.Errorf("ClusterTTL = %v by %q, want %v by %q", ttl, rule, tc.ttl, tc.rule)
			}
			stored := tc.ev.DeepCopy()
			stored.Namespace = storage.ClusterNamespace(tc.cluster, tc.ev.Namespace)
			if ttl, rule := p.StoredTTL(stored); ttl != tc.ttl || rule != tc.rule {
				t.Errorf("StoredTTL(%s) = %v by %q, want %v by %q", stored.Namespace, ttl, rule, tc.ttl, tc.rule)
			}
			if stored.Namespace != storage.ClusterNamespace(tc.cluster, tc.ev.Namespace) {
				t.Errorf("StoredTTL changed the event's namespace to %q", stored.Namespace)
			}
			if tc.cluster == "" {
				if ttl, rule := p.TTL(tc.ev); ttl != tc.ttl || rule != tc.rule {
					t.Errorf("TTL = %v by %q, want ClusterTTL's %v by %q", ttl, rule, tc.ttl, tc.rule)
				}
			}
		})
	}
}

// TestNilConfiguration: without a configuration every event gets the
// default.
func TestNilConfiguration(t *testing.T) {
	p, err := NewPolicy(nil, 3*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if ttl, rule := p.TTL(event("prod", "Warning", "X", "c", "c")); ttl != 3*time.Hour || rule != DefaultRuleName {
		t.Fatalf("TTL = %v by %q", ttl, rule)
	}
}

// TestDecodeErrors: bad files are refused with an error naming the rule
// and field.
func TestDecodeErrors(t *testing.T) {
	const head = "apiVersion: eventsd.kubevents.io/v1alpha1\nkind: RetentionConfiguration\n"
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown field", head + "rules:\n- namespace: [prod]\n  ttl: 1h\n", `unknown field "rules[0].namespace"`},
		{"duplicate field", head + "rules:\n- ttl: 1h\n  ttl: 2h\n", `ttl`},
		{"missing ttl", head + "rules:\n- types: [Warning]\n", "rules[0].ttl: Required value"},
		{"bad duration", head + "rules:\n- ttl: 1h\n- ttl: 7d\n", `rules[1].ttl: Invalid value: "7d": use hours, e.g. 168h`},
		{"wrong type", head + "rules:\n- ttl: 1h\n- ttl: true\n", `decoding RetentionConfiguration: rules[1].ttl: Invalid value: true: want a string`},
		{"zero ttl", head + "rules:\n- ttl: 0s\n", `rules[0].ttl: Invalid value: "0s": must be positive`},
		{"negative ttl", head + "rules:\n- ttl: -1h\n", `rules[0].ttl: Invalid value: "-1h": must be positive`},
		{"unknown type", head + "rules:\n- types: [Normal, Error]\n  ttl: 1h\n", `rules[0].types[1]: Unsupported value: "Error"`},
		{"duplicate name", head + "rules:\n- name: a\n  ttl: 1h\n- name: a\n  ttl: 2h\n", `rules[1].name: Duplicate value`},
		{"bad cluster", head + "rules:\n- clusters: [east, East]\n  ttl: 1h\n", `rules[0].clusters[1]: Invalid value: "East"`},
		{"cluster twice", head + "rules:\n- clusters: [\"\", east, \"\"]\n  ttl: 1h\n", `rules[0].clusters[2]: Duplicate value`},
		{"cluster not a list", head + "rules:\n- clusters: east\n  ttl: 1h\n", `rules[0].clusters: Invalid value: "east": want a list`},
		{"reserved name", head + "rules:\n- name: default\n  ttl: 1h\n", `rules[0].name: Invalid value: "default"`},
		{"wrong kind", "apiVersion: eventsd.kubevents.io/v1alpha1\nkind: Retention\nrules: []\n", `found apiVersion "eventsd.kubevents.io/v1alpha1", kind "Retention"`},
		{"no apiVersion", "kind: RetentionConfiguration\n", `want apiVersion eventsd.kubevents.io/v1alpha1`},
		{"not YAML", "rules: [", "decoding RetentionConfiguration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestLoadFile: errors name the file; JSON is accepted too.
func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: eventsd.kubevents.io/v1alpha1\nkind: RetentionConfiguration\nrules:\n- ttl: 7d\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "rules[0].ttl") {
		t.Fatalf("LoadFile(bad) = %v", err)
	}
	if _, err := LoadFile(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("LoadFile(missing) = %v", err)
	}
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"apiVersion":"eventsd.kubevents.io/v1alpha1","kind":"RetentionConfiguration","rules":[{"types":["Warning"],"ttl":"168h"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadFile(good)
	if err != nil || len(c.Rules) != 1 || c.Rules[0].TTL != "168h" {
		t.Fatalf("LoadFile(good) = %+v, %v", c, err)
	}
}

// TestREADMEExample: the example in docs/keep-events-longer.md loads,
// and chooses what it says.
func TestREADMEExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "docs", "keep-events-longer.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The example is the file the page's heredoc writes.
	const section, start, end = "### Retention rules", "<<'EOF'\n", "\nEOF\n"
	_, rest, ok := strings.Cut(string(readme), section)
	if ok {
		_, rest, ok = strings.Cut(rest, start)
	}
	ex, _, closed := strings.Cut(rest, end)
	if !ok || !closed {
		t.Fatalf("docs/keep-events-longer.md has no YAML example under %q", section)
	}
	c, err := Decode([]byte(ex))
	if err != nil {
		t.Fatal(err)
	}
	// The page runs it with --event-ttl 24h.
	p, err := NewPolicy(c, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ev  *corev1.Event
		ttl time.Duration
	}{
		{event("default", "Warning", "BackOff", "kubelet", ""), 30 * 24 * time.Hour},
		{event("prod", "Warning", "BackOff", "kubelet", ""), 30 * 24 * time.Hour},
		{event("prod", "Normal", "Started", "kubelet", ""), 7 * 24 * time.Hour},
		{event("default", "Normal", "Started", "kubelet", ""), 24 * time.Hour},
	} {
		if ttl, _ := p.TTL(tc.ev); ttl != tc.ttl {
			t.Errorf("%s %s: TTL %v, want %v", tc.ev.Namespace, tc.ev.Type, ttl, tc.ttl)
		}
	}
}
