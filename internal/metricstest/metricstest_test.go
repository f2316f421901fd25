package metricstest

import (
	"maps"
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

func TestSamples(t *testing.T) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "c"}, []string{"verb", "code"})
	c.WithLabelValues("list", "200").Add(2)
	c.WithLabelValues("list", "500").Add(3)
	c.WithLabelValues("get", "200").Add(5)
	for _, tc := range []struct {
		by   []string
		want map[string]float64
	}{
		{[]string{"verb"}, map[string]float64{"list": 5, "get": 5}},
		{[]string{"code", "verb"}, map[string]float64{"200/list": 2, "500/list": 3, "200/get": 5}},
		{[]string{"absent"}, map[string]float64{"": 10}},
		{nil, map[string]float64{"code=200,verb=list": 2, "code=500,verb=list": 3, "code=200,verb=get": 5}},
	} {
		if got := Samples(t, c, "c_total", tc.by...); !maps.Equal(got, tc.want) {
			t.Errorf("Samples(c_total, %v) = %v, want %v", tc.by, got, tc.want)
		}
	}
	if got := Samples(t, c, "absent"); len(got) != 0 {
		t.Errorf("Samples(absent) = %v, want none", got)
	}
}
