package readme

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/helmbin"
	"github.com/kubevents/kubevents/internal/kubeapiserver"
)

// installSection is the README section whose commands TestInstallCommands
// runs.
const installSection = "## Installing in a cluster"

// notRun are the section's ```sh blocks no test here runs, by their first
// line, with the reason. Every other block belongs to a scenario below.
var notRun = map[string]string{
	"go run -C tools/image .": "test/image runs it (with --output in a temporary directory instead of bin/)",
	"go run -C tools/image . --name registry.example.com/kubevents/eventsd:v0.1.0": "it pushes to a registry",
	"kubectl -n kubevents port-forward svc/eventsd 8080 &":                         "it needs a running pod, and kube-apiserver here has no nodes (the token and RBAC it relies on are checked after the events-reader block; test/deploy's TestDelegatedAuth runs the delegation)",
	"kubectl -n kubevents create secret generic eventsd-etcd-client \\":            "it reads etcd's client certificate files",
}

// step is one README block of a scenario, by its first line, and what must
// hold after it ran.
type step struct {
	first string
	check func(t *testing.T, cs kubernetes.Interface, kc string)
}

// The chart's and the bases' objects the checks look at.
const (
	ns        = "kubevents"
	imageV1   = "registry.example.com/kubevents/eventsd:v0.1.0"
	mirrorCR  = "eventsd-mirror"
	pvcOfPod0 = "data-eventsd-0"
)

// TestInstallCommands runs README's "Installing in a cluster" commands as
// a user would (bash, in a directory holding deploy/, with helm and
// kubectl on PATH) against a real kube-apiserver, one new kube-apiserver
// per set-up, and checks what each installs, upgrades and uninstalls.
// kube-apiserver here has no controllers and no nodes: objects are
// created, and no pod runs; the test does what the README's deletions wait
// for of kube-controller-manager (finalizers). Every ```sh block of the
// section is run or listed in notRun with why.
func TestInstallCommands(t *testing.T) {
	blocks := sectionBlocks(t, installSection)
	scenarios := []struct {
		name  string
		steps []step
	}{
		{"helm mirror", []step{
			{"helm install eventsd deploy/helm/eventsd --namespace kubevents --create-namespace \\", func(t *testing.T, cs kubernetes.Interface, _ string) {
				ss := statefulSet(t, cs)
				args := ss.Spec.Template.Spec.Containers[0].Args
				if img := ss.Spec.Template.Spec.Containers[0].Image; img != imageV1 || !slices.Contains(args, "--source=in-cluster") {
					t.Errorf("the StatefulSet runs %s %v, want %s mirroring the cluster", img, args, imageV1)
				}
				if _, err := cs.RbacV1().ClusterRoles().Get(context.Background(), mirrorCR, metav1.GetOptions{}); err != nil {
					t.Errorf("the mirror's ClusterRole: %v", err)
				}
				// The claim the StatefulSet controller would make for
				// its pod, for the uninstall to delete.
				claim := ss.Spec.VolumeClaimTemplates[0].DeepCopy()
				claim.ObjectMeta = metav1.ObjectMeta{Name: pvcOfPod0, Namespace: ns, Labels: claim.Labels}
				if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(context.Background(), claim, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}},
			{"kubectl -n kubevents create serviceaccount events-reader", func(t *testing.T, cs kubernetes.Interface, kc string) {
				r := eventsdtest.RunKubectl(context.Background(), t, kc, nil, "auth", "can-i", "list", "events", "--all-namespaces", "--as=system:serviceaccount:kubevents:events-reader")
				if strings.TrimSpace(r.Stdout) != "yes" {
					t.Errorf("may events-reader list events? %q %v %s", r.Stdout, r.Err, r.Stderr)
				}
				r = eventsdtest.RunKubectl(context.Background(), t, kc, nil, "-n", ns, "create", "token", "events-reader")
				if r.Err != nil || strings.Count(strings.TrimSpace(r.Stdout), ".") != 2 {
					t.Errorf("kubectl create token events-reader: %q %v %s", r.Stdout, r.Err, r.Stderr)
				}
			}},
			{"helm upgrade eventsd deploy/helm/eventsd --namespace kubevents --reuse-values --set image.tag=v0.2.0", func(t *testing.T, cs kubernetes.Interface, _ string) {
				ss := statefulSet(t, cs)
				if img := ss.Spec.Template.Spec.Containers[0].Image; img != "registry.example.com/kubevents/eventsd:v0.2.0" {
					t.Errorf("after the upgrade the StatefulSet runs %s", img)
				}
			}},
			{"helm uninstall eventsd --namespace kubevents", func(t *testing.T, cs kubernetes.Interface, _ string) {
				ctx := context.Background()
				if _, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "eventsd", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("the StatefulSet after helm uninstall: %v", err)
				}
				if _, err := cs.RbacV1().ClusterRoles().Get(ctx, mirrorCR, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("the mirror's ClusterRole after helm uninstall: %v", err)
				}
				if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvcOfPod0, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("the claim after the uninstall: %v", err)
				}
			}},
		}},
		{"kubectl mirror", []step{
			{"kubectl apply -k deploy/kustomize/mirror", func(t *testing.T, cs kubernetes.Interface, _ string) {
				if img := statefulSet(t, cs).Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/kubevents/eventsd:v0.1.0" {
					t.Errorf("the base's StatefulSet runs %s", img)
				}
			}},
			{"mkdir -p my-eventsd", func(t *testing.T, cs kubernetes.Interface, _ string) {
				c := statefulSet(t, cs).Spec.Template.Spec.Containers[0]
				if c.Image != imageV1 || !slices.Contains(c.Args, "--export-config=/etc/eventsd/export/export.yaml") {
					t.Errorf("the overlay's StatefulSet runs %s %v, want %s exporting", c.Image, c.Args, imageV1)
				}
			}},
			{"kubectl delete -k my-eventsd", func(t *testing.T, cs kubernetes.Interface, _ string) {
				ctx := context.Background()
				if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("the namespace after kubectl delete -k: %v", err)
				}
				if _, err := cs.RbacV1().ClusterRoles().Get(ctx, mirrorCR, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("the mirror's ClusterRole after kubectl delete -k: %v", err)
				}
			}},
		}},
		{"helm replicas", []step{
			{"cat >replicas.yaml <<'EOF'", nil},
			{"helm install eventsd deploy/helm/eventsd --namespace kubevents --values replicas.yaml", func(t *testing.T, cs kubernetes.Interface, _ string) {
				d := deployment(t, cs)
				args := d.Spec.Template.Spec.Containers[0].Args
				if *d.Spec.Replicas != 3 || !slices.Contains(args, "--etcd-servers=https://etcd-events.kube-system.svc:2379") || !slices.Contains(args, "--etcd-certfile=/etc/eventsd/etcd-tls/tls.crt") || slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--source") }) {
					t.Errorf("the Deployment: %d replicas, %v; want 3 over the events etcd with its client certificate, not mirroring", *d.Spec.Replicas, args)
				}
				if _, err := cs.RbacV1().ClusterRoles().Get(context.Background(), mirrorCR, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("replicas that do not mirror got the mirror's ClusterRole: %v", err)
				}
			}},
		}},
		{"kubectl replicas", []step{
			{"kubectl apply -k deploy/kustomize/replicas", func(t *testing.T, cs kubernetes.Interface, _ string) {
				d := deployment(t, cs)
				if *d.Spec.Replicas != 2 || !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--storage-backend=etcd") {
					t.Errorf("the base's Deployment: %d replicas, %v", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Args)
				}
			}},
		}},
	}

	// Every block is run by one scenario or listed in notRun.
	byFirst := map[string]string{}
	for _, b := range blocks {
		first, _, _ := strings.Cut(b, "\n")
		if _, dup := byFirst[first]; dup {
			t.Fatalf("two blocks of %q start with %q: the test cannot tell them apart", installSection, first)
		}
		byFirst[first] = b
	}
	claimed := map[string]bool{}
	for first := range notRun {
		claimed[first] = true
	}
	for _, s := range scenarios {
		for _, st := range s.steps {
			if claimed[st.first] {
				t.Fatalf("the block %q is claimed twice", st.first)
			}
			claimed[st.first] = true
		}
	}
	for first := range byFirst {
		if !claimed[first] {
			t.Errorf("README's %q has a block no test runs, starting %q: add it to a scenario here, or to notRun with why", installSection, first)
		}
	}
	for first := range claimed {
		if _, ok := byFirst[first]; !ok {
			t.Errorf("README's %q has no block starting %q any more", installSection, first)
		}
	}
	if t.Failed() {
		return
	}

	bin := pathWith(t, requireHelm(t), eventsdtest.Kubectl(t))
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			kas := kubeapiserver.Start(t, kubeapiserver.Options{})
			cs, err := kubernetes.NewForConfig(kas.RESTConfig())
			if err != nil {
				t.Fatal(err)
			}
			stop := finalizers(t, cs)
			defer stop()
			dir := t.TempDir()
			if err := os.CopyFS(filepath.Join(dir, "deploy"), os.DirFS(filepath.Join(root(), "deploy"))); err != nil {
				t.Fatal(err)
			}
			for _, st := range s.steps {
				runBlock(t, dir, bin, kas.Kubeconfig(), byFirst[st.first])
				if st.check != nil {
					st.check(t, cs, kas.Kubeconfig())
				}
				if t.Failed() {
					return
				}
			}
		})
	}
}

// sectionBlocks are the ```sh blocks of README's section title.
func sectionBlocks(t *testing.T, title string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+title+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", title)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	var out []string
	for _, m := range fenceRE.FindAllStringSubmatch(rest, -1) {
		if m[1] == "sh" {
			out = append(out, m[2])
		}
	}
	if len(out) == 0 {
		t.Fatalf("README's %q has no ```sh block", title)
	}
	return out
}

// requireHelm returns helm, or skips when it is not built and a first
// build does not fit in the test binary's time.
func requireHelm(t *testing.T) string {
	t.Helper()
	if !helmbin.Cached() {
		if dl, ok := t.Deadline(); ok && time.Until(dl) < helmbin.FirstBuildTime {
			t.Skipf("helm is not built yet, and a first build (up to %v) does not fit in the %v left: build it once with `go run ./internal/helmbin/buildhelm` (.ci/run does)", helmbin.FirstBuildTime, time.Until(dl).Round(time.Second))
		}
	}
	bin, err := helmbin.Binary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// pathWith is a directory holding helm and kubectl under those names, for
// PATH.
func pathWith(t *testing.T, helm, kubectl string) string {
	dir := t.TempDir()
	for name, target := range map[string]string{"helm": helm, "kubectl": kubectl} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runBlock runs a README block with bash (stopping at the first failing
// command) in dir, with kubeconfig and the tools in bin first on PATH;
// helm keeps its caches and configuration in the test's directories.
func runBlock(t *testing.T, dir, bin, kubeconfig, block string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+block)
	cmd.Dir = dir
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s(%v)\n%s", block, time.Since(start).Round(time.Millisecond), out.String())
	if err != nil {
		t.Fatalf("README block failed: %v", err)
	}
}

func statefulSet(t *testing.T, cs kubernetes.Interface) *appsv1.StatefulSet {
	t.Helper()
	ss, err := cs.AppsV1().StatefulSets(ns).Get(context.Background(), "eventsd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

func deployment(t *testing.T, cs kubernetes.Interface) *appsv1.Deployment {
	t.Helper()
	d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), "eventsd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// finalizers does what the README's deletions wait for of
// kube-controller-manager, which this kube-apiserver runs without: a
// terminating namespace is finalized (kubectl delete -k has deleted what
// was in it), and a deleted claim loses its pvc-protection finalizer (no
// pod uses it). stop ends it and waits for it.
func finalizers(t *testing.T, cs kubernetes.Interface) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	follow := func(w func(context.Context) (watch.Interface, error), handle func(obj any) error) {
		defer wg.Done()
		for ctx.Err() == nil {
			wi, err := w(ctx)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("watch: %v", err)
				}
				return
			}
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					if err := handle(ev.Object); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
						t.Errorf("finalizing: %v", err)
					}
				}
			}
			wi.Stop()
		}
	}
	wg.Add(2)
	go follow(func(ctx context.Context) (watch.Interface, error) {
		return cs.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{})
	}, func(obj any) error {
		n, ok := obj.(*corev1.Namespace)
		if !ok || n.DeletionTimestamp == nil || len(n.Spec.Finalizers) == 0 {
			return nil
		}
		n = n.DeepCopy()
		n.Spec.Finalizers = nil
		_, err := cs.CoreV1().Namespaces().Finalize(ctx, n, metav1.UpdateOptions{})
		return err
	})
	go follow(func(ctx context.Context) (watch.Interface, error) {
		return cs.CoreV1().PersistentVolumeClaims("").Watch(ctx, metav1.ListOptions{})
	}, func(obj any) error {
		c, ok := obj.(*corev1.PersistentVolumeClaim)
		if !ok || c.DeletionTimestamp == nil || len(c.Finalizers) == 0 {
			return nil
		}
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			c, err := cs.CoreV1().PersistentVolumeClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			c.Finalizers = nil
			_, err = cs.CoreV1().PersistentVolumeClaims(c.Namespace).Update(ctx, c, metav1.UpdateOptions{})
			return err
		})
	})
	return func() {
		cancel()
		wg.Wait()
	}
}
