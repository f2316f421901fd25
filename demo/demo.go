package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Defaults of Options.
const (
	// DefaultBackOffInterval is how often the crashing Pod's back-off is
	// counted again: the kubelet reports it at each pod sync, about every
	// 10 s while the container waits.
	DefaultBackOffInterval = 10 * time.Second
	// DefaultRestartInterval is how often the crashing Pod's container is
	// started again: the kubelet's back-off reaches its 5-minute cap
	// after a few restarts.
	DefaultRestartInterval = 5 * time.Minute
)

// Options configure Run.
type Options struct {
	// Client writes the story; eventsd gives one that reaches its own
	// API.
	Client kubernetes.Interface
	// Clock gives the story's start and paces what goes on; the real
	// clock when nil.
	Clock clock.WithTicker
	// BackOffInterval and RestartInterval pace the crashloop while Run
	// runs; their defaults when 0.
	BackOffInterval, RestartInterval time.Duration
	// Logger reports the story written and failed live writes;
	// slog.Default() when nil.
	Logger *slog.Logger
}

// Run writes the story as of o.Clock's now, then keeps the crashloop
// going (its back-off counted every BackOffInterval, its container
// restarted every RestartInterval) until ctx ends. It returns an error
// only when the story could not be written; a live write that fails is
// logged and tried again at the next tick.
func Run(ctx context.Context, o Options) error {
	if o.Client == nil {
		return errNoClient
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.BackOffInterval <= 0 {
		o.BackOffInterval = DefaultBackOffInterval
	}
	if o.RestartInterval <= 0 {
		o.RestartInterval = DefaultRestartInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	start := o.Clock.Now()
	n, err := write(ctx, o.Client, start)
	if err != nil {
		return err
	}
	o.Logger.Info("demo: wrote the story's events; the crashloop goes on", "events", n,
		"namespaces", Namespace+","+BatchNamespace, "crashingPod", Namespace+"/"+CrashingPod)

	loop := newCrashLoop(start)
	backOff := o.Clock.NewTicker(o.BackOffInterval)
	defer backOff.Stop()
	restart := o.Clock.NewTicker(o.RestartInterval)
	defer restart.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-backOff.C():
			loop.backOff.see(now)
		case now := <-restart.C():
			for _, e := range loop.restart {
				e.see(now)
			}
		}
		for _, e := range loop.all() {
			if err := e.flush(ctx, o.Client); err != nil && ctx.Err() == nil {
				o.Logger.Warn("demo: a live write failed; trying again at the next tick", "event", e.namespace+"/"+e.name, "err", err)
			}
		}
	}
}

// write creates the story's events as of start and returns how many.
func write(ctx context.Context, cs kubernetes.Interface, start time.Time) (int, error) {
	n := 0
	for i, l := range legacyEvents() {
		ev := l.core(start, i)
		if _, err := cs.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			return n, fmt.Errorf("demo: writing %s event %s/%s: %w", l.reason, ev.Namespace, ev.Name, err)
		}
		n++
	}
	for i, s := range schedulerEvents() {
		ev := s.event(start, i)
		if _, err := cs.EventsV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			return n, fmt.Errorf("demo: writing %s event %s/%s: %w", s.reason, ev.Namespace, ev.Name, err)
		}
		n++
	}
	return n, nil
}

// crashLoop is the live part of the story: the crashing Pod's back-off
// event and the three events of each restart, each counted further as
// the kubelet's record package counts a repeated event.
type crashLoop struct {
	backOff *counted
	restart []*counted
}

func newCrashLoop(start time.Time) *crashLoop {
	c := &crashLoop{}
	for i, l := range legacyEvents() {
		if !l.live {
			continue
		}
		ev := l.core(start, i)
		e := &counted{namespace: ev.Namespace, name: ev.Name, count: l.count, written: l.count}
		if l.reason == reasonBackOff {
			c.backOff = e
		} else {
			c.restart = append(c.restart, e)
		}
	}
	return c
}

func (c *crashLoop) all() []*counted { return append([]*counted{c.backOff}, c.restart...) }

// counted is one repeated core/v1 event: its count and last time, and
// the count last written.
type counted struct {
	namespace, name string
	count, written  int32
	last            time.Time
}

// see counts one more occurrence at now.
func (e *counted) see(now time.Time) {
	e.count++
	e.last = now
}

// flush patches the event's count and last timestamp when they changed
// since the last write, as client-go's record package does.
func (e *counted) flush(ctx context.Context, cs kubernetes.Interface) error {
	if e.count == e.written {
		return nil
	}
	patch := fmt.Sprintf(`{"count":%d,"lastTimestamp":%q}`, e.count, e.last.UTC().Format(time.RFC3339))
	_, err := cs.CoreV1().Events(e.namespace).Patch(ctx, e.name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return err
	}
	e.written = e.count
	return nil
}

// errNoClient is Run's answer without a client.
var errNoClient = errors.New("demo: no client to write the story with")
