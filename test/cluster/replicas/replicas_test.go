//go:build linux

// Package replicas runs docs/install.md's "Replicas over etcd" on a real
// single-node cluster (internal/nodecluster) whose events are in an etcd
// of their own: eventsd replicas, installed with helm and with kustomize,
// serving the events kube-apiserver writes there, staying available when
// a replica is killed and while they are upgraded.
package replicas

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubevents/kubevents/internal/doctest"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/helmbin"
	"github.com/kubevents/kubevents/internal/nodecluster"
	"github.com/kubevents/kubevents/internal/syncbuf"
	"github.com/kubevents/kubevents/test/cluster/clustertest"
)

const (
	ns            = clustertest.Namespace
	installDoc    = clustertest.InstallDoc
	replicasTitle = "Replicas over etcd"
	readingTitle  = "Reading its events: kubectl and evctl"
	// etcdService is the name docs/install.md gives the cluster's events
	// etcd (kube-apiserver's --etcd-servers-overrides=/events#...).
	etcdService = "etcd-events"
	etcdPort    = 2379
	// eventLag bounds the time from an event's creation through
	// kube-apiserver to its arrival on a watch of eventsd's.
	eventLag = 10 * time.Second
)

// TestReplicasOverEtcd runs docs/install.md's "Replicas over etcd" with
// Helm on a real node whose kube-apiserver keeps the events in an etcd of
// their own (nodecluster.Options.EventsEtcd), reached in the cluster as
// the page names it, etcd-events.kube-system.svc:2379 (a Service without
// selector and its EndpointSlice, as a cluster's would be), then reads the
// events the kubelet and the controllers wrote, through kube-apiserver,
// into that etcd, with the page's reading blocks: eventsd serves them
// without mirroring anything. Then: an event created through kube-apiserver
// reaches a watch of eventsd's within eventLag, a killed replica leaves
// the Service answering from the others, and the page's upgrade block
// (verbatim: a new image tag) rolls the replicas with the Service
// answering every request, as the page says ("none unavailable").
//
// What differs from the page, as the page itself says for an etcd without
// TLS ("without tlsSecretName for plain HTTP"): the values file's server is
// http:// instead of https://, its tlsSecretName line is dropped, and the
// block creating the client certificate's Secret is not run (there is no
// certificate). kubectl port-forward listens on a free port instead of
// 8080, and the page's three reading blocks run as one (its port-forward
// ends with its block), waiting for the port-forward to listen. The image
// is built with tools/image's --name as the values file names it
// (registry.example.com/kubevents/eventsd:v0.1.0) and imported on the
// node, as a pull would put it there.
func TestReplicasOverEtcd(t *testing.T) {
	blocks := doctest.Blocks(installSection(t, replicasTitle), "sh")
	if len(blocks) != 4 || !strings.HasPrefix(blocks[0], "cat >replicas.yaml") || !strings.Contains(blocks[1], "create secret generic eventsd-etcd-client") ||
		!strings.HasPrefix(blocks[2], "helm install eventsd deploy/helm/eventsd") || !strings.HasPrefix(blocks[3], "kubectl apply -k deploy/kustomize/replicas") {
		t.Fatalf("%s's %q has %d sh blocks %q: want the values file, the etcd client Secret, the helm install and the kubectl apply -k", installDoc, replicasTitle, len(blocks), blocks)
	}
	values := plainEtcd(t, blocks[0])
	image := imageOf(t, values)
	readBlocks := doctest.Blocks(installSection(t, readingTitle), "sh")
	if len(readBlocks) != 3 || !strings.Contains(readBlocks[1], "port-forward svc/eventsd 8080 &") {
		t.Fatalf("%s's %q has %d sh blocks %q: want the CA, the port-forward and the reading", installDoc, readingTitle, len(readBlocks), readBlocks)
	}

	r := startReplicasCluster(t, []string{"--name", image})
	c, cs, sh, kubectl := r.c, r.c.Client(), r.sh, r.kubectl
	ctx := context.Background()

	// A crashlooping workload, whose events the kubelet and the
	// controllers write through kube-apiserver into the events etcd.
	clustertest.Crashloop(t, cs, "shop", "web")

	// 1. The values file and the namespace; the namespace enforces the
	// restricted Pod Security Standard before anything runs in it (a
	// replica that violates it is never made); the helm install.
	sh.Run(t, values)
	enforceRestricted(t, c.RESTConfig())
	sh.Run(t, blocks[2])
	waitReplicasReady(t, cs, 3)
	t.Logf("3 replicas Ready %v after the cluster's start", time.Since(r.begun).Round(time.Second))
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "eventsd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
	if strings.Contains(args, "--source") || !strings.Contains(args, "--etcd-servers=http://etcd-events.kube-system.svc:2379") {
		t.Errorf("the replicas run %s: want the events etcd by its Service's name, no mirror", args)
	}

	// 2. The kubelet's events for web, in the events etcd (kube-apiserver
	// wrote them there), read through eventsd with the page's blocks.
	clustertest.WaitEvent(t, cs, "shop", "BackOff")
	if n := etcdKeys(t, c.EventsEtcdURL(), "/registry/events/shop/"); n == 0 {
		t.Fatalf("the events etcd has no key under /registry/events/shop/")
	}
	port := clustertest.FreePort(t)
	read := strings.Join([]string{
		readBlocks[0],
		strings.Replace(readBlocks[1], "svc/eventsd 8080", "svc/eventsd "+port+":8080", 1),
		"for i in $(seq 100); do (: </dev/tcp/127.0.0.1/" + port + ") 2>/dev/null && break; sleep 0.1; done",
		strings.ReplaceAll(readBlocks[2], "127.0.0.1:8080", "127.0.0.1:"+port),
	}, "\n")
	out := sh.Run(t, read)
	// kubectl's table, then evctl's, each with its header.
	tables := strings.Split(out, "NAMESPACE   LAST SEEN")
	if len(tables) != 3 {
		t.Fatalf("the page's kubectl and evctl through eventsd printed %d tables, want 2", len(tables)-1)
	}
	for i, tool := range []string{"kubectl", "evctl"} {
		for _, want := range []string{"BackOff", "Scheduled", "SuccessfulCreate", "ScalingReplicaSet", "web-"} {
			if !strings.Contains(tables[i+1], want) {
				t.Errorf("the page's %s through eventsd printed no %q", tool, want)
			}
		}
	}

	// 3. An event created through kube-apiserver reaches a watch of
	// eventsd's.
	token := viewerToken(t, cs)
	ca, err := os.ReadFile(filepath.Join(sh.Dir, "eventsd-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pfPort := portForward(t, kubectl, c.Kubeconfig(), "svc/eventsd")
	ecs, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:" + pfPort, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	if err != nil {
		t.Fatal(err)
	}
	eventReachesEventsd(t, cs, ecs)

	// 4. A replica killed: the Service goes on answering, from the others.
	p := startProber(t, c, kubectl, ca, token)
	killReplica(t, cs, p)

	// 5. docs/install.md's upgrade, verbatim: the Service answers
	// throughout.
	upgradeReplicas(t, c, sh, image, p)
	t.Logf("the test took %v from the cluster's start", time.Since(r.begun).Round(time.Second))
}

// kustomizeOverlay is the overlay docs/install.md describes for
// deploy/kustomize/replicas ("takes the same settings from its ConfigMap
// eventsd-etcd (set them from an overlay) and replicas:"), for the
// cluster's events etcd over plain HTTP, with three replicas.
const kustomizeOverlay = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../deploy/kustomize/replicas
configMapGenerator:
  - name: eventsd-etcd
    namespace: kubevents
    behavior: merge
    literals:
      - ETCD_SERVERS=http://etcd-events.kube-system.svc:2379
replicas:
  - name: eventsd
    count: 3
`

// TestKustomizeReplicasOverEtcd runs docs/install.md's `kubectl apply -k
// deploy/kustomize/replicas` on a node like TestReplicasOverEtcd's, through
// an overlay (kustomizeOverlay) as the page says: the base's etcd is
// https://etcd-events.kube-system.svc:2379, this one serves plain HTTP.
// The base serves plain HTTP too, where kubectl and evctl send no token:
// the events are read with the viewer's token over HTTP (as a browser
// does) through a port-forward, and without a token they are refused.
func TestKustomizeReplicasOverEtcd(t *testing.T) {
	const apply = "kubectl apply -k deploy/kustomize/replicas"
	var block string
	for _, b := range doctest.Blocks(installSection(t, replicasTitle), "sh") {
		if strings.TrimSpace(b) == apply {
			block = b
		}
	}
	if block == "" {
		t.Fatalf("%s's %q has no block %q", installDoc, replicasTitle, apply)
	}
	// The base's image, as tools/image names it by default.
	r := startReplicasCluster(t, nil)
	cs := r.c.Client()
	ctx := context.Background()
	clustertest.Crashloop(t, cs, "shop", "web")

	if err := os.MkdirAll(filepath.Join(r.sh.Dir, "my-replicas"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.sh.Dir, "my-replicas", "kustomization.yaml"), []byte(kustomizeOverlay), 0o644); err != nil {
		t.Fatal(err)
	}
	r.sh.Run(t, strings.Replace(block, "deploy/kustomize/replicas", "my-replicas", 1))
	waitReplicasReady(t, cs, 3)
	t.Logf("3 replicas Ready %v after the cluster's start", time.Since(r.begun).Round(time.Second))
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "eventsd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm := ""
	for _, e := range d.Spec.Template.Spec.Containers[0].EnvFrom {
		if e.ConfigMapRef != nil {
			cm = e.ConfigMapRef.Name
		}
	}
	etcdConfig, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, cm, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the replicas' ConfigMap %q: %v", cm, err)
	}
	if got := etcdConfig.Data["ETCD_SERVERS"]; got != "http://etcd-events.kube-system.svc:2379" || etcdConfig.Data["ETCD_PREFIX"] != "/registry" {
		t.Errorf("the overlay's %s has ETCD_SERVERS=%q, ETCD_PREFIX=%q: want the overlay's server merged into the base's settings", cm, got, etcdConfig.Data["ETCD_PREFIX"])
	}

	clustertest.WaitEvent(t, cs, "shop", "BackOff")
	port := portForward(t, r.kubectl, r.c.Kubeconfig(), "svc/eventsd")
	get := func(token string) (int, []byte) {
		req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+port+"/api/v1/namespaces/shop/events", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}
	if code, body := get(""); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("without a token, eventsd answered %d: %.300s", code, body)
	}
	code, body := get(viewerToken(t, cs))
	if code != http.StatusOK {
		t.Fatalf("with the viewer's token, eventsd answered %d: %.300s", code, body)
	}
	var list corev1.EventList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, e := range list.Items {
		if strings.HasPrefix(e.InvolvedObject.Name, "web-") {
			reasons[e.Reason] = true
		}
	}
	for _, want := range []string{"Scheduled", "Started", "BackOff"} {
		if !reasons[want] {
			t.Errorf("eventsd's events of web's pod have no %s: %v", want, reasons)
		}
	}
	t.Logf("the test took %v from the cluster's start", time.Since(r.begun).Round(time.Second))
}

// installSection is docs/install.md's section under the heading title.
func installSection(t *testing.T, title string) string {
	t.Helper()
	md, err := doctest.Read(installDoc)
	if err != nil {
		t.Fatal(err)
	}
	section, err := doctest.Section(md, title)
	if err != nil {
		t.Fatal(err)
	}
	return section
}

// replicasCluster is a node whose events are in an etcd of their own,
// reached in the cluster as etcd-events.kube-system.svc:2379, with
// eventsd's image on it and a clustertest.Shell for the page's blocks.
type replicasCluster struct {
	c       *nodecluster.Cluster
	sh      clustertest.Shell
	kubectl string
	// begun is when the cluster started.
	begun time.Time
}

// startReplicasCluster builds the image (tools/image with imageArgs,
// before the cluster starts: the build is the slow part), starts the
// node, imports the image, exposes the events etcd by name and makes the
// clustertest.Shell (helm, kubectl, evctl; deploy/ beside its directory).
func startReplicasCluster(t *testing.T, imageArgs []string) replicasCluster {
	t.Helper()
	helm := helmbin.ForTest(t)
	kubectl := eventsdtest.Kubectl(t)
	evctl := clustertest.BuildEvctl(t)
	work := t.TempDir()
	imageTar := filepath.Join(work, "eventsd-image.tar")
	clustertest.GoRun(t, append([]string{"-C", "tools/image", ".", "--output", imageTar}, imageArgs...)...)

	begun := time.Now()
	c := nodecluster.StartTest(t, nodecluster.Options{EventsEtcd: true})
	if err := c.ImportImage(imageTar); err != nil {
		t.Fatal(err)
	}
	etcdURL, err := url.Parse(c.EventsEtcdURL())
	if err != nil || etcdURL.Host == "" {
		t.Fatalf("the events etcd's URL %q: %v", c.EventsEtcdURL(), err)
	}
	exposeEtcd(t, c.Client(), etcdURL.Host)

	bin := t.TempDir()
	for name, target := range map[string]string{"helm": helm, "kubectl": kubectl, "evctl": evctl} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(doctest.Root(), "deploy"), filepath.Join(work, "deploy")); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	sh := clustertest.Shell{Dir: work, Env: append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+c.Kubeconfig(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"),
		"DOCKER_CONFIG="+filepath.Join(home, "docker"),
	)}
	return replicasCluster{c: c, sh: sh, kubectl: kubectl, begun: begun}
}

// waitReplicasReady waits for the Deployment eventsd's n replicas, all
// of its current template, to be Ready.
func waitReplicasReady(t *testing.T, cs kubernetes.Interface, n int32) {
	t.Helper()
	nodecluster.WaitFor(t, 3*time.Minute, fmt.Sprintf("the Deployment's %d replicas Ready", n), func() (bool, string) {
		d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), "eventsd", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.ReadyReplicas == n && d.Status.UpdatedReplicas == n && d.Status.Replicas == n,
			fmt.Sprintf("%d of %d ready, %d updated %v", d.Status.ReadyReplicas, d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.Conditions)
	})
}

// plainEtcd is the page's values block for an etcd without TLS, as the
// page says: http://, no tlsSecretName. Each substitution must apply once.
func plainEtcd(t *testing.T, block string) string {
	t.Helper()
	for old, repl := range map[string]string{
		"https://etcd-events.kube-system.svc:2379": "http://etcd-events.kube-system.svc:2379",
		"    tlsSecretName: eventsd-etcd-client\n": "",
	} {
		if n := strings.Count(block, old); n != 1 {
			t.Fatalf("the values block has %q %d times, want once:\n%s", old, n, block)
		}
		block = strings.Replace(block, old, repl, 1)
	}
	return block
}

// imageOf is the image the values block installs (image.repository and
// image.tag).
func imageOf(t *testing.T, block string) string {
	t.Helper()
	repo := regexp.MustCompile(`(?m)^  repository: (\S+)$`).FindStringSubmatch(block)
	tag := regexp.MustCompile(`(?m)^  tag: (\S+)$`).FindStringSubmatch(block)
	if repo == nil || tag == nil {
		t.Fatalf("the values block names no image.repository and image.tag:\n%s", block)
	}
	return repo[1] + ":" + tag[1]
}

// exposeEtcd makes the events etcd at hostPort reachable in the cluster as
// etcd-events.kube-system.svc:2379, as a cluster's own events etcd: a
// Service without selector and an EndpointSlice with the etcd's address.
func exposeEtcd(t *testing.T, cs kubernetes.Interface, hostPort string) {
	t.Helper()
	ctx := context.Background()
	host, portStr, err := net.SplitHostPort(hostPort)
	if err != nil {
		t.Fatal(err)
	}
	var port int32
	if _, err := fmt.Sscan(portStr, &port); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: etcdService, Namespace: "kube-system"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "client", Port: etcdPort, Protocol: corev1.ProtocolTCP}}},
	}
	if _, err := cs.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: etcdService + "-1", Namespace: "kube-system",
			Labels: map[string]string{discoveryv1.LabelServiceName: etcdService, discoveryv1.LabelManagedBy: "replicas-test"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("client"), Port: &port, Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if _, err := cs.DiscoveryV1().EndpointSlices("kube-system").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// enforceRestricted labels the namespace to enforce the restricted Pod
// Security Standard.
func enforceRestricted(t *testing.T, cfg *rest.Config) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n, err := cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if _, err := cs.CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// etcdKeys counts the keys under prefix in the etcd at endpoint.
func etcdKeys(t *testing.T, endpoint, prefix string) int64 {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// viewerToken is a token of the chart's eventsd-viewer.
func viewerToken(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), "eventsd-viewer", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// portForward runs kubectl port-forward to target in ns on a free port
// until the test ends, and returns the port once it listens.
func portForward(t *testing.T, kubectl, kubeconfig, target string) string {
	t.Helper()
	port := clustertest.FreePort(t)
	cmd := exec.Command(kubectl, "--kubeconfig", kubeconfig, "-n", ns, "port-forward", target, port+":8080")
	var log syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	nodecluster.WaitFor(t, 30*time.Second, "kubectl port-forward listening", func() (bool, string) {
		conn, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			conn.Close()
			return true, ""
		}
		return false, log.String()
	})
	return port
}

// eventReachesEventsd creates an event through kube-apiserver (cs) and
// waits for it on a watch of eventsd's (ecs), at most eventLag.
func eventReachesEventsd(t *testing.T, cs, ecs kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	list, err := ecs.CoreV1().Events("shop").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing shop's events through eventsd: %v", err)
	}
	w, err := ecs.CoreV1().Events("shop").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watching shop's events through eventsd: %v", err)
	}
	defer w.Stop()
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.probe", Namespace: "shop"},
		InvolvedObject: corev1.ObjectReference{Kind: "Deployment", Namespace: "shop", Name: "web", APIVersion: "apps/v1"},
		Reason:         "Probe", Message: "written through kube-apiserver", Type: corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "replicas-test"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	created := time.Now()
	if _, err := cs.CoreV1().Events("shop").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(eventLag)
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("eventsd's watch ended before the event created through kube-apiserver arrived")
			}
			if e.Type == watch.Error {
				t.Fatalf("eventsd's watch: %v", e.Object)
			}
			if got, isEvent := e.Object.(*corev1.Event); isEvent && e.Type == watch.Added && got.Name == ev.Name {
				t.Logf("the event created through kube-apiserver reached eventsd's watch in %v", time.Since(created).Round(time.Millisecond))
				return
			}
		case <-timeout:
			t.Fatalf("the event created through kube-apiserver did not reach eventsd's watch within %v", eventLag)
		}
	}
}

// prober asks the Service eventsd for shop's events every 200 ms with
// kubectl from a client pod's network namespace, new connections each
// time (kube-proxy picks a replica per connection), verifying the
// certificate for the Service's name, and records each answer.
type prober struct {
	mu      sync.Mutex
	results []probeResult
	stop    context.CancelFunc
	done    chan struct{}
}

type probeResult struct {
	at  time.Time
	err error
}

// startProber starts a prober, stopped when the test ends, and waits for
// its first 5 answers.
func startProber(t *testing.T, c *nodecluster.Cluster, kubectl string, ca []byte, token string) *prober {
	t.Helper()
	ctx := context.Background()
	svc, err := c.Client().CoreV1().Services(ns).Get(ctx, "eventsd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	netns := clientPodNetNS(t, c, "shop", "eventsd-client")
	dir := t.TempDir()
	caFile, kubeconfig := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeconfig, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	probe := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "nsenter", "--net="+netns, kubectl,
			"--server", "https://"+net.JoinHostPort(svc.Spec.ClusterIP, "8080"), "--tls-server-name", "eventsd.kubevents.svc",
			"--certificate-authority", caFile, "--token", token, "--cache-dir", filepath.Join(dir, "cache"), "--request-timeout", "3s",
			"get", "events", "-n", "shop", "-o", "name")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "event/") {
			return fmt.Errorf("%v: %.300s", err, out)
		}
		return nil
	}
	pctx, stop := context.WithCancel(ctx)
	p := &prober{stop: stop, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for pctx.Err() == nil {
			err := probe(pctx)
			if pctx.Err() != nil {
				return
			}
			p.mu.Lock()
			p.results = append(p.results, probeResult{time.Now(), err})
			p.mu.Unlock()
			select {
			case <-pctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(p.close)
	nodecluster.WaitFor(t, time.Minute, "5 answers of the Service", func() (bool, string) {
		oks, last := 0, ""
		for _, r := range p.since(time.Time{}) {
			if r.err == nil {
				oks++
			} else {
				last = r.err.Error()
			}
		}
		return oks >= 5, fmt.Sprintf("%d; the last failure: %s", oks, last)
	})
	return p
}

// since are the answers recorded from start on.
func (p *prober) since(start time.Time) []probeResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	var rs []probeResult
	for _, r := range p.results {
		if !r.at.Before(start) {
			rs = append(rs, r)
		}
	}
	return rs
}

func (p *prober) close() {
	p.stop()
	<-p.done
}

// killReplica kills one replica (no grace period) while p probes, and
// checks that the Service answered before the replacement was Ready (the
// other replicas served) and failed no request later than a few seconds
// after the kill (kube-proxy drops the dead endpoint).
func killReplica(t *testing.T, cs kubernetes.Interface, p *prober) {
	t.Helper()
	ctx := context.Background()
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=eventsd"})
	if err != nil || len(pods.Items) != 3 {
		t.Fatalf("the replicas: %v, %v", pods, err)
	}
	victim := pods.Items[0].Name
	killed := time.Now()
	if err := cs.CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	// The replacement's Ready time (whole seconds: the condition's).
	var replacementReady time.Time
	nodecluster.WaitFor(t, 3*time.Minute, "a replacement of "+victim+" Ready", func() (bool, string) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=eventsd"})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range l.Items {
			if p.CreationTimestamp.Time.Before(killed.Truncate(time.Second)) || !clustertest.PodReady(&p) {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					replacementReady = c.LastTransitionTime.Time
				}
			}
			return true, ""
		}
		return false, fmt.Sprintf("%d pods", len(l.Items))
	})
	time.Sleep(3 * time.Second) // a few more requests, all replicas back
	var before, after int
	var lastFail time.Time
	var failures []string
	for _, r := range p.since(killed) {
		switch {
		case r.err != nil:
			lastFail = r.at
			failures = append(failures, fmt.Sprintf("+%v: %v", r.at.Sub(killed).Round(time.Millisecond), r.err))
		case r.at.Before(replacementReady):
			before++
		default:
			after++
		}
	}
	t.Logf("after %s was killed: %d answers before its replacement was Ready (%v later), %d after, %d failures %q",
		victim, before, replacementReady.Sub(killed).Round(time.Millisecond), after, len(failures), failures)
	if before == 0 {
		t.Errorf("the Service answered no request between %s's kill and its replacement's readiness", victim)
	}
	if after == 0 {
		t.Errorf("the Service answered no request after the replacement was Ready")
	}
	if len(failures) > 0 && lastFail.Sub(killed) > 5*time.Second {
		t.Errorf("the Service failed a request %v after the kill: want none after 5 s", lastFail.Sub(killed))
	}
}

// upgradeReplicas runs docs/install.md's upgrade block (a new image tag,
// tagged on the node as a push of the new release would name it) while p
// probes, and checks what the page says of replicas: they roll one at a
// time with none unavailable, so the Service fails no request.
func upgradeReplicas(t *testing.T, c *nodecluster.Cluster, sh clustertest.Shell, image string, p *prober) {
	t.Helper()
	ctx := context.Background()
	cs := c.Client()
	upgrade := clustertest.InstallBlock(t, "helm upgrade eventsd deploy/helm/eventsd --namespace kubevents --reuse-values --set image.tag=")
	tag := regexp.MustCompile(`--set image\.tag=(\S+)`).FindStringSubmatch(upgrade)
	if tag == nil {
		t.Fatalf("the upgrade block sets no image.tag: %s", upgrade)
	}
	repo, _, _ := strings.Cut(image, ":")
	newImage := repo + ":" + tag[1]
	ctr := exec.Command(c.Containerd().Binaries().Ctr(), "--address", c.Containerd().Socket(), "--namespace", "k8s.io", "images", "tag", image, newImage)
	if out, err := ctr.CombinedOutput(); err != nil {
		t.Fatalf("ctr images tag: %v\n%s", err, out)
	}
	begun := time.Now()
	sh.Run(t, upgrade)
	nodecluster.WaitFor(t, 3*time.Minute, "the replicas rolled to "+newImage, func() (bool, string) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=eventsd"})
		if err != nil {
			return false, err.Error()
		}
		var state []string
		rolled := 0
		for _, p := range l.Items {
			if p.Spec.Containers[0].Image == newImage && clustertest.PodReady(&p) && p.DeletionTimestamp == nil {
				rolled++
			}
			state = append(state, fmt.Sprintf("%s %s ready=%v deleting=%v", p.Name, p.Spec.Containers[0].Image, clustertest.PodReady(&p), p.DeletionTimestamp != nil))
		}
		return rolled == 3 && len(l.Items) == 3, strings.Join(state, "; ")
	})
	rolled := time.Since(begun)
	time.Sleep(2 * time.Second) // requests after the last old pod went
	var failures []string
	rs := p.since(begun)
	for _, r := range rs {
		if r.err != nil {
			failures = append(failures, fmt.Sprintf("+%v: %v", r.at.Sub(begun).Round(time.Millisecond), r.err))
		}
	}
	t.Logf("the replicas rolled to %s in %v: %d requests to the Service, %d failed %q", newImage, rolled.Round(time.Millisecond), len(rs), len(failures), failures)
	if len(failures) > 0 {
		t.Errorf("during the upgrade the Service failed %d of %d requests: the page says replicas roll with none unavailable", len(failures), len(rs))
	}
}

// clientPodNetNS runs a pod that sleeps and returns the path of its
// network namespace, its container's process's.
func clientPodNetNS(t *testing.T, c *nodecluster.Cluster, namespace, name string) string {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "main", Image: nodecluster.Image, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"sleep", "3600"},
		}}},
	}
	if _, err := c.Client().CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitPodReady(t, c.Client(), namespace, name)
	rt, closeRT, err := c.Containerd().Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer closeRT()
	l, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": namespace, "io.kubernetes.pod.name": name},
	}})
	if err != nil || len(l.Containers) != 1 {
		t.Fatalf("%s's running containers: %v, %v", name, l, err)
	}
	st, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: l.Containers[0].Id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.Pid == 0 {
		t.Fatalf("%s's container's pid in %.300q: %v", name, st.Info["info"], err)
	}
	return fmt.Sprintf("/proc/%d/ns/net", info.Pid)
}
