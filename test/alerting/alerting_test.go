// Package alerting tests the alerting rules eventsd ships on
// eventsd_event_occurrences_total (issue 33): the Helm chart's
// PrometheusRule (deploy/helm/eventsd, prometheusRule.*) and the same
// rules as a plain Prometheus rules file (deploy/prometheus), which is
// the chart's render with its defaults; promtool (internal/promtoolbin)
// checks them and runs their unit tests (deploy/prometheus/*.test.yaml).
package alerting

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/internal/helmbin"
	"github.com/kubevents/kubevents/internal/promtoolbin"
)

var update = flag.Bool("update", false, "rewrite deploy/prometheus/eventsd-rules.yaml from the chart")

// regenerate is the command that rewrites the plain rules file.
const regenerate = "go test ./test/alerting -run TestRulesFileIsTheChartsRender -update"

var (
	root      = filepath.Join("..", "..")
	chart     = filepath.Join(root, "deploy", "helm", "eventsd")
	rulesFile = filepath.Join(root, "deploy", "prometheus", "eventsd-rules.yaml")
	testsFile = filepath.Join(root, "deploy", "prometheus", "eventsd-rules.test.yaml")
)

// header starts the plain rules file.
const header = `# eventsd's alerting rules on eventsd_event_occurrences_total, for a
# Prometheus without the operator (add this file to rule_files; see
# docs/alerting-on-events.md). It is the Helm chart's PrometheusRule spec
# rendered with the chart's defaults (prometheusRule.* in
# deploy/helm/eventsd/values.yaml), written by:
#   ` + regenerate + `
# Replace https://eventsd.example.com/ui/ with your eventsd's web page.
`

// helmTemplate renders the chart's PrometheusRule with args.
func helmTemplate(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := helmbin.Binary()
	if err != nil {
		t.Fatalf("helm: %v", err)
	}
	out, err := exec.Command(bin, append([]string{"template", "eventsd", chart, "--show-only", "templates/prometheusrule.yaml",
		"--set", "prometheusRule.enabled=true"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	return string(out)
}

// specOf returns a rendered PrometheusRule's spec, unindented.
func specOf(t *testing.T, manifest string) string {
	t.Helper()
	_, spec, ok := strings.Cut(manifest, "\nspec:\n")
	if !ok {
		t.Fatalf("no spec in\n%s", manifest)
	}
	var b strings.Builder
	for line := range strings.Lines(spec) {
		b.WriteString(strings.TrimPrefix(line, "  "))
	}
	return b.String()
}

// TestRulesFileIsTheChartsRender: deploy/prometheus/eventsd-rules.yaml is
// the chart's rules with its defaults, so the two cannot drift.
func TestRulesFileIsTheChartsRender(t *testing.T) {
	want := header + specOf(t, helmTemplate(t))
	if *update {
		if err := os.WriteFile(rulesFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is not the chart's render; run %s", rulesFile, regenerate)
	}
}

// TestChartValues: the chart's values reach the rules (threshold, for,
// URL, labels), and the PrometheusRule is off by default.
func TestChartValues(t *testing.T) {
	out := helmTemplate(t, "--set", "prometheusRule.backOffThreshold=10", "--set", "prometheusRule.window=30s", "--set", "prometheusRule.failedSchedulingFor=30m",
		"--set", "prometheusRule.timelineURL=https://events.internal/ui/", "--set", "prometheusRule.additionalLabels.team=platform",
		"--set", "prometheusRule.labels.release=prom")
	for _, want := range []string{
		`[30s]) and eventsd_event_occurrences_total{reason="BackOff"} offset 30s) or`, "backing off) in 30s:",
		`) > 10`, "for: 30m", "https://events.internal/ui/?object=", "team: platform", "release: prom",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the render with values lacks %q:\n%s", want, out)
		}
	}
	bin, err := helmbin.Binary()
	if err != nil {
		t.Fatal(err)
	}
	off, err := exec.Command(bin, "template", "eventsd", chart).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, off)
	}
	if bytes.Contains(off, []byte("kind: PrometheusRule")) {
		t.Error("the chart renders a PrometheusRule by default")
	}
}

// promtool returns promtool, skipping the test when it cannot be built.
func promtool(t *testing.T) string {
	t.Helper()
	bin, err := promtoolbin.Binary()
	if err != nil {
		t.Skipf("promtool could not be built from tools/promtool (it needs the Go module proxy the first time, and minutes of compiling), so the rules are not checked: %v", err)
	}
	return bin
}

// TestPromtoolCheckRules: promtool accepts the plain rules file and the
// chart's rules with other values.
func TestPromtoolCheckRules(t *testing.T) {
	bin := promtool(t)
	other := filepath.Join(t.TempDir(), "rules.yaml")
	spec := specOf(t, helmTemplate(t, "--set", "prometheusRule.backOffThreshold=10", "--set", "prometheusRule.additionalLabels.team=platform"))
	if err := os.WriteFile(other, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{rulesFile, other} {
		out, err := exec.Command(bin, "check", "rules", f).CombinedOutput()
		if err != nil {
			t.Errorf("promtool check rules %s: %v\n%s", f, err, out)
		}
	}
}

// TestPromtoolTestRules runs the rules' unit tests: every shipped alert
// fires on the occurrences it is about and resolves once they stop.
func TestPromtoolTestRules(t *testing.T) {
	bin := promtool(t)
	out, err := exec.Command(bin, "test", "rules", testsFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	tests, err := os.ReadFile(testsFile)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	// Every alert has a test.
	for line := range strings.Lines(string(rules)) {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "- alert: "); ok && !bytes.Contains(tests, []byte("alertname: "+name+"\n")) {
			t.Errorf("alert %s has no unit test in %s", name, testsFile)
		}
	}
}
