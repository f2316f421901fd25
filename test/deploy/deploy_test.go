// Package deploy_test checks what deploy/ installs: every kustomize
// variant and every chart render (the chart's ci/*-values.yaml and its
// defaults) is applied with `kubectl apply --dry-run=server` to a real
// kube-apiserver (internal/kubeapiserver), in a namespace that enforces
// and warns on the restricted Pod Security Standard, and checked for what
// the issue asks of it (non-root, read-only root filesystem, probes, the
// least ClusterRole, ...); the chart is linted with helm (internal/helmbin);
// and the delegated authentication the manifests configure is run for
// real: eventsd with their webhook kubeconfig against kube-apiserver.
package deploy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kubevents/kubevents/export/exportconfig"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/helmbin"
	"github.com/kubevents/kubevents/internal/kubeapiserver"
	"github.com/kubevents/kubevents/internal/podrun"
	"github.com/kubevents/kubevents/lineage"
	"github.com/kubevents/kubevents/retention"
)

// TestMain finds (or builds) kubectl and eventsd before any test starts,
// so that no test's own time limit is spent building them. helm is found
// or built by the first test that needs it (requireHelm).
func TestMain(m *testing.M) {
	if err := eventsdtest.Prepare(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := closeSharedAPIServer(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// shared is the package's one kube-apiserver: the dry runs of every
// variant and the delegated authentication's real ServiceAccounts and
// RBAC share it (a kube-apiserver and its etcd take seconds to start, and
// the tests run one after the other: nothing they apply for real changes
// what a dry run answers).
var shared struct {
	once sync.Once
	c    *kubeapiserver.Cluster
	dir  string
	err  error
}

// sharedAPIServer returns the package's kube-apiserver, started by the
// first test that asks (skipped, saying why, where it cannot be built),
// stopped by TestMain after the last; its token users are the delegated
// authentication test's.
func sharedAPIServer(t *testing.T) *kubeapiserver.Cluster {
	t.Helper()
	kubeapiserver.RequireBinaries(t)
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "deploy-kube-apiserver-"); shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		shared.c, shared.err = kubeapiserver.Launch(ctx, kubeapiserver.Options{Dir: shared.dir,
			Users: []kubeapiserver.User{{Name: "reader"}, {Name: "nobody"}, {Name: notesUser}}})
	})
	if shared.err != nil {
		t.Fatalf("the package's kube-apiserver: %v", shared.err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", shared.c.LogTails(40))
		}
	})
	return shared.c
}

// closeSharedAPIServer stops the package's kube-apiserver, if started.
func closeSharedAPIServer() error {
	if shared.dir == "" {
		return nil
	}
	defer os.RemoveAll(shared.dir)
	if shared.c == nil {
		return nil
	}
	return shared.c.Close()
}

// requireHelm returns helm (helmbin.ForTest).
func requireHelm(t *testing.T) string {
	t.Helper()
	return helmbin.ForTest(t)
}

// repo is the repository root.
func repo() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	chartDir     = filepath.Join(repo(), "deploy", "helm", "eventsd")
	kustomizeDir = filepath.Join(repo(), "deploy", "kustomize")
)

// helm runs the helm binary and returns its stdout; it fails the test on
// an error.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	return helmbin.Run(t, args...)
}

// chartVariants are the chart's values files: the defaults, and each of
// ci/*-values.yaml.
func chartVariants(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("want the chart's four ci/*-values.yaml variants, found %v", files)
	}
	return append([]string{""}, files...)
}

// TestChartLint: `helm lint --strict` passes for the defaults and every
// ci values file, and a values file that is not a set-up the chart can
// install fails to render with a message saying what is wrong.
func TestChartLint(t *testing.T) {
	for _, values := range chartVariants(t) {
		args := []string{"lint", "--strict", chartDir}
		if values != "" {
			args = append(args, "--values", values)
		}
		out := helm(t, args...)
		if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
			t.Errorf("helm %s:\n%s", strings.Join(args, " "), out)
		}
	}
	for _, bad := range []struct{ set, want string }{
		{"storage.backend=etcd", "storage.backend etcd needs storage.etcd.servers"},
		{"storage.backend=sqlite", `storage.backend must be pebble or etcd, not "sqlite"`},
	} {
		bin := requireHelm(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, bin, "template", "x", chartDir, "--set", bad.set).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), bad.want) {
			t.Errorf("helm template --set %s: %v, %s; want a failure saying %q", bad.set, err, out, bad.want)
		}
	}
}

// variant is one set of manifests to check and dry-run.
type variant struct {
	name string
	// namespace the objects go to (helm: the release's; kustomize: the
	// bases' own).
	namespace string
	manifests []byte
	// serviceMonitor: the variant is expected to have one.
	serviceMonitor bool
	// exports: the variant is expected to export (--export-config).
	exports bool
	// emptyDir: the variant is expected to keep its pebble store on an
	// emptyDir rather than a claim.
	emptyDir bool
	// storageClass is the claim's expected storageClassName; empty:
	// none set.
	storageClass string
	// noLineage: a mirror is expected without the lineage's RBAC.
	noLineage bool
}

// kustomizeVariants renders the two bases alone, and overlays of them
// with the components (the ServiceMonitor, HTTPS, TLS to etcd).
func kustomizeVariants(t *testing.T) []variant {
	t.Helper()
	overlay := func(base, extra string, components ...string) string {
		dir := t.TempDir()
		// kustomize takes only relative paths.
		rel := func(p string) string {
			r, err := filepath.Rel(dir, p)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\ncomponents:\n", rel(filepath.Join(kustomizeDir, base)))
		for _, c := range components {
			fmt.Fprintf(&b, "- %s\n", rel(filepath.Join(kustomizeDir, "components", c)))
		}
		b.WriteString(extra)
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	var vs []variant
	// The storage class patch components/ephemeral's comment shows.
	const classPatch = `patches:
- target: {kind: StatefulSet, name: eventsd}
  patch: |-
    - {op: add, path: /spec/volumeClaimTemplates/0/spec/storageClassName, value: fast-ssd}
`
	for _, v := range []struct {
		name, dir             string
		sm, exports, emptyDir bool
		storageClass          string
	}{
		{"kustomize/mirror", filepath.Join(kustomizeDir, "mirror"), false, false, false, ""},
		{"kustomize/replicas", filepath.Join(kustomizeDir, "replicas"), false, false, false, ""},
		{"kustomize/mirror+export+servicemonitor+tls", overlay("mirror", "", "export", "servicemonitor", "tls"), true, true, false, ""},
		{"kustomize/replicas+etcd-tls+export+servicemonitor+tls", overlay("replicas", "", "etcd-tls", "export", "servicemonitor", "tls"), true, true, false, ""},
		{"kustomize/mirror+ephemeral", overlay("mirror", "", "ephemeral"), false, false, true, ""},
		{"kustomize/mirror+storage-class", overlay("mirror", classPatch), false, false, false, "fast-ssd"},
		{"kustomize/mirror+tls+aggregated", overlay("mirror", "", "tls", "aggregated"), false, false, false, ""},
		{"kustomize/replicas+tls+aggregated", overlay("replicas", "", "tls", "aggregated"), false, false, false, ""},
	} {
		r := kubectl(t, nil, "", "kustomize", v.dir)
		if r.Err != nil {
			t.Fatalf("kubectl kustomize %s: %v\n%s", v.dir, r.Err, r.Stderr)
		}
		vs = append(vs, variant{name: v.name, namespace: "kubevents", manifests: []byte(r.Stdout), serviceMonitor: v.sm, exports: v.exports,
			emptyDir: v.emptyDir, storageClass: v.storageClass})
	}
	return vs
}

// storageClassRE finds a values file's storage.persistence.storageClassName.
var storageClassRE = regexp.MustCompile(`(?m)^    storageClassName: (\S+)$`)

// helmNamespace is where the chart's renders are dry-run.
const helmNamespace = "eventsd-chart"

// chartRenders renders the chart for each values file, as `helm install`
// would in helmNamespace.
func chartRenders(t *testing.T) []variant {
	t.Helper()
	var vs []variant
	for _, values := range chartVariants(t) {
		args := []string{"template", "eventsd", chartDir, "--namespace", helmNamespace, "--kube-version", "1.37.2"}
		name := "helm/defaults"
		if values != "" {
			args = append(args, "--values", values)
			name = "helm/" + strings.TrimSuffix(filepath.Base(values), "-values.yaml")
		}
		out := helm(t, args...)
		b, _ := os.ReadFile(values)
		var class string
		if m := storageClassRE.FindSubmatch(b); m != nil {
			class = string(m[1])
		}
		vs = append(vs, variant{name: name, namespace: helmNamespace, manifests: []byte(out),
			serviceMonitor: bytes.Contains(b, []byte("serviceMonitor:\n  enabled: true")),
			exports:        bytes.Contains(b, []byte("export:\n  sinks:\n    - ")),
			emptyDir:       bytes.Contains(b, []byte("persistence:\n    enabled: false")),
			noLineage:      bytes.Contains(b, []byte("lineage:\n  enabled: false")),
			storageClass:   class})
	}
	return vs
}

// TestKustomize: the two kustomize bases, alone and with the components,
// pass the checks of checkVariant and dryRun.
func TestKustomize(t *testing.T) {
	dryRun(t, kustomizeVariants(t))
}

// TestChart: the chart's renders (its defaults and each ci/*-values.yaml,
// as `helm install` in a namespace of their own) pass the checks of
// checkVariant and dryRun.
func TestChart(t *testing.T) {
	dryRun(t, chartRenders(t))
}

// dryRun checks each variant (checkVariant), then applies it with
// `kubectl apply --dry-run=server` to a real kube-apiserver: every object
// passes without a warning (the namespaces enforce and warn on the
// restricted Pod Security Standard, so a pod template it would reject is a
// warning on its workload). The ServiceMonitor CRD the dry runs need is
// this package's stand-in for the Prometheus operator's
// (testdata/servicemonitor-crd.yaml).
func dryRun(t *testing.T, variants []variant) {
	t.Helper()
	for _, v := range variants {
		t.Run(v.name+"/static", func(t *testing.T) { checkVariant(t, v) })
	}

	kas := sharedAPIServer(t)
	kc := kas.Kubeconfig()
	// The bases' namespace, for real, as kubectl apply -k creates it
	// first; the chart's, as `helm install --create-namespace` would,
	// with the same Pod Security labels.
	if r := kubectl(t, nil, kc, "apply", "-f", filepath.Join(kustomizeDir, "common", "namespace.yaml")); r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, r.Stderr)
	}
	ns := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n    pod-security.kubernetes.io/enforce: restricted\n    pod-security.kubernetes.io/warn: restricted\n", helmNamespace)
	if r := kubectl(t, strings.NewReader(ns), kc, "apply", "-f", "-"); r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, r.Stderr)
	}
	if r := kubectl(t, nil, kc, "apply", "-f", filepath.Join("testdata", "servicemonitor-crd.yaml")); r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, r.Stderr)
	}
	if r := kubectl(t, nil, kc, "wait", "--for=condition=Established", "--timeout=60s", "crd/servicemonitors.monitoring.coreos.com"); r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, r.Stderr)
	}

	// A pod template that breaks the restricted standard does warn, and
	// a field the ServiceMonitor CRD does not have fails: the checks
	// below can see what they look for.
	bad := strings.Replace(string(variants[0].manifests), "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true", 1)
	if r := kubectl(t, strings.NewReader(bad), kc, "apply", "--dry-run=server", "--namespace", variants[0].namespace, "-f", "-"); !strings.Contains(r.Stderr, "would violate PodSecurity") {
		t.Fatalf("a pod template allowing privilege escalation gave no Pod Security warning: %v\n%s", r.Err, r.Stderr)
	}
	badSM := "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: x, namespace: kubevents}\nspec:\n  selector: {}\n  endpoints: [{port: http, intervall: 30s}]\n"
	if r := kubectl(t, strings.NewReader(badSM), kc, "apply", "--dry-run=server", "-f", "-"); r.Err == nil || !strings.Contains(r.Stderr, "intervall") {
		t.Fatalf("a ServiceMonitor with an unknown field passed the dry run: %v\n%s", r.Err, r.Stderr)
	}

	for _, v := range variants {
		t.Run(v.name+"/dry-run", func(t *testing.T) {
			// kubectl refuses an object of another namespace than
			// --namespace's (the aggregated set-up's RoleBinding in
			// kube-system): those go in a second apply of their own.
			for ns, manifests := range byNamespace(t, v.manifests, v.namespace) {
				r := kubectl(t, bytes.NewReader(manifests), kc, "apply", "--dry-run=server", "--namespace", ns, "-f", "-")
				if r.Err != nil {
					t.Fatalf("kubectl apply --dry-run=server: %v\n%s\n%s", r.Err, r.Stderr, r.Stdout)
				}
				if strings.Contains(r.Stderr, "Warning") {
					t.Errorf("kubectl apply --dry-run=server warned:\n%s", r.Stderr)
				}
				if n := strings.Count(r.Stdout, "(server dry run)"); n != len(objects(t, manifests)) {
					t.Errorf("%d objects dry-run in %s, want %d:\n%s", n, ns, len(objects(t, manifests)), r.Stdout)
				}
			}
		})
	}
}

// kubectl runs kubectl (with kubeconfig, unless empty) with stdin.
func kubectl(t *testing.T, stdin io.Reader, kubeconfig string, args ...string) eventsdtest.KubectlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if kubeconfig == "" {
		cmd := exec.CommandContext(ctx, eventsdtest.Kubectl(t), args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errb, stdin
		err := cmd.Run()
		return eventsdtest.KubectlResult{Stdout: out.String(), Stderr: errb.String(), Err: err}
	}
	return eventsdtest.RunKubectl(ctx, t, kubeconfig, stdin, args...)
}

// byNamespace splits manifests into the objects of each namespace as
// YAML streams, those without one in def's.
func byNamespace(t *testing.T, manifests []byte, def string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, o := range objects(t, manifests) {
		ns := o.GetNamespace()
		if ns == "" {
			ns = def
		}
		b, err := sigsyaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		out[ns] = append(append(out[ns], "---\n"...), b...)
	}
	return out
}

// objects splits a YAML stream into its objects.
func objects(t *testing.T, manifests []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatal(err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// set is the objects of one variant, by kind.
type set struct {
	all []*unstructured.Unstructured
}

func (s set) ofKind(kind string) []*unstructured.Unstructured {
	var r []*unstructured.Unstructured
	for _, o := range s.all {
		if o.GetKind() == kind {
			r = append(r, o)
		}
	}
	return r
}

// typed converts o to a typed object.
func typed[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	v := new(T)
	if err := apiruntime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, v, true); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return v
}

// flagValue is the value of --name=value in args, and whether it is there.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// leastMirrorRules is all a mirror may do in the cluster without the
// ownership lineage; lineageRules what the lineage adds: reading the
// metadata of lineage.DefaultKinds (RBAC cannot grant metadata alone).
var (
	leastMirrorRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list", "watch"}}}
	lineageRules     = []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "deployments", "statefulsets", "daemonsets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: []string{"get", "list", "watch"}},
	}
)

// TestLineageRules: the lineage's rules of the mirror's ClusterRole grant
// get, list and watch on exactly the kinds eventsd's lineage follows by
// default (lineage.DefaultKinds), so neither can change without the other.
func TestLineageRules(t *testing.T) {
	var granted []string
	for _, r := range lineageRules {
		if !slices.Equal(r.Verbs, []string{"get", "list", "watch"}) {
			t.Errorf("rule %v: verbs %v, want get, list and watch", r, r.Verbs)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				granted = append(granted, schema.GroupResource{Group: g, Resource: res}.String())
			}
		}
	}
	slices.Sort(granted)
	want := slices.Sorted(slices.Values(lineage.DefaultKinds()))
	if !slices.Equal(granted, want) {
		t.Errorf("the lineage's rules grant %v, want lineage.DefaultKinds %v", granted, want)
	}
}

// checkVariant checks one variant's objects:
//   - one workload: a StatefulSet of one with a PersistentVolumeClaim
//     mounted at --data-dir for pebble, a Deployment over etcd otherwise,
//     with a writable volume (emptyDir) at --data-dir for its on-disk
//     index unless --etcd-index=memory;
//   - its pod: non-root (uid 65532), no privilege escalation, every
//     capability dropped, seccomp RuntimeDefault, read-only root
//     filesystem; startup and liveness probes on /livez, readiness on
//     /readyz, leaving the mirror's check out when it mirrors; CPU and
//     memory requests;
//   - --retention-config and --export-config (and the webhook
//     kubeconfigs, when delegating) name files of a mounted ConfigMap of
//     the variant, which eventsd's own strict decoders accept;
//   - RBAC: a mirror's ServiceAccount bound to a ClusterRole with exactly
//     list and watch of events and, unless the variant turns the lineage
//     off, get, list and watch of the kinds the lineage follows by
//     default (TestLineageRules); delegation bound to
//     system:auth-delegator;
//     neither: no RBAC object and no token mounted;
//   - the Service, the PodDisruptionBudget and the ServiceMonitor select
//     the pods (and the Service's port).
func checkVariant(t *testing.T, v variant) {
	s := set{all: objects(t, v.manifests)}
	var pod corev1.PodTemplateSpec
	var selector map[string]string
	sts, deps := s.ofKind("StatefulSet"), s.ofKind("Deployment")
	if len(sts)+len(deps) != 1 {
		t.Fatalf("%d StatefulSets and %d Deployments, want one workload", len(sts), len(deps))
	}
	var ss *appsv1.StatefulSet
	if len(sts) == 1 {
		ss = typed[appsv1.StatefulSet](t, sts[0])
		pod, selector = ss.Spec.Template, ss.Spec.Selector.MatchLabels
		if ss.Spec.Replicas == nil || *ss.Spec.Replicas != 1 {
			t.Errorf("the pebble StatefulSet has %v replicas, want 1", ss.Spec.Replicas)
		}
	} else {
		d := typed[appsv1.Deployment](t, deps[0])
		pod, selector = d.Spec.Template, d.Spec.Selector.MatchLabels
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
			t.Errorf("the Deployment has %v replicas, want 2 or more", d.Spec.Replicas)
		}
	}
	if !labels.SelectorFromSet(selector).Matches(labels.Set(pod.Labels)) {
		t.Errorf("the workload's selector %v does not match its pods' labels %v", selector, pod.Labels)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want eventsd alone", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	args := c.Args

	// The storage.
	backend, _ := flagValue(args, "storage-backend")
	if ss != nil {
		if backend != "" && backend != "pebble" {
			t.Errorf("a StatefulSet with --storage-backend=%s", backend)
		}
		dataDir, ok := flagValue(args, "data-dir")
		// An emptyDir at --data-dir instead of a claim: the set-ups for
		// trying eventsd out without a StorageClass.
		emptyDir := slices.ContainsFunc(pod.Spec.Volumes, func(vol corev1.Volume) bool {
			return vol.EmptyDir != nil && slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == vol.Name && m.MountPath == dataDir })
		})
		switch {
		case !ok || len(ss.Spec.VolumeClaimTemplates) != btoi(!emptyDir):
			t.Fatalf("pebble: --data-dir %q, %d volumeClaimTemplates, emptyDir %v", dataDir, len(ss.Spec.VolumeClaimTemplates), emptyDir)
		case emptyDir != v.emptyDir:
			t.Errorf("pebble on an emptyDir: %v, want %v", emptyDir, v.emptyDir)
		case !emptyDir:
			claim := ss.Spec.VolumeClaimTemplates[0]
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == claim.Name && m.MountPath == dataDir }) {
				t.Errorf("the claim %s is not mounted at --data-dir %s: %v", claim.Name, dataDir, c.VolumeMounts)
			}
			if got := claim.Spec.StorageClassName; (got == nil) != (v.storageClass == "") || (got != nil && *got != v.storageClass) {
				t.Errorf("the claim's storageClassName %v, want %q (empty: unset, the cluster's default)", got, v.storageClass)
			}
		}
		if pod.Spec.SecurityContext == nil || pod.Spec.SecurityContext.FSGroup == nil || *pod.Spec.SecurityContext.FSGroup != 65532 {
			t.Errorf("pebble's volume needs fsGroup 65532 to be writable by the user: %+v", pod.Spec.SecurityContext)
		}
	} else if backend != "etcd" {
		t.Errorf("a Deployment with --storage-backend=%q, want etcd", backend)
	} else if servers, _ := flagValue(args, "etcd-servers"); servers == "" {
		t.Errorf("no --etcd-servers: %v", args)
	} else if index, _ := flagValue(args, "etcd-index"); index != "memory" {
		// The on-disk index (the default) needs a writable --data-dir on
		// the read-only root filesystem.
		dataDir, ok := flagValue(args, "data-dir")
		writable := func(m corev1.VolumeMount) bool {
			return m.MountPath == dataDir && !m.ReadOnly && slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool {
				return v.Name == m.Name && (v.EmptyDir != nil || v.PersistentVolumeClaim != nil || v.Ephemeral != nil)
			})
		}
		if !ok || !slices.ContainsFunc(c.VolumeMounts, writable) {
			t.Errorf("etcd with --etcd-index=%q: --data-dir %q is not a writable volume: %v", index, dataDir, c.VolumeMounts)
		}
	}

	// The security context.
	psc := pod.Spec.SecurityContext
	csc := c.SecurityContext
	if csc == nil {
		t.Fatal("no container securityContext")
	}
	nonRoot := (csc.RunAsNonRoot != nil && *csc.RunAsNonRoot) || (psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
	uid := csc.RunAsUser
	if uid == nil && psc != nil {
		uid = psc.RunAsUser
	}
	seccomp := csc.SeccompProfile
	if seccomp == nil && psc != nil {
		seccomp = psc.SeccompProfile
	}
	switch {
	case !nonRoot:
		t.Error("runAsNonRoot is not set")
	case uid == nil || *uid != 65532:
		t.Errorf("runAsUser %v, want the image's 65532", uid)
	case csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation:
		t.Error("allowPrivilegeEscalation is not false")
	case csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem:
		t.Error("readOnlyRootFilesystem is not true")
	case csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(csc.Capabilities.Add) != 0:
		t.Errorf("capabilities %+v, want every one dropped and none added", csc.Capabilities)
	case seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("seccomp profile %+v, want RuntimeDefault", seccomp)
	case csc.Privileged != nil && *csc.Privileged:
		t.Error("privileged")
	}

	// A replica keeps serving while kube-proxy drops its endpoint (eventsd
	// stops listening at SIGTERM), then shuts down within the grace period.
	if ss == nil {
		var sleep int64
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
			sleep = c.Lifecycle.PreStop.Sleep.Seconds
		}
		shutdown := 30 * time.Second // eventsd's --shutdown-timeout
		if v, ok := flagValue(args, "shutdown-timeout"); ok {
			var err error
			if shutdown, err = time.ParseDuration(v); err != nil {
				t.Errorf("--shutdown-timeout=%q: %v", v, err)
			}
		}
		grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
		if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
			grace = *g
		}
		if sleep < 1 || time.Duration(grace)*time.Second <= time.Duration(sleep)*time.Second+shutdown {
			t.Errorf("the replicas' preStop sleep is %d s, their grace period %d s and --shutdown-timeout %v: want a sleep, and the grace period longer than both", sleep, grace, shutdown)
		}
	}

	// Probes and resources.
	_, mirrors := flagValue(args, "source")
	wantReady := "/readyz"
	if mirrors {
		wantReady = "/readyz?exclude=mirror"
	}
	for _, p := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{{"startup", c.StartupProbe, "/livez"}, {"liveness", c.LivenessProbe, "/livez"}, {"readiness", c.ReadinessProbe, wantReady}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe %+v, want an HTTP GET of %s on port http", p.what, p.probe, p.path)
			continue
		}
		_, tls := flagValue(args, "tls-cert-file")
		if tls != (p.probe.HTTPGet.Scheme == corev1.URISchemeHTTPS) {
			t.Errorf("%s probe scheme %q with TLS %v", p.what, p.probe.HTTPGet.Scheme, tls)
		}
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "http" && p.ContainerPort == 8080 }) {
		t.Errorf("no port http (8080): %v", c.Ports)
	}
	if listen, _ := flagValue(args, "listen"); listen != ":8080" {
		t.Errorf("--listen=%q, want :8080", listen)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resource requests %v, want CPU and memory", c.Resources.Requests)
	}
	if pod.Spec.TerminationGracePeriodSeconds == nil || *pod.Spec.TerminationGracePeriodSeconds <= 30 {
		t.Errorf("terminationGracePeriodSeconds %v, want more than eventsd's 30s --shutdown-timeout", pod.Spec.TerminationGracePeriodSeconds)
	}

	// The configuration files, read by eventsd's own decoders.
	file := func(flag string) []byte {
		t.Helper()
		p, ok := flagValue(args, flag)
		if !ok {
			t.Errorf("no --%s", flag)
			return nil
		}
		for _, m := range c.VolumeMounts {
			if path.Dir(p) != m.MountPath || m.SubPath != "" {
				continue
			}
			for _, vol := range pod.Spec.Volumes {
				if vol.Name != m.Name || vol.ConfigMap == nil {
					continue
				}
				for _, cm := range s.ofKind("ConfigMap") {
					if cm.GetName() == vol.ConfigMap.Name {
						data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
						if d, ok := data[path.Base(p)]; ok {
							return []byte(d)
						}
					}
				}
			}
		}
		t.Errorf("--%s=%s is in no ConfigMap mounted in the pod", flag, p)
		return nil
	}
	if b := file("retention-config"); b != nil {
		if _, err := retention.Decode(b); err != nil {
			t.Errorf("eventsd refuses the retention config: %v\n%s", err, b)
		}
	}
	// An ExportConfiguration needs a sink: without one there is no flag.
	if _, ok := flagValue(args, "export-config"); ok || v.exports {
		if b := file("export-config"); b != nil {
			if _, err := exportconfig.Decode(b); err != nil {
				t.Errorf("eventsd refuses the export config: %v\n%s", err, b)
			}
		}
	}
	_, webhooks := flagValue(args, "authentication-token-webhook-config-file")
	aggregated := len(s.ofKind("APIService")) > 0
	delegates := webhooks || aggregated
	if webhooks {
		if mode, _ := flagValue(args, "authorization-mode"); mode != "Webhook" {
			t.Errorf("authentication is delegated but --authorization-mode=%q", mode)
		}
		for _, f := range []string{"authentication-token-webhook-config-file", "authorization-webhook-config-file"} {
			if b := file(f); b != nil {
				if _, err := clientcmd.Load(b); err != nil {
					t.Errorf("--%s: %v", f, err)
				}
			}
		}
	}

	// RBAC: eventsd's, and with delegation the viewer's (checkViewer).
	saName := pod.Spec.ServiceAccountName
	viewer := checkViewer(t, v, s, delegates)
	sas := slices.DeleteFunc(s.ofKind("ServiceAccount"), func(o *unstructured.Unstructured) bool { return o.GetName() == viewer })
	if saName == "" || len(sas) != 1 || sas[0].GetName() != saName {
		t.Errorf("the pod's ServiceAccount %q is not the variant's one", saName)
	}
	bound := map[string]bool{}
	for _, o := range s.ofKind("ClusterRoleBinding") {
		b := typed[rbacv1.ClusterRoleBinding](t, o)
		if b.Name == viewer {
			continue
		}
		if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != saName || b.Subjects[0].Namespace != v.namespace {
			t.Errorf("ClusterRoleBinding %s binds %+v, want the ServiceAccount %s/%s alone", b.Name, b.Subjects, v.namespace, saName)
		}
		bound[b.RoleRef.Name] = true
	}
	var roles []*unstructured.Unstructured
	for _, r := range s.ofKind("ClusterRole") {
		if aggregated && r.GetName() == eventsReaderRole || r.GetName() == viewer {
			continue
		}
		roles = append(roles, r)
	}
	switch {
	case mirrors:
		if len(roles) != 1 {
			t.Fatalf("%d ClusterRoles, want the mirror's", len(roles))
		}
		r := typed[rbacv1.ClusterRole](t, roles[0])
		want := leastMirrorRules
		if !v.noLineage {
			want = slices.Concat(leastMirrorRules, lineageRules)
		}
		if fmt.Sprint(r.Rules) != fmt.Sprint(want) {
			t.Errorf("the mirror's ClusterRole allows %v, want exactly %v", r.Rules, want)
		}
		if !bound[r.Name] {
			t.Errorf("the mirror's ClusterRole %s is bound to nothing", r.Name)
		}
	case len(roles) != 0:
		t.Errorf("ClusterRoles without a mirror: %v", roles)
	}
	if delegates != bound["system:auth-delegator"] {
		t.Errorf("delegation %v, bound to system:auth-delegator %v", delegates, bound["system:auth-delegator"])
	}
	// The kustomize aggregated component binds system:auth-delegator
	// itself too (for an eventsd of the user's own, without the bases'
	// binding): a second binding to the same role.
	extra := btoi(aggregated && strings.HasPrefix(v.name, "kustomize/"))
	if len(bound) != len(s.ofKind("ClusterRoleBinding"))-btoi(viewer != "")-extra || len(bound) != btoi(mirrors)+btoi(delegates) {
		t.Errorf("ClusterRoleBindings to %v with mirror %v and delegation %v", bound, mirrors, delegates)
	}
	if aggregated {
		checkAggregated(t, v, s, args, saName)
	} else if len(s.ofKind("Role"))+len(s.ofKind("RoleBinding")) != 0 {
		t.Error("Roles or RoleBindings: eventsd needs none")
	}
	token := pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken
	if token != (mirrors || delegates) {
		t.Errorf("service account token mounted: %v, with mirror %v and delegation %v", token, mirrors, delegates)
	}

	// Service, PDB, ServiceMonitor.
	svcs := s.ofKind("Service")
	if len(svcs) != 1 {
		t.Fatalf("%d Services, want 1", len(svcs))
	}
	svc := typed[corev1.Service](t, svcs[0])
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("the Service selects %v, not the pods (%v)", svc.Spec.Selector, pod.Labels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "http" || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("the Service's ports %+v, want http to the pods' port http", svc.Spec.Ports)
	}
	for _, o := range s.ofKind("PodDisruptionBudget") {
		pdb := typed[policyv1.PodDisruptionBudget](t, o)
		if !labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(labels.Set(pod.Labels)) || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("the PodDisruptionBudget %+v does not let one of the pods go at a time", pdb.Spec)
		}
	}
	if len(s.ofKind("PodDisruptionBudget")) != 1 && !strings.HasSuffix(v.name, "/local") {
		t.Errorf("%d PodDisruptionBudgets, want 1", len(s.ofKind("PodDisruptionBudget")))
	}
	sms := s.ofKind("ServiceMonitor")
	if len(sms) != btoi(v.serviceMonitor) {
		t.Fatalf("%d ServiceMonitors, want %d", len(sms), btoi(v.serviceMonitor))
	}
	for _, sm := range sms {
		sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(svc.Labels)) || len(eps) != 1 {
			t.Errorf("the ServiceMonitor selects %v, the Service has labels %v; endpoints %v", sel, svc.Labels, eps)
			continue
		}
		ep := eps[0].(map[string]any)
		if ep["port"] != "http" || ep["path"] != "/metrics" {
			t.Errorf("the ServiceMonitor scrapes %v", ep)
		}
		_, tls := flagValue(args, "tls-cert-file")
		if scheme, _ := ep["scheme"].(string); tls != (scheme == "https") {
			t.Errorf("the ServiceMonitor's scheme %q with TLS %v", scheme, tls)
		}
		// With the chart's generated certificate, Prometheus verifies it
		// with the Secret's CA.
		for _, o := range s.ofKind("Secret") {
			name, _, _ := unstructured.NestedString(ep, "tlsConfig", "ca", "secret", "name")
			server, _, _ := unstructured.NestedString(ep, "tlsConfig", "serverName")
			if o.GetName() == "eventsd-tls" && (name != o.GetName() || server != "eventsd."+v.namespace+".svc") {
				t.Errorf("the ServiceMonitor verifies eventsd with %q as %q, want the CA of the Secret %s", name, server, o.GetName())
			}
		}
		if _, ok := ep["bearerTokenFile"]; delegates && !ok && ep["authorization"] == nil {
			t.Errorf("/metrics needs a token with delegation, the ServiceMonitor sends none: %v", ep)
		}
	}

	// Namespaces: each namespaced object in the variant's; helm's may
	// have none, for helm to set, kustomize's must name it (kubectl
	// apply -k would put an object without one in kubectl's default
	// namespace, away from the pod that mounts it).
	for _, o := range s.all {
		if aggregated && o.GetKind() == "RoleBinding" && o.GetNamespace() == "kube-system" {
			continue // checkAggregated's
		}
		ns := o.GetNamespace()
		if ns == "" && !clusterScoped[o.GetKind()] && strings.HasPrefix(v.name, "kustomize/") {
			t.Errorf("%s %s has no namespace, want %s", o.GetKind(), o.GetName(), v.namespace)
		}
		if ns != "" && ns != v.namespace {
			t.Errorf("%s %s in namespace %s, want %s", o.GetKind(), o.GetName(), ns, v.namespace)
		}
	}
	checkTLSSecret(t, v, s, pod)
}

// lineageRule lets a reader list a family's objects (the lineages of
// eventsd's group, behind evctl's and the web page's family trees) and
// summaries of events (its facets, behind evctl top and the search page).
var lineageRule = rbacv1.PolicyRule{APIGroups: []string{"events.kubevents.io"}, Resources: []string{"lineages", "facets"}, Verbs: []string{"list"}}

// viewerRules are all the viewer's ServiceAccount may do.
var viewerRules = []rbacv1.PolicyRule{{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}}, lineageRule}

// checkViewer checks the viewer of a variant that delegates (and that
// there is none otherwise): a ServiceAccount named like its ClusterRole
// and ClusterRoleBinding, which bind it to reading events and nothing
// else, with no token mounted anywhere (only kubectl create token makes
// them). It returns the viewer's name, or "".
func checkViewer(t *testing.T, v variant, s set, delegates bool) string {
	t.Helper()
	var name string
	for _, o := range s.ofKind("ServiceAccount") {
		if strings.HasSuffix(o.GetName(), "-viewer") {
			name = o.GetName()
			sa := typed[corev1.ServiceAccount](t, o)
			if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
				t.Errorf("the viewer's ServiceAccount %s mounts its token", name)
			}
		}
	}
	if (name != "") != delegates {
		t.Fatalf("the viewer ServiceAccount %q with delegation %v: want one exactly when eventsd checks tokens", name, delegates)
	}
	if name == "" {
		return ""
	}
	var role *rbacv1.ClusterRole
	var binding *rbacv1.ClusterRoleBinding
	for _, o := range s.ofKind("ClusterRole") {
		if o.GetName() == name {
			role = typed[rbacv1.ClusterRole](t, o)
		}
	}
	for _, o := range s.ofKind("ClusterRoleBinding") {
		if o.GetName() == name {
			binding = typed[rbacv1.ClusterRoleBinding](t, o)
		}
	}
	if role == nil || fmt.Sprint(role.Rules) != fmt.Sprint(viewerRules) {
		t.Errorf("the viewer's ClusterRole %s: %+v, want exactly %v", name, role, viewerRules)
	}
	if binding == nil || binding.RoleRef.Name != name || len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "ServiceAccount" ||
		binding.Subjects[0].Name != name || binding.Subjects[0].Namespace != v.namespace {
		t.Errorf("the viewer's ClusterRoleBinding %s: %+v, want its ClusterRole for the ServiceAccount %s/%s alone", name, binding, v.namespace, name)
	}
	return name
}

// clusterScoped are the kinds deploy/ installs that have no namespace.
var clusterScoped = map[string]bool{"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true, "APIService": true}

// checkTLSSecret checks the Secret a variant serves HTTPS with when the
// variant holds it (the chart's generated one): a CA and a certificate it
// signed for the Service's names, localhost and 127.0.0.1, and its key.
func checkTLSSecret(t *testing.T, v variant, s set, pod corev1.PodTemplateSpec) {
	t.Helper()
	var secretName string
	for _, vol := range pod.Spec.Volumes {
		if vol.Name == "tls" && vol.Secret != nil {
			secretName = vol.Secret.SecretName
		}
	}
	for _, o := range s.ofKind("Secret") {
		if o.GetName() != secretName {
			continue
		}
		sec := typed[corev1.Secret](t, o)
		if _, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"]); err != nil || sec.Type != corev1.SecretTypeTLS {
			t.Fatalf("Secret %s (%s): %v", secretName, sec.Type, err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(sec.Data["ca.crt"]) {
			t.Fatalf("Secret %s: ca.crt holds no certificate", secretName)
		}
		block, _ := pem.Decode(sec.Data["tls.crt"])
		if block == nil {
			t.Fatalf("Secret %s: tls.crt is not PEM", secretName)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		svc := "eventsd." + v.namespace
		for _, name := range []string{"eventsd", svc, svc + ".svc", svc + ".svc.cluster.local", "localhost", "127.0.0.1", "::1"} {
			if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err != nil {
				t.Errorf("Secret %s's certificate for %s: %v", secretName, name, err)
			}
		}
		return
	}
	// The chart's generated Secret is <fullname>-tls (the ci values name
	// theirs otherwise).
	if strings.HasPrefix(v.name, "helm/") && secretName == "eventsd-tls" {
		t.Errorf("the chart serves HTTPS with %s, which it does not render", secretName)
	}
}

// eventsReaderRole is the aggregated set-up's ClusterRole for reading
// eventsd's group.
const eventsReaderRole = "kubevents:events-reader"

// checkAggregated checks the aggregated set-up of a variant with an
// APIService: eventsd's group registered for the variant's Service over
// HTTPS, eventsd delegating to the cluster in-cluster (front proxy,
// TokenReview, SubjectAccessReview), its ServiceAccount bound to read the
// front proxy's settings in kube-system, and a ClusterRole reading the
// group's events, aggregated into view, edit and admin.
func checkAggregated(t *testing.T, v variant, s set, args []string, saName string) {
	t.Helper()
	for flag, want := range map[string]string{"authentication-kubeconfig": "in-cluster", "authorization-kubeconfig": "in-cluster", "authorization-mode": "Webhook"} {
		if got, _ := flagValue(args, flag); got != want {
			t.Errorf("aggregated: --%s=%q, want %q", flag, got, want)
		}
	}
	if _, tls := flagValue(args, "tls-cert-file"); !tls {
		t.Error("aggregated without HTTPS: the front proxy's client certificate needs TLS")
	}
	// The delegated flags replace the webhook files: both would check a
	// refused token twice.
	for _, flag := range []string{"authentication-token-webhook-config-file", "authorization-webhook-config-file"} {
		if got, ok := flagValue(args, flag); ok {
			t.Errorf("aggregated: --%s=%q beside the delegated flags", flag, got)
		}
	}
	apis := s.ofKind("APIService")
	svcs := s.ofKind("Service")
	if len(apis) != 1 || len(svcs) != 1 {
		t.Fatalf("%d APIServices and %d Services, want one of each", len(apis), len(svcs))
	}
	group, _, _ := unstructured.NestedString(apis[0].Object, "spec", "group")
	version, _, _ := unstructured.NestedString(apis[0].Object, "spec", "version")
	svcName, _, _ := unstructured.NestedString(apis[0].Object, "spec", "service", "name")
	svcNS, _, _ := unstructured.NestedString(apis[0].Object, "spec", "service", "namespace")
	// Numbers decode as float64 from YAML through JSON.
	portField, _, _ := unstructured.NestedFieldNoCopy(apis[0].Object, "spec", "service", "port")
	port := fmt.Sprint(portField)
	svc := typed[corev1.Service](t, svcs[0])
	if apis[0].GetName() != "v1.events.kubevents.io" || group != "events.kubevents.io" || version != "v1" ||
		svcName != svc.Name || svcNS != v.namespace || len(svc.Spec.Ports) != 1 || port != fmt.Sprint(svc.Spec.Ports[0].Port) {
		t.Errorf("APIService %s: %s/%s for service %s/%s:%s, want events.kubevents.io/v1 for %s/%s:%v",
			apis[0].GetName(), group, version, svcNS, svcName, port, v.namespace, svc.Name, svc.Spec.Ports)
	}
	rbs := s.ofKind("RoleBinding")
	if len(rbs) != 1 {
		t.Fatalf("%d RoleBindings, want the one in kube-system", len(rbs))
	}
	rb := typed[rbacv1.RoleBinding](t, rbs[0])
	if rb.Namespace != "kube-system" || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != "extension-apiserver-authentication-reader" ||
		len(rb.Subjects) != 1 || rb.Subjects[0].Name != saName || rb.Subjects[0].Namespace != v.namespace {
		t.Errorf("RoleBinding %s/%s to %+v for %+v, want kube-system's extension-apiserver-authentication-reader for %s/%s",
			rb.Namespace, rb.Name, rb.RoleRef, rb.Subjects, v.namespace, saName)
	}
	var reader *rbacv1.ClusterRole
	for _, o := range s.ofKind("ClusterRole") {
		if o.GetName() == eventsReaderRole {
			reader = typed[rbacv1.ClusterRole](t, o)
		}
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{"events.kubevents.io"}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}}, lineageRule}
	if reader == nil || fmt.Sprint(reader.Rules) != fmt.Sprint(want) {
		t.Fatalf("ClusterRole %s: %+v, want exactly %v", eventsReaderRole, reader, want)
	}
	for _, r := range []string{"view", "edit", "admin"} {
		if reader.Labels["rbac.authorization.k8s.io/aggregate-to-"+r] != "true" {
			t.Errorf("ClusterRole %s is not aggregated into %s", eventsReaderRole, r)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestDelegatedAuth runs what the manifests configure for authentication
// and authorization: eventsd with the flags, the webhook kubeconfigs and
// the TLS certificate of the mirror base and of the chart's defaults
// (podrun: the pod's server, CA and token pointed at a real kube-apiserver),
// its ServiceAccounts and RBAC applied for real, and checks that
// kube-apiserver's users get what its RBAC gives them: a reader lists
// events, a user without a role gets 403, no token 401, and a write is
// allowed only to whom RBAC allows it. The chart's defaults serve HTTPS
// with the certificate the chart generates: clients verify it with the
// Secret's ca.crt at 127.0.0.1 (a port-forward) and at the Service's
// name, and NOTES.txt's commands (the port-forward aside) list events with
// kubectl, verifying eventsd with that CA and authenticating with a token
// of the viewer ServiceAccount the chart creates.
func TestDelegatedAuth(t *testing.T) {
	ctx := context.Background()
	renders := []variant{kustomizeVariants(t)[0]}
	if helmbin.Cached() {
		for _, v := range chartRenders(t) {
			if v.name == "helm/defaults" {
				renders = append(renders, v)
			}
		}
	} else {
		t.Log("helm is not built: the chart's delegation is not run here (TestChart says how to build helm)")
	}
	kas := sharedAPIServer(t)
	kc := kas.Kubeconfig()
	reader := `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: events-reader}
rules: [{apiGroups: [""], resources: [events], verbs: [get, list, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: events-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: events-reader}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: reader}]
`
	if r := kubectl(t, strings.NewReader(reader), kc, "apply", "-f", "-"); r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, r.Stderr)
	}
	// NOTES.txt as `helm install` prints it (a dry run needs a cluster).
	var notes string
	if len(renders) > 1 {
		notes = helm(t, "install", "eventsd", chartDir, "--namespace", helmNamespace, "--dry-run=client", "--kubeconfig", kc)
		_, notes, _ = strings.Cut(notes, "NOTES:\n")
	}

	for _, v := range renders {
		t.Run(v.name, func(t *testing.T) {
			s := set{all: objects(t, v.manifests)}
			if err := kas.EnsureNamespace(ctx, v.namespace); err != nil {
				t.Fatal(err)
			}
			// The ServiceAccounts, the RBAC and the Secrets, for real.
			files := map[string][]byte{}
			for _, o := range s.all {
				switch o.GetKind() {
				case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Secret":
					if o.GetNamespace() == "" && o.GetKind() != "ClusterRole" && o.GetKind() != "ClusterRoleBinding" {
						o.SetNamespace(v.namespace)
					}
					b, err := o.MarshalJSON()
					if err != nil {
						t.Fatal(err)
					}
					if r := kubectl(t, bytes.NewReader(b), kc, "apply", "-f", "-"); r.Err != nil {
						t.Fatalf("%v\n%s", r.Err, r.Stderr)
					}
				case "ConfigMap":
					data, _, _ := unstructured.NestedStringMap(o.Object, "data")
					for k, d := range data {
						files[k] = []byte(d)
					}
				}
				if o.GetKind() == "Secret" {
					sec := typed[corev1.Secret](t, o)
					for k, d := range sec.Data {
						files[k] = d
					}
				}
			}
			var pod corev1.PodTemplateSpec
			for _, o := range append(s.ofKind("StatefulSet"), s.ofKind("Deployment")...) {
				tmpl, _, _ := unstructured.NestedMap(o.Object, "spec", "template")
				pod = *typed[corev1.PodTemplateSpec](t, &unstructured.Unstructured{Object: tmpl})
			}
			for _, f := range []string{"authentication-token-webhook-config-file", "authorization-webhook-config-file", "authorization-mode"} {
				if _, ok := flagValue(pod.Spec.Containers[0].Args, f); !ok {
					t.Fatalf("no --%s: %v", f, pod.Spec.Containers[0].Args)
				}
			}
			ev := podrun.Start(t, podrun.Pod{Args: pod.Spec.Containers[0].Args, Files: files},
				podrun.Cluster{URL: kas.URL(), CA: kas.CA(), Token: createToken(t, kc, v.namespace, pod.Spec.ServiceAccountName)})

			client := func(user string) *rest.Config {
				c := ev.RESTConfig()
				if user != "" {
					c.BearerToken = kas.Token(user)
				}
				return c
			}
			cs := func(user string) kubernetes.Interface {
				c, err := kubernetes.NewForConfig(client(user))
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			ev1 := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web-1.a", Namespace: "default"},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-1"}, Reason: "Started", Type: corev1.EventTypeNormal}
			if _, err := cs("reader").CoreV1().Events("default").Create(ctx, ev1, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("a create by a reader: %v, want 403", err)
			}
			if _, err := cs(kubeapiserver.AdminUser).CoreV1().Events("default").Create(ctx, ev1, metav1.CreateOptions{}); err != nil {
				t.Errorf("a create by kube-apiserver's admin: %v", err)
			}
			if l, err := cs("reader").CoreV1().Events("").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
				t.Errorf("a list by a reader: %v, %v; want the admin's event", err, l)
			}
			if _, err := cs("nobody").CoreV1().Events("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("a list by a user without a role: %v, want 403", err)
			}
			if _, err := cs("").CoreV1().Events("default").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
				t.Errorf("a list without a token: %v, want 401", err)
			}
			bad := ev.RESTConfig()
			bad.BearerToken = "not-a-token"
			if _, err := kubernetes.NewForConfigOrDie(bad).CoreV1().Events("").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
				t.Errorf("a list with a token kube-apiserver does not know: %v, want 401", err)
			}
			// The viewer's token reads every namespace's events and
			// writes nothing (kube-apiserver's SubjectAccessReview).
			viewer := createToken(t, kc, v.namespace, "eventsd-viewer")
			vc := ev.RESTConfig()
			vc.BearerToken = viewer
			if l, err := kubernetes.NewForConfigOrDie(vc).EventsV1().Events("").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
				t.Errorf("a list by eventsd-viewer: %v, %v; want the admin's event", err, l)
			}
			if err := kubernetes.NewForConfigOrDie(vc).CoreV1().Events("default").Delete(ctx, ev1.Name, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("a delete by eventsd-viewer: %v, want 403", err)
			}
			if v.name == "helm/defaults" {
				checkGeneratedTLS(t, ev, files["ca.crt"], viewer, v.namespace)
				runNotes(t, notes, kas, v.namespace, ev.Addr)
			}
		})
	}
}

// createToken is a token of the ServiceAccount ns/name, as
// `kubectl create token` makes it.
func createToken(t *testing.T, kubeconfig, ns, name string) string {
	t.Helper()
	r := kubectl(t, nil, kubeconfig, "-n", ns, "create", "token", name)
	if r.Err != nil {
		t.Fatalf("kubectl create token %s: %v\n%s", name, r.Err, r.Stderr)
	}
	return strings.TrimSpace(r.Stdout)
}

// checkGeneratedTLS: eventsd serves HTTPS with the chart's generated
// certificate, which clients verify with the Secret's ca.crt at 127.0.0.1
// (kubectl port-forward), localhost and the Service's DNS name, and not
// without it.
func checkGeneratedTLS(t *testing.T, ev *eventsdtest.Process, ca []byte, token, ns string) {
	t.Helper()
	ctx := context.Background()
	if !strings.HasPrefix(ev.URL, "https://") || len(ca) == 0 {
		t.Fatalf("the chart's defaults serve %s with ca.crt %q, want HTTPS with the generated CA", ev.URL, ca)
	}
	_, port, _ := strings.Cut(ev.Addr, ":")
	for _, c := range []struct{ host, serverName string }{
		{"https://127.0.0.1:" + port, ""},
		{"https://localhost:" + port, ""},
		{"https://127.0.0.1:" + port, "eventsd." + ns + ".svc"},
		{"https://127.0.0.1:" + port, "eventsd." + ns + ".svc.cluster.local"},
	} {
		cfg := &rest.Config{Host: c.host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca, ServerName: c.serverName}}
		if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Events("").List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("a list at %s (server name %q) verified with the Secret's ca.crt: %v", c.host, c.serverName, err)
		}
	}
	cfg := &rest.Config{Host: ev.URL, BearerToken: token}
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Events("").List(ctx, metav1.ListOptions{}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a list verified with the system roots: %v, want a certificate error", err)
	}
}

// notesUser runs NOTES.txt's commands: a user who may get the TLS Secret
// and create the viewer's tokens in the release's namespace, and nothing
// else, so that only the viewer's token can list events (kubectl sends
// the kubeconfig's credentials when --token is empty).
const notesUser = "notes-user"

// runNotes runs NOTES.txt's commands for reading events but its
// port-forward, as notesUser, with eventsd at addr standing for the
// forwarded port: they must list the events.
func runNotes(t *testing.T, notes string, kas *kubeapiserver.Cluster, ns, addr string) {
	t.Helper()
	role := fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: notes, namespace: %[1]s}
rules:
- {apiGroups: [""], resources: [secrets], resourceNames: [eventsd-tls], verbs: [get]}
- {apiGroups: [""], resources: [serviceaccounts/token], resourceNames: [eventsd-viewer], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: notes, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: notes}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: %[2]s}]
`, ns, notesUser)
	if r := kubectl(t, strings.NewReader(role), kas.Kubeconfig(), "apply", "-f", "-"); r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, r.Stderr)
	}
	kubeconfig, err := kas.KubeconfigAs(notesUser)
	if err != nil {
		t.Fatal(err)
	}
	var script []string
	for _, l := range strings.Split(notes, "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "kubectl ") || strings.Contains(l, " port-forward ") {
			continue
		}
		script = append(script, strings.ReplaceAll(l, "127.0.0.1:8080", addr))
	}
	if len(script) != 2 || !strings.Contains(notes, "port-forward") {
		t.Fatalf("NOTES.txt's commands: want the CA, a port-forward and a kubectl get events:\n%s", notes)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bin := t.TempDir()
	if err := os.Symlink(eventsdtest.Kubectl(t), filepath.Join(bin, "kubectl")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+strings.Join(script, "\n"))
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "web-1") {
		t.Errorf("NOTES.txt's commands:\n%s\n%v\n%s", strings.Join(script, "\n"), err, out)
	}
}
