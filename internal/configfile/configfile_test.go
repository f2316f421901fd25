package configfile

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testConfig has the shapes eventsd's files have: a list of entries with
// an inlined embedded struct, a map, a nested struct, numbers, lists and
// a metav1.Duration.
type testConfig struct {
	metav1.TypeMeta `json:",inline"`
	Sinks           []testSink `json:"sinks"`
}

type testSink struct {
	Name    string       `json:"name"`
	Filter  testFilter   `json:"filter,omitempty"`
	Batch   testBatch    `json:"batch,omitempty"`
	Webhook *testWebhook `json:"webhook,omitempty"`
}

type testCriteria struct {
	Types []string `json:"types,omitempty"`
}

type testFilter struct {
	testCriteria `json:",inline"`
	Deletions    bool `json:"deletions,omitempty"`
}

type testBatch struct {
	MaxRecords int             `json:"maxRecords,omitempty"`
	MaxWait    metav1.Duration `json:"maxWait,omitempty"`
}

type testWebhook struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

// TestTypeErrorsNameTheirPath: a value of the wrong JSON type is an error
// naming its path in the file, list indexes and map keys included, as
// validation errors name theirs, not Go's struct and field names.
func TestTypeErrorsNameTheirPath(t *testing.T) {
	const head = "apiVersion: v1test\nkind: Test\n"
	ok := "- name: ok\n  webhook: {url: 'http://x', headers: {A: b}}\n"
	for _, c := range []struct{ name, doc, want string }{
		{"map value", head + "sinks:\n" + ok + "- name: b\n  webhook: {url: 'http://x', headers: {A: b, X: true}}\n",
			"decoding Test: sinks[1].webhook.headers[X]: Invalid value: true: want a string"},
		{"map itself", head + "sinks:\n" + ok + ok + "- name: c\n  webhook: {url: 'http://x', headers: true}\n",
			"decoding Test: sinks[2].webhook.headers: Invalid value: true: want an object"},
		{"integer", head + "sinks:\n" + ok + "- name: b\n  batch: {maxRecords: many}\n",
			`decoding Test: sinks[1].batch.maxRecords: Invalid value: "many": want an integer`},
		{"list in an inlined struct", head + "sinks:\n- name: a\n  filter: {types: Warning}\n",
			`decoding Test: sinks[0].filter.types: Invalid value: "Warning": want a list`},
		{"list element", head + "sinks:\n- name: a\n  filter: {types: [Warning, 3]}\n",
			"decoding Test: sinks[0].filter.types[1]: Invalid value: 3: want a string"},
		{"boolean", head + "sinks:\n- name: a\n  filter: {deletions: 'yes'}\n",
			`decoding Test: sinks[0].filter.deletions: Invalid value: "yes": want true or false`},
		{"a type's own decoding", head + "sinks:\n" + ok + "- name: b\n  batch: {maxWait: 5}\n",
			"decoding Test: sinks[1].batch.maxWait: Invalid value: 5: want a string"},
		{"object for a string, after an entry without it", head + "sinks:\n- name: a\n- name: b\n  webhook: {url: {host: x}}\n",
			"decoding Test: sinks[1].webhook.url: Invalid value: want a string, not an object"},
		{"object for a list", head + "sinks: {a: 1}\n",
			"decoding Test: sinks: Invalid value: want a list, not an object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := &testConfig{}
			err := Decode([]byte(c.doc), cfg, func() metav1.TypeMeta { return cfg.TypeMeta }, "v1test", "Test")
			if err == nil || err.Error() != c.want {
				t.Errorf("Decode: %v\nwant:   %s", err, c.want)
			}
			if err != nil && strings.Contains(err.Error(), "Go struct") {
				t.Errorf("Decode: %v names Go types", err)
			}
		})
	}
}
