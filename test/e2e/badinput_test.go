package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// cgResponse is a raw HTTP response.
type cgResponse struct {
	code   int
	header http.Header
	body   []byte
}

// cgHTTP sends one raw request to eventsd.
func cgHTTP(t *testing.T, method, rawURL, contentType string, body []byte) cgResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(cgCtx(t), method, rawURL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, rawURL, err)
	}
	return cgResponse{code: resp.StatusCode, header: resp.Header, body: b}
}

// cgFailure checks that r is a JSON failure Status with code and reason,
// and returns it.
func cgFailure(t *testing.T, r cgResponse, code int, reason metav1.StatusReason) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatalf("response %d is not JSON: %v\n%s", r.code, err, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if r.code != code || st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure ||
		st.Code != int32(code) || st.Reason != reason {
		t.Fatalf("got HTTP %d %s, want HTTP %d with a Status code %d reason %s", r.code, r.body, code, code, reason)
	}
	return st
}

// cgExpectCauses checks that st's causes include, for each field, one
// with that field, type and a message containing msg.
func cgExpectCause(t *testing.T, st metav1.Status, fieldName string, typ metav1.CauseType, msg string) {
	t.Helper()
	if st.Details == nil || !slices.ContainsFunc(st.Details.Causes, func(c metav1.StatusCause) bool {
		return c.Field == fieldName && c.Type == typ && strings.Contains(c.Message, msg)
	}) {
		t.Errorf("no cause {field %q, reason %s, message containing %q} in %+v", fieldName, typ, msg, st.Details)
	}
}

// cgBody marshals v to JSON and lets mutate edit it as a generic object.
func cgBody(t *testing.T, v any, mutate func(m map[string]any)) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if mutate == nil {
		return b
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	mutate(m)
	b, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cgStored lists ns through both groups and returns the names.
func cgStored(t *testing.T, cs kubernetes.Interface, ns string) []string {
	t.Helper()
	l, err := cs.CoreV1().Events(ns).List(cgCtx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list %s: %v", ns, err)
	}
	nl, err := cs.EventsV1().Events(ns).List(cgCtx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("events.k8s.io list %s: %v", ns, err)
	}
	names := cgCoreNames(l.Items)
	if !slices.Equal(names, cgNewNames(nl.Items)) {
		t.Errorf("core/v1 and events.k8s.io lists differ: %v vs %v", names, cgNewNames(nl.Items))
	}
	return names
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	const ns = "bad"
	coreURL := p.URL + "/api/v1/namespaces/" + ns + "/events"
	newURL := p.URL + "/apis/events.k8s.io/v1/namespaces/" + ns + "/events"
	// One good event to patch and to show lists work.
	cgCreateCore(t, cs, cgCoreEvent(ns, "good", "pod"))
	cgCreateNew(t, cs, cgNewEvent(ns, "good-new", "pod"))
	before := cgStored(t, cs, ns)
	if len(before) != 2 {
		t.Fatalf("stored %v", before)
	}
	// unchanged checks that a rejected write left the store alone.
	unchanged := func(t *testing.T) {
		t.Helper()
		if got := cgStored(t, cs, ns); !slices.Equal(got, before) {
			t.Errorf("after a rejected write the namespace holds %v, want %v", got, before)
		}
	}
	good := func(name string) *corev1.Event { return cgCoreEvent(ns, name, "pod") }

	t.Run("malformed JSON", func(t *testing.T) {
		for _, u := range []string{coreURL, newURL} {
			cgFailure(t, cgHTTP(t, "POST", u, "application/json", []byte(`{"metadata":{"name":"mal"`)), 400, metav1.StatusReasonBadRequest)
			cgFailure(t, cgHTTP(t, "POST", u, "application/json", []byte(`not json`)), 400, metav1.StatusReasonBadRequest)
			cgFailure(t, cgHTTP(t, "PUT", u+"/good", "application/json", []byte(`{"metadata":`)), 400, metav1.StatusReasonBadRequest)
		}
		cgFailure(t, cgHTTP(t, "PATCH", coreURL+"/good", "application/merge-patch+json", []byte(`{"message":`)), 400, metav1.StatusReasonBadRequest)
		cgFailure(t, cgHTTP(t, "PATCH", coreURL+"/good", "application/strategic-merge-patch+json", []byte(`{"message":`)), 400, metav1.StatusReasonBadRequest)
		cgFailure(t, cgHTTP(t, "PATCH", coreURL+"/good", "application/json-patch+json", []byte(`{"op":"replace"}`)), 400, metav1.StatusReasonBadRequest)
		unchanged(t)
		if ev, err := cs.CoreV1().Events(ns).Get(cgCtx(t), "good", metav1.GetOptions{}); err != nil || ev.Message != "message of good" {
			t.Errorf("a rejected patch changed the event: %+v %v", ev, err)
		}
	})

	t.Run("wrong kind", func(t *testing.T) {
		body := cgBody(t, good("wk"), func(m map[string]any) { m["kind"] = "Pod"; m["apiVersion"] = "v1" })
		cgFailure(t, cgHTTP(t, "POST", coreURL, "application/json", body), 400, metav1.StatusReasonBadRequest)
		nbody := cgBody(t, cgNewEvent(ns, "wk2", "pod"), func(m map[string]any) { m["kind"] = "Deployment"; m["apiVersion"] = "events.k8s.io/v1" })
		cgFailure(t, cgHTTP(t, "POST", newURL, "application/json", nbody), 400, metav1.StatusReasonBadRequest)
		unchanged(t)
	})

	t.Run("apiVersion does not match the URL", func(t *testing.T) {
		body := cgBody(t, good("wa"), func(m map[string]any) { m["kind"] = "Event"; m["apiVersion"] = "events.k8s.io/v1" })
		st := cgFailure(t, cgHTTP(t, "POST", coreURL, "application/json", body), 400, metav1.StatusReasonBadRequest)
		if want := "the API version in the data (events.k8s.io/v1) does not match the expected API version (v1)"; st.Message != want {
			t.Errorf("message %q, want %q", st.Message, want)
		}
		nbody := cgBody(t, cgNewEvent(ns, "wa2", "pod"), func(m map[string]any) { m["kind"] = "Event"; m["apiVersion"] = "v1" })
		st = cgFailure(t, cgHTTP(t, "POST", newURL, "application/json", nbody), 400, metav1.StatusReasonBadRequest)
		if want := "the API version in the data (v1) does not match the expected API version (events.k8s.io/v1)"; st.Message != want {
			t.Errorf("message %q, want %q", st.Message, want)
		}
		unchanged(t)
	})

	t.Run("namespace does not match the URL", func(t *testing.T) {
		const want = "the namespace of the provided object does not match the namespace sent on the request"
		ev := good("nsm")
		ev.Namespace = "other"
		st := cgFailure(t, cgHTTP(t, "POST", coreURL, "application/json", cgBody(t, ev, nil)), 400, metav1.StatusReasonBadRequest)
		if st.Message != want {
			t.Errorf("message %q, want %q", st.Message, want)
		}
		nev := cgNewEvent("other", "nsm2", "pod")
		st = cgFailure(t, cgHTTP(t, "POST", newURL, "application/json", cgBody(t, nev, nil)), 400, metav1.StatusReasonBadRequest)
		if st.Message != want {
			t.Errorf("events.k8s.io message %q, want %q", st.Message, want)
		}
		put := good("good")
		put.Namespace = "other"
		st = cgFailure(t, cgHTTP(t, "PUT", coreURL+"/good", "application/json", cgBody(t, put, nil)), 400, metav1.StatusReasonBadRequest)
		if st.Message != want {
			t.Errorf("PUT message %q, want %q", st.Message, want)
		}
		// The name on the URL and in the body differ.
		st = cgFailure(t, cgHTTP(t, "PUT", coreURL+"/good", "application/json", cgBody(t, good("other-name"), nil)), 400, metav1.StatusReasonBadRequest)
		if want := "the name of the object (other-name) does not match the name on the URL (good)"; st.Message != want {
			t.Errorf("PUT name mismatch message %q, want %q", st.Message, want)
		}
		for _, n := range []string{"other", "nothing"} {
			if got := cgStored(t, cs, n); len(got) != 0 {
				t.Errorf("namespace %s holds %v", n, got)
			}
		}
		unchanged(t)
	})

	t.Run("body over 3 MiB", func(t *testing.T) {
		ev := good("huge")
		ev.Message = strings.Repeat("x", 3<<20)
		st := cgFailure(t, cgHTTP(t, "POST", coreURL, "application/json", cgBody(t, ev, nil)), 413, metav1.StatusReasonRequestEntityTooLarge)
		if !strings.Contains(st.Message, "limit is 3145728") {
			t.Errorf("message %q", st.Message)
		}
		cgFailure(t, cgHTTP(t, "PATCH", coreURL+"/good", "application/merge-patch+json", cgBody(t, map[string]string{"message": ev.Message}, nil)), 413, metav1.StatusReasonRequestEntityTooLarge)
		unchanged(t)
	})

	t.Run("field selectors", func(t *testing.T) {
		for _, c := range []struct {
			url, sel string
			msg      string
		}{
			{coreURL, "involvedObject.name", ""},
			{coreURL, "foo=bar", "field label not supported: foo"},
			{coreURL, "note=x", "field label not supported: note"},
			{coreURL, "regarding.name=x", "field label not supported: regarding.name"},
			{newURL, "involvedObject.name=x", "field label not supported: involvedObject.name"},
			{newURL, "reportingComponent=x", "field label not supported: reportingComponent"},
			{newURL, "note=x", "field label not supported: note"},
			{p.URL + "/api/v1/events", "foo=bar", "field label not supported: foo"},
		} {
			for _, watch := range []string{"", "&watch=true"} {
				st := cgFailure(t, cgHTTP(t, "GET", c.url+"?fieldSelector="+url.QueryEscape(c.sel)+watch, "", nil), 400, metav1.StatusReasonBadRequest)
				if c.msg != "" && st.Message != c.msg {
					t.Errorf("%s fieldSelector %q%s: message %q, want %q", c.url, c.sel, watch, st.Message, c.msg)
				}
			}
		}
		// deletecollection with a bad selector deletes nothing.
		cgFailure(t, cgHTTP(t, "DELETE", coreURL+"?fieldSelector=foo%3Dbar", "", nil), 400, metav1.StatusReasonBadRequest)
		unchanged(t)
	})

	t.Run("label selector", func(t *testing.T) {
		for _, sel := range []string{"app in (", "a=b=c", "!"} {
			cgFailure(t, cgHTTP(t, "GET", coreURL+"?labelSelector="+url.QueryEscape(sel), "", nil), 400, metav1.StatusReasonBadRequest)
			cgFailure(t, cgHTTP(t, "GET", newURL+"?labelSelector="+url.QueryEscape(sel), "", nil), 400, metav1.StatusReasonBadRequest)
		}
	})

	t.Run("watch parameters", func(t *testing.T) {
		// sendInitialEvents needs resourceVersionMatch=NotOlderThan and
		// bookmarks.
		for _, q := range []string{
			"watch=true&sendInitialEvents=true&allowWatchBookmarks=true",
			"watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
			"watch=true&resourceVersionMatch=NotOlderThan",
		} {
			cgFailure(t, cgHTTP(t, "GET", coreURL+"?"+q, "", nil), 422, metav1.StatusReasonInvalid)
		}
		cgFailure(t, cgHTTP(t, "GET", coreURL+"?resourceVersionMatch=Exact", "", nil), 422, metav1.StatusReasonInvalid)
	})

	t.Run("garbage continue token", func(t *testing.T) {
		for _, tok := range []string{"garbage", "%21%21not-base64%21%21"} {
			st := cgFailure(t, cgHTTP(t, "GET", coreURL+"?limit=1&continue="+tok, "", nil), 400, metav1.StatusReasonBadRequest)
			if !strings.HasPrefix(st.Message, "invalid continue token") {
				t.Errorf("message %q, want it to start with %q", st.Message, "invalid continue token")
			}
		}
	})

	t.Run("unknown patch Content-Type", func(t *testing.T) {
		for _, ct := range []string{"text/plain", "application/xml", "application/json"} {
			cgFailure(t, cgHTTP(t, "PATCH", coreURL+"/good", ct, []byte(`{"message":"x"}`)), 415, metav1.StatusReasonUnsupportedMediaType)
		}
		cgFailure(t, cgHTTP(t, "PATCH", newURL+"/good-new", "text/plain", []byte(`{"note":"x"}`)), 415, metav1.StatusReasonUnsupportedMediaType)
		if ev, err := cs.CoreV1().Events(ns).Get(cgCtx(t), "good", metav1.GetOptions{}); err != nil || ev.Message != "message of good" {
			t.Errorf("a rejected patch changed the event: %+v %v", ev, err)
		}
		cgFailure(t, cgHTTP(t, "POST", coreURL, "text/plain", cgBody(t, good("ct"), nil)), 415, metav1.StatusReasonUnsupportedMediaType)
		unchanged(t)
	})

	t.Run("field validation", func(t *testing.T) {
		withFoo := func(m map[string]any) { m["foo"] = "bar" }
		st := cgFailure(t, cgHTTP(t, "POST", coreURL+"?fieldValidation=Strict", "application/json", cgBody(t, good("strict"), withFoo)), 400, metav1.StatusReasonBadRequest)
		if want := `strict decoding error: unknown field "foo"`; st.Message != want {
			t.Errorf("message %q, want %q", st.Message, want)
		}
		st = cgFailure(t, cgHTTP(t, "POST", newURL+"?fieldValidation=Strict", "application/json", cgBody(t, cgNewEvent(ns, "strict2", "pod"), withFoo)), 400, metav1.StatusReasonBadRequest)
		if want := `strict decoding error: unknown field "foo"`; st.Message != want {
			t.Errorf("events.k8s.io message %q, want %q", st.Message, want)
		}
		// message is core/v1, not events.k8s.io.
		st = cgFailure(t, cgHTTP(t, "POST", newURL+"?fieldValidation=Strict", "application/json",
			cgBody(t, cgNewEvent(ns, "strict3", "pod"), func(m map[string]any) { m["message"] = "m" })), 400, metav1.StatusReasonBadRequest)
		if want := `strict decoding error: unknown field "message"`; st.Message != want {
			t.Errorf("events.k8s.io message %q, want %q", st.Message, want)
		}
		unchanged(t)

		// Warn, the default: created, with a warning header.
		r := cgHTTP(t, "POST", coreURL, "application/json", cgBody(t, good("warn"), withFoo))
		if r.code != 201 {
			t.Fatalf("POST with an unknown field: %d %s", r.code, r.body)
		}
		if got, want := r.header.Values("Warning"), []string{`299 - "unknown field \"foo\""`}; !slices.Equal(got, want) {
			t.Errorf("Warning headers %q, want %q", got, want)
		}
		r = cgHTTP(t, "POST", coreURL+"?fieldValidation=Ignore", "application/json", cgBody(t, good("ignore"), withFoo))
		if r.code != 201 || len(r.header.Values("Warning")) != 0 {
			t.Errorf("fieldValidation=Ignore: %d, Warning %q", r.code, r.header.Values("Warning"))
		}
		r = cgHTTP(t, "PATCH", coreURL+"/warn?fieldValidation=Strict", "application/merge-patch+json", []byte(`{"foo":"bar"}`))
		cgFailure(t, r, 400, metav1.StatusReasonBadRequest)
		before = append(before, ns+"/ignore", ns+"/warn")
		slices.Sort(before)
		unchanged(t)
	})

	t.Run("core/v1 validation", func(t *testing.T) {
		dflt := cgStored(t, cs, "default")
		type invalidCase struct {
			name, ns string
			ev       *corev1.Event
			causes   [][3]string // field, reason, message fragment
			message  string      // exact, when set
		}
		other := cgCoreEvent("default", "io-other", "pod")
		other.InvolvedObject.Namespace = "other"
		foo := cgCoreEvent("foo", "io-empty", "pod")
		foo.InvolvedObject.Namespace = ""
		newStyle := cgCoreEvent("default", "new-style", "pod")
		newStyle.EventTime = metav1.NewMicroTime(time.Now())
		newStyle.InvolvedObject.Namespace = ""
		long := cgCoreEvent("default", "long-message", "pod")
		long.EventTime = metav1.NewMicroTime(time.Now())
		long.ReportingController, long.ReportingInstance, long.Action = "ctrl", "ctrl-1", "Act"
		long.Message = strings.Repeat("m", 1025)
		for _, c := range []invalidCase{
			{name: "io-other", ns: "default", ev: other,
				message: `Event "io-other" is invalid: involvedObject.namespace: Invalid value: "other": does not match event.namespace`,
				causes:  [][3]string{{"involvedObject.namespace", string(metav1.CauseTypeFieldValueInvalid), `Invalid value: "other": does not match event.namespace`}}},
			{name: "io-empty", ns: "foo", ev: foo,
				message: `Event "io-empty" is invalid: involvedObject.namespace: Invalid value: "": does not match event.namespace`,
				causes:  [][3]string{{"involvedObject.namespace", string(metav1.CauseTypeFieldValueInvalid), "does not match event.namespace"}}},
			{name: "new-style", ns: "default", ev: newStyle, causes: [][3]string{
				{"reportingComponent", string(metav1.CauseTypeFieldValueRequired), "Required value"},
				{"reportingComponent", string(metav1.CauseTypeFieldValueInvalid), "name part must be non-empty"},
				{"reportingInstance", string(metav1.CauseTypeFieldValueRequired), "Required value"},
				{"action", string(metav1.CauseTypeFieldValueRequired), "Required value"},
			}},
			{name: "long-message", ns: "default", ev: long,
				message: `Event "long-message" is invalid: message: Invalid value: "": can have at most 1024 characters`,
				causes:  [][3]string{{"message", string(metav1.CauseTypeFieldValueInvalid), "can have at most 1024 characters"}}},
		} {
			r := cgHTTP(t, "POST", p.URL+"/api/v1/namespaces/"+c.ns+"/events", "application/json", cgBody(t, c.ev, nil))
			st := cgFailure(t, r, 422, metav1.StatusReasonInvalid)
			if c.message != "" && st.Message != c.message {
				t.Errorf("%s: message %q, want %q", c.name, st.Message, c.message)
			}
			if !strings.HasPrefix(st.Message, `Event "`+c.name+`" is invalid: `) {
				t.Errorf("%s: message %q", c.name, st.Message)
			}
			if st.Details == nil || st.Details.Name != c.name || st.Details.Kind != "Event" {
				t.Errorf("%s: details %+v", c.name, st.Details)
			}
			for _, cs := range c.causes {
				cgExpectCause(t, st, cs[0], metav1.CauseType(cs[1]), cs[2])
			}
			if c.name == "new-style" {
				for _, f := range []string{"reportingComponent: Required value", "reportingInstance: Required value", "action: Required value"} {
					if !strings.Contains(st.Message, f) {
						t.Errorf("new-style: message %q lacks %q", st.Message, f)
					}
				}
			}
		}
		// Generic object-metadata checks.
		noName := cgCoreEvent("default", "", "pod")
		badLabel := cgCoreEvent("default", "bad-label", "pod")
		badLabel.Labels = map[string]string{"bad key!": "v"}
		for _, c := range []struct {
			ev                  *corev1.Event
			field, reason, frag string
		}{
			{cgCoreEvent("default", "a%b", "pod"), "metadata.name", string(metav1.CauseTypeFieldValueInvalid), `Invalid value: "a%b": may not contain '%'`},
			{cgCoreEvent("default", "..", "pod"), "metadata.name", string(metav1.CauseTypeFieldValueInvalid), `Invalid value: "..": may not be '..'`},
			{noName, "metadata.name", string(metav1.CauseTypeFieldValueRequired), "Required value: name or generateName is required"},
			{badLabel, "metadata.labels", string(metav1.CauseTypeFieldValueInvalid), `Invalid value: "bad key!": name part must consist of alphanumeric characters`},
		} {
			st := cgFailure(t, cgHTTP(t, "POST", p.URL+"/api/v1/namespaces/default/events", "application/json", cgBody(t, c.ev, nil)), 422, metav1.StatusReasonInvalid)
			cgExpectCause(t, st, c.field, metav1.CauseType(c.reason), c.frag)
		}
		if got := cgStored(t, cs, "default"); !slices.Equal(got, dflt) {
			t.Errorf("default holds %v after rejected writes, want %v", got, dflt)
		}
		if got := cgStored(t, cs, "foo"); len(got) != 0 {
			t.Errorf("foo holds %v", got)
		}

		// The accepted counterparts.
		ok := cgCoreEvent("default", "io-empty-default", "pod")
		ok.InvolvedObject.Namespace = ""
		cgCreateCore(t, cs, ok)
		long.Message = strings.Repeat("m", 1024)
		cgCreateCore(t, cs, long)
		legacyLong := cgCoreEvent("default", "legacy-long", "pod")
		legacyLong.Message = strings.Repeat("m", 5000) // no limit without eventTime
		cgCreateCore(t, cs, legacyLong)
		upper := cgCoreEvent(ns, "UPPER", "pod")
		cgCreateCore(t, cs, upper) // core/v1 only checks path segments
		before = append(before, ns+"/UPPER")
		slices.Sort(before)
		// An update is validated too.
		upd := other.DeepCopy()
		upd.Name, upd.InvolvedObject.Namespace = "io-empty-default", "other"
		cur, err := cs.CoreV1().Events("default").Get(cgCtx(t), "io-empty-default", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		upd.ResourceVersion = cur.ResourceVersion
		st := cgFailure(t, cgHTTP(t, "PUT", p.URL+"/api/v1/namespaces/default/events/io-empty-default", "application/json", cgBody(t, upd, nil)), 422, metav1.StatusReasonInvalid)
		cgExpectCause(t, st, "involvedObject.namespace", metav1.CauseTypeFieldValueInvalid, "does not match event.namespace")
		if after, err := cs.CoreV1().Events("default").Get(cgCtx(t), "io-empty-default", metav1.GetOptions{}); err != nil || after.ResourceVersion != cur.ResourceVersion {
			t.Errorf("rejected update changed the event: %+v %v", after, err)
		}
	})

	t.Run("events.k8s.io validation", func(t *testing.T) {
		type invalidCase struct {
			name   string
			mutate func(m map[string]any)
			field  string
			reason metav1.CauseType
			msg    string
		}
		for _, c := range []invalidCase{
			{"no-event-time", func(m map[string]any) { m["eventTime"] = nil }, "eventTime", metav1.CauseTypeFieldValueRequired, "Required value"},
			{"type-info", func(m map[string]any) { m["type"] = "Info" }, "type", metav1.CauseTypeFieldValueInvalid, `Invalid value: "": has invalid value: Info`},
			{"series-one", func(m map[string]any) {
				m["series"] = map[string]any{"count": 1, "lastObservedTime": "2030-01-01T00:00:00.000000Z"}
			}, "series.count", metav1.CauseTypeFieldValueInvalid, `Invalid value: "": should be at least 2`},
			{"series-no-time", func(m map[string]any) { m["series"] = map[string]any{"count": 2} }, "series.lastObservedTime", metav1.CauseTypeFieldValueRequired, "Required value"},
			{"deprecated-count", func(m map[string]any) { m["deprecatedCount"] = 3 }, "count", metav1.CauseTypeFieldValueInvalid, `Invalid value: "": needs to be unset`},
			{"deprecated-source", func(m map[string]any) { m["deprecatedSource"] = map[string]any{"component": "kubelet"} }, "source", metav1.CauseTypeFieldValueInvalid, "needs to be unset"},
			{"deprecated-first", func(m map[string]any) { m["deprecatedFirstTimestamp"] = "2030-01-01T00:00:00Z" }, "firstTimestamp", metav1.CauseTypeFieldValueInvalid, "needs to be unset"},
			{"bad-controller", func(m map[string]any) { m["reportingController"] = "bad name!" }, "reportingController", metav1.CauseTypeFieldValueInvalid, `Invalid value: "bad name!": name part must consist of alphanumeric characters`},
			{"no-controller", func(m map[string]any) { delete(m, "reportingController") }, "reportingController", metav1.CauseTypeFieldValueRequired, "Required value"},
			{"no-action", func(m map[string]any) { delete(m, "action") }, "action", metav1.CauseTypeFieldValueRequired, "Required value"},
			{"long-note", func(m map[string]any) { m["note"] = strings.Repeat("n", 1025) }, "message", metav1.CauseTypeFieldValueInvalid, "can have at most 1024 characters"},
			{"long-reason", func(m map[string]any) { m["reason"] = strings.Repeat("r", 129) }, "reason", metav1.CauseTypeFieldValueInvalid, "can have at most 128 characters"},
			{"UPPER-NEW", nil, "metadata.name", metav1.CauseTypeFieldValueInvalid, `Invalid value: "UPPER-NEW": a lowercase RFC 1123 subdomain`},
			// A cluster-scoped regarding object's events belong in default
			// or kube-system.
			{"cluster-scoped", func(m map[string]any) {
				m["regarding"] = map[string]any{"kind": "Node", "name": "node1", "apiVersion": "v1"}
			}, "involvedObject.namespace", metav1.CauseTypeFieldValueInvalid, `Invalid value: "": does not match event.namespace`},
		} {
			body := cgBody(t, cgNewEvent(ns, c.name, "pod"), c.mutate)
			st := cgFailure(t, cgHTTP(t, "POST", newURL, "application/json", body), 422, metav1.StatusReasonInvalid)
			if !strings.Contains(st.Message, `"`+c.name+`" is invalid: `) || !strings.Contains(st.Message, c.field+": ") {
				t.Errorf("%s: message %q", c.name, st.Message)
			}
			if st.Details == nil || st.Details.Name != c.name {
				t.Errorf("%s: details %+v", c.name, st.Details)
			}
			cgExpectCause(t, st, c.field, c.reason, c.msg)
		}
		unchanged(t)

		// The same upper-case name through core/v1 is accepted.
		cgCreateCore(t, cs, cgCoreEvent(ns, "UPPER-NEW", "pod"))
		before = append(before, ns+"/UPPER-NEW")
		slices.Sort(before)
		unchanged(t)

		// Update checks: a series with count 1 is rejected on patch.
		cur, err := cs.EventsV1().Events(ns).Get(cgCtx(t), "good-new", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := cgFailure(t, cgHTTP(t, "PATCH", newURL+"/good-new", "application/strategic-merge-patch+json",
			[]byte(`{"series":{"count":1,"lastObservedTime":"2030-01-01T00:00:00.000001Z"}}`)), 422, metav1.StatusReasonInvalid)
		cgExpectCause(t, st, "series.count", metav1.CauseTypeFieldValueInvalid, `Invalid value: "": should be at least 2`)
		st = cgFailure(t, cgHTTP(t, "PATCH", newURL+"/good-new", "application/merge-patch+json", []byte(`{"action":"Other"}`)), 422, metav1.StatusReasonInvalid)
		cgExpectCause(t, st, "action", metav1.CauseTypeFieldValueInvalid, "field is immutable")
		if after, err := cs.EventsV1().Events(ns).Get(cgCtx(t), "good-new", metav1.GetOptions{}); err != nil || after.ResourceVersion != cur.ResourceVersion || after.Series != nil {
			t.Errorf("rejected patches changed the event: %+v %v", after, err)
		}
	})
}
