package eventapi

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTableCells(t *testing.T) {
	now := time.Date(2025, 1, 1, 1, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	cases := []struct {
		desc string
		ev   *corev1.Event
		want string
	}{
		{"legacy with count", legacyEvent(func(e *corev1.Event) {
			e.FirstTimestamp, e.LastTimestamp, e.Count = ago(7*time.Minute+17*time.Second), ago(47*time.Second), 4
			e.Source.Host = "node-1"
			e.Message = "  padded  "
			e.InvolvedObject.FieldPath = "spec.containers{web}"
		}), "[47s Normal Started pod/p spec.containers{web} kubelet, node-1 padded 7m17s 4 x.17f3a]"},
		{"series overrides", newEvent(func(e *corev1.Event) {
			e.EventTime = metav1.NewMicroTime(now.Add(-10 * time.Minute))
			e.Series = &corev1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(now.Add(-77 * time.Second))}
		}), "[77s Normal Started pod/p  kubelet, kubelet-node1 m 10m 3 x.17f3a]"},
		{"singleton new-style counts 1", newEvent(func(e *corev1.Event) {
			e.EventTime = metav1.NewMicroTime(now.Add(-30 * time.Second))
			e.InvolvedObject = corev1.ObjectReference{Kind: "Node"}
		}), "[30s Normal Started node  kubelet, kubelet-node1 m 30s 1 x.17f3a]"},
		{"no times", legacyEvent(func(e *corev1.Event) { e.Count = 0 }), "[<unknown> Normal Started pod/p  kubelet m <unknown> 1 x.17f3a]"},
	}
	for _, c := range cases {
		if got := fmt.Sprint(TableCells(c.ev, now)); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.desc, got, c.want)
		}
	}
	if len(TableColumns) != 10 || TableColumns[4].Priority != 1 || TableColumns[9].Format != "name" {
		t.Fatalf("columns differ from upstream's: %+v", TableColumns)
	}
}
