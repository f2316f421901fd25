package fold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const example = `apiVersion: eventsd.kubevents.io/v1alpha1
kind: FoldConfiguration
rules:
- name: backoff
  reasons: [BackOff, FailedSync]
  window: 10m
- namespaces: [kyverno]
  types: [Warning]
  window: 1h
- reportingControllers: [my-operator]
  window: 90s
`

// TestPolicyMatch: the first matching rule decides, with its name (or
// index) and window; every non-empty list must match; an event no rule
// matches, and every event under a nil policy, is not folded.
func TestPolicyMatch(t *testing.T) {
	c, err := Decode([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPolicy(c)
	if err != nil {
		t.Fatal(err)
	}
	ev := func(ns, typ, reason, controller, component string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e"}, Type: typ, Reason: reason,
			ReportingController: controller, Source: corev1.EventSource{Component: component}}
	}
	for _, tc := range []struct {
		name   string
		ev     *corev1.Event
		rule   string
		window time.Duration
		ok     bool
	}{
		{"reason", ev("default", "Warning", "BackOff", "", ""), "backoff", 10 * time.Minute, true},
		{"first rule wins", ev("kyverno", "Warning", "FailedSync", "", ""), "backoff", 10 * time.Minute, true},
		{"namespace and type", ev("kyverno", "Warning", "PolicyViolation", "", ""), "1", time.Hour, true},
		{"namespace without its type", ev("kyverno", "Normal", "PolicyApplied", "", ""), "", 0, false},
		{"reportingController", ev("default", "Normal", "X", "my-operator", ""), "2", 90 * time.Second, true},
		{"source.component", ev("default", "Normal", "X", "", "my-operator"), "2", 90 * time.Second, true},
		{"none", ev("default", "Normal", "Started", "kubelet", "kubelet"), "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule, window, ok := p.Match(tc.ev)
			if rule != tc.rule || window != tc.window || ok != tc.ok {
				t.Fatalf("Match = %q %v %v, want %q %v %v", rule, window, ok, tc.rule, tc.window, tc.ok)
			}
		})
	}
	if got := strings.Join(p.RuleNames(), ","); got != "backoff,1,2" {
		t.Fatalf("RuleNames = %s", got)
	}
	var none *Policy
	if _, _, ok := none.Match(ev("default", "Warning", "BackOff", "", "")); ok {
		t.Fatal("a nil policy folded")
	}
	if p, err := NewPolicy(nil); p != nil || err != nil {
		t.Fatalf("NewPolicy(nil) = %v, %v", p, err)
	}
}

// TestDecodeErrors: each mistake is refused with an error naming the rule
// and field, as the retention rules' are.
func TestDecodeErrors(t *testing.T) {
	head := "apiVersion: eventsd.kubevents.io/v1alpha1\nkind: FoldConfiguration\n"
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"missing window", head + "rules:\n- reasons: [BackOff]\n", []string{"rules[0].window", "Required value"}},
		{"not a duration", head + "rules:\n- window: 10m\n- window: \"10\"\n", []string{"rules[1].window", `"10"`, "not a duration"}},
		{"number", head + "rules:\n- window: 10\n", []string{"rules[0].window", "want a string"}},
		{"day unit", head + "rules:\n- window: 1d\n", []string{"rules[0].window", `"1d": use hours, e.g. 24h`}},
		{"zero", head + "rules:\n- window: 0s\n", []string{"rules[0].window", "must be positive"}},
		{"negative", head + "rules:\n- window: -5m\n", []string{"rules[0].window", "must be positive"}},
		{"too long", head + "rules:\n- window: 48h\n", []string{"rules[0].window", "at most 24h0m0s"}},
		{"type", head + "rules:\n- window: 1m\n  types: [Error]\n", []string{"rules[0].types[0]", `"Error"`, "Normal", "Warning"}},
		{"duplicate name", head + "rules:\n- {name: a, window: 1m}\n- {name: a, window: 2m}\n", []string{"rules[1].name", "also rules[0].name"}},
		// An unnamed rule is named by its index: "1" is rules[1]'s name.
		{"name of an unnamed rule", head + "rules:\n- {name: '1', window: 1m}\n- {window: 2m}\n", []string{"rules[1].name", `Duplicate value: "1 (`, "rules[1] is unnamed, so named by its index", "also rules[0].name"}},
		{"unnamed rule's name taken later", head + "rules:\n- {window: 1m}\n- {name: '0', window: 2m}\n", []string{"rules[1].name", `Duplicate value: "0 (`, "also rules[0] is unnamed, so named by its index"}},
		{"unknown field", head + "rules:\n- window: 1m\n  namespace: [x]\n", []string{"unknown field", "namespace"}},
		{"repeated field", head + "rules:\n- window: 1m\n  window: 2m\n", []string{"window"}},
		{"wrong type", head + "rules:\n- window: 1m\n  reasons: BackOff\n", []string{"rules[0].reasons", "want"}},
		{"kind", "apiVersion: eventsd.kubevents.io/v1alpha1\nkind: RetentionConfiguration\nrules: []\n", []string{"FoldConfiguration", `"RetentionConfiguration"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			if err == nil {
				t.Fatal("decoded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestLoadFile: errors name the file; a good file loads.
func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "fold.yaml")
	if err := os.WriteFile(good, []byte(example), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadFile(good)
	if err != nil || len(c.Rules) != 3 {
		t.Fatalf("LoadFile = %v, %v", c, err)
	}
	_, err = LoadFile(filepath.Join(dir, "missing.yaml"))
	if err == nil || !strings.Contains(err.Error(), "fold config") || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("missing file: %v", err)
	}
}
