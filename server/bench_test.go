package server_test

import (
	"testing"
	"time"

	"github.com/kubevents/kubevents/admission/eventratelimit"
	"github.com/kubevents/kubevents/server"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// protobufEvent is a legacy-recorder-shaped create body as client-go's
// typed client sends it: the protobuf envelope.
func protobufEvent(b *testing.B, name string) []byte {
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-7d4b9c-x2x9k", UID: "6c1d2f0e-3b7a-4c55-9f1e-2a8d4b6c9e01", APIVersion: "v1", ResourceVersion: "1234", FieldPath: "spec.containers{web}"},
		Reason:         "Pulled", Message: "Successfully pulled image \"nginx:1.27\" in 1.2s (1.2s including waiting). Image size: 72 MB.",
		Source: corev1.EventSource{Component: "kubelet", Host: "node-1"}, FirstTimestamp: now, LastTimestamp: now, Count: 1, Type: "Normal",
	}
	raw, err := ev.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "Event"}, Raw: raw}
	env, _ := u.Marshal()
	return append([]byte("k8s\x00"), env...)
}

// BenchmarkServerCreate measures the whole create path in process: HTTP,
// protobuf decode, validation, a synced group commit, encoding the answer.
func BenchmarkServerCreate(b *testing.B) {
	benchCreates(b, server.Config{}, "")
}

// BenchmarkServerCreateRateLimited is BenchmarkServerCreate with event
// rate limits of every type, generous enough that nothing is refused: the
// cost of the limiter on the create path.
func BenchmarkServerCreateRateLimited(b *testing.B) {
	benchCreates(b, server.Config{EventRateLimit: generousLimits(b)}, "")
}

// generousLimits are event rate limits of every type, so high that
// nothing is refused.
func generousLimits(b *testing.B) *eventratelimit.Limiter {
	const generous = 1 << 30
	var limits []eventratelimit.Limit
	for _, t := range []eventratelimit.LimitType{eventratelimit.ServerLimitType, eventratelimit.NamespaceLimitType,
		eventratelimit.UserLimitType, eventratelimit.SourceAndObjectLimitType} {
		limits = append(limits, eventratelimit.Limit{Type: t, QPS: generous, Burst: generous})
	}
	l, err := eventratelimit.New(&eventratelimit.Configuration{Limits: limits}, eventratelimit.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return l
}
