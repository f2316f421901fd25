package clusterview

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestNames: an empty list matches every cluster, the root included; a
// list matches its clusters only, "" naming the root; Validate names each
// bad or repeated entry under the given path.
func TestNames(t *testing.T) {
	for _, tc := range []struct {
		names   Names
		cluster string
		want    bool
	}{
		{nil, "", true},
		{nil, "east", true},
		{Names{"east"}, "east", true},
		{Names{"east"}, "west", false},
		{Names{"east"}, "", false},
		{Names{""}, "", true},
		{Names{""}, "east", false},
		{Names{"", "west"}, "west", true},
	} {
		if got := tc.names.Matches(tc.cluster); got != tc.want {
			t.Errorf("%q.Matches(%q) = %v, want %v", tc.names, tc.cluster, got, tc.want)
		}
	}
	if errs := (Names{"", "east"}).Validate(field.NewPath("clusters")); len(errs) != 0 {
		t.Errorf("valid names: %v", errs)
	}
	errs := Names{"east", "-x", "", "a~b", "east", ""}.Validate(field.NewPath("rules").Index(0).Child("clusters"))
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`rules[0].clusters[1]: Invalid value: "-x"`,
		`rules[0].clusters[3]: Invalid value: "a~b"`,
		`rules[0].clusters[4]: Duplicate value: "\"east\" (also [0])"`,
		`rules[0].clusters[5]: Duplicate value: "\"\" (also [2])"`,
	}
	if len(got) != len(want) {
		t.Fatalf("errors %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("error %d: %s, want it to start %s", i, got[i], want[i])
		}
	}
}
