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
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kubevents/kubevents/internal/buildcache"
	"github.com/kubevents/kubevents/internal/doctest"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/helmbin"
	"github.com/kubevents/kubevents/internal/kubeapiserver"
	"github.com/kubevents/kubevents/internal/podrun"
)

// installDoc is the page whose commands TestInstallCommands runs.
const installDoc = "docs/install.md"

// notRun are the page's ```sh blocks no test here runs, by their first
// line, with the reason. Every other block belongs to a scenario below.
var notRun = map[string]string{
	"go run -C tools/image .": "test/image runs it (with --output in a temporary directory instead of bin/)",
	"go run -C tools/image . --name registry.example.com/kubevents/eventsd:v0.1.0":     "it pushes to a registry",
	"kubectl -n kubevents port-forward svc/eventsd 8080 &":                             "it needs a running pod, and kube-apiserver here has no nodes: the block after it runs against eventsd started as the installed pod would run (its flags, ConfigMap and Secret, delegating to this kube-apiserver), its address standing for the forwarded port",
	"kubectl -n kubevents create secret generic eventsd-etcd-client \\":                "it reads etcd's client certificate files",
	"helm upgrade eventsd deploy/helm/eventsd --namespace kubevents --reuse-values \\": "test/cluster runs it on a real node, where the aggregator reaches eventsd's pod",
}

// env is what a step's check sees: the cluster, the directory the blocks
// run in, and what the block printed.
type env struct {
	cs         kubernetes.Interface
	kubeconfig string
	dir        string
	out        string
}

// step is one block of a scenario, by its first line, and what must hold
// after it ran. A forwarded block reads eventsd through `kubectl
// port-forward`: it runs against eventsd started as the installed
// workload's pod (podrun), whose address replaces 127.0.0.1:8080.
type step struct {
	first     string
	forwarded bool
	check     func(t *testing.T, e env)
}

// The chart's and the bases' objects the checks look at.
const (
	ns        = "kubevents"
	imageV1   = "registry.example.com/kubevents/eventsd:v0.1.0"
	mirrorCR  = "eventsd-mirror"
	pvcOfPod0 = "data-eventsd-0"
	tlsSecret = "eventsd-tls"
	viewerSA  = "eventsd-viewer"
	// The blocks that read eventsd: the CA out of its Secret, then
	// kubectl and evctl with a viewer's token over HTTPS.
	caBlock   = "kubectl -n kubevents get secret eventsd-tls -o jsonpath='{.data.ca\\.crt}' | base64 -d >eventsd-ca.crt"
	readBlock = "kubectl --server https://127.0.0.1:8080 --certificate-authority eventsd-ca.crt \\"
)

// TestInstallCommands runs docs/install.md's commands as a user would
// (bash, in a directory holding deploy/, with helm, kubectl and evctl on
// PATH) against a real kube-apiserver, one new kube-apiserver per set-up,
// and checks what each installs, upgrades and uninstalls, and that the
// documented way of reading the installed eventsd (the CA from its
// Secret, a viewer's token, kubectl and evctl over HTTPS) lists events.
// kube-apiserver here has no controllers and no nodes: objects are
// created, and no pod runs; the test does what the page's deletions wait
// for of kube-controller-manager (finalizers). Every ```sh block of the
// page is run or listed in notRun with why.
func TestInstallCommands(t *testing.T) {
	blocks := docBlocks(t, installDoc)
	var installedCert []byte // the generated certificate, across the upgrade
	read := []step{
		{caBlock, false, func(t *testing.T, e env) {
			secret, err := e.cs.CoreV1().Secrets(ns).Get(context.Background(), tlsSecret, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ca, err := os.ReadFile(filepath.Join(e.dir, "eventsd-ca.crt"))
			if err != nil || len(ca) == 0 || !bytes.Equal(ca, secret.Data["ca.crt"]) {
				t.Errorf("eventsd-ca.crt: %q, %v; want the Secret's ca.crt", ca, err)
			}
		}},
		{readBlock, true, func(t *testing.T, e env) {
			// kubectl's line and evctl's.
			if n := strings.Count(e.out, "web-1"); n != 2 || !strings.Contains(e.out, "Started") {
				t.Errorf("kubectl and evctl with the viewer's token printed %d lines of web-1's event, want 2:\n%s", n, e.out)
			}
		}},
	}
	scenarios := []struct {
		name  string
		needs string // a command the scenario needs on PATH
		steps []step
	}{
		{"helm mirror", "", append(append([]step{
			{"helm install eventsd deploy/helm/eventsd --namespace kubevents --create-namespace \\", false, func(t *testing.T, e env) {
				ss := statefulSet(t, e.cs)
				args := ss.Spec.Template.Spec.Containers[0].Args
				if img := ss.Spec.Template.Spec.Containers[0].Image; img != imageV1 || !slices.Contains(args, "--source=in-cluster") || !slices.Contains(args, "--tls-cert-file=/etc/eventsd/tls/tls.crt") {
					t.Errorf("the StatefulSet runs %s %v, want %s mirroring the cluster over HTTPS", img, args, imageV1)
				}
				if _, err := e.cs.RbacV1().ClusterRoles().Get(context.Background(), mirrorCR, metav1.GetOptions{}); err != nil {
					t.Errorf("the mirror's ClusterRole: %v", err)
				}
				secret, err := e.cs.CoreV1().Secrets(ns).Get(context.Background(), tlsSecret, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("the generated certificate's Secret: %v", err)
				}
				installedCert = secret.Data["tls.crt"]
				checkViewer(t, e)
				// The claim the StatefulSet controller would make for
				// its pod, for the uninstall to delete.
				claim := ss.Spec.VolumeClaimTemplates[0].DeepCopy()
				claim.ObjectMeta = metav1.ObjectMeta{Name: pvcOfPod0, Namespace: ns, Labels: claim.Labels}
				if _, err := e.cs.CoreV1().PersistentVolumeClaims(ns).Create(context.Background(), claim, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}},
		}, read...),
			step{"helm upgrade eventsd deploy/helm/eventsd --namespace kubevents --reuse-values --set image.tag=v0.2.0", false, func(t *testing.T, e env) {
				ss := statefulSet(t, e.cs)
				if img := ss.Spec.Template.Spec.Containers[0].Image; img != "registry.example.com/kubevents/eventsd:v0.2.0" {
					t.Errorf("after the upgrade the StatefulSet runs %s", img)
				}
				secret, err := e.cs.CoreV1().Secrets(ns).Get(context.Background(), tlsSecret, metav1.GetOptions{})
				if err != nil || !bytes.Equal(secret.Data["tls.crt"], installedCert) {
					t.Errorf("the upgrade changed the generated certificate (%v): clients' eventsd-ca.crt would no longer verify it", err)
				}
			}},
			step{"helm uninstall eventsd --namespace kubevents", false, func(t *testing.T, e env) {
				ctx := context.Background()
				if _, err := e.cs.AppsV1().StatefulSets(ns).Get(ctx, "eventsd", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("the StatefulSet after helm uninstall: %v", err)
				}
				if _, err := e.cs.RbacV1().ClusterRoles().Get(ctx, mirrorCR, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("the mirror's ClusterRole after helm uninstall: %v", err)
				}
				if _, err := e.cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvcOfPod0, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("the claim after the uninstall: %v", err)
				}
			}})},
		{"helm emptyDir", "", []step{
			{"helm install eventsd deploy/helm/eventsd --namespace kubevents --create-namespace --set storage.persistence.enabled=false", false, func(t *testing.T, e env) {
				ss := statefulSet(t, e.cs)
				data := slices.IndexFunc(ss.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "data" && v.EmptyDir != nil })
				if len(ss.Spec.VolumeClaimTemplates) != 0 || data < 0 {
					t.Errorf("the StatefulSet claims %v, volumes %v; want an emptyDir data and no claim", ss.Spec.VolumeClaimTemplates, ss.Spec.Template.Spec.Volumes)
				}
			}},
		}},
		{"kubectl mirror", "openssl", append(append([]step{
			{"kubectl apply -k deploy/kustomize/mirror", false, func(t *testing.T, e env) {
				if img := statefulSet(t, e.cs).Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/kubevents/eventsd:v0.1.0" {
					t.Errorf("the base's StatefulSet runs %s", img)
				}
			}},
			{"mkdir -p my-eventsd", false, func(t *testing.T, e env) {
				c := statefulSet(t, e.cs).Spec.Template.Spec.Containers[0]
				if c.Image != imageV1 || !slices.Contains(c.Args, "--export-config=/etc/eventsd/export/export.yaml") || !slices.Contains(c.Args, "--tls-cert-file=/etc/eventsd/tls/tls.crt") {
					t.Errorf("the overlay's StatefulSet runs %s %v, want %s exporting over HTTPS", c.Image, c.Args, imageV1)
				}
				checkOneNamespace(t, e, "my-eventsd")
				checkViewer(t, e)
			}},
		}, read...),
			step{"kubectl delete -k my-eventsd", false, func(t *testing.T, e env) {
				ctx := context.Background()
				if _, err := e.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("the namespace after kubectl delete -k: %v", err)
				}
				if _, err := e.cs.RbacV1().ClusterRoles().Get(ctx, mirrorCR, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("the mirror's ClusterRole after kubectl delete -k: %v", err)
				}
			}})},
		{"helm replicas", "", []step{
			{"cat >replicas.yaml <<'EOF'", false, nil},
			{"helm install eventsd deploy/helm/eventsd --namespace kubevents --values replicas.yaml", false, func(t *testing.T, e env) {
				d := deployment(t, e.cs)
				args := d.Spec.Template.Spec.Containers[0].Args
				if *d.Spec.Replicas != 3 || !slices.Contains(args, "--etcd-servers=https://etcd-events.kube-system.svc:2379") || !slices.Contains(args, "--etcd-certfile=/etc/eventsd/etcd-tls/tls.crt") || slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--source") }) {
					t.Errorf("the Deployment: %d replicas, %v; want 3 over the events etcd with its client certificate, not mirroring", *d.Spec.Replicas, args)
				}
				if _, err := e.cs.RbacV1().ClusterRoles().Get(context.Background(), mirrorCR, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("replicas that do not mirror got the mirror's ClusterRole: %v", err)
				}
			}},
		}},
		{"kubectl replicas", "", []step{
			{"kubectl apply -k deploy/kustomize/replicas", false, func(t *testing.T, e env) {
				d := deployment(t, e.cs)
				if *d.Spec.Replicas != 2 || !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--storage-backend=etcd") {
					t.Errorf("the base's Deployment: %d replicas, %v", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Args)
				}
			}},
		}},
	}

	// Every block is run by a scenario (the reading blocks by two) or
	// listed in notRun.
	byFirst := map[string]string{}
	for _, b := range blocks {
		first, _, _ := strings.Cut(b, "\n")
		if _, dup := byFirst[first]; dup {
			t.Fatalf("two blocks of %s start with %q: the test cannot tell them apart", installDoc, first)
		}
		byFirst[first] = b
	}
	claimed := map[string]bool{}
	for first := range notRun {
		claimed[first] = true
	}
	for _, s := range scenarios {
		for _, st := range s.steps {
			if _, ok := notRun[st.first]; ok {
				t.Fatalf("the block %q is both run and in notRun", st.first)
			}
			claimed[st.first] = true
		}
	}
	for first := range byFirst {
		if !claimed[first] {
			t.Errorf("%s has a block no test runs, starting %q: add it to a scenario here, or to notRun with why", installDoc, first)
		}
	}
	for first := range claimed {
		if _, ok := byFirst[first]; !ok {
			t.Errorf("%s has no block starting %q any more", installDoc, first)
		}
	}
	if t.Failed() {
		return
	}

	bin := pathWith(t, map[string]string{"helm": requireHelm(t), "kubectl": eventsdtest.Kubectl(t), "evctl": buildEvctl(t)})
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			if s.needs != "" {
				if _, err := exec.LookPath(s.needs); err != nil {
					t.Skipf("the page's commands need %s: %v", s.needs, err)
				}
			}
			kas := kubeapiserver.Start(t, kubeapiserver.Options{Users: []kubeapiserver.User{{Name: tokenUser}}})
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
				block := byFirst[st.first]
				kubeconfig := kas.Kubeconfig()
				if st.forwarded {
					block = strings.ReplaceAll(block, "127.0.0.1:8080", forward(t, kas, cs))
					kubeconfig = asTokenUser(t, kas, cs)
				}
				out := runBlock(t, dir, bin, kubeconfig, block)
				if st.check != nil {
					st.check(t, env{cs: cs, kubeconfig: kas.Kubeconfig(), dir: dir, out: out})
				}
				if t.Failed() {
					return
				}
			}
		})
	}
}

// forward starts eventsd as the pod of the installed workload would run
// (podrun: its authentication, authorization and TLS flags with the files
// of its ConfigMaps and Secrets as installed, delegating to kas with its
// ServiceAccount's token), writes an event as kube-apiserver's admin, and
// returns eventsd's address: what `kubectl port-forward svc/eventsd 8080`
// would reach.
func forward(t *testing.T, kas *kubeapiserver.Cluster, cs kubernetes.Interface) string {
	t.Helper()
	ctx := context.Background()
	var pod corev1.PodTemplateSpec
	if ss, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "eventsd", metav1.GetOptions{}); err == nil {
		pod = ss.Spec.Template
	} else if d, err := cs.AppsV1().Deployments(ns).Get(ctx, "eventsd", metav1.GetOptions{}); err == nil {
		pod = d.Spec.Template
	} else {
		t.Fatalf("no eventsd workload installed: %v", err)
	}
	files := map[string][]byte{}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the pod's ConfigMap: %v", err)
			}
			for k, d := range cm.Data {
				files[k] = []byte(d)
			}
		case v.Secret != nil:
			s, err := cs.CoreV1().Secrets(ns).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the pod's Secret: %v", err)
			}
			for k, d := range s.Data {
				files[k] = d
			}
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev := podrun.Start(t, podrun.Pod{Args: pod.Spec.Containers[0].Args, Files: files}, podrun.Cluster{URL: kas.URL(), CA: kas.CA(), Token: tr.Status.Token})
	admin := ev.RESTConfig()
	admin.BearerToken = kas.AdminToken()
	e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web-1.a", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-1"}, Reason: "Started", Message: "Started container web", Type: corev1.EventTypeNormal}
	if _, err := kubernetes.NewForConfigOrDie(admin).CoreV1().Events("default").Create(ctx, e, metav1.CreateOptions{}); err != nil {
		t.Fatalf("an event written to eventsd as kube-apiserver's admin: %v", err)
	}
	return ev.Addr
}

// tokenUser runs the blocks that read eventsd: a user who may create the
// viewer's tokens and nothing else, so that only the viewer's token can
// list events (kubectl and evctl send the kubeconfig's credentials when
// --token is empty).
const tokenUser = "token-user"

// asTokenUser lets tokenUser create eventsd-viewer's tokens in kubevents
// and returns a kubeconfig as tokenUser.
func asTokenUser(t *testing.T, kas *kubeapiserver.Cluster, cs kubernetes.Interface) string {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: tokenUser, Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{viewerSA}, Verbs: []string{"create"}}}}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: tokenUser, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: tokenUser},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: tokenUser}}}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	kc, err := kas.KubeconfigAs(tokenUser)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// checkViewer: the installed ServiceAccount eventsd-viewer may read
// events in every namespace, and write none.
func checkViewer(t *testing.T, e env) {
	t.Helper()
	for verb, want := range map[string]string{"list": "yes", "watch": "yes", "create": "no", "delete": "no"} {
		r := eventsdtest.RunKubectl(context.Background(), t, e.kubeconfig, nil, "auth", "can-i", verb, "events", "--all-namespaces", "--as=system:serviceaccount:"+ns+":"+viewerSA)
		if got := strings.TrimSpace(r.Stdout); got != want {
			t.Errorf("may %s %s events? %q (%v %s), want %s", viewerSA, verb, got, r.Err, r.Stderr, want)
		}
	}
}

// checkOneNamespace: every namespaced object of the overlay in dir names
// the namespace kubevents (an object without one would land in
// kubectl's default namespace, away from the pod that mounts it), and
// nothing was installed in default.
func checkOneNamespace(t *testing.T, e env, overlay string) {
	t.Helper()
	r := eventsdtest.RunKubectl(context.Background(), t, "", nil, "kustomize", filepath.Join(e.dir, overlay))
	if r.Err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", overlay, r.Err, r.Stderr)
	}
	for _, doc := range strings.Split(r.Stdout, "\n---\n") {
		var o metav1.PartialObjectMetadata
		if err := sigsyaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		switch o.Kind {
		case "Namespace", "ClusterRole", "ClusterRoleBinding", "APIService":
		default:
			if o.Namespace != ns {
				t.Errorf("%s: %s %s in namespace %q, want %s", overlay, o.Kind, o.Name, o.Namespace, ns)
			}
		}
	}
	ctx := context.Background()
	cms, err := e.cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := e.cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cms.Items)+len(secrets.Items) != 0 {
		t.Errorf("ConfigMaps %v and Secrets %v in namespace default", cms.Items, secrets.Items)
	}
}

// docBlocks are the ```sh blocks of the page at path (from the module
// root).
func docBlocks(t *testing.T, path string) []string {
	t.Helper()
	md, err := doctest.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	out := doctest.Blocks(md, "sh")
	if len(out) == 0 {
		t.Fatalf("%s has no ```sh block", path)
	}
	return out
}

// buildEvctl builds cmd/evctl into the test's directory.
func buildEvctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "evctl")
	cmd := exec.Command(buildcache.GoTool(), "build", "-o", bin, "./cmd/evctl")
	cmd.Dir = root()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building evctl: %v\n%s", err, out)
	}
	return bin
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

// pathWith is a directory holding the tools (name to binary), for PATH.
func pathWith(t *testing.T, tools map[string]string) string {
	dir := t.TempDir()
	for name, target := range tools {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runBlock runs a block with bash (stopping at the first failing
// command) in dir, with kubeconfig and the tools in bin first on PATH,
// and returns what it printed; helm keeps its caches and configuration in
// the test's directories.
func runBlock(t *testing.T, dir, bin, kubeconfig, block string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	home := t.TempDir()
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	start := time.Now()
	out, err := doctest.Run(ctx, doctest.Command{Block: block, Dir: dir, Env: env})
	t.Logf("%s(%v)\n%s", block, time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("%s's block failed: %v", installDoc, err)
	}
	return out
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
