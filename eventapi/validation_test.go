package eventapi

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func legacyEvent(mods ...func(*corev1.Event)) *corev1.Event {
	e := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "x.17f3a", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "default"},
		Reason:         "Started", Message: "m", Count: 1, Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: "kubelet"},
	}
	for _, m := range mods {
		m(e)
	}
	return e
}

var t0 = metav1.NewMicroTime(time.Date(2025, 1, 1, 0, 0, 0, 123456000, time.UTC))

func newEvent(mods ...func(*corev1.Event)) *corev1.Event {
	e := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "x.17f3a", Namespace: "default"},
		InvolvedObject:      corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "default"},
		EventTime:           t0,
		ReportingController: "kubelet", ReportingInstance: "kubelet-node1",
		Action: "Start", Reason: "Started", Message: "m", Type: corev1.EventTypeNormal,
	}
	for _, m := range mods {
		m(e)
	}
	return e
}

// errs renders an ErrorList as upstream's message does.
func errs(list field.ErrorList) string {
	if a := list.ToAggregate(); a != nil {
		return a.Error()
	}
	return ""
}

func TestValidateCreate(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	cases := []struct {
		desc string
		v    Version
		ev   *corev1.Event
		want []string // substrings of the aggregate message; none means valid
	}{
		{"legacy recorder body", CoreV1, legacyEvent(), nil},
		{"legacy: involved namespace must match", CoreV1, legacyEvent(func(e *corev1.Event) { e.InvolvedObject.Namespace = "other" }),
			[]string{`involvedObject.namespace: Invalid value: "other": does not match event.namespace`}},
		{"legacy: cluster-scoped object in default", CoreV1, legacyEvent(func(e *corev1.Event) { e.InvolvedObject.Namespace = "" }), nil},
		{"legacy: cluster-scoped object in foo", CoreV1, legacyEvent(func(e *corev1.Event) { e.InvolvedObject.Namespace = ""; e.Namespace = "foo" }),
			[]string{`involvedObject.namespace: Invalid value: "": does not match event.namespace`}},
		{"legacy: any type, long message", CoreV1, legacyEvent(func(e *corev1.Event) { e.Type = "Info"; e.Message = long(5000) }), nil},
		{"legacy: upper-case name accepted", CoreV1, legacyEvent(func(e *corev1.Event) { e.Name = "UPPER" }), nil},
		{"legacy: slash in name", CoreV1, legacyEvent(func(e *corev1.Event) { e.Name = "a/b" }), []string{`metadata.name: Invalid value: "a/b"`}},
		{"core with eventTime needs reporting fields", CoreV1, legacyEvent(func(e *corev1.Event) { e.EventTime = t0 }),
			[]string{"reportingComponent: Required value", "reportingInstance: Required value", "action: Required value"}},
		{"core with eventTime: message over 1024 bytes", CoreV1, newEvent(func(e *corev1.Event) { e.Message = long(1025) }),
			[]string{`message: Invalid value: "": can have at most 1024 characters`}},
		{"core with eventTime: namespace mismatch allowed", CoreV1, newEvent(func(e *corev1.Event) { e.InvolvedObject.Namespace = "other" }), nil},
		{"core with eventTime: cluster object in kube-system", CoreV1, newEvent(func(e *corev1.Event) { e.InvolvedObject.Namespace = ""; e.Namespace = "kube-system" }), nil},
		{"core with eventTime: cluster object elsewhere", CoreV1, newEvent(func(e *corev1.Event) { e.InvolvedObject.Namespace = ""; e.Namespace = "foo" }),
			[]string{"does not match event.namespace"}},
		{"v1 valid", EventsV1, newEvent(), nil},
		{"v1 missing eventTime", EventsV1, newEvent(func(e *corev1.Event) { e.EventTime = metav1.MicroTime{} }), []string{"eventTime: Required value"}},
		{"v1 type Info", EventsV1, newEvent(func(e *corev1.Event) { e.Type = "Info" }), []string{`type: Invalid value: "": has invalid value: Info`}},
		{"v1 series count 1", EventsV1, newEvent(func(e *corev1.Event) { e.Series = &corev1.EventSeries{Count: 1, LastObservedTime: t0} }),
			[]string{`series.count: Invalid value: "": should be at least 2`}},
		{"v1 series without time", EventsV1, newEvent(func(e *corev1.Event) { e.Series = &corev1.EventSeries{Count: 2} }),
			[]string{"series.lastObservedTime: Required value"}},
		{"v1 deprecated fields set", EventsV1, newEvent(func(e *corev1.Event) { e.Count = 3; e.Source.Host = "h"; e.FirstTimestamp = metav1.Now() }),
			[]string{`count: Invalid value: "": needs to be unset`, `source: Invalid value: "": needs to be unset`, `firstTimestamp: Invalid value: "": needs to be unset`}},
		{"v1 bad controller", EventsV1, newEvent(func(e *corev1.Event) { e.ReportingController = "bad name!" }), []string{`reportingController: Invalid value: "bad name!"`}},
		{"v1 empty controller", EventsV1, newEvent(func(e *corev1.Event) { e.ReportingController = "" }),
			[]string{"reportingController: Required value", "name part must be non-empty"}},
		{"v1 long instance", EventsV1, newEvent(func(e *corev1.Event) { e.ReportingInstance = long(129) }),
			[]string{`reportingInstance: Invalid value: "": can have at most 128 characters`}},
		{"v1 long action and reason", EventsV1, newEvent(func(e *corev1.Event) { e.Action, e.Reason = long(129), long(129) }),
			[]string{"action: Invalid value", "reason: Invalid value"}},
		{"v1 upper-case name", EventsV1, newEvent(func(e *corev1.Event) { e.Name = "UPPER" }), []string{`metadata.name: Invalid value: "UPPER"`}},
		{"no name", CoreV1, legacyEvent(func(e *corev1.Event) { e.Name = "" }), []string{"name or generateName is required"}},
		{"bad label", CoreV1, legacyEvent(func(e *corev1.Event) { e.Labels = map[string]string{"a b": "c"} }), []string{"metadata.labels"}},
	}
	for _, c := range cases {
		got := errs(ValidateCreate(c.ev, c.v))
		if len(c.want) == 0 && got != "" {
			t.Errorf("%s: unexpected errors: %s", c.desc, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: errors %q do not contain %q", c.desc, got, w)
			}
		}
	}
}

func TestValidateUpdate(t *testing.T) {
	old := newEvent(func(e *corev1.Event) { e.UID = "u1"; e.ResourceVersion = "5" })
	cases := []struct {
		desc string
		v    Version
		mod  func(*corev1.Event)
		want string
	}{
		{"series may change", EventsV1, func(e *corev1.Event) { e.Series = &corev1.EventSeries{Count: 2, LastObservedTime: t0} }, ""},
		{"series count 1", EventsV1, func(e *corev1.Event) { e.Series = &corev1.EventSeries{Count: 1, LastObservedTime: t0} }, "series.count"},
		{"labels may change", EventsV1, func(e *corev1.Event) { e.Labels = map[string]string{"a": "b"} }, ""},
		{"note is immutable", EventsV1, func(e *corev1.Event) { e.Message = "other" }, "message: Invalid value"},
		{"reason is immutable", EventsV1, func(e *corev1.Event) { e.Reason = "Other" }, "reason: Invalid value"},
		{"type is immutable", EventsV1, func(e *corev1.Event) { e.Type = corev1.EventTypeWarning }, "type: Invalid value"},
		{"action is immutable", EventsV1, func(e *corev1.Event) { e.Action = "Other" }, "action: Invalid value"},
		{"regarding is immutable", EventsV1, func(e *corev1.Event) { e.InvolvedObject.Name = "q" }, "involvedObject: Invalid value"},
		{"sub-microsecond eventTime change tolerated", EventsV1, func(e *corev1.Event) {
			e.EventTime = metav1.NewMicroTime(t0.Add(300 * time.Nanosecond))
		}, ""},
		{"eventTime change", EventsV1, func(e *corev1.Event) { e.EventTime = metav1.NewMicroTime(t0.Add(time.Second)) }, "eventTime: Invalid value"},
		{"core may change the message", CoreV1, func(e *corev1.Event) { e.Message = "other"; e.Reason = "Other" }, ""},
		{"uid is immutable everywhere", CoreV1, func(e *corev1.Event) { e.UID = "u2" }, "metadata.uid"},
		{"name is immutable everywhere", CoreV1, func(e *corev1.Event) { e.Name = "other" }, "metadata.name"},
	}
	for _, c := range cases {
		ev := old.DeepCopy()
		c.mod(ev)
		got := errs(ValidateUpdate(ev, old, c.v))
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: got %q, want errors containing %q", c.desc, got, c.want)
		}
	}
}
