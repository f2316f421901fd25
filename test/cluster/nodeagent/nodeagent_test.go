// Package nodeagent runs nodeagent beside the real kubelet of a
// single-node cluster (internal/nodecluster), on the node's containerd,
// and compares what each records of a crashlooping pod.
package nodeagent

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubevents/kubevents/internal/buildcache"
	"github.com/kubevents/kubevents/internal/doctest"
	"github.com/kubevents/kubevents/internal/nodecluster"
	"github.com/kubevents/kubevents/internal/syncbuf"
	"github.com/kubevents/kubevents/test/cluster/clustertest"
)

// TestNodeagentBesideKubelet runs nodeagent on the node's containerd
// beside the real kubelet, a Deployment crashlooping, and compares what
// each recorded for its pod: every start, in counts (the kubelet's core/v1
// count, nodeagent's events.k8s.io series), and when each first saw it.
func TestNodeagentBesideKubelet(t *testing.T) {
	c := nodecluster.StartTest(t, nodecluster.Options{})
	ctx := context.Background()
	cs := c.Client()
	agentBin := filepath.Join(t.TempDir(), "nodeagent")
	build := exec.Command(buildcache.GoTool(), "build", "-o", agentBin, "./cmd/nodeagent")
	build.Dir = doctest.Root()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building nodeagent: %v\n%s", err, out)
	}
	agent := exec.Command(agentBin, "--runtime-endpoint", c.Containerd().Endpoint(),
		"--kubeconfig", c.Kubeconfig(), "--node-name", nodecluster.NodeName, "--metrics-addr", "")
	var agentLog syncbuf.Buffer
	agent.Stdout, agent.Stderr = &agentLog, &agentLog
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	agentDone := make(chan error, 1)
	go func() { agentDone <- agent.Wait() }()
	stopAgent := func() error {
		_ = agent.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-agentDone:
			return err
		case <-time.After(30 * time.Second):
			_ = agent.Process.Kill()
			return fmt.Errorf("nodeagent did not end within 30 s of SIGTERM: %w", <-agentDone)
		}
	}
	defer func() {
		if agent.ProcessState == nil {
			_ = stopAgent()
		}
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("nodeagent's log:\n%s", agentLog.String())
		}
	})

	clustertest.Crashloop(t, cs, "shop", "web")
	// Three starts: the first, and the restarts after 10 s and 20 s of
	// back-off.
	const starts = 3
	// When each start happened, as the runtime has it (nanoseconds),
	// gathered while the kubelet keeps the containers.
	rt, closeRT, err := c.Containerd().Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer closeRT()
	startedAt := map[string]time.Time{}
	nodecluster.WaitFor(t, 3*time.Minute, fmt.Sprintf("%d starts of web's container by the kubelet", starts), func() (bool, string) {
		l, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.namespace": "shop"}}})
		if err == nil {
			for _, ctr := range l.Containers {
				if st, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctr.Id}); err == nil && st.Status.StartedAt > 0 {
					startedAt[ctr.Id] = time.Unix(0, st.Status.StartedAt)
				}
			}
		}
		n := clustertest.KubeletCount(t, cs, "Started")
		return n >= starts, fmt.Sprintf("%d", n)
	})
	// The crashloop ends; then nodeagent stops (SIGTERM: it writes its
	// series' last counts) and both records are final.
	if err := cs.AppsV1().Deployments("shop").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	nodecluster.WaitFor(t, 2*time.Minute, "web's pod gone", func() (bool, string) {
		l, err := cs.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(l.Items) == 0, fmt.Sprintf("%d pods", len(l.Items))
	})
	if err := stopAgent(); err != nil {
		t.Errorf("nodeagent on SIGTERM: %v", err)
	}

	kubelet := map[string]int{}
	var kubeletLast time.Time
	core, err := cs.CoreV1().Events("shop").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range core.Items {
		if e.Source.Component == "kubelet" && strings.HasPrefix(e.InvolvedObject.Name, "web-") {
			kubelet[e.Reason] += int(max(e.Count, 1))
			if e.Reason == "Started" {
				kubeletLast = e.LastTimestamp.Time
			}
		}
	}
	agentCounts := map[string]int{}
	var agentLast time.Time
	evs, err := cs.EventsV1().Events("shop").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.ReportingController != "kubevents.io/nodeagent" || !strings.HasPrefix(e.Regarding.Name, "web-") {
			continue
		}
		n := 1
		if e.Series != nil {
			n = int(e.Series.Count)
		}
		agentCounts[e.Reason] += n
		if e.Reason == "Started" {
			agentLast = e.EventTime.Time
			if e.Series != nil {
				agentLast = e.Series.LastObservedTime.Time
			}
		}
	}
	// The start each last saw: the runtime's latest before nodeagent's
	// last observation.
	var start time.Time
	for _, at := range startedAt {
		if !at.After(agentLast) && at.After(start) {
			start = at
		}
	}
	t.Logf("for web's crashlooping pod, the kubelet recorded %v, nodeagent %v; the last start seen by nodeagent %v after the runtime's start, by the kubelet %v (its timestamps are whole seconds)",
		kubelet, agentCounts, agentLast.Sub(start).Round(time.Millisecond), kubeletLast.Sub(start).Round(time.Millisecond))
	if start.IsZero() {
		t.Errorf("none of the runtime's start times %v precedes nodeagent's last Started observation %v", startedAt, agentLast)
	}
	if kubelet["Started"] < starts || agentCounts["Started"] != kubelet["Started"] {
		t.Errorf("starts: the kubelet recorded %d, nodeagent %d; want the same, at least %d", kubelet["Started"], agentCounts["Started"], starts)
	}
	if agentCounts["Exited"] != agentCounts["Started"] {
		t.Errorf("nodeagent recorded %d exits of %d starts", agentCounts["Exited"], agentCounts["Started"])
	}
	// nodeagent records a back-off before each restart; the kubelet each
	// time a sync finds the container backing off, at least once.
	if agentCounts["BackOff"] != agentCounts["Started"]-1 || kubelet["BackOff"] < 1 {
		t.Errorf("BackOff: the kubelet recorded %d, nodeagent %d; want at least 1, and one less than the starts (%d)", kubelet["BackOff"], agentCounts["BackOff"], agentCounts["Started"])
	}
}
