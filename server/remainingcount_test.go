package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
	"github.com/kubevents/kubevents/storage/pebblestore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestListRemainingItemCount: through client-go, a page that has a
// continuation and no selector carries metadata.remainingItemCount (the
// events its later pages hold), in both groups and in the Table kubectl
// asks for, on both backends; a field or label selector gives none, as
// kube-apiserver does.
func TestListRemainingItemCount(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	backends := map[string]func(t *testing.T) storage.Interface{
		"pebble": func(t *testing.T) storage.Interface {
			s, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: vfs.NewMem(), Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"etcd": func(t *testing.T) storage.Interface {
			e, endpoint := etcdtest.Start(t, t.TempDir())
			t.Cleanup(func() { e.Close() })
			s, err := etcdstore.Open(etcdstore.Options{Endpoints: []string{endpoint}, DialTimeout: etcdtest.StartTimeout, CompactionInterval: -1, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			_, cs := serveStore(t, open(t))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for ns, n := range map[string]int{"a": 5, "b": 2} {
				for i := range n {
					ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("e%d", i), Labels: map[string]string{"app": "web"}},
						InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: ns}, Reason: "Started", Type: corev1.EventTypeNormal}
					if _, err := cs.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			checkRemaining(t, ctx, cs, "core, namespace a", "a", metav1.ListOptions{Limit: 2}, []string{"3", "1", "nil"})
			checkRemaining(t, ctx, cs, "core, all namespaces", "", metav1.ListOptions{Limit: 3}, []string{"4", "1", "nil"})
			checkRemaining(t, ctx, cs, "events.k8s.io, namespace a", "a", metav1.ListOptions{Limit: 4}, []string{"1", "nil"})
			checkRemaining(t, ctx, cs, "field selector", "a", metav1.ListOptions{Limit: 2, FieldSelector: "reason=Started"}, []string{"nil", "nil", "nil"})
			checkRemaining(t, ctx, cs, "label selector", "a", metav1.ListOptions{Limit: 2, LabelSelector: "app=web"}, []string{"nil", "nil", "nil"})

			// The Table kubectl asks for carries the list's metadata.
			raw, err := cs.CoreV1().RESTClient().Get().Namespace("a").Resource("events").Param("limit", "2").
				SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var tbl metav1.Table
			if err := json.Unmarshal(raw, &tbl); err != nil || tbl.Kind != "Table" || tbl.RemainingItemCount == nil || *tbl.RemainingItemCount != 3 {
				t.Errorf("Table page of 2 of 5: %v %s, want remainingItemCount 3", err, raw)
			}
		})
	}
}

// checkRemaining pages through a list of ns (core/v1, or events.k8s.io/v1
// when what says so) and compares each page's remaining item count.
func checkRemaining(t *testing.T, ctx context.Context, cs kubernetes.Interface, what, ns string, opts metav1.ListOptions, want []string) {
	t.Helper()
	var got []string
	for pages := 0; pages < 10; pages++ {
		var meta metav1.ListMeta
		if strings.HasPrefix(what, "events.k8s.io") {
			l, err := cs.EventsV1().Events(ns).List(ctx, opts)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			meta = l.ListMeta
		} else {
			l, err := cs.CoreV1().Events(ns).List(ctx, opts)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			meta = l.ListMeta
		}
		if meta.RemainingItemCount == nil {
			got = append(got, "nil")
		} else {
			got = append(got, fmt.Sprint(*meta.RemainingItemCount))
		}
		if meta.Continue == "" {
			break
		}
		opts.Continue = meta.Continue
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: remaining item counts %v, want %v", what, got, want)
	}
}
