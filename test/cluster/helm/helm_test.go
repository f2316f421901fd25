// Package helm runs the README's "Install in a cluster" (helm from the
// release's OCI chart at ghcr.io, stood in for by internal/ociregistry)
// and docs/install.md's aggregation, upgrade and uninstall blocks, as
// written, on a real single-node cluster (internal/nodecluster), and
// checks what a dry run cannot: the pod scheduled on a claim, running
// under the restricted Pod Security Standard, mirroring the events the
// real kubelet and controllers emit and keeping them past the cluster's
// TTL, read with kubectl and evctl through a port-forward over HTTPS and
// through the cluster's own API as RBAC allows, upgraded and uninstalled.
package helm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubevents/kubevents/internal/doctest"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/helmbin"
	"github.com/kubevents/kubevents/internal/kubeapiserver"
	"github.com/kubevents/kubevents/internal/nodecluster"
	"github.com/kubevents/kubevents/internal/ociregistry"
	"github.com/kubevents/kubevents/test/cluster/clustertest"
)

// What the README installs, and where.
const (
	readme       = "README.md"
	installTitle = "Install in a cluster"
	ns           = clustertest.Namespace
	chartRepo    = "kubevents/charts/eventsd"
	// clusterTTL is the cluster's --event-ttl: short, so that the test
	// sees kube-apiserver drop events that the mirror keeps.
	clusterTTL = time.Minute
)

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
	clustertest.ImportEventsdImage(t, c)
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
	bin := clustertest.Tools(t, map[string]string{"helm": helm, "kubectl": kubectl, "evctl": clustertest.BuildEvctl(t)})
	sh := clustertest.Shell{Dir: work, Env: append(append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+c.Kubeconfig(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"),
		// helm reads no registry credentials of the user's.
		"DOCKER_CONFIG="+filepath.Join(home, "docker"),
	), reg.Env()...)}

	// A crashlooping workload, whose events the real kubelet writes.
	clustertest.Crashloop(t, cs, "shop", "web")

	// 1. helm install from ghcr.io.
	sh.Run(t, blocks[0])
	ss, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "eventsd", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the mirror's StatefulSet: %v", err)
	}
	if img := ss.Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/kubevents/eventsd:v0.1.0" {
		t.Errorf("the chart from ghcr.io runs %s", img)
	}
	clustertest.WaitPodReady(t, cs, ns, "eventsd-0")
	clustertest.EnforceRestricted(t, c.RESTConfig(), cs)

	// 2. The README's reading of events: kubectl with the viewer's token
	// over HTTPS through a port-forward. Its output has the events the
	// kubelet and the controllers wrote for web.
	port := clustertest.FreePort(t)
	read := strings.NewReplacer("svc/eventsd 8080", "svc/eventsd "+port+":8080", "127.0.0.1:8080", "127.0.0.1:"+port).Replace(blocks[1])
	clustertest.WaitEvent(t, cs, "shop", "BackOff")
	out := sh.Run(t, read)
	for _, want := range []string{"BackOff", "Scheduled", "SuccessfulCreate", "ScalingReplicaSet", "web-"} {
		if !strings.Contains(out, want) {
			t.Errorf("the README's kubectl get events -A through eventsd printed no %q", want)
		}
	}

	// 3. Past the cluster's TTL: kube-apiserver dropped web's Scheduled
	// event, eventsd keeps it.
	deadline := time.Now().Add(clusterTTL + 3*time.Minute)
	for clustertest.HasEvent(t, cs, "shop", "Scheduled") {
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver kept web's Scheduled event for %v with --event-ttl=%v", clusterTTL+3*time.Minute, clusterTTL)
		}
		time.Sleep(2 * time.Second)
	}
	// The same block with evctl for kubectl, as the README says it takes
	// the same flags.
	evctlRead := strings.NewReplacer("kubectl --server", "evctl --server", " get events -A", " get -n shop --reason Scheduled").Replace(read)
	if out := sh.Run(t, evctlRead); !strings.Contains(out, "Scheduled") || !strings.Contains(out, "web-") {
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
	sh.Run(t, clustertest.InstallBlock(t, "helm upgrade eventsd deploy/helm/eventsd --namespace kubevents --reuse-values \\"))
	aggregated(t, c, sh)

	// 5. docs/install.md's upgrade to a new image (v0.2.0: the same
	// build, tagged as a release's push would name it) and uninstall.
	upgrade, uninstall := clustertest.InstallBlock(t, "helm upgrade eventsd deploy/helm/eventsd --namespace kubevents --reuse-values --set image.tag="), clustertest.InstallBlock(t, "helm uninstall eventsd")
	clustertest.TagImage(t, c, "ghcr.io/kubevents/eventsd:v0.1.0", "ghcr.io/kubevents/eventsd:v0.2.0")
	before, err := cs.CoreV1().Pods(ns).Get(ctx, "eventsd-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sh.Run(t, upgrade)
	nodecluster.WaitFor(t, 3*time.Minute, "eventsd-0 replaced by v0.2.0's", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "eventsd-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ss, _ := cs.AppsV1().StatefulSets(ns).Get(ctx, "eventsd", metav1.GetOptions{})
		return p.UID != before.UID && p.Spec.Containers[0].Image == "ghcr.io/kubevents/eventsd:v0.2.0" && clustertest.PodReady(p),
			fmt.Sprintf("pod %s (%s, created %v, revision %s) %s %v; StatefulSet image %s, status %+v", p.UID, p.Spec.Containers[0].Image, p.CreationTimestamp, p.Labels["controller-revision-hash"], p.Status.Phase, p.Status.Conditions,
				ss.Spec.Template.Spec.Containers[0].Image, ss.Status)
	})
	// The new pod has the old one's store (the claim): web's Scheduled
	// event, which the cluster no longer has, is still there.
	if out := sh.Run(t, evctlRead); !strings.Contains(out, "web-") {
		t.Errorf("after the upgrade, eventsd lost web's Scheduled event")
	}

	sh.Run(t, uninstall)
	nodecluster.WaitFor(t, 3*time.Minute, "nothing of eventsd left in "+ns, func() (bool, string) {
		left := clustertest.Leftovers(ctx, cs)
		return len(left) == 0, strings.Join(left, ", ")
	})
}

// aggregated waits for eventsd's APIService to be Available, then reads
// web's events through kube-apiserver as the admin and as alice.
func aggregated(t *testing.T, c *nodecluster.Cluster, sh clustertest.Shell) {
	t.Helper()
	ctx := context.Background()
	// The upgrade replaces the pod; then the APIService comes up.
	sh.Run(t, "kubectl -n kubevents rollout status statefulset/eventsd --timeout=3m\nkubectl wait --for=condition=Available apiservice/v1.events.kubevents.io --timeout=3m\n")
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
	pod := clustertest.WebPod(t, c.Client())
	out := sh.Run(t, fmt.Sprintf("kubectl get events.events.kubevents.io -A --field-selector involves.name=%s\n", pod))
	if !strings.Contains(out, "Scheduled") {
		t.Errorf("the admin's kubectl get events.events.kubevents.io through kube-apiserver has no Scheduled event of %s", pod)
	}
	out = sh.Run(t, fmt.Sprintf("kubectl --kubeconfig %s -n shop get events.events.kubevents.io --field-selector involves.name=%s\nevctl --kubeconfig %s -n shop timeline pod/%s\n", alice, pod, alice, pod))
	if strings.Count(out, "Scheduled") < 2 {
		t.Errorf("alice's kubectl and evctl through kube-apiserver did not both print %s's Scheduled event", pod)
	}
	out, err = doctest.Run(ctx, doctest.Command{Block: "kubectl --kubeconfig " + alice + " -n kubevents get events.events.kubevents.io\n", Dir: sh.Dir, Env: sh.Env})
	if err == nil || !strings.Contains(out, "Forbidden") && !strings.Contains(out, "forbidden") {
		t.Errorf("alice, who may read shop's events only, listed kubevents' through the aggregated API: %v\n%s", err, out)
	}
}
