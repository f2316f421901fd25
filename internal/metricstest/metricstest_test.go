package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestSum(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "c"}, []string{"verb", "code"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "g"})
	reg.MustRegister(c, g)
	c.WithLabelValues("list", "200").Add(2)
	c.WithLabelValues("list", "500").Add(3)
	c.WithLabelValues("get", "200").Add(5)
	g.Set(7)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"c_total", nil, 10},
		{"c_total", []string{"verb", "list"}, 5},
		{"c_total", []string{"verb", "list", "code", "500"}, 3},
		{"c_total", []string{"verb", "watch"}, 0},
		{"g", nil, 7},
		{"absent", nil, 0},
	} {
		if got := Sum(t, reg, tc.name, tc.labels...); got != tc.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}
