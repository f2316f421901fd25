package interop_test

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	evstorage "github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	apistorage "k8s.io/apiserver/pkg/storage"
)

// eventAttrs are the attributes kube-apiserver's events strategy selects
// on, as far as these tests use them.
func eventAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	ev, ok := obj.(*corev1.Event)
	if !ok {
		return nil, nil, fmt.Errorf("not an Event: %T", obj)
	}
	return labels.Set(ev.Labels), fields.Set{
		"metadata.name":      ev.Name,
		"metadata.namespace": ev.Namespace,
		"involvedObject.uid": string(ev.InvolvedObject.UID),
	}, nil
}

// TestInteropContinue: a paginated list gives the same continue token on
// both sides (kube-apiserver's: the list's revision and the next key
// relative to the listed prefix, the namespace's for a namespaced list)
// and the same remaining item count (none with a selector), and either
// side continues the other's list where it stopped.
func TestInteropContinue(t *testing.T) {
	e := newEnv(t)
	api := e.apiserverStore(mediaProtobuf, nil)
	for _, ns := range []string{"default", "other"} {
		for _, name := range []string{"a", "b", "c"} {
			must(t)(e.es.Create(e.ctx, coreEvent(ns, name, "pod-1"), evstorage.WriteOptions{TTL: time.Hour}))
		}
	}
	sel, err := eventapi.ParseFieldSelector(eventapi.CoreV1, "involvedObject.uid=pod-1", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		key       string // the apiserver store's list key
		selector  evstorage.Selector
		field     fields.Selector
		want      []string // the first two pages' keys
		remaining []string // and their remaining item counts
	}{
		{"all namespaces", resourcePrefix, evstorage.Selector{}, fields.Everything(), []string{"default/a", "default/b"}, []string{"5", "4"}},
		{"namespace", resourcePrefix + "/other", evstorage.Selector{Namespace: "other"}, fields.Everything(), []string{"other/a", "other/b"}, []string{"2", "1"}},
		{"namespace, indexed field", resourcePrefix + "/other", evstorage.Selector{Namespace: "other", Fields: sel},
			fields.OneTermEqualSelector("involvedObject.uid", "pod-1"), []string{"other/a", "other/b"}, []string{"nil", "nil"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			apiList := func(cont string) *corev1.EventList {
				t.Helper()
				list := &corev1.EventList{}
				pred := apistorage.SelectionPredicate{Label: labels.Everything(), Field: tc.field, GetAttrs: eventAttrs, Limit: 1, Continue: cont}
				if err := api.GetList(e.ctx, tc.key, apistorage.ListOptions{Predicate: pred, Recursive: true}, list); err != nil {
					t.Fatalf("apiserver list: %v", err)
				}
				return list
			}
			esList := func(cont string) *evstorage.ListResult {
				t.Helper()
				res, err := e.es.List(e.ctx, evstorage.ListOptions{Selector: tc.selector, Limit: 1, Continue: cont})
				if err != nil {
					t.Fatalf("etcdstore list: %v", err)
				}
				return res
			}
			key := func(ev *corev1.Event) string { return ev.Namespace + "/" + ev.Name }

			a, s := apiList(""), esList("")
			if len(a.Items) != 1 || len(s.Items) != 1 || key(&a.Items[0]) != tc.want[0] || key(s.Items[0]) != tc.want[0] {
				t.Fatalf("first pages: apiserver %d items, etcdstore %d, want %s", len(a.Items), len(s.Items), tc.want[0])
			}
			if a.Continue != s.Continue {
				t.Fatalf("continue tokens differ:\napiserver %s\netcdstore %s", token(a.Continue), token(s.Continue))
			}
			sameCount(t, "first pages", a.RemainingItemCount, s.RemainingItemCount, tc.remaining[0])
			// Each side continues the other's list.
			s2, a2 := esList(a.Continue), apiList(s.Continue)
			if len(s2.Items) != 1 || key(s2.Items[0]) != tc.want[1] {
				t.Fatalf("etcdstore continuing the apiserver's token %s: %d items, want %s", token(a.Continue), len(s2.Items), tc.want[1])
			}
			if len(a2.Items) != 1 || key(&a2.Items[0]) != tc.want[1] {
				t.Fatalf("apiserver continuing etcdstore's token %s: %d items, want %s", token(s.Continue), len(a2.Items), tc.want[1])
			}
			if a2.Continue != s2.Continue {
				t.Fatalf("second continue tokens differ:\napiserver %s\netcdstore %s", token(a2.Continue), token(s2.Continue))
			}
			sameCount(t, "second pages", a2.RemainingItemCount, s2.RemainingItemCount, tc.remaining[1])
		})
	}
}

// sameCount fails unless the apiserver's and etcdstore's remaining item
// counts of a page are both want ("nil": neither has one).
func sameCount(t *testing.T, what string, api, es *int64, want string) {
	t.Helper()
	show := func(p *int64) string {
		if p == nil {
			return "nil"
		}
		return fmt.Sprint(*p)
	}
	if show(api) != want || show(es) != want {
		t.Fatalf("%s: remaining item count: apiserver %s, etcdstore %s, want %s", what, show(api), show(es), want)
	}
}

// token shows a continue token's JSON.
func token(s string) string {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return fmt.Sprintf("%q (%v)", s, err)
	}
	return fmt.Sprintf("%q", b)
}
