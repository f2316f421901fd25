package eventfilter_test

import (
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/eventfilter"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkFilterMatches: one filter evaluated on one event, as a list
// evaluates it on each candidate.
func BenchmarkFilterMatches(b *testing.B) {
	f, err := eventfilter.Compile(eventapi.CoreV1, `object.message.contains("OOM")`, eventfilter.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "b"}, Message: "Back-off restarting failed container app", Reason: "BackOff",
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "x"}, LastTimestamp: metav1.NewTime(time.Now()), Count: 3}
	for b.Loop() {
		f.Matches(ev)
	}
}
