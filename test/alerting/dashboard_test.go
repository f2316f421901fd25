package alerting

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/eventmetrics"
)

var dashboardFile = filepath.Join(root, "deploy", "grafana", "eventsd-events.json")

// dashboard is what the test reads of a Grafana dashboard.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		ID      int    `json:"id"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// grafanaVars are the dashboard's variables and Grafana's built-in ones,
// replaced by values Prometheus accepts.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__range", "6h", "$namespace", ".*", "$type", ".*", "$reason", ".*")

// metricName finds the eventsd metrics an expression reads.
var metricName = regexp.MustCompile(`eventsd_[a-z_]+`)

// TestDashboard: the dashboard is JSON Grafana reads (title, uid, panels
// with ids), every panel queries eventsd's metrics by their real names,
// and every query is PromQL promtool accepts (as recording rules).
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: title %q, uid %q, %d panels", dashboardFile, d.Title, d.UID, len(d.Panels))
	}
	known := map[string]bool{eventmetrics.OccurrencesName: true, eventmetrics.LabelSetsName: true, eventmetrics.LabelSetsRefusedName: true}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, q := range p.Targets {
			for _, m := range metricName.FindAllString(q.Expr, -1) {
				if !known[m] {
					t.Errorf("panel %q reads %s, which eventsd does not export", p.Title, m)
				}
			}
			expr, err := json.Marshal(grafanaVars.Replace(q.Expr))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&rules, "      - record: panel_%d_%d\n        expr: %s\n", p.ID, i, expr)
		}
	}
	bin := promtool(t)
	f := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(f, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "rules", f).CombinedOutput(); err != nil {
		t.Errorf("the dashboard's queries: promtool check rules: %v\n%s\n%s", err, out, rules.String())
	}
}
