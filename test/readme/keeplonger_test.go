package readme

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/internal/kubeapiserver"
)

// keepLongerDoc is the page TestKeepEventsLongerCommands runs.
const keepLongerDoc = "docs/keep-events-longer.md"

// The blocks of keep-events-longer.md, by a text only each has.
const (
	klMirrorProd = "kubectl --context prod apply -f deploy/kustomize/mirror/rbac.yaml"
	klInCluster  = "eventsd --source=in-cluster --event-ttl 720h --listen 0.0.0.0:8080"
	klDevcluster = "go run ./cmd/devcluster --kubeconfig cluster.kubeconfig"
	klMirrorDev  = "go run ./cmd/eventsd --source-kubeconfig cluster.kubeconfig --event-ttl 720h --data-dir ./mirror-data"
	klThird      = "metadata: {name: web-1.mirrored, namespace: default}"
	klRetention  = "cat >retention-rules.yaml <<'EOF'"
	klBudget     = "--event-ttl 720h --max-storage-bytes 8Gi --data-dir ./mirror-data"
)

// keepLongerNotRun are the page's blocks no test here runs, with why.
var keepLongerNotRun = map[string]string{
	klInCluster: "it reads a pod's service account (in-cluster configuration under /var/run/secrets/kubernetes.io/serviceaccount) and listens on every interface; test/cluster runs the chart's pod, which runs this command",
}

// TestKeepEventsLongerCommands runs docs/keep-events-longer.md's ```sh
// blocks as a reader would, in order, each server block in a terminal of
// its own: the mirror of a cluster named by the context prod of
// ~/.kube/config (a real kube-apiserver; its user may manage RBAC but
// not read events until the page's binding), then with the page's
// retention rules, then with its storage budget, over the same data
// directory; and the mirror of the page's devcluster, with the event the
// page creates listed through eventsd, deleted from the cluster and kept
// by eventsd, and eventsd refusing to delete it (405).
//
// What the test changes, and why, is said at each substitution: `go run
// ./cmd/eventsd` and `go run ./cmd/devcluster` run the commands built
// once (go run would build them again at each block); eventsd listens on
// a free port (other tests may hold 8080) and the later blocks' 8080 is
// that port; devcluster's kube-apiserver and events etcd take free ports
// (other tests may hold 6443 and 2379).
func TestKeepEventsLongerCommands(t *testing.T) {
	t.Parallel()
	blocks := pageBlocks(t, keepLongerDoc, []string{klMirrorProd, klDevcluster, klMirrorDev, klThird, klRetention, klBudget}, keepLongerNotRun)
	bin := commandsBin(t, "devcluster")
	// eventsd on a free port: its address is read from its log.
	eventsdCmd := "eventsd --listen 127.0.0.1:0"

	t.Run("prod", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		defer func() { t.Logf("%v", time.Since(start).Round(time.Millisecond)) }()
		const me = "me"
		kas := kubeapiserver.Start(t, kubeapiserver.Options{Users: []kubeapiserver.User{{Name: me}}})
		ctx := context.Background()
		if err := kas.EnsureNamespace(ctx, "prod"); err != nil {
			t.Fatal(err)
		}
		admin := kubernetes.NewForConfigOrDie(kas.RESTConfig())
		rbacManager(t, admin, me)
		asMe := kubernetes.NewForConfigOrDie(kas.UserConfig(me))
		if _, err := asMe.CoreV1().Events("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("listing events as %s before the page's binding: %v, want Forbidden", me, err)
		}

		// ~/.kube/config: the context prod the page names, as the user
		// me, beside a current context elsewhere (--source-context must
		// choose prod).
		home := t.TempDir()
		writeKubeconfig(t, filepath.Join(home, ".kube", "config"), kas, me)
		dir := t.TempDir()
		// The page runs at the repository's root; the blocks here run in
		// a directory of the test's (they write ./mirror-data and
		// retention-rules.yaml) holding the file they read.
		copyFile(t, filepath.Join(root(), "deploy/kustomize/mirror/rbac.yaml"), filepath.Join(dir, "deploy/kustomize/mirror/rbac.yaml"))
		r := newReader(t, dir, bin, home)

		term, stop := r.terminal(replace(t, blocks[klMirrorProd], "go run ./cmd/eventsd", eventsdCmd), "the source's events are mirrored; following its changes")
		out := term.Output()
		for _, want := range []string{"clusterrole.rbac.authorization.k8s.io/eventsd-mirror created", "clusterrolebinding.rbac.authorization.k8s.io/eventsd-mirror-me created", `msg="mirroring a cluster's events" source="context \"prod\" of `, "server=" + kas.URL(), "eventTTL=720h0m0s"} {
			if !strings.Contains(out, want) {
				t.Errorf("the block did not print %q:\n%s", want, out)
			}
		}
		addr := servingAddr(t, term)
		ev := createEvent(t, admin, "default", "web-1.started", corev1.EventTypeNormal)
		waitMirrored(t, addr, ev)
		stop()

		term, stop = r.terminal(replace(t, blocks[klRetention], "go run ./cmd/eventsd", eventsdCmd), `msg="eventsd serving"`)
		out = term.Output()
		// The rules in force, as the page says eventsd logs them.
		for _, want := range []string{`msg="retention rule" rule=warnings ttl=720h types=Warning`, `msg="retention rule" rule=1 ttl=168h namespaces=prod`, `msg="retention rule" rule=default ttl=24h0m0s`} {
			if !strings.Contains(out, want) {
				t.Errorf("eventsd did not log %q:\n%s", want, out)
			}
		}
		addr = servingAddr(t, term)
		// Each rule chooses the TTL of the events it matches: a Warning
		// in prod is the first rule's.
		for _, e := range []struct{ ns, name, typ, rule string }{
			{"default", "web-1.backoff", corev1.EventTypeWarning, "warnings"},
			{"prod", "api-1.backoff", corev1.EventTypeWarning, "warnings"},
			{"prod", "api-1.pulled", corev1.EventTypeNormal, "1"},
			{"default", "web-1.pulled", corev1.EventTypeNormal, "default"},
		} {
			ev := createEvent(t, admin, e.ns, e.name, e.typ)
			waitMirrored(t, addr, ev)
		}
		waitMetric(t, addr, `eventsd_retention_rule_writes_total{rule="warnings"}`, "2")
		waitMetric(t, addr, `eventsd_retention_rule_writes_total{rule="1"}`, "1")
		waitMetric(t, addr, `eventsd_retention_rule_writes_total{rule="default"}`, "1")
		stop()

		term, stop = r.terminal(replace(t, blocks[klBudget], "go run ./cmd/eventsd", eventsdCmd), `msg="eventsd serving"`)
		addr = servingAddr(t, term)
		if !strings.Contains(term.Output(), "eventTTL=720h0m0s") {
			t.Errorf("eventsd does not keep events 720h:\n%s", term.Output())
		}
		waitMetric(t, addr, "eventsd_storage_budget_limit_bytes", "8.589934592e+09")
		// Everything mirrored before is still there.
		waitMirrored(t, addr, ev)
		stop()
	})

	t.Run("devcluster", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		defer func() { t.Logf("%v", time.Since(start).Round(time.Millisecond)) }()
		r := newReader(t, t.TempDir(), bin, "")
		cfg, _ := devcluster(t, r, blocks[klDevcluster])
		cluster := kubernetes.NewForConfigOrDie(cfg)

		mirror, _ := r.terminal(replace(t, blocks[klMirrorDev], "go run ./cmd/eventsd", eventsdCmd), "the source's events are mirrored; following its changes")
		// What the page says it logs: that it mirrors the cluster (the
		// context, the server) and reads the cluster's events.
		for _, want := range []string{`msg="mirroring a cluster's events" source="context `, "server=" + cfg.Host, `msg="reading the source's events`} {
			if !strings.Contains(mirror.Output(), want) {
				t.Errorf("eventsd did not log %q:\n%s", want, mirror.Output())
			}
		}
		addr := servingAddr(t, mirror)

		// The third terminal: eventsd's 8080 is its free port.
		out, err := r.run(replace(t, blocks[klThird], "127.0.0.1:8080", addr))
		// The block ends with the delete eventsd refuses: a reader sees
		// the error, and bash stops there.
		if err == nil {
			t.Errorf("the block's last command, a delete through eventsd, succeeded; the page says eventsd refuses it")
		}
		printedInOrder(t, out, []line{
			{"kubectl create", []string{`event/web-1.mirrored created`}},
			{"eventsd listing the mirrored event", []string{"Warning", "BackOff", "pod/web-1", "Back-off restarting failed container web"}},
			{"kubectl delete", []string{`event "web-1.mirrored" deleted`}},
			{"eventsd refusing the delete, naming the cluster", []string{`Error from server (MethodNotAllowed)`, `eventsd mirrors the events of a cluster (context "admin" of cluster.kubeconfig)`}},
		})
		// The deletion reached eventsd and it kept the event: the
		// custom columns' row has eventsd's resourceVersion and the
		// cluster's.
		waitMetric(t, addr, `eventsd_mirror_changes_skipped_total{reason="deletion-kept"}`, "1")
		if _, err := cluster.CoreV1().Events("default").Get(context.Background(), "web-1.mirrored", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the cluster's event after kubectl delete: %v", err)
		}
		kept, err := eventsdClient(addr).CoreV1().Events("default").Get(context.Background(), "web-1.mirrored", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("eventsd after the cluster deleted the event: %v", err)
		}
		srcRV := kept.Annotations["events.kubevents.io/source-resource-version"]
		if srcRV == "" {
			t.Errorf("the kept event has no source-resource-version annotation: %v", kept.Annotations)
		}
		row := fmt.Sprintf("web-1.mirrored   %s", kept.ResourceVersion)
		if !strings.Contains(out, row) || !strings.Contains(out, srcRV) {
			t.Errorf("the custom columns do not show the kept event (%s, source %s):\n%s", kept.ResourceVersion, srcRV, out)
		}
	})
}

// rbacManager lets user create and bind cluster roles (what the page's
// first block does) and nothing else beyond what every user may.
func rbacManager(t *testing.T, cs kubernetes.Interface, user string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "rbac-manager"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles", "clusterrolebindings"},
			Verbs: []string{"get", "list", "create", "update", "patch", "bind", "escalate"}}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rbac-manager"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// writeKubeconfig writes a kubeconfig at path with the context prod (kas
// as user) and a current context dev whose server refuses connections.
func writeKubeconfig(t *testing.T, path string, kas *kubeapiserver.Cluster, user string) {
	t.Helper()
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster: {server: %q, certificate-authority-data: %s}
- name: dev
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: %s
  user: {token: %q}
contexts:
- name: prod
  context: {cluster: prod, user: %s}
- name: dev
  context: {cluster: dev, user: %s}
current-context: dev
`, kas.URL(), base64.StdEncoding.EncodeToString(kas.CA()), user, kas.Token(user), user, user)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
}

// copyFile copies src to dst, making dst's directory.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// createEvent creates a core/v1 event in the cluster.
func createEvent(t *testing.T, cs kubernetes.Interface, ns, name, typ string) *corev1.Event {
	t.Helper()
	now := metav1.Now()
	e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: strings.Split(name, ".")[0]},
		Reason:         "Test", Message: "an event of the cluster", Type: typ, Count: 1, FirstTimestamp: now, LastTimestamp: now,
		Source: corev1.EventSource{Component: "kubelet", Host: "node-1"}}
	e, err := cs.CoreV1().Events(ns).Create(context.Background(), e, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// eventsdClient is a clientset of the eventsd serving at addr.
func eventsdClient(addr string) kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://" + addr})
}

// waitMirrored waits until the eventsd at addr serves ev, mirrored: with
// the cluster's resourceVersion as its source's.
func waitMirrored(t *testing.T, addr string, ev *corev1.Event) {
	t.Helper()
	cs := eventsdClient(addr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := cs.CoreV1().Events(ev.Namespace).Get(context.Background(), ev.Name, metav1.GetOptions{})
		if err == nil && got.Annotations["events.kubevents.io/source-resource-version"] == ev.ResourceVersion {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("eventsd does not serve %s/%s mirrored at the cluster's resourceVersion %s: %v %v", ev.Namespace, ev.Name, ev.ResourceVersion, got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
