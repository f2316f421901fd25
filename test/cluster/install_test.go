// Package cluster runs the README's and docs/install.md's install
// commands, as written, on a real single-node cluster on this machine
// (internal/nodecluster: a kubelet, containerd, the controllers, the
// scheduler, kube-proxy and DNS), and checks what a dry run cannot: the
// pod scheduled on a claim, running under the restricted Pod Security
// Standard, mirroring the events the real kubelet and controllers emit and
// keeping them past the cluster's TTL, read with kubectl and evctl through
// a port-forward over HTTPS, upgraded and uninstalled.
package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/kubevents/kubevents/internal/buildcache"
	"github.com/kubevents/kubevents/internal/doctest"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/helmbin"
	"github.com/kubevents/kubevents/internal/kubeapiserver"
	"github.com/kubevents/kubevents/internal/nodecluster"
	"github.com/kubevents/kubevents/internal/ociregistry"
)

// What the README installs, and where.
const (
	readme       = "README.md"
	installTitle = "Install in a cluster"
	installDoc   = "docs/install.md"
	ns           = "kubevents"
	chartRepo    = "kubevents/charts/eventsd"
	// clusterTTL is the cluster's --event-ttl: short, so that the test
	// sees kube-apiserver drop events that the mirror keeps.
	clusterTTL = time.Minute
)

// shell is what the page's blocks run with: the tools on PATH, the
// cluster's kubeconfig, helm's homes, ghcr.io stood in for.
type shell struct {
	dir string
	env []string
}

func (s shell) run(t *testing.T, block string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := doctest.Run(ctx, doctest.Command{Block: block, Dir: s.dir, Env: s.env})
	t.Logf("$ %s(%v)\n%s", block, time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadmeInstall runs the README's "Install in a cluster" blocks
// verbatim, but for the port kubectl port-forward listens on (a free one
// for 8080, which another test may hold), then docs/install.md's upgrade
// and uninstall blocks.
func TestReadmeInstall(t *testing.T) {
	md, err := doctest.Read(readme)
	if err != nil {
		t.Fatal(err)
	}
	section, err := doctest.Section(md, installTitle)
	if err != nil {
		t.Fatal(err)
	}
	blocks := doctest.Blocks(section, "sh")
	if len(blocks) != 2 || !strings.HasPrefix(blocks[0], "helm install eventsd oci://ghcr.io/") {
		t.Fatalf("the README's %q has %d sh blocks, the first %q: want the helm install from ghcr.io and the reading of events", installTitle, len(blocks), blocks[0])
	}
	helm := helmbin.ForTest(t)
	kubectl := eventsdtest.Kubectl(t)

	c := nodecluster.StartTest(t, nodecluster.Options{EventTTL: clusterTTL, Users: []kubeapiserver.User{{Name: "alice"}}})
	ctx := context.Background()
	cs := c.Client()

	// The release's image on the node, as a release's pull would put it:
	// tools/image names it as the chart installs it.
	work := t.TempDir()
	image := filepath.Join(work, "eventsd-image.tar")
	goRun(t, "-C", "tools/image", ".", "--output", image)
	if err := c.ImportImage(image); err != nil {
		t.Fatal(err)
	}
	// The release's chart at ghcr.io, as the release publishes it.
	chartDir := t.TempDir()
	if out, err := exec.Command(helm, "package", filepath.Join(doctest.Root(), "deploy", "helm", "eventsd"), "--destination", chartDir).CombinedOutput(); err != nil {
		t.Fatalf("helm package: %v\n%s", err, out)
	}
	tgzs, _ := filepath.Glob(filepath.Join(chartDir, "*.tgz"))
	if len(tgzs) != 1 {
		t.Fatalf("helm package wrote %v", tgzs)
	}
	// Everything else helm, kubectl and evctl reach is direct: the
	// cluster's kube-apiserver, its pods, the port-forward on 127.0.0.1.
	reg, err := ociregistry.New(ociregistry.Options{NoProxy: []string{c.HostIP(), c.PodCIDR()}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r := reg.Refused(); len(r) > 0 {
			t.Errorf("the blocks tried to reach, through the proxy, %v", r)
		}
		reg.Close()
	})
	if _, err := reg.AddChart(chartRepo, tgzs[0]); err != nil {
		t.Fatal(err)
	}

	home := t.TempDir()
	bin := t.TempDir()
	for name, target := range map[string]string{"helm": helm, "kubectl": kubectl, "evctl": buildEvctl(t)} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	sh := shell{dir: work, env: append(append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+c.Kubeconfig(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"),
		// helm reads no registry credentials of the user's.
		"DOCKER_CONFIG="+filepath.Join(home, "docker"),
	), reg.Env()...)}

	// A crashlooping workload, whose events the real kubelet writes.
	crashloop(t, cs, "shop", "web")

	// 1. helm install from ghcr.io.
	sh.run(t, blocks[0])
	ss, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "eventsd", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the mirror's StatefulSet: %v", err)
	}
	if img := ss.Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/kubevents/eventsd:v0.1.0" {
		t.Errorf("the chart from ghcr.io runs %s", img)
	}
	waitPodReady(t, cs, ns, "eventsd-0")
	restricted(t, c.RESTConfig(), cs)

	// 2. The README's reading of events: kubectl with the viewer's token
	// over HTTPS through a port-forward. Its output has the events the
	// kubelet and the controllers wrote for web.
	port := freePort(t)
	read := strings.NewReplacer("svc/eventsd 8080", "svc/eventsd "+port+":8080", "127.0.0.1:8080", "127.0.0.1:"+port).Replace(blocks[1])
	waitEvent(t, cs, "shop", "BackOff")
	out := sh.run(t, read)
	for _, want := range []string{"BackOff", "Scheduled", "SuccessfulCreate", "ScalingReplicaSet", "web-"} {
		if !strings.Contains(out, want) {
			t.Errorf("the README's kubectl get events -A through eventsd printed no %q", want)
		}
	}

	// 3. Past the cluster's TTL: kube-apiserver dropped web's Scheduled
	// event, eventsd keeps it.
	deadline := time.Now().Add(clusterTTL + 3*time.Minute)
	for hasEvent(t, cs, "shop", "Scheduled") {
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver kept web's Scheduled event for %v with --event-ttl=%v", clusterTTL+3*time.Minute, clusterTTL)
		}
		time.Sleep(2 * time.Second)
	}
	// The same block with evctl for kubectl, as the README says it takes
	// the same flags.
	evctlRead := strings.NewReplacer("kubectl --server", "evctl --server", " get events -A", " get -n shop --reason Scheduled").Replace(read)
	if out := sh.run(t, evctlRead); !strings.Contains(out, "Scheduled") || !strings.Contains(out, "web-") {
		t.Errorf("after kube-apiserver's TTL, eventsd (through evctl) has no Scheduled event of web's pod")
	}

	// 4. Through the cluster's own API: install.md's upgrade turning
	// aggregation on; then the cluster's users read eventsd's history
	// (web's Scheduled event, gone from kube-apiserver) with their usual
	// kubeconfig, as RBAC lets them read events: alice, with the view
	// role in shop only, reads shop's and nothing of kubevents'.
	// install.md's blocks run in a clone: deploy/ beside them.
	if err := os.Symlink(filepath.Join(doctest.Root(), "deploy"), filepath.Join(work, "deploy")); err != nil {
		t.Fatal(err)
	}
	sh.run(t, installBlock(t, "helm upgrade eventsd deploy/helm/eventsd --namespace kubevents --reuse-values \\"))
	aggregated(t, c, sh)

	// 5. docs/install.md's upgrade to a new image (v0.2.0: the same
	// build, tagged as a release's push would name it) and uninstall.
	upgrade, uninstall := installBlock(t, "helm upgrade eventsd deploy/helm/eventsd --namespace kubevents --reuse-values --set image.tag="), installBlock(t, "helm uninstall eventsd")
	tagImage(t, c, "ghcr.io/kubevents/eventsd:v0.1.0", "ghcr.io/kubevents/eventsd:v0.2.0")
	before, err := cs.CoreV1().Pods(ns).Get(ctx, "eventsd-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sh.run(t, upgrade)
	waitFor(t, 3*time.Minute, "eventsd-0 replaced by v0.2.0's", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "eventsd-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ss, _ := cs.AppsV1().StatefulSets(ns).Get(ctx, "eventsd", metav1.GetOptions{})
		return p.UID != before.UID && p.Spec.Containers[0].Image == "ghcr.io/kubevents/eventsd:v0.2.0" && podReady(p),
			fmt.Sprintf("pod %s (%s, created %v, revision %s) %s %v; StatefulSet image %s, status %+v", p.UID, p.Spec.Containers[0].Image, p.CreationTimestamp, p.Labels["controller-revision-hash"], p.Status.Phase, p.Status.Conditions,
				ss.Spec.Template.Spec.Containers[0].Image, ss.Status)
	})
	// The new pod has the old one's store (the claim): web's Scheduled
	// event, which the cluster no longer has, is still there.
	if out := sh.run(t, evctlRead); !strings.Contains(out, "web-") {
		t.Errorf("after the upgrade, eventsd lost web's Scheduled event")
	}

	sh.run(t, uninstall)
	waitFor(t, 3*time.Minute, "nothing of eventsd left in "+ns, func() (bool, string) {
		left := leftovers(ctx, cs)
		return len(left) == 0, strings.Join(left, ", ")
	})
}

// aggregated waits for eventsd's APIService to be Available, then reads
// web's events through kube-apiserver as the admin and as alice.
func aggregated(t *testing.T, c *nodecluster.Cluster, sh shell) {
	t.Helper()
	ctx := context.Background()
	// The upgrade replaces the pod; then the APIService comes up.
	sh.run(t, "kubectl -n kubevents rollout status statefulset/eventsd --timeout=3m\nkubectl wait --for=condition=Available apiservice/v1.events.kubevents.io --timeout=3m\n")
	if _, err := c.Client().RbacV1().RoleBindings("shop").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "alice"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	alice, err := c.APIServer().KubeconfigAs("alice")
	if err != nil {
		t.Fatal(err)
	}
	// The page's console lines, for web's pod and by a kubeconfig's path.
	pod := webPod(t, c.Client())
	out := sh.run(t, fmt.Sprintf("kubectl get events.events.kubevents.io -A --field-selector involves.name=%s\n", pod))
	if !strings.Contains(out, "Scheduled") {
		t.Errorf("the admin's kubectl get events.events.kubevents.io through kube-apiserver has no Scheduled event of %s", pod)
	}
	out = sh.run(t, fmt.Sprintf("kubectl --kubeconfig %s -n shop get events.events.kubevents.io --field-selector involves.name=%s\nevctl --kubeconfig %s -n shop timeline pod/%s\n", alice, pod, alice, pod))
	if strings.Count(out, "Scheduled") < 2 {
		t.Errorf("alice's kubectl and evctl through kube-apiserver did not both print %s's Scheduled event", pod)
	}
	out, err = doctest.Run(ctx, doctest.Command{Block: "kubectl --kubeconfig " + alice + " -n kubevents get events.events.kubevents.io\n", Dir: sh.dir, Env: sh.env})
	if err == nil || !strings.Contains(out, "Forbidden") && !strings.Contains(out, "forbidden") {
		t.Errorf("alice, who may read shop's events only, listed kubevents' through the aggregated API: %v\n%s", err, out)
	}
}

// webPod is the name of web's (one) pod.
func webPod(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	l, err := cs.CoreV1().Pods("shop").List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("web's pods: %v %v", l, err)
	}
	return l.Items[0].Name
}

// installBlock is docs/install.md's one sh block starting with first.
func installBlock(t *testing.T, first string) string {
	t.Helper()
	md, err := doctest.Read(installDoc)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, b := range doctest.Blocks(md, "sh") {
		if strings.HasPrefix(b, first) {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s has %d sh blocks starting with %q, want one", installDoc, len(found), first)
	}
	return found[0]
}

// leftovers are what the chart made that still exists: its objects in
// the namespace, its cluster-wide RBAC, the claim.
func leftovers(ctx context.Context, cs kubernetes.Interface) []string {
	var left []string
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=eventsd"}
	if l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
		left = append(left, fmt.Sprintf("pods (%v)", err))
	}
	if l, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
		left = append(left, fmt.Sprintf("claims (%v)", err))
	}
	if l, err := cs.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
		left = append(left, fmt.Sprintf("StatefulSets (%v)", err))
	}
	for _, name := range []string{"eventsd", "eventsd-viewer"} {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "ServiceAccount "+name)
		}
	}
	if l, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
		left = append(left, fmt.Sprintf("Secrets (%v)", err))
	}
	if l, err := cs.RbacV1().ClusterRoles().List(ctx, sel); err != nil || len(l.Items) > 0 {
		left = append(left, fmt.Sprintf("ClusterRoles (%v)", err))
	}
	if l, err := cs.RbacV1().ClusterRoleBindings().List(ctx, sel); err != nil || len(l.Items) > 0 {
		left = append(left, fmt.Sprintf("ClusterRoleBindings (%v)", err))
	}
	err := cs.Discovery().RESTClient().Get().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices/v1.events.kubevents.io").Do(ctx).Error()
	if !apierrors.IsNotFound(err) {
		left = append(left, fmt.Sprintf("the APIService (%v)", err))
	}
	return left
}

// crashloop creates namespace ns and a Deployment whose container exits
// at once.
func crashloop(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "main", Image: nodecluster.Image, ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"/bin/sh", "-c", "echo starting; exit 1"},
				}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// restricted enforces the restricted Pod Security Standard on the
// namespace (kube-apiserver warns of pods that violate it), then deletes
// the mirror's pod: its StatefulSet can only make it again if it passes.
func restricted(t *testing.T, cfg *rest.Config, cs kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	var warnings warningRecorder
	cfg.WarningHandler = &warnings
	wcs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nsObj, err := wcs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nsObj.Labels == nil {
		nsObj.Labels = map[string]string{}
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if _, err := wcs.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Errorf("enforcing the restricted standard on %s warned: %v", ns, warnings)
	}
	old, err := cs.CoreV1().Pods(ns).Get(ctx, "eventsd-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "eventsd-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Minute, "eventsd-0 made again under the restricted standard", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "eventsd-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.UID != old.UID && podReady(p), fmt.Sprintf("%s %v", p.Status.Phase, p.Status.Conditions)
	})
}

type warningRecorder []string

func (w *warningRecorder) HandleWarningHeader(code int, agent, text string) {
	*w = append(*w, text)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitPodReady(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	waitFor(t, 3*time.Minute, "pod "+ns+"/"+name+" Ready", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return podReady(p), fmt.Sprintf("%s %v", p.Status.Phase, p.Status.Conditions)
	})
}

// hasEvent reports whether kube-apiserver has an event with reason in ns.
func hasEvent(t *testing.T, cs kubernetes.Interface, ns, reason string) bool {
	t.Helper()
	list, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items) > 0
}

func waitEvent(t *testing.T, cs kubernetes.Interface, ns, reason string) {
	t.Helper()
	waitFor(t, 3*time.Minute, "a "+reason+" event in "+ns, func() (bool, string) {
		return hasEvent(t, cs, ns, reason), "none yet"
	})
}

// waitFor polls cond every 250 ms until it holds or timeout passes; the
// cluster acts asynchronously.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, timeout, state)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// goRun runs `go run args...` at the repository's root.
func goRun(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(buildcache.GoTool(), append([]string{"run"}, args...)...)
	cmd.Dir = doctest.Root()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// buildEvctl builds cmd/evctl into the test's directory.
func buildEvctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "evctl")
	cmd := exec.Command(buildcache.GoTool(), "build", "-o", bin, "./cmd/evctl")
	cmd.Dir = doctest.Root()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building evctl: %v\n%s", err, out)
	}
	return bin
}

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
	var agentLog syncWriter
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

	crashloop(t, cs, "shop", "web")
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
	waitFor(t, 3*time.Minute, fmt.Sprintf("%d starts of web's container by the kubelet", starts), func() (bool, string) {
		l, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.namespace": "shop"}}})
		if err == nil {
			for _, ctr := range l.Containers {
				if st, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctr.Id}); err == nil && st.Status.StartedAt > 0 {
					startedAt[ctr.Id] = time.Unix(0, st.Status.StartedAt)
				}
			}
		}
		n := kubeletCount(t, cs, "Started")
		return n >= starts, fmt.Sprintf("%d", n)
	})
	// The crashloop ends; then nodeagent stops (SIGTERM: it writes its
	// series' last counts) and both records are final.
	if err := cs.AppsV1().Deployments("shop").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "web's pod gone", func() (bool, string) {
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

// kubeletCount is the kubelet's count of web's events with reason.
func kubeletCount(t *testing.T, cs kubernetes.Interface, reason string) int {
	t.Helper()
	l, err := cs.CoreV1().Events("shop").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range l.Items {
		if e.Source.Component == "kubelet" && strings.HasPrefix(e.InvolvedObject.Name, "web-") {
			n += int(max(e.Count, 1))
		}
	}
	return n
}

// syncWriter is a buffer a process writes and the test reads.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestKustomizeMirror runs docs/install.md's "The mirror, with kubectl":
// the mirror base, then the page's overlay (HTTPS from an openssl
// certificate, export, the image renamed), the page's reading of events
// through a port-forward, and kubectl delete -k.
func TestKustomizeMirror(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("the page's overlay makes its certificate with openssl, which is not installed")
	}
	kubectl := eventsdtest.Kubectl(t)
	c := nodecluster.StartTest(t, nodecluster.Options{})
	ctx := context.Background()
	cs := c.Client()

	work := t.TempDir()
	image := filepath.Join(work, "eventsd-image.tar")
	goRun(t, "-C", "tools/image", ".", "--output", image)
	if err := c.ImportImage(image); err != nil {
		t.Fatal(err)
	}
	// The overlay's image: the same build, as the page's push names it.
	tagImage(t, c, "ghcr.io/kubevents/eventsd:v0.1.0", "registry.example.com/kubevents/eventsd:v0.1.0")
	if err := os.Symlink(filepath.Join(doctest.Root(), "deploy"), filepath.Join(work, "deploy")); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for name, target := range map[string]string{"kubectl": kubectl, "evctl": buildEvctl(t)} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	sh := shell{dir: work, env: append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+c.Kubeconfig())}
	crashloop(t, cs, "shop", "web")

	sh.run(t, installBlock(t, "kubectl apply -k deploy/kustomize/mirror"))
	waitPodReady(t, cs, ns, "eventsd-0")

	sh.run(t, installBlock(t, "mkdir -p my-eventsd"))
	waitFor(t, 3*time.Minute, "eventsd-0 replaced by the overlay's", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "eventsd-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Spec.Containers[0].Image == "registry.example.com/kubevents/eventsd:v0.1.0" && podReady(p),
			fmt.Sprintf("%s %s %v", p.Spec.Containers[0].Image, p.Status.Phase, p.Status.Conditions)
	})

	waitEvent(t, cs, "shop", "BackOff")
	port := freePort(t)
	read := strings.NewReplacer("svc/eventsd 8080", "svc/eventsd "+port+":8080", "127.0.0.1:8080", "127.0.0.1:"+port).Replace(
		installBlock(t, "kubectl -n kubevents get secret eventsd-tls") +
			installBlock(t, "kubectl -n kubevents port-forward svc/eventsd 8080 &") +
			// A reader types the next command once the forward listens.
			"for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null && break; sleep 0.1; done\n" +
			installBlock(t, "kubectl --server https://127.0.0.1:8080"))
	out := sh.run(t, read)
	if n := strings.Count(out, "BackOff"); n < 2 {
		t.Errorf("kubectl and evctl through the overlay's eventsd printed %d lines of web's BackOff, want one each", n)
	}

	sh.run(t, installBlock(t, "kubectl delete -k my-eventsd"))
	waitFor(t, 3*time.Minute, "namespace "+ns+" deleted", func() (bool, string) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if left := leftovers(ctx, cs); len(left) > 0 {
		t.Errorf("after kubectl delete -k: %v", left)
	}
}

// tagImage names an image of the node's containerd anew, as a push under
// another name and a pull would.
func tagImage(t *testing.T, c *nodecluster.Cluster, from, to string) {
	t.Helper()
	ctr := exec.Command(c.Containerd().Binaries().Ctr(), "--address", c.Containerd().Socket(), "--namespace", "k8s.io", "images", "tag", from, to)
	if out, err := ctr.CombinedOutput(); err != nil {
		t.Fatalf("ctr images tag: %v\n%s", err, out)
	}
}
