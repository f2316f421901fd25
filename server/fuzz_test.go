package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/eventapi"
)

var seedEvent = `{"kind":"Event","apiVersion":"v1","metadata":{"name":"x","namespace":"default","resourceVersion":"3"},
"involvedObject":{"kind":"Pod","name":"p","namespace":"default"},"reason":"R","message":"m","count":1,
"firstTimestamp":"2025-01-01T00:00:00Z","lastTimestamp":"2025-01-01T00:00:00Z","source":{"component":"kubelet"},
"eventTime":null,"reportingComponent":"","reportingInstance":""}`

// FuzzDecodeEvent: any body either decodes to an Event that survives a
// JSON round trip, or is rejected with a 4xx Status; nothing panics.
func FuzzDecodeEvent(f *testing.F) {
	f.Add("application/json", []byte(seedEvent), false, "Strict")
	f.Add("application/json", []byte(`{"kind":"Event","apiVersion":"events.k8s.io/v1","eventTime":"2025-01-01T00:00:00.000001Z","series":{"count":2}}`), true, "Warn")
	f.Add("application/yaml", []byte("kind: Event\napiVersion: v1\nmetadata: {name: y}\n"), false, "Ignore")
	f.Add("application/vnd.kubernetes.protobuf", []byte("k8s\x00\x0a\x04\x0a\x02v1"), false, "Warn")
	f.Add("application/json", []byte(`{"count":"x"}`), false, "Warn")
	f.Fuzz(func(t *testing.T, ct string, body []byte, events bool, validation string) {
		v := eventapi.CoreV1
		if events {
			v = eventapi.EventsV1
		}
		ev, _, se := decodeEvent(ct, body, v, validation)
		if se != nil {
			if c := se.ErrStatus.Code; c < 400 || c >= 500 {
				t.Fatalf("rejection with code %d: %v", c, se)
			}
			return
		}
		raw, err := json.Marshal(externalEvent(v, ev))
		if err != nil {
			t.Fatalf("decoded event does not encode: %v", err)
		}
		again, _, se := decodeEvent("application/json", raw, v, validationStrict)
		if se != nil {
			t.Fatalf("re-encoded event %s does not decode strictly: %v", raw, se)
		}
		raw2, _ := json.Marshal(externalEvent(v, again))
		if string(raw) != string(raw2) {
			t.Fatalf("round trip changed the event:\n%s\n%s", raw, raw2)
		}
	})
}

// jsonEscapeGrowth is the most a JSON encoder's escaping grows a byte.
const jsonEscapeGrowth = 6

// FuzzApplyPatch: any patch of any supported type either applies or is
// rejected with a 4xx Status; nothing panics; and what a patch produces is
// bounded by its inputs and the copy limit, whatever it asks for (a JSON
// patch that copies a value onto itself doubles it each time).
func FuzzApplyPatch(f *testing.F) {
	for _, p := range []string{`{"count":2,"message":"m2"}`, `{"metadata":{"labels":{"a":"b"}}}`, `{"series":{"count":2}}`,
		`[{"op":"replace","path":"/count","value":3}]`, `[{"op":"remove","path":"/nope"}]`, `{"$patch":"delete"}`, `null`} {
		for _, ct := range []string{patchStrategic, patchMerge, patchJSON} {
			f.Add(ct, []byte(p), false)
		}
	}
	bomb := `[{"op":"add","path":"/bomb","value":["` + strings.Repeat("<", 512) + `"]}` +
		strings.Repeat(`,{"op":"copy","from":"/bomb","path":"/bomb/-"}`, 20) + `]`
	f.Add(patchJSON, []byte(bomb), false)
	f.Fuzz(func(t *testing.T, ct string, patch []byte, events bool) {
		if ct != patchJSON && ct != patchMerge {
			ct = patchStrategic
		}
		v := eventapi.CoreV1
		if events {
			v = eventapi.EventsV1
		}
		out, se := applyPatch(ct, []byte(seedEvent), patch, v)
		if se != nil {
			if c := se.ErrStatus.Code; c < 400 || c >= 500 {
				t.Fatalf("rejection with code %d: %v", c, se)
			}
			return
		}
		// Re-encoding may escape a byte as \u00XX (6 bytes); copies add at
		// most the copy limit.
		if bound := jsonEscapeGrowth * (len(seedEvent) + len(patch) + maxJSONPatchCopyBytes); len(out) > bound {
			t.Fatalf("a %d-byte %s patch produced %d bytes, over the bound %d", len(patch), ct, len(out), bound)
		}
		if _, _, se := decodeEvent("application/json", out, v, validationIgnore); se != nil && se.ErrStatus.Code >= 500 {
			t.Fatalf("patched result gives a server error: %v", se)
		}
	})
}
