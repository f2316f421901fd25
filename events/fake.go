package events

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// FakeSink is an in-memory EventSink and Lister for tests: it stores what
// it is sent (applying strategic-merge patches as a server does), records
// every call, and fails calls when told to (SetFail).
type FakeSink struct {
	mu     sync.Mutex
	events map[string]*eventsv1.Event // "<ns>/<name>"
	calls  []SinkCall
	fail   func(call SinkCall) error
}

// SetFail sets a function consulted before each call; a non-nil error it
// returns is returned instead of performing the call. nil clears it.
func (f *FakeSink) SetFail(fail func(call SinkCall) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = fail
}

// SinkCall is one call a FakeSink received.
type SinkCall struct {
	Verb      string // "create", "patch" or "list"
	Namespace string
	Name      string
	Body      []byte          // the patch
	Event     *eventsv1.Event // the created event
	Err       error           // what the call returned
}

// NewFakeSink returns an empty FakeSink.
func NewFakeSink() *FakeSink { return &FakeSink{events: map[string]*eventsv1.Event{}} }

var _ EventSink = (*FakeSink)(nil)
var _ Lister = (*FakeSink)(nil)

func (f *FakeSink) record(c SinkCall) error {
	if f.fail != nil {
		if err := f.fail(c); err != nil {
			c.Err = err
			f.calls = append(f.calls, c)
			return err
		}
	}
	f.calls = append(f.calls, c)
	return nil
}

var gr = schema.GroupResource{Group: "events.k8s.io", Resource: "events"}

// Create implements EventSink.
func (f *FakeSink) Create(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(SinkCall{Verb: "create", Namespace: ev.Namespace, Name: ev.Name, Event: ev.DeepCopy()}); err != nil {
		return nil, err
	}
	k := ev.Namespace + "/" + ev.Name
	if _, ok := f.events[k]; ok {
		err := apierrors.NewAlreadyExists(gr, ev.Name)
		f.calls[len(f.calls)-1].Err = err
		return nil, err
	}
	f.events[k] = ev.DeepCopy()
	return ev.DeepCopy(), nil
}

// Update implements EventSink; recorders never call it.
func (f *FakeSink) Update(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return nil, fmt.Errorf("FakeSink: Update is not used")
}

// Patch implements EventSink with a strategic-merge patch.
func (f *FakeSink) Patch(_ context.Context, old *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(SinkCall{Verb: "patch", Namespace: old.Namespace, Name: old.Name, Body: append([]byte(nil), data...)}); err != nil {
		return nil, err
	}
	k := old.Namespace + "/" + old.Name
	cur, ok := f.events[k]
	if !ok {
		err := apierrors.NewNotFound(gr, old.Name)
		f.calls[len(f.calls)-1].Err = err
		return nil, err
	}
	curJSON, _ := json.Marshal(cur)
	out, err := strategicpatch.StrategicMergePatch(curJSON, data, eventsv1.Event{})
	if err != nil {
		return nil, err
	}
	next := &eventsv1.Event{}
	if err := json.Unmarshal(out, next); err != nil {
		return nil, err
	}
	f.events[k] = next
	return next.DeepCopy(), nil
}

// List implements Lister, honouring equality field selectors on
// reportingController and reportingInstance.
func (f *FakeSink) List(_ context.Context, opts metav1.ListOptions) (*eventsv1.EventList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(SinkCall{Verb: "list", Body: []byte(opts.FieldSelector)}); err != nil {
		return nil, err
	}
	sel, err := fields.ParseSelector(opts.FieldSelector)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	l := &eventsv1.EventList{}
	for _, k := range f.keys() {
		ev := f.events[k]
		if sel.Matches(fields.Set{"reportingController": ev.ReportingController, "reportingInstance": ev.ReportingInstance}) {
			l.Items = append(l.Items, *ev.DeepCopy())
		}
	}
	return l, nil
}

func (f *FakeSink) keys() []string {
	ks := make([]string, 0, len(f.events))
	for k := range f.events {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Calls returns the calls received so far.
func (f *FakeSink) Calls() []SinkCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]SinkCall(nil), f.calls...)
}

// Events returns the stored events in (namespace, name) order.
func (f *FakeSink) Events() []*eventsv1.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []*eventsv1.Event{}
	for _, k := range f.keys() {
		out = append(out, f.events[k].DeepCopy())
	}
	return out
}

// Put stores ev as if written earlier (for resume tests).
func (f *FakeSink) Put(ev *eventsv1.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events[ev.Namespace+"/"+ev.Name] = ev.DeepCopy()
}

// Delete removes an event, as the server's TTL would.
func (f *FakeSink) Delete(namespace, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.events, namespace+"/"+name)
}
