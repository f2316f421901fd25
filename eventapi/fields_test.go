package eventapi

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestParseFieldSelector(t *testing.T) {
	cases := []struct {
		v       Version
		raw     string
		want    string // canonical internal form
		wantErr string
	}{
		{CoreV1, "", "", ""},
		{CoreV1, "involvedObject.kind=Pod,involvedObject.name==x,type!=Normal", "involvedObject.kind=Pod,involvedObject.name=x,type!=Normal", ""},
		{CoreV1, "action=Bind,reportingInstance=i,related.uid=u", "action=Bind,related.uid=u,reportingInstance=i", ""}, // apimachinery sorts terms
		{CoreV1, `reason=a\,b`, `reason=a\,b`, ""},
		{CoreV1, "regarding.name=x", "", "field label not supported: regarding.name"},
		{CoreV1, "note=x", "", "field label not supported: note"},
		{EventsV1, "regarding.name=x,reportingController=c,type=Warning", "involvedObject.name=x,reportingComponent=c,type=Warning", ""},
		{EventsV1, "involvedObject.name=x", "", "field label not supported: involvedObject.name"},
		{EventsV1, "reportingComponent=c", "", "field label not supported: reportingComponent"},
		{EventsV1, "source=kubelet,action=A,reportingInstance=i,related.kind=Node", "action=A,related.kind=Node,reportingInstance=i,source=kubelet", ""},
		{CoreV1, "garbage", "", "invalid selector"},
		// eventsd's own group takes events.k8s.io/v1's labels.
		{KubeventsV1, "regarding.name=x,reportingController=c,involves.name=y", "involves.name=y,involvedObject.name=x,reportingComponent=c", ""},
		{KubeventsV1, "involvedObject.name=x", "", "field label not supported: involvedObject.name"},
	}
	for _, c := range cases {
		sel, err := ParseFieldSelector(c.v, c.raw, true)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v %q: got error %v, want %q", c.v, c.raw, err, c.wantErr)
			}
		case err != nil:
			t.Errorf("%v %q: %v", c.v, c.raw, err)
		case sel.String() != c.want:
			t.Errorf("%v %q: got %q, want %q", c.v, c.raw, sel.String(), c.want)
		}
	}
	// Escaped values (fields.EscapeValue, as evctl and the web page send
	// them) are read back as the names they escape.
	sel, err := ParseFieldSelector(EventsV1, `involves.kind=Pod,involves.name=victim\,type\=Warning\\x`, true)
	if name, ok := sel.Equal(FieldInvolvesName); err != nil || !ok || name != `victim,type=Warning\x` || len(sel) != 2 {
		t.Errorf("escaped involves.name: %v, %q %v in %d terms", err, name, ok, len(sel))
	}
	_, err = ParseFieldSelector(CoreV1, "foo=bar", true)
	var uf *UnsupportedFieldError
	if !errors.As(err, &uf) || uf.Label != "foo" {
		t.Errorf("unsupported label error is %T %v", err, err)
	}
}

func TestKubeventsV1(t *testing.T) {
	if got := KubeventsV1.APIVersion(); got != "events.kubevents.io/v1" {
		t.Errorf("KubeventsV1.APIVersion() = %q", got)
	}
	if gr := KubeventsV1.GroupResource(); gr.String() != "events.events.kubevents.io" {
		t.Errorf("KubeventsV1.GroupResource() = %q", gr)
	}
	for _, ext := range []Extensions{true, false} {
		got, want := strings.Join(FieldLabels(KubeventsV1, ext), ","), strings.Join(FieldLabels(EventsV1, ext), ",")
		if got != want {
			t.Errorf("extensions %v: KubeventsV1 labels %s, events.k8s.io/v1's %s", ext, got, want)
		}
	}
	if _, err := ParseFieldSelector(KubeventsV1, "involves.name=x", false); err == nil {
		t.Error("involves.name accepted without extensions")
	}
}

func TestSourceFallsBackToReportingController(t *testing.T) {
	ev := newEvent(func(e *corev1.Event) { e.Source = corev1.EventSource{} })
	if Value(ev, FieldSource) != "kubelet" {
		t.Fatalf("source = %q, want the reporting controller", Value(ev, FieldSource))
	}
	ev.Source.Component = "other"
	if Value(ev, FieldSource) != "other" {
		t.Fatalf("source = %q, want the component", Value(ev, FieldSource))
	}
	sel, _ := ParseFieldSelector(CoreV1, "source=other,reportingComponent=kubelet,related.name=", true)
	if !sel.Matches(ev) {
		t.Fatal("selector should match")
	}
}

func FuzzParseFieldSelector(f *testing.F) {
	for _, s := range []string{"", "a=b", "involvedObject.name=x,type!=Warning", `reason=a\,b`, "regarding.uid==u", "x in (a)", "=", ",,"} {
		f.Add(s, true)
	}
	ev := newEvent()
	f.Fuzz(func(t *testing.T, raw string, events bool) {
		v := CoreV1
		if events {
			v = EventsV1
		}
		sel, err := ParseFieldSelector(v, raw, true)
		if err != nil {
			return
		}
		// A parsed selector renders to a selector that parses to itself.
		again, err := ParseFieldSelector(CoreV1, sel.String(), true)
		if err != nil {
			t.Fatalf("%q parsed, but its rendering %q does not: %v", raw, sel.String(), err)
		}
		if again.String() != sel.String() || again.Matches(ev) != sel.Matches(ev) {
			t.Fatalf("%q: rendering %q changes meaning", raw, sel.String())
		}
	})
}

func TestSameSelection(t *testing.T) {
	a := newEvent()
	b := a.DeepCopy()
	b.Message, b.Count = "other message", 7 // not selectable
	if !SameSelection(a, b) {
		t.Fatal("message and count are not selectable")
	}
	for desc, mod := range map[string]func(*corev1.Event){
		"reason":  func(e *corev1.Event) { e.Reason = "X" },
		"related": func(e *corev1.Event) { e.Related = &corev1.ObjectReference{Name: "n"} },
		"label":   func(e *corev1.Event) { e.Labels = map[string]string{"a": "b"} },
		"source":  func(e *corev1.Event) { e.Source.Component = "other" },
	} {
		c := a.DeepCopy()
		mod(c)
		if SameSelection(a, c) {
			t.Errorf("%s changes the selection", desc)
		}
	}
}

func TestInvolves(t *testing.T) {
	ev := newEvent(func(e *corev1.Event) {
		e.InvolvedObject = corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default", UID: "pod-uid"}
		e.Related = &corev1.ObjectReference{Kind: "Node", Name: "n1", UID: "node-uid"}
	})
	for raw, want := range map[string]bool{
		"involves.name=web":                   true,
		"involves.name=n1":                    true,
		"involves.uid=node-uid":               true,
		"involves.kind=Node,involves.name=n1": true,
		"involves.kind=Pod,involves.name=n1":  false, // one object must satisfy all terms
		"involves.kind=Pod,involves.name=web": true,
		"involves.name=web,reason=Started":    true,
		"involves.name=web,reason=Other":      false,
		"involves.name=other":                 false,
		"involves.namespace=default":          true,
	} {
		sel, err := ParseFieldSelector(EventsV1, raw, true)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if got := sel.Matches(ev); got != want {
			t.Errorf("%s: matches %v, want %v", raw, got, want)
		}
	}
	noRelated := newEvent()
	if sel, _ := ParseFieldSelector(CoreV1, "involves.name=n1", true); sel.Matches(noRelated) {
		t.Error("an event without a related object matched a related name")
	}
	if _, err := ParseFieldSelector(CoreV1, "involves.name!=x", true); err == nil {
		t.Error("involves supports only equality")
	}
}

func TestExtensionsOff(t *testing.T) {
	for _, raw := range []string{"action=x", "reportingInstance=i", "related.name=n", "involves.uid=u"} {
		var uf *UnsupportedFieldError
		if _, err := ParseFieldSelector(CoreV1, raw, false); !errors.As(err, &uf) {
			t.Errorf("%s without extensions: got %v, want field label not supported", raw, err)
		}
	}
	if _, err := ParseFieldSelector(EventsV1, "regarding.name=x,reportingController=c,type=Warning", false); err != nil {
		t.Errorf("upstream labels without extensions: %v", err)
	}
	if got := FieldLabels(CoreV1, false); len(got) != 13 {
		t.Errorf("upstream core/v1 labels: %v", got)
	}
}
