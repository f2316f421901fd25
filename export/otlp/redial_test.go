package otlp

import (
	"context"
	"testing"
	"time"

	"github.com/kubevents/kubevents/export"
	"github.com/kubevents/kubevents/export/otlp/otlptest"
	"google.golang.org/grpc/connectivity"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// fakeRedialer is a connection in a given state that counts redials.
type fakeRedialer struct {
	state  connectivity.State
	resets int
}

func (f *fakeRedialer) GetState() connectivity.State { return f.state }
func (f *fakeRedialer) ResetConnectBackoff()         { f.resets++ }

func grpcSink(t *testing.T, endpoint string) *Sink {
	t.Helper()
	s, err := New(Config{Protocol: ProtocolGRPC, Endpoint: endpoint, Insecure: true, Timeout: metav1.Duration{Duration: 20 * time.Second}},
		Options{Version: "v0.0.0-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func oneRecord() []export.Record {
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns", UID: "u", ResourceVersion: "1"}, Reason: "R"}
	return []export.Record{{Key: export.KeyOf(ev, 1), Type: watch.Added, Revision: 1, Event: ev}}
}

// TestSendRedialsAFailedConnection: an attempt on a connection in
// TRANSIENT_FAILURE (waiting out gRPC's own backoff) redials it first;
// one on a connection in any other state leaves it alone.
func TestSendRedialsAFailedConnection(t *testing.T) {
	r := otlptest.Start(t, otlptest.Options{})
	for _, c := range []struct {
		state  connectivity.State
		resets int
	}{
		{connectivity.TransientFailure, 1},
		{connectivity.Ready, 0},
		{connectivity.Idle, 0},
		{connectivity.Connecting, 0},
	} {
		s := grpcSink(t, r.GRPCEndpoint())
		f := &fakeRedialer{state: c.state}
		s.redial = f
		if err := s.Send(context.Background(), oneRecord()); err != nil {
			t.Fatalf("%v: Send: %v", c.state, err)
		}
		if f.resets != c.resets {
			t.Errorf("%v: %d redials, want %d", c.state, f.resets, c.resets)
		}
	}
}

// TestSendAfterLongOutage: once gRPC has given up on a collector that went
// away (TRANSIENT_FAILURE, its next dial seconds away), the exporter's
// next attempt after the collector is back succeeds at once: it does not
// wait for gRPC's schedule, however long that has grown.
func TestSendAfterLongOutage(t *testing.T) {
	r := otlptest.Start(t, otlptest.Options{})
	s := grpcSink(t, r.GRPCEndpoint())
	if err := s.Send(context.Background(), oneRecord()); err != nil {
		t.Fatal(err)
	}
	r.Down()
	deadline := time.Now().Add(20 * time.Second)
	for s.conn.GetState() != connectivity.TransientFailure {
		if time.Now().After(deadline) {
			t.Fatalf("connection %v, not TRANSIENT_FAILURE, 20 s after the collector went", s.conn.GetState())
		}
		_ = s.Send(context.Background(), oneRecord()) // fails: the collector is down
		time.Sleep(10 * time.Millisecond)
	}
	if err := r.Up(); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), oneRecord()); err != nil {
		t.Fatalf("the first attempt after the collector came back: %v", err)
	}
}

func (f *fakeRedialer) WaitForStateChange(context.Context, connectivity.State) bool { return true }
