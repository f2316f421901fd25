package nodecluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

func TestNodeReady(t *testing.T) {
	c := StartTest(t, Options{})
	ctx := context.Background()
	node, err := c.Client().CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !isReady(node) {
		t.Fatalf("node not Ready: %+v", node.Status.Conditions)
	}
	var ip string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
		}
	}
	if ip != c.NodeIP() {
		t.Errorf("node's InternalIP %q, want %q", ip, c.NodeIP())
	}
	sc, err := c.Client().StorageV1().StorageClasses().Get(ctx, StorageClassName, metav1.GetOptions{})
	if err != nil || sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" {
		t.Errorf("the default StorageClass: %v %v", sc, err)
	}
}

// TestWorkloadEvents runs a crashlooping Deployment and a pod that calls
// kube-apiserver through the kubernetes Service, and checks the events
// real controllers, the real scheduler and the real kubelet emit for them.
func TestWorkloadEvents(t *testing.T) {
	c := StartTest(t, Options{})
	ctx := context.Background()
	cs := c.Client()
	const ns = "default"

	crash := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "crash"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "crash"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "crash"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "main", Image: Image, ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"/bin/sh", "-c", "echo crashing; exit 1"},
				}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, crash, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Through the kubernetes Service (kube-proxy's rules in the node's
	// namespace, the pod network) to kube-apiserver on the host, which
	// tells a plain HTTP request that it serves HTTPS (busybox's TLS has
	// none of Go's default cipher suites); its log read through the
	// kubelet. And the Service's name, through the cluster's DNS.
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "main", Image: Image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/bin/sh", "-c", `nslookup kubernetes.default.svc.cluster.local; printf 'GET /version HTTP/1.0\r\n\r\n' | nc -w 10 "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT"`},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// reason -> reporting component, for the crashlooping pod's family.
	want := map[string]string{
		"ScalingReplicaSet": "deployment-controller",
		"SuccessfulCreate":  "replicaset-controller",
		"Scheduled":         "default-scheduler",
		"Pulled":            "kubelet",
		"Created":           "kubelet",
		"Started":           "kubelet",
		"BackOff":           "kubelet",
	}
	WaitFor(t, 3*time.Minute, "the crashlooping Deployment's events", func() (bool, string) {
		list, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		seen := map[string]string{}
		for _, e := range list.Items {
			if strings.HasPrefix(e.InvolvedObject.Name, "crash") {
				seen[e.Reason] = e.Source.Component + e.ReportingController
			}
		}
		var missing []string
		for reason, who := range want {
			if !strings.Contains(seen[reason], who) {
				missing = append(missing, fmt.Sprintf("%s from %s (seen: %q)", reason, who, seen[reason]))
			}
		}
		return len(missing) == 0, "missing " + strings.Join(missing, ", ")
	})

	WaitFor(t, 2*time.Minute, "the probe pod's end", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, string(p.Status.Phase)
	})
	logs, err := cs.CoreV1().Pods(ns).GetLogs("probe", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("the probe's log through the kubelet: %v", err)
	}
	if !bytes.Contains(logs, []byte("Client sent an HTTP request to an HTTPS server")) {
		t.Errorf("the probe reached no kube-apiserver through the kubernetes Service; its log:\n%s", logs)
	}
	if !bytes.Contains(logs, []byte("Address: 10.96.0.1")) {
		t.Errorf("the probe's nslookup of kubernetes.default.svc.cluster.local did not answer the Service's address; its log:\n%s", logs)
	}
}

// TestStopLeavesNothing stops a cluster with a running pod and checks
// that nothing it made is left: processes, the network namespace and
// veth, mounts, cgroups, the kubelet's log links.
func TestStopLeavesNothing(t *testing.T) {
	if err := CanRun(); err != nil {
		t.Skipf("no real cluster: %v", err)
	}
	if missing := Cached(); len(missing) > 0 {
		t.Skipf("no real cluster: not built yet: %s (%s builds them)", strings.Join(missing, "; "), BuildCommand)
	}
	// Everything Launch starts in this process (the DNS server and its
	// informers, the clients' connections) ends with Stop.
	ignore := goleak.IgnoreCurrent()
	dir := t.TempDir()
	c, err := Launch(context.Background(), Options{Dir: dir, Logf: t.Logf})
	if err != nil {
		t.Fatalf("%v (stopping: %v)", err, errorsAndStop(c))
	}
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "main", Image: Image, ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"/bin/sleep", "3600"},
		}}},
	}
	if _, err := c.Client().CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("%v (%v)", err, errorsAndStop(c))
	}
	waitRunning(t, c.Client(), "default", "sleeper")

	netns, hostIf, cgroup := c.NetNS(), c.net.hostIf, c.containerd.CgroupRoot()
	ctdDir := filepath.Dir(c.containerd.Socket())
	if err := c.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if _, err := os.Stat(netns); !os.IsNotExist(err) {
		t.Errorf("the network namespace %s is left (%v)", netns, err)
	}
	if _, err := os.Stat("/sys/class/net/" + hostIf); !os.IsNotExist(err) {
		t.Errorf("the host's veth %s is left (%v)", hostIf, err)
	}
	for _, d := range []string{dir, ctdDir} {
		if pids := processesNaming(d); len(pids) > 0 {
			t.Errorf("processes naming %s are left: %v", d, pids)
		}
		if mi, _ := os.ReadFile("/proc/self/mountinfo"); bytes.Contains(mi, []byte(" "+d+"/")) {
			t.Errorf("mounts under %s are left", d)
		}
	}
	for _, root := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/pids"} {
		if _, err := os.Stat(filepath.Join(root, cgroup)); err == nil {
			t.Errorf("the cgroup %s is left in %s", cgroup, root)
		}
	}
	if links, _ := filepath.Glob(filepath.Join(containerLogLinks, "sleeper_*")); len(links) > 0 {
		t.Errorf("the kubelet's log links are left: %v", links)
	}
	goleak.VerifyNone(t, ignore)
}

func errorsAndStop(c *Cluster) error {
	if c == nil {
		return nil
	}
	return c.Stop()
}

func waitRunning(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	WaitFor(t, 2*time.Minute, "pod "+name+" Running", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning, fmt.Sprintf("%s %v", p.Status.Phase, p.Status.ContainerStatuses)
	})
}

// processesNaming are the PIDs whose command line names dir.
func processesNaming(dir string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Contains(b, []byte(dir)) && e.Name() != fmt.Sprint(os.Getpid()) {
			pids = append(pids, e.Name()+": "+string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	return pids
}
