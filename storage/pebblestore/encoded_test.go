package pebblestore_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// randomEvent returns an event about Pod pod with i's name and, at random,
// every kind of field a stored event can have: labels, annotations,
// managedFields, owner references, series, a related object, times,
// notes of every length (metadata and event lengths across one- and
// two-byte varints).
func randomEvent(r *rand.Rand, i int, pod string) *corev1.Event {
	str := func(max int) string { return strings.Repeat(string(rune('a'+r.IntN(26))), r.IntN(max+1)) }
	at := metav1.NewTime(time.Date(2026, 11, 1, 0, 0, r.IntN(86400), 0, time.UTC))
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: fmt.Sprintf("%s.%x%s", pod, i, str(60)), GenerateName: str(8),
			UID: types.UID(fmt.Sprintf("uid-%d", i)), CreationTimestamp: at,
		},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: pod, UID: types.UID("uid-" + pod), FieldPath: str(30)},
		Reason:         "Reason" + str(10), Message: str(300), Type: []string{"Normal", "Warning"}[r.IntN(2)],
		Source:         corev1.EventSource{Component: str(12), Host: str(12)},
		FirstTimestamp: at, LastTimestamp: at, Count: int32(r.IntN(1000)),
		ReportingController: str(20), ReportingInstance: str(20),
	}
	if r.IntN(2) == 0 {
		ev.Labels = map[string]string{"app": str(10), "tier": str(5)}
		ev.Annotations = map[string]string{"note": str(200)}
	}
	if r.IntN(3) == 0 {
		ev.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			Time: &at, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:message":{},"f:reason":{}}`)}}}
		ev.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod, UID: "uid-" + types.UID(pod)}}
	}
	if r.IntN(3) == 0 {
		ev.EventTime = metav1.NewMicroTime(at.Time)
		ev.Series = &corev1.EventSeries{Count: int32(r.IntN(50)), LastObservedTime: metav1.NewMicroTime(at.Add(time.Minute))}
		ev.Action = str(10)
	}
	if r.IntN(3) == 0 {
		ev.Related = &corev1.ObjectReference{Kind: "Node", Name: str(20)}
	}
	return ev
}

// TestListProtobuf: a list asked WithProtobuf gives, for each item of an
// index-driven list over several lookups, exactly what the item's Marshal
// gives (its stored form with the resourceVersion spliced in), on every
// page size, from the decoded-event cache or without one, and after
// updates (new revisions, the cached form not reused); without
// WithProtobuf, none.
func TestListProtobuf(t *testing.T) {
	for _, cache := range []int{0, -1} {
		t.Run(fmt.Sprintf("decoded cache %d", cache), func(t *testing.T) {
			s, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler), DecodedCacheEvents: cache})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			r := rand.New(rand.NewPCG(1, uint64(cache+2)))
			var stored []*corev1.Event
			for i := range 400 {
				ev, err := s.Create(ctx, randomEvent(r, i, fmt.Sprintf("p%d", i%8)), storage.WriteOptions{})
				if err != nil {
					t.Fatal(err)
				}
				stored = append(stored, ev)
			}
			check := func(what string) {
				t.Helper()
				seen := 0
				for _, pod := range []string{"p0", "p3", "p7"} {
					f, err := eventapi.ParseFieldSelector(eventapi.CoreV1, "involves.name="+pod, true)
					if err != nil {
						t.Fatal(err)
					}
					for _, limit := range []int64{0, 7, 256} {
						opts := storage.ListOptions{Selector: storage.Selector{Namespace: "ns", Fields: f}, Limit: limit, WithProtobuf: true}
						for {
							res, err := s.List(ctx, opts)
							if err != nil {
								t.Fatal(err)
							}
							if len(res.Items) > 0 && len(res.Protobuf) != len(res.Items) {
								t.Fatalf("%s: %d items, %d encoded", what, len(res.Items), len(res.Protobuf))
							}
							for i, ev := range res.Items {
								want, err := ev.Marshal()
								if err != nil {
									t.Fatal(err)
								}
								if !bytes.Equal(res.Protobuf[i].Matches(ev), want) {
									t.Fatalf("%s: %s (resourceVersion %s): stored form\n%q\nMarshal\n%q", what, ev.Name, ev.ResourceVersion, res.Protobuf[i].Matches(ev), want)
								}
								seen++
							}
							if res.Continue == "" {
								break
							}
							opts.Continue = res.Continue
						}
					}
				}
				if seen != 3*3*50 {
					t.Fatalf("%s: %d items compared, want %d", what, seen, 3*3*50)
				}
			}
			check("first list")
			check("listed again")
			// A list begun before the updates below, continued after them
			// (at its first page's snapshot, older than what the cache
			// then holds).
			f0, err := eventapi.ParseFieldSelector(eventapi.CoreV1, "involves.name=p0", true)
			if err != nil {
				t.Fatal(err)
			}
			old, err := s.List(ctx, storage.ListOptions{Selector: storage.Selector{Namespace: "ns", Fields: f0}, Limit: 5, WithProtobuf: true})
			if err != nil || old.Continue == "" {
				t.Fatalf("first page: %v, continue %q", err, old.Continue)
			}
			// New revisions of some: the form kept for the old one is not used.
			for i := 0; i < len(stored); i += 3 {
				ev := stored[i].DeepCopy()
				ev.Message = strings.Repeat("x", r.IntN(500))
				ev.Count++
				if _, err := s.Update(ctx, ev, storage.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			check("after updates")
			older := 0
			for cont := old.Continue; cont != ""; {
				res, err := s.List(ctx, storage.ListOptions{Selector: storage.Selector{Namespace: "ns", Fields: f0}, Limit: 5, Continue: cont, WithProtobuf: true})
				if err != nil {
					t.Fatal(err)
				}
				for i, ev := range res.Items {
					want, err := ev.Marshal()
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(res.Protobuf[i].Matches(ev), want) {
						t.Fatalf("a list continued at its older snapshot: %s (resourceVersion %s) differs from Marshal", ev.Name, ev.ResourceVersion)
					}
					older++
				}
				cont = res.Continue
			}
			if older != 45 {
				t.Fatalf("the list continued at its snapshot gave %d events, want 45", older)
			}
			res, err := s.List(ctx, storage.ListOptions{Selector: storage.Selector{Namespace: "ns", Fields: f0}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Items) == 0 || res.Protobuf != nil {
				t.Errorf("without WithProtobuf: %d items, %d encoded", len(res.Items), len(res.Protobuf))
			}
		})
	}
}
