// Package clustertest holds what the tests on a real single-node
// cluster (internal/nodecluster) share: a shell that runs the pages'
// blocks (internal/doctest) with the tools on PATH, waits on the
// cluster's objects and events, a crashlooping workload whose events the
// real kubelet writes, the image on the node, and what an install leaves
// behind. The tests are in test/cluster's subpackages, one scenario each,
// so that each has go test's timeout to itself.
package clustertest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubevents/kubevents/internal/buildcache"
	"github.com/kubevents/kubevents/internal/doctest"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/nodecluster"
)

// Namespace is where the pages install eventsd, and InstallDoc the page
// with the install commands.
const (
	Namespace  = "kubevents"
	InstallDoc = "docs/install.md"
)

// Tools is a directory holding the named binaries (name to path), for the
// front of a shell's PATH.
func Tools(t *testing.T, tools map[string]string) string {
	t.Helper()
	bin := t.TempDir()
	for name, target := range tools {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// ImportEventsdImage builds eventsd's image with tools/image (named as the
// chart installs it, ghcr.io/kubevents/eventsd:<appVersion>) and imports
// it on the node, as a pull of the release's image would put it there.
func ImportEventsdImage(t *testing.T, c *nodecluster.Cluster) {
	t.Helper()
	image := filepath.Join(t.TempDir(), "eventsd-image.tar")
	GoRun(t, "-C", "tools/image", ".", "--output", image)
	if err := c.ImportImage(image); err != nil {
		t.Fatal(err)
	}
}

// Shell is what the page's blocks run with: the tools on PATH, the
// cluster's kubeconfig, helm's homes, ghcr.io stood in for.
type Shell struct {
	// Dir is the working directory.
	Dir string
	// Env is the environment.
	Env []string
}

func (s Shell) Run(t *testing.T, block string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := doctest.Run(ctx, doctest.Command{Block: block, Dir: s.Dir, Env: s.Env})
	t.Logf("$ %s(%v)\n%s", block, time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// WebPod is the name of web's (one) pod.
func WebPod(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	l, err := cs.CoreV1().Pods("shop").List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("web's pods: %v %v", l, err)
	}
	return l.Items[0].Name
}

// InstallBlock is docs/install.md's one sh block starting with first.
func InstallBlock(t *testing.T, first string) string {
	t.Helper()
	md, err := doctest.Read(InstallDoc)
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
		t.Fatalf("%s has %d sh blocks starting with %q, want one", InstallDoc, len(found), first)
	}
	return found[0]
}

// Leftovers are what the chart made that still exists: its objects in
// the namespace, its cluster-wide RBAC, the claim.
func Leftovers(ctx context.Context, cs kubernetes.Interface) []string {
	var left []string
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=eventsd"}
	if l, err := cs.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
		left = append(left, fmt.Sprintf("pods (%v)", err))
	}
	if l, err := cs.CoreV1().PersistentVolumeClaims(Namespace).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
		left = append(left, fmt.Sprintf("claims (%v)", err))
	}
	if l, err := cs.AppsV1().StatefulSets(Namespace).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
		left = append(left, fmt.Sprintf("StatefulSets (%v)", err))
	}
	for _, name := range []string{"eventsd", "eventsd-viewer"} {
		if _, err := cs.CoreV1().ServiceAccounts(Namespace).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "ServiceAccount "+name)
		}
	}
	if l, err := cs.CoreV1().Secrets(Namespace).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
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

// Crashloop creates namespace ns and a Deployment whose container exits
// at once.
func Crashloop(t *testing.T, cs kubernetes.Interface, ns, name string) {
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

// EnforceRestricted enforces the restricted Pod Security Standard on the
// namespace (kube-apiserver warns of pods that violate it), then deletes
// the mirror's pod: its StatefulSet can only make it again if it passes.
func EnforceRestricted(t *testing.T, cfg *rest.Config, cs kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	var warnings warningRecorder
	cfg.WarningHandler = &warnings
	wcs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nsObj, err := wcs.CoreV1().Namespaces().Get(ctx, Namespace, metav1.GetOptions{})
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
		t.Errorf("enforcing the restricted standard on %s warned: %v", Namespace, warnings)
	}
	old, err := cs.CoreV1().Pods(Namespace).Get(ctx, "eventsd-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(Namespace).Delete(ctx, "eventsd-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	nodecluster.WaitFor(t, 3*time.Minute, "eventsd-0 made again under the restricted standard", func() (bool, string) {
		p, err := cs.CoreV1().Pods(Namespace).Get(ctx, "eventsd-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.UID != old.UID && PodReady(p), fmt.Sprintf("%s %v", p.Status.Phase, p.Status.Conditions)
	})
}

type warningRecorder []string

func (w *warningRecorder) HandleWarningHeader(code int, agent, text string) {
	*w = append(*w, text)
}

func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func WaitPodReady(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	nodecluster.WaitFor(t, 3*time.Minute, "pod "+ns+"/"+name+" Ready", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return PodReady(p), fmt.Sprintf("%s %v", p.Status.Phase, p.Status.Conditions)
	})
}

// HasEvent reports whether kube-apiserver has an event with reason in ns.
func HasEvent(t *testing.T, cs kubernetes.Interface, ns, reason string) bool {
	t.Helper()
	list, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items) > 0
}

func WaitEvent(t *testing.T, cs kubernetes.Interface, ns, reason string) {
	t.Helper()
	nodecluster.WaitFor(t, 3*time.Minute, "a "+reason+" event in "+ns, func() (bool, string) {
		return HasEvent(t, cs, ns, reason), "none yet"
	})
}

// FreePort is a loopback TCP port free now, for a port-forward.
func FreePort(t *testing.T) string {
	t.Helper()
	_, port, _ := net.SplitHostPort(eventsdtest.FreeAddr(t))
	return port
}

// GoRun runs `go run args...` at the repository's root.
func GoRun(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(buildcache.GoTool(), append([]string{"run"}, args...)...)
	cmd.Dir = doctest.Root()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// BuildEvctl builds cmd/evctl into the test's directory.
func BuildEvctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "evctl")
	cmd := exec.Command(buildcache.GoTool(), "build", "-o", bin, "./cmd/evctl")
	cmd.Dir = doctest.Root()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building evctl: %v\n%s", err, out)
	}
	return bin
}

// KubeletCount is the kubelet's count of web's events with reason.
func KubeletCount(t *testing.T, cs kubernetes.Interface, reason string) int {
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

// TagImage names an image of the node's containerd anew, as a push under
// another name and a pull would.
func TagImage(t *testing.T, c *nodecluster.Cluster, from, to string) {
	t.Helper()
	ctr := exec.Command(c.Containerd().Binaries().Ctr(), "--address", c.Containerd().Socket(), "--namespace", "k8s.io", "images", "tag", from, to)
	if out, err := ctr.CombinedOutput(); err != nil {
		t.Fatalf("ctr images tag: %v\n%s", err, out)
	}
}
