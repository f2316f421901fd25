package sinkretry

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	restclient "k8s.io/client-go/rest"
)

func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Resource: "events"}
	cases := []struct {
		err  error
		want Outcome
	}{
		{apierrors.NewTooManyRequests("slow down", 3), Retry},
		{apierrors.NewInternalError(errors.New("x")), Retry},
		{apierrors.NewServiceUnavailable("x"), Retry},
		{apierrors.NewTimeoutError("x", 1), Retry},
		{errors.New("connection refused"), Retry},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "Event"}, "x", nil), Drop},
		{apierrors.NewForbidden(gr, "x", errors.New("no")), Drop},
		{apierrors.NewAlreadyExists(gr, "x"), Drop},
		{&restclient.RequestConstructionError{Err: errors.New("bad")}, Drop},
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("%v: got %v, want %v", c.err, got, c.want)
		}
	}
}

func TestDelay(t *testing.T) {
	p := Policy{Initial: time.Second, Max: 30 * time.Second, Jitter: -1}.WithDefaults()
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i, w := range want {
		if got := p.Delay(i+1, errors.New("x")); got != w*time.Second {
			t.Errorf("attempt %d: delay %v, want %v", i+1, got, w*time.Second)
		}
	}
	if got := p.Delay(1, apierrors.NewTooManyRequests("x", 7)); got != 7*time.Second {
		t.Errorf("Retry-After 7 s: delay %v", got)
	}
	j := Policy{}.WithDefaults()
	for i := 0; i < 100; i++ {
		if d := j.Delay(2, errors.New("x")); d < 1500*time.Millisecond || d > 2500*time.Millisecond {
			t.Fatalf("jittered delay %v outside 2s ±25%%", d)
		}
	}
}
