// Package metricstest reads metrics back from a Prometheus registry in
// tests, so that tests assert on what /metrics would show.
package metricstest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Sum is the sum of the counter and gauge samples of the family name in g
// whose labels include every name, value pair of labels (given as name1,
// value1, name2, value2, ...); 0 when there are none yet.
func Sum(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	if len(labels)%2 != 0 {
		t.Fatalf("metricstest.Sum: labels %q are not name, value pairs", labels)
	}
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Samples gathers c alone, in a pedantic registry (so that what it
// collects is checked against what it describes), and returns the counter
// and gauge samples of the family name summed by the values of the labels
// by, joined with "/" (a label a sample lacks as ""); with no by, keyed
// by all of a sample's labels, "name=value" joined with ",". A family
// with no samples gives an empty map.
func Samples(t testing.TB, c prometheus.Collector, name string, by ...string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var key []string
			if len(by) == 0 {
				for _, lp := range m.GetLabel() {
					key = append(key, lp.GetName()+"="+lp.GetValue())
				}
			}
			for _, l := range by {
				v := ""
				for _, lp := range m.GetLabel() {
					if lp.GetName() == l {
						v = lp.GetValue()
					}
				}
				key = append(key, v)
			}
			sep := "/"
			if len(by) == 0 {
				sep = ","
			}
			out[strings.Join(key, sep)] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}
