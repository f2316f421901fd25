package pebblestore

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestWithResourceVersion: splicing the resourceVersion into a stored
// event gives Marshal's bytes for metadata and events of every length
// around the varint boundaries (127/128 bytes) and revisions of 1 to 19
// digits; a value that is not Marshal's layout is refused.
func TestWithResourceVersion(t *testing.T) {
	for nameLen := 90; nameLen < 140; nameLen++ {
		for _, rev := range []int64{1, 9, 10, 12345, 1 << 40, 1<<63 - 1} {
			ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: strings.Repeat("n", nameLen)}, Message: strings.Repeat("m", nameLen)}
			stored, err := ev.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			got, err := withResourceVersion(stored, rev)
			if err != nil {
				t.Fatalf("name of %d, revision %d: %v", nameLen, rev, err)
			}
			want, err := decodeEventMarshal(stored, rev)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("name of %d, revision %d: spliced\n%q\nMarshal\n%q", nameLen, rev, got, want)
			}
		}
	}
	withRV, err := (&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", ResourceVersion: "5"}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"empty":                  nil,
		"no metadata first":      {2<<3 | 2, 0},
		"metadata truncated":     {1<<3 | 2, 10, 1<<3 | 2},
		"field truncated":        {1<<3 | 2, 2, 1<<3 | 2, 9},
		"a resourceVersion kept": withRV,
		"fields missing":         {1<<3 | 2, 2, 1<<3 | 2, 0},
	} {
		if _, err := withResourceVersion(bad, 1); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// decodeEventMarshal is what a list encoded before: the stored event
// decoded at rev, then marshalled.
func decodeEventMarshal(stored []byte, rev int64) ([]byte, error) {
	ev, err := decodeEvent(stored, rev)
	if err != nil {
		return nil, err
	}
	return ev.Marshal()
}
