// Package kustomize runs docs/install.md's "The mirror, with kubectl"
// (the mirror base, the page's overlay with HTTPS and export, reading its
// events, kubectl delete -k) as written on a real single-node cluster
// (internal/nodecluster).
package kustomize

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubevents/kubevents/internal/doctest"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/nodecluster"
	"github.com/kubevents/kubevents/test/cluster/clustertest"
)

const ns = clustertest.Namespace

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
	clustertest.ImportEventsdImage(t, c)
	// The overlay's image: the same build, as the page's push names it.
	clustertest.TagImage(t, c, "ghcr.io/kubevents/eventsd:v0.1.0", "registry.example.com/kubevents/eventsd:v0.1.0")
	if err := os.Symlink(filepath.Join(doctest.Root(), "deploy"), filepath.Join(work, "deploy")); err != nil {
		t.Fatal(err)
	}
	bin := clustertest.Tools(t, map[string]string{"kubectl": kubectl, "evctl": clustertest.BuildEvctl(t)})
	sh := clustertest.Shell{Dir: work, Env: append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+c.Kubeconfig())}
	clustertest.Crashloop(t, cs, "shop", "web")

	sh.Run(t, clustertest.InstallBlock(t, "kubectl apply -k deploy/kustomize/mirror"))
	clustertest.WaitPodReady(t, cs, ns, "eventsd-0")

	sh.Run(t, clustertest.InstallBlock(t, "mkdir -p my-eventsd"))
	nodecluster.WaitFor(t, 3*time.Minute, "eventsd-0 replaced by the overlay's", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "eventsd-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Spec.Containers[0].Image == "registry.example.com/kubevents/eventsd:v0.1.0" && clustertest.PodReady(p),
			fmt.Sprintf("%s %s %v", p.Spec.Containers[0].Image, p.Status.Phase, p.Status.Conditions)
	})

	clustertest.WaitEvent(t, cs, "shop", "BackOff")
	port := clustertest.FreePort(t)
	read := strings.NewReplacer("svc/eventsd 8080", "svc/eventsd "+port+":8080", "127.0.0.1:8080", "127.0.0.1:"+port).Replace(
		clustertest.InstallBlock(t, "kubectl -n kubevents get secret eventsd-tls") +
			clustertest.InstallBlock(t, "kubectl -n kubevents port-forward svc/eventsd 8080 &") +
			// A reader types the next command once the forward listens.
			"for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null && break; sleep 0.1; done\n" +
			clustertest.InstallBlock(t, "kubectl --server https://127.0.0.1:8080"))
	out := sh.Run(t, read)
	if n := strings.Count(out, "BackOff"); n < 2 {
		t.Errorf("kubectl and evctl through the overlay's eventsd printed %d lines of web's BackOff, want one each", n)
	}

	sh.Run(t, clustertest.InstallBlock(t, "kubectl delete -k my-eventsd"))
	nodecluster.WaitFor(t, 3*time.Minute, "namespace "+ns+" deleted", func() (bool, string) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if left := clustertest.Leftovers(ctx, cs); len(left) > 0 {
		t.Errorf("after kubectl delete -k: %v", left)
	}

	// The page's overlay for the cluster's own API (its yaml block: the
	// mirror with the tls and aggregated components), with the certificate
	// and image of the overlay above, and the ephemeral component (an
	// emptyDir for the store).
	aggregatedOverlay(t, filepath.Join(work, "my-aggregated"), filepath.Join(work, "my-eventsd"))
	sh.Run(t, "kubectl apply -k my-aggregated\n")
	clustertest.WaitPodReady(t, cs, ns, "eventsd-0")
	if l, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
		t.Errorf("with the ephemeral component, claims %v (%v)", l, err)
	}
	sh.Run(t, "kubectl wait --for=condition=Available apiservice/v1.events.kubevents.io --timeout=3m\n")
	// The store is new: it mirrors what the cluster still has of web.
	nodecluster.WaitFor(t, time.Minute, "web's BackOff through the cluster's API", func() (bool, string) {
		out, err := doctest.Run(ctx, doctest.Command{Block: "kubectl -n shop get events.events.kubevents.io\n", Dir: sh.Dir, Env: sh.Env})
		return err == nil && strings.Contains(out, "BackOff"), out
	})
	sh.Run(t, "kubectl delete -k my-aggregated\n")
	nodecluster.WaitFor(t, 3*time.Minute, "nothing of the aggregated overlay left", func() (bool, string) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		left := clustertest.Leftovers(ctx, cs)
		return apierrors.IsNotFound(err) && len(left) == 0, fmt.Sprintf("namespace: %v; %v", err, left)
	})
}

// aggregatedOverlay writes, in dir, install.md's kustomization for the
// aggregated API plus the ephemeral component, and the certificate
// Secret and image of the overlay in tls (the page's my-eventsd).
func aggregatedOverlay(t *testing.T, dir, tls string) {
	t.Helper()
	md, err := doctest.Read(clustertest.InstallDoc)
	if err != nil {
		t.Fatal(err)
	}
	var page string
	for _, b := range doctest.Blocks(md, "yaml") {
		if strings.Contains(b, "components/aggregated") {
			page = b
		}
	}
	if page == "" {
		t.Fatalf("%s has no yaml block listing the aggregated component", clustertest.InstallDoc)
	}
	mine, err := os.ReadFile(filepath.Join(tls, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The page's block, then the my-eventsd overlay's Secret and images.
	text := strings.Replace(page, "  - ../deploy/kustomize/components/aggregated\n",
		"  - ../deploy/kustomize/components/aggregated\n  - ../deploy/kustomize/components/ephemeral\n", 1)
	text += string(mine[strings.Index(string(mine), "secretGenerator:"):])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		b, err := os.ReadFile(filepath.Join(tls, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("my-aggregated/kustomization.yaml:\n%s", text)
}
