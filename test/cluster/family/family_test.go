// Package family checks eventsd's family timelines (issue 31) on a real
// single-node cluster (internal/nodecluster): a Deployment rolled out
// twice, its first Pods never fitting, its second ones failing to
// schedule on a cordoned node, then fitting and crashlooping, its old
// ReplicaSet deleted by the controller; eventsd, mirroring the cluster and
// following its objects' metadata, killed (-9) during the rollout while
// the source compacts past its cursor. Afterwards the Deployment's family
// holds every event of every ReplicaSet and Pod that the source still
// holds, and nothing of an unrelated Deployment.
package family

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/nodecluster"
)

const ns = "shop"

func deployment(name, cpu string, command ...string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas:             ptr.To[int32](2),
			RevisionHistoryLimit: ptr.To[int32](0), // the controller deletes old ReplicaSets
			Selector:             &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{
						Name: "main", Image: nodecluster.Image, ImagePullPolicy: corev1.PullIfNotPresent, Command: command,
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
					}},
				},
			},
		},
	}
}

// inFamily reports whether the source's event is about web's family:
// the Deployment, or one of its ReplicaSets (web-<hash>) or Pods.
func inFamily(ev *corev1.Event) bool {
	o := ev.InvolvedObject
	return o.Kind == "Deployment" && o.Name == "web" ||
		(o.Kind == "ReplicaSet" || o.Kind == "Pod") && strings.HasPrefix(o.Name, "web-")
}

// eventsOf lists the events of ns that fieldSelector selects, by uid.
func eventsOf(t *testing.T, cs kubernetes.Interface, fieldSelector string) map[types.UID]corev1.Event {
	t.Helper()
	l, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: fieldSelector})
	if err != nil {
		t.Fatal(err)
	}
	out := map[types.UID]corev1.Event{}
	for _, ev := range l.Items {
		out[ev.UID] = ev
	}
	return out
}

// sourceEvents are the cluster's events of ns, and familyEvents eventsd's
// of web's family.
func sourceEvents(t *testing.T, cs kubernetes.Interface) map[types.UID]corev1.Event {
	return eventsOf(t, cs, "")
}

func familyEvents(t *testing.T, cs kubernetes.Interface) map[types.UID]corev1.Event {
	return eventsOf(t, cs, "family.kind=Deployment,family.name=web")
}

func describe(evs map[types.UID]corev1.Event) string {
	var out []string
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%s/%s %s", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

func lineages(t *testing.T, p *eventsdtest.Process) []eventapi.Lineage {
	t.Helper()
	q := url.Values{"fieldSelector": {"family.kind=Deployment,family.name=web"}}
	resp, err := http.Get(p.URL + "/apis/events.kubevents.io/v1/namespaces/" + ns + "/lineages?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l eventapi.LineageList
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("lineages: %d %v", resp.StatusCode, err)
	}
	return l.Items
}

func setUnschedulable(t *testing.T, cs kubernetes.Interface, v bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, v)
	if _, err := cs.CoreV1().Nodes().Patch(context.Background(), nodecluster.NodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestFamilyOfARollout(t *testing.T) {
	c := nodecluster.StartTest(t, nodecluster.Options{EventsEtcd: true})
	cs := c.Client()
	ctx := context.Background()
	p := eventsdtest.Start(t, eventsdtest.Options{Args: []string{"--source-kubeconfig", c.Kubeconfig()}})
	ecs := p.Clientset()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The unrelated Deployment runs; web's first Pods can never fit.
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment("api", "10m", "sleep", "3600"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment("web", "1000", "/bin/sh", "-c", "exit 1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodecluster.WaitFor(t, 2*time.Minute, "web's first Pods FailedScheduling, known to eventsd's lineage", func() (bool, string) {
		pods := 0
		for _, l := range lineages(t, p) {
			if l.Object.Kind == "Pod" {
				pods++
			}
		}
		failed := 0
		for _, ev := range familyEvents(t, ecs) {
			if ev.Reason == "FailedScheduling" {
				failed++
			}
		}
		return pods == 2 && failed > 0, fmt.Sprintf("%d pods, %d FailedScheduling", pods, failed)
	})
	firstRS := map[string]bool{}
	for _, l := range lineages(t, p) {
		if l.Object.Kind == "ReplicaSet" {
			firstRS[l.Object.Name] = true
		}
	}

	// eventsd dies; the second rollout happens on a cordoned node, so its
	// Pods fail to schedule first, then fit and crashloop.
	p.Kill()
	setUnschedulable(t, cs, true)
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"main","resources":{"requests":{"cpu":"10m"}}}]}}}}`
	if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	nodecluster.WaitFor(t, 2*time.Minute, "the second rollout's Pods FailedScheduling on the cordoned node", func() (bool, string) {
		for _, ev := range sourceEvents(t, cs) {
			if ev.Reason == "FailedScheduling" && strings.Contains(ev.Message, "unschedulable") {
				return true, ""
			}
		}
		return false, "none yet"
	})
	setUnschedulable(t, cs, false)
	nodecluster.WaitFor(t, 3*time.Minute, "the first ReplicaSet deleted and the second's Pods crashlooping", func() (bool, string) {
		rss, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error()
		}
		for _, rs := range rss.Items {
			if firstRS[rs.Name] {
				return false, "first ReplicaSet " + rs.Name + " still there"
			}
		}
		for _, ev := range sourceEvents(t, cs) {
			if ev.Reason == "BackOff" && strings.HasPrefix(ev.InvolvedObject.Name, "web-") {
				return true, ""
			}
		}
		return false, "no BackOff yet"
	})
	// The source compacts past eventsd's cursor while it is down.
	if _, err := c.APIServer().CompactEvents(ctx); err != nil {
		t.Fatal(err)
	}
	p.Restart()

	// Every event the source holds of web's family is in the family, and
	// nothing else; the source's events were read once more after the 410.
	var want, got map[types.UID]corev1.Event
	nodecluster.WaitFor(t, 2*time.Minute, "eventsd's family of web holding every family event the source holds", func() (bool, string) {
		src := sourceEvents(t, cs)
		want = map[types.UID]corev1.Event{}
		for uid, ev := range src {
			if inFamily(&ev) {
				want[uid] = ev
			}
		}
		got = familyEvents(t, ecs)
		missing := map[types.UID]corev1.Event{}
		for uid, ev := range want {
			if _, ok := got[uid]; !ok {
				missing[uid] = ev
			}
		}
		return len(missing) == 0, "missing " + describe(missing)
	})
	for uid, ev := range got {
		if !inFamily(&ev) {
			t.Errorf("family of web holds %s/%s %s (uid %s)", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, uid)
		}
	}
	reasons := map[string]bool{}
	rsNames := map[string]bool{}
	for _, ev := range got {
		reasons[ev.Reason] = true
		if ev.InvolvedObject.Kind == "ReplicaSet" {
			rsNames[ev.InvolvedObject.Name] = true
		}
	}
	for _, r := range []string{"ScalingReplicaSet", "SuccessfulCreate", "FailedScheduling", "Scheduled", "BackOff"} {
		if !reasons[r] {
			t.Errorf("family of web has no %s event; reasons %v", r, slices.Sorted(maps.Keys(reasons)))
		}
	}
	if len(rsNames) < 2 {
		t.Errorf("family of web holds the events of ReplicaSets %v: want both rollouts'", slices.Sorted(maps.Keys(rsNames)))
	}
	// The lineage keeps the deleted first ReplicaSet, marked deleted.
	deleted := 0
	for _, l := range lineages(t, p) {
		if firstRS[l.Object.Name] {
			if !l.Deleted {
				t.Errorf("first ReplicaSet %s not marked deleted", l.Object.Name)
			}
			deleted++
		}
	}
	if deleted != len(firstRS) {
		t.Errorf("lineage holds %d of the first ReplicaSets %v", deleted, firstRS)
	}
	t.Logf("family of web: %d events of %d objects; source held %d of them", len(got), len(lineages(t, p)), len(want))
}
