package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
			Source:         corev1.EventSource{Component: component, Host: host}, FirstTimestamp: ts, LastTimestamp: ts,
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
