package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// TestExtensionsInvolves: involves.* selects the events where an object is
// the regarding or the related one, in both groups; with --extensions=false
// every selector kube-apiserver lacks gets its 400.
func TestExtensionsInvolves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, enabled := range []bool{true, false} {
		args := []string{}
		if !enabled {
			args = append(args, "--extensions=false")
		}
		p := eventsdtest.Start(t, eventsdtest.Options{Args: args})
		cs := p.Clientset()
		mk := func(name string, regarding corev1.ObjectReference, related *corev1.ObjectReference) {
			_, err := cs.CoreV1().Events("default").Create(ctx, &corev1.Event{
				ObjectMeta: metav1.ObjectMeta{Name: name}, InvolvedObject: regarding, Related: related,
				Reason: "R", Message: name, Type: "Normal", Count: 1,
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
		node := corev1.ObjectReference{Kind: "Node", Name: "n1", UID: "node-uid"}
		mk("about-node", corev1.ObjectReference{Kind: "Node", Name: "n1", UID: "node-uid"}, nil)
		mk("scheduled", corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default", UID: "pod-uid"}, &node)
		mk("other", corev1.ObjectReference{Kind: "Pod", Name: "db", Namespace: "default", UID: "db-uid"}, nil)

		for _, sel := range []string{"involves.uid=node-uid", "involves.kind=Node,involves.name=n1"} {
			core, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: sel})
			v1, err2 := cs.EventsV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: sel})
			if !enabled {
				if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "field label not supported: involves.") || !apierrors.IsBadRequest(err2) {
					t.Fatalf("without extensions, %s: %v / %v", sel, err, err2)
				}
				continue
			}
			if err != nil || err2 != nil {
				t.Fatal(err, err2)
			}
			var got []string
			for _, e := range core.Items {
				got = append(got, e.Name)
			}
			if strings.Join(got, ",") != "about-node,scheduled" || len(v1.Items) != 2 {
				t.Fatalf("%s: core %v, events.k8s.io %d", sel, got, len(v1.Items))
			}
		}
		if !enabled {
			for _, sel := range []string{"action=x", "reportingInstance=x", "related.name=n1"} {
				if _, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: sel}); !apierrors.IsBadRequest(err) {
					t.Fatalf("without extensions, %s: %v", sel, err)
				}
			}
			if l, err := cs.EventsV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=web,type=Normal"}); err != nil || len(l.Items) != 1 {
				t.Fatalf("upstream selectors without extensions: %v %v", l, err)
			}
		}
	}
}
