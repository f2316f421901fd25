package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// writeRollout writes, through core/v1 as the controllers do, the events
// of a Deployment web rolled out twice (each ReplicaSet announcing its
// Pods, each Pod's kubelet events) and of an unrelated Deployment api.
// It returns the regarding objects of web's family.
func writeRollout(t *testing.T, p *eventsdtest.Process) []string {
	t.Helper()
	cs := p.Clientset()
	ctx := cgCtx(t)
	now := time.Now()
	n := 0
	write := func(kind, name, uid, reason, msg, component, host string) {
		t.Helper()
		n++
		ts := metav1.NewTime(now.Add(time.Duration(n) * time.Second))
		_, err := cs.CoreV1().Events("shop").Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%d", name, n)},
			InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: "shop", Name: name, UID: types.UID(uid)},
			Reason:         reason, Message: msg, Type: corev1.EventTypeNormal, Count: 1,
			Source: corev1.EventSource{Component: component, Host: host}, FirstTimestamp: ts, LastTimestamp: ts,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	var family []string
	for _, app := range []string{"web", "api"} {
		for r := 1; r <= 2; r++ {
			rs := fmt.Sprintf("%s-%d", app, r)
			write("Deployment", app, app+"-uid", "ScalingReplicaSet", fmt.Sprintf("Scaled up replica set %s from 0 to 2", rs), "deployment-controller", "")
			for i := range 2 {
				pod := fmt.Sprintf("%s-%c", rs, 'a'+i)
				write("ReplicaSet", rs, rs+"-uid", "SuccessfulCreate", "Created pod: "+pod, "replicaset-controller", "")
				write("Pod", pod, pod+"-uid", "Pulled", "pulled", "kubelet", "node-1")
				if app == "web" {
					family = append(family, pod)
				}
			}
			if app == "web" {
				family = append(family, rs)
			}
		}
	}
	return append(family, "web")
}

// TestFamilyAcrossKill: eventsd learns a Deployment's family from the
// controllers' events alone (no source cluster), kubectl lists it with
// family.* selectors on both groups, and after kill -9 and a restart the
// family is the same.
func TestFamilyAcrossKill(t *testing.T) {
	p, kc := kubectlStart(t)
	want := writeRollout(t, p)
	slices.Sort(want)
	names := func(group string) []string {
		t.Helper()
		r := kubectlOK(t, p, kc, "get", group, "-n", "shop", "--field-selector", "family.kind=Deployment,family.name=web",
			"-o", "jsonpath={range .items[*]}{.involvedObject.name}{.regarding.name}{\"\\n\"}{end}")
		var out []string
		for _, l := range strings.Fields(r.Stdout) {
			if !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
		slices.Sort(out)
		return out
	}
	// The learner follows the store asynchronously.
	deadline := time.Now().Add(20 * time.Second)
	for got := names("events"); !slices.Equal(got, want); got = names("events") {
		if time.Now().After(deadline) {
			t.Fatalf("family of web: %v, want %v", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := names("events.events.k8s.io"); !slices.Equal(got, want) {
		t.Errorf("events.k8s.io family of web: %v, want %v", got, want)
	}
	// The family says where its ownership came from.
	r := kubectlOK(t, p, kc, "get", "events", "-n", "shop", "--field-selector", "family.kind=Deployment,family.name=web")
	if !strings.Contains(r.Stderr, "ownership is learned from events only") {
		t.Errorf("kubectl printed no warning about ownership from events only:\n%s", r.Stderr)
	}
	// Let the lineage's write-through (once a second) and the learner's
	// cursor catch up, then kill -9 and restart.
	time.Sleep(2500 * time.Millisecond)
	p.Kill()
	p.Restart()
	if got := names("events"); !slices.Equal(got, want) {
		t.Errorf("after kill -9 and restart, family of web: %v, want %v", got, want)
	}
	if !strings.Contains(p.Logs(), "learning ownership for family queries") {
		t.Error("eventsd did not log that it learns ownership")
	}
}

// TestFamilyNamespaceLimitedUser: with family.withNodes, the family
// reaches the events of the Node its Pods ran on, in another namespace; a
// user who may read only the family's namespace cannot list across
// namespaces (403, as for any list) and, in the namespace, sees that
// namespace's part of the family, events and lineage alike.
func TestFamilyNamespaceLimitedUser(t *testing.T) {
	policy := azWriteFile(t, "policy.jsonl", strings.Join([]string{
		`{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "bob", "namespace": "shop", "apiGroup": "*", "resource": "*", "readonly": true}}`,
		`{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "root", "namespace": "*", "apiGroup": "*", "resource": "*"}}`,
	}, "\n")+"\n")
	p := azStart(t, "--token-auth-file", azTokenFile(t), "--authorization-mode", "ABAC", "--authorization-policy-file", policy)
	root, bob := azClient(t, p, "tok-root"), azClient(t, p, "tok-bob")
	ctx := cgCtx(t)
	// web's Pod runs on node-1 (the kubelet's events say so), which goes
	// NotReady while it runs; another node's trouble is not web's.
	now := time.Now()
	write := func(ns, kind, name, uid, reason, msg, host string) {
		t.Helper()
		ts := metav1.NewTime(now)
		_, err := root.CoreV1().Events(ns).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: strings.ToLower(name) + "."},
			InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: map[bool]string{true: "", false: ns}[kind == "Node"], Name: name, UID: types.UID(uid)},
			Reason:         reason, Message: msg, Type: corev1.EventTypeNormal, Count: 1,
			Source: corev1.EventSource{Component: "kubelet", Host: host}, FirstTimestamp: ts, LastTimestamp: ts,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	write("shop", "Deployment", "web", "web-uid", "ScalingReplicaSet", "Scaled up replica set web-1 from 0 to 1", "")
	write("shop", "ReplicaSet", "web-1", "rs-uid", "SuccessfulCreate", "Created pod: web-1-a", "")
	write("shop", "Pod", "web-1-a", "pod-uid", "Pulled", "pulled", "node-1")
	write("default", "Node", "node-1", "node-1", "NodeNotReady", "node-1 is not ready", "node-1")
	write("default", "Node", "node-2", "node-2", "NodeNotReady", "node-2 is not ready", "node-2")
	sel := "family.kind=Deployment,family.namespace=shop,family.name=web,family.withNodes=true"
	regardings := func(cs kubernetes.Interface, ns string) ([]string, error) {
		l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, ev := range l.Items {
			out = append(out, ev.Namespace+"/"+ev.InvolvedObject.Name)
		}
		slices.Sort(out)
		return out, nil
	}
	want := []string{"default/node-1", "shop/web", "shop/web-1", "shop/web-1-a"}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := regardings(root, "")
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("root's family of web with nodes: %v, want %v", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := regardings(bob, ""); !apierrors.IsForbidden(err) {
		t.Errorf("bob's family across namespaces: %v, want Forbidden", err)
	}
	got, err := regardings(bob, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"shop/web", "shop/web-1", "shop/web-1-a"}; !slices.Equal(got, want) {
		t.Errorf("bob's family of web in shop: %v, want %v", got, want)
	}
	lineages := func(cs kubernetes.Interface, path string) ([]string, error) {
		var l eventapi.LineageList
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath(path).Param("fieldSelector", sel).DoRaw(ctx)
		if err == nil {
			err = json.Unmarshal(raw, &l)
		}
		var out []string
		for _, it := range l.Items {
			out = append(out, it.Object.Kind+"/"+it.Object.Name)
		}
		return out, err
	}
	if _, err := lineages(bob, "/apis/events.kubevents.io/v1/lineages"); !apierrors.IsForbidden(err) {
		t.Errorf("bob's lineages across namespaces: %v, want Forbidden", err)
	}
	got, err = lineages(bob, "/apis/events.kubevents.io/v1/namespaces/shop/lineages")
	if want := []string{"Deployment/web", "ReplicaSet/web-1", "Pod/web-1-a"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("bob's lineages in shop: %v %v, want %v", got, err, want)
	}
}
