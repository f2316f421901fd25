package events

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	clientevents "k8s.io/client-go/tools/events"
	clientrecord "k8s.io/client-go/tools/record"

	"github.com/kubevents/kubevents/record"
)

// Adapter records through events.k8s.io/v1 when the server offers it and
// through core/v1 otherwise, as client-go's EventBroadcasterAdapter does;
// both sides are this project's recorders.
type Adapter struct {
	eventsV1 *Broadcaster        // nil when the server has no events.k8s.io/v1
	core     *record.Broadcaster // always: also for DeprecatedNewLegacyRecorder
	sink     *typedcorev1.EventSinkImpl
}

var _ clientevents.EventBroadcasterAdapter = (*Adapter)(nil)

// NewEventBroadcasterAdapter is NewEventBroadcasterAdapterWithContext with
// a background context.
func NewEventBroadcasterAdapter(client kubernetes.Interface, opts ...Option) *Adapter {
	return NewEventBroadcasterAdapterWithContext(context.Background(), client, opts...)
}

// NewEventBroadcasterAdapterWithContext asks the server (discovery) whether
// it serves events.k8s.io/v1 and builds the broadcasters accordingly. The
// options configure the events.k8s.io/v1 broadcaster; the core/v1 one gets
// the same clock, logger and metrics registry. Cancelling ctx shuts the
// core/v1 broadcaster down.
func NewEventBroadcasterAdapterWithContext(ctx context.Context, client kubernetes.Interface, opts ...Option) *Adapter {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	ropts := []record.Option{record.WithContext(ctx), record.WithClock(o.clock), record.WithLogger(o.logger)}
	if o.registerer != nil {
		ropts = append(ropts, record.WithMetrics(o.registerer))
	}
	a := &Adapter{core: record.NewBroadcaster(ropts...), sink: &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}}
	if _, err := client.Discovery().ServerResourcesForGroupVersion(eventsv1.SchemeGroupVersion.String()); err == nil {
		a.eventsV1 = NewBroadcaster(&clientevents.EventSinkImpl{Interface: client.EventsV1()}, opts...)
	}
	return a
}

// StartRecordingToSink starts both broadcasters until stopCh is closed.
func (a *Adapter) StartRecordingToSink(stopCh <-chan struct{}) {
	if a.eventsV1 != nil {
		a.eventsV1.StartRecordingToSink(stopCh)
	}
	a.core.StartRecordingToSink(a.sink)
}

// NewRecorder returns an events.k8s.io/v1 recorder for reporting
// controller name when the server offers that API; otherwise a core/v1
// recorder with source component name behind client-go's adapter, which,
// as upstream, cannot carry the related object and the action.
func (a *Adapter) NewRecorder(name string) EventRecorderLogger {
	if a.eventsV1 != nil {
		return a.eventsV1.NewRecorder(scheme.Scheme, name)
	}
	return clientrecord.NewEventRecorderAdapter(a.DeprecatedNewLegacyRecorder(name))
}

// DeprecatedNewLegacyRecorder returns a core/v1 recorder with source
// component name.
func (a *Adapter) DeprecatedNewLegacyRecorder(name string) clientrecord.EventRecorderLogger {
	return a.core.NewRecorder(scheme.Scheme, corev1.EventSource{Component: name})
}

// Shutdown shuts both broadcasters down.
func (a *Adapter) Shutdown() {
	if a.eventsV1 != nil {
		a.eventsV1.Shutdown()
	}
	a.core.Shutdown()
}
