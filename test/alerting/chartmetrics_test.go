package alerting

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/eventmetrics"
	"github.com/kubevents/kubevents/internal/helmbin"
	"sigs.k8s.io/yaml"
)

// renderChart renders the whole chart with args.
func renderChart(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := helmbin.Binary()
	if err != nil {
		t.Fatalf("helm: %v", err)
	}
	out, err := exec.Command(bin, append([]string{"template", "eventsd", chart}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	return string(out)
}

// TestChartEventMetricsConfig: the chart's eventMetrics.config becomes an
// EventMetricsConfiguration eventsd accepts, passed with
// --event-metrics-config; eventMetrics.enabled=false turns the metrics
// off; the defaults pass neither flag (the metrics on, by default).
func TestChartEventMetricsConfig(t *testing.T) {
	out := renderChart(t, "--set", "eventMetrics.config.maxLabelSets=5000", "--set", "eventMetrics.config.labels={namespace,reason,kind,name}")
	var file string
	for doc := range strings.SplitSeq(out, "\n---\n") {
		var cm struct {
			Kind string            `json:"kind"`
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal([]byte(doc), &cm); err == nil && cm.Kind == "ConfigMap" && cm.Data["event-metrics.yaml"] != "" {
			file = cm.Data["event-metrics.yaml"]
		}
	}
	if file == "" {
		t.Fatalf("no event-metrics.yaml in the chart's ConfigMap:\n%s", out)
	}
	c, err := eventmetrics.Decode([]byte(file))
	if err != nil {
		t.Fatalf("the chart's EventMetricsConfiguration: %v\n%s", err, file)
	}
	if c.MaxLabelSets != 5000 || !slices.Equal(c.Labels, []string{"namespace", "reason", "kind", "name"}) {
		t.Errorf("the chart's EventMetricsConfiguration: %+v", c)
	}
	if !strings.Contains(out, "- --event-metrics-config=/etc/eventsd/event-metrics.yaml\n") {
		t.Error("eventsd is not given --event-metrics-config")
	}
	if off := renderChart(t, "--set", "eventMetrics.enabled=false"); !strings.Contains(off, "- --event-metrics=false\n") {
		t.Error("eventMetrics.enabled=false does not pass --event-metrics=false")
	}
	if def := renderChart(t); strings.Contains(def, "event-metrics") {
		t.Error("the defaults pass an event metrics flag or file")
	}
}
