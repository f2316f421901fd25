package nodeagent

import (
	"context"
	"fmt"
	"sync"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientevents "k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/events"
	"github.com/kubevents/kubevents/internal/ratelog"
)

// Defaults of the agent's event sink.
const (
	// DefaultWriteFailureLogInterval is the least time between two log
	// lines about failing writes (and between two about their recovery):
	// an API server that is down fails every write, and the line says how
	// many it stands for.
	DefaultWriteFailureLogInterval = 10 * time.Second
	// DefaultWriteTimeout bounds one write to the API server. A write
	// takes milliseconds; one still unanswered after this is failed, so
	// that the recorder retries it (and the failure is logged) instead of
	// its single writer waiting on a server that will not answer.
	DefaultWriteTimeout = 30 * time.Second
)

// sinkConfig configures a reportingSink. Zero fields take the defaults.
type sinkConfig struct {
	// Logger gets the failure lines (klog's).
	Logger *klog.Logger
	// Clock paces the log lines (clock.RealClock).
	Clock clock.PassiveClock
	// LogInterval is DefaultWriteFailureLogInterval unless set.
	LogInterval time.Duration
	// WriteTimeout is DefaultWriteTimeout unless set.
	WriteTimeout time.Duration
}

// reportingSink is the recorder's event sink, logging failed writes as
// they happen, rate-limited: the recorder itself retries a failing write
// for about 90 s before it gives up and logs the drop, so without these
// lines an API server that is down or refusing goes unnoticed for that
// long, or until the agent stops. It also logs, once, when writes work
// again. The writes themselves are counted by the recorder
// (kubevents_recorder_writes_total{result="error"}).
type reportingSink struct {
	sink    clientevents.EventSink
	log     klog.Logger
	timeout time.Duration
	failLog *ratelog.Limiter
	okLog   *ratelog.Limiter

	mu sync.Mutex
	// failing counts the writes failed since the last one that worked.
	failing int
}

var (
	_ clientevents.EventSink = (*reportingSink)(nil)
	// The recorder resumes the series an earlier agent on this node left
	// (ongoing, or unknown after its Shutdown) only through a sink that
	// can list.
	_ events.Lister = (*reportingSink)(nil)
)

func newReportingSink(sink clientevents.EventSink, cfg sinkConfig) *reportingSink {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.LogInterval <= 0 {
		cfg.LogInterval = DefaultWriteFailureLogInterval
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	log := klog.Background().WithName("nodeagent")
	if cfg.Logger != nil {
		log = *cfg.Logger
	}
	return &reportingSink{sink: sink, log: log, timeout: cfg.WriteTimeout,
		failLog: ratelog.New(cfg.Clock, cfg.LogInterval), okLog: ratelog.New(cfg.Clock, cfg.LogInterval)}
}

// Create implements clientevents.EventSink.
func (s *reportingSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.sink.Create(ctx, ev)
	// AlreadyExists is the recorder's business (a create whose answer
	// was lost, or a name taken): the server answered.
	s.observe("create", ev, err, apierrors.IsAlreadyExists(err))
	return out, err
}

// List implements events.Lister over the wrapped sink's client (an
// *EventSinkImpl, or a sink that lists itself); a sink that cannot list
// answers an error, and the recorder then starts its series afresh.
func (s *reportingSink) List(ctx context.Context, opts metav1.ListOptions) (*eventsv1.EventList, error) {
	switch inner := s.sink.(type) {
	case events.Lister:
		return inner.List(ctx, opts)
	case *clientevents.EventSinkImpl:
		return inner.Interface.Events(metav1.NamespaceAll).List(ctx, opts)
	}
	return nil, fmt.Errorf("event sink %T cannot list events", s.sink)
}

// Update implements clientevents.EventSink.
func (s *reportingSink) Update(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.sink.Update(ctx, ev)
	s.observe("update", ev, err, false)
	return out, err
}

// Patch implements clientevents.EventSink.
func (s *reportingSink) Patch(ctx context.Context, old *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.sink.Patch(ctx, old, data)
	// NotFound: the event expired; the recorder creates it again.
	s.observe("patch", old, err, apierrors.IsNotFound(err))
	return out, err
}

// observe logs a failed write, or the first write that works after
// failures; expected is an error that is part of the recorder's protocol.
func (s *reportingSink) observe(verb string, ev *eventsv1.Event, err error, expected bool) {
	s.mu.Lock()
	if err == nil || expected {
		n := s.failing
		s.failing = 0
		s.mu.Unlock()
		if n > 0 {
			if ok, _ := s.okLog.Allow(); ok {
				s.log.Info("Writing events to the API server works again", "failedWrites", n)
			}
		}
		return
	}
	s.failing++
	n := s.failing
	s.mu.Unlock()
	ok, suppressed := s.failLog.Allow()
	if !ok {
		return
	}
	kv := []any{"verb", verb, "event", klog.KRef(ev.Namespace, ev.Name).String(), "reason", ev.Reason, "failedWritesInARow", n}
	if suppressed > 0 {
		kv = append(kv, "suppressedSinceLastLog", suppressed)
	}
	s.log.Error(err, "Writing an event to the API server failed; the recorder retries it, then drops it", kv...)
}
