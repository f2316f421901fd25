package readme

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubevents/kubevents/internal/etcdproc"
)

// etcdDoc is the page TestEtcdCommands runs.
const etcdDoc = "docs/etcd.md"

// The blocks of etcd.md, by a text only each has.
const (
	etcdLocal      = "go build -o bin/etcd go.etcd.io/etcd/server/v3"
	etcdReplicaA   = "--listen=127.0.0.1:8080 --data-dir=/tmp/replica-a"
	etcdReplicaB   = "--listen=127.0.0.1:8081 --data-dir=/tmp/replica-b"
	etcdReplicated = "metadata: {name: web-1.replicated, namespace: default}"
	etcdBeside     = "# kube-apiserver ... --etcd-prefix=/registry"
	etcdDevcluster = "go run ./cmd/devcluster --kubeconfig cluster.kubeconfig"
	etcdBesideDev  = "--data-dir=/tmp/beside-cluster"
	etcdBothSides  = "metadata: {name: web-1.fromapiserver, namespace: default}"
)

// etcdNotRun are the page's blocks no test here runs, with why.
var etcdNotRun = map[string]string{
	etcdBeside: "the devcluster section's eventsd block is this command with a --data-dir of its own, and runs",
}

// TestEtcdCommands runs docs/etcd.md's ```sh blocks as a reader would,
// each server in a terminal of its own: a local etcd and two eventsd
// replicas over it, an event created through one listed through the
// other by its index; then devcluster, eventsd beside it on its events
// etcd, an event written through kube-apiserver read through eventsd with
// an extension selector, and one written through eventsd read through
// kube-apiserver.
//
// What the test changes, and why, is said at each substitution: `go run
// ./cmd/eventsd` and `go run ./cmd/devcluster` run the commands built
// once (go run would build them again at each block); the ports the
// page fixes (etcd's 2379 and 2380, eventsd's 8080 and 8081,
// kube-apiserver's 6443) are free ones, since other tests may hold them;
// the /tmp directories are the test's own.
func TestEtcdCommands(t *testing.T) {
	t.Parallel()
	blocks := pageBlocks(t, etcdDoc, []string{etcdLocal, etcdReplicaA, etcdReplicaB, etcdReplicated, etcdDevcluster, etcdBesideDev, etcdBothSides}, etcdNotRun)
	bin := commandsBin(t, "devcluster")

	t.Run("replicas", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		defer func() { t.Logf("%v", time.Since(start).Round(time.Millisecond)) }()
		etcd, err := etcdproc.Binary()
		if err != nil {
			t.Skipf("no etcd: %v", err)
		}
		dir := t.TempDir()
		r := newReader(t, dir, bin, "")
		client, peer := freePort(t), freePort(t)
		block := blocks[etcdLocal]
		// etcdproc's build of the module's etcd, cached, rather than a
		// go build of it (the page builds it into the repository's bin/).
		block = replace(t, block, "go build -o bin/etcd go.etcd.io/etcd/server/v3", "mkdir -p bin && ln -s "+etcd+" bin/etcd")
		block = replace(t, block, "127.0.0.1:2379", "127.0.0.1:"+client)
		block = replace(t, block, "127.0.0.1:2380", "127.0.0.1:"+peer)
		block = replace(t, block, "/tmp/etcd-data", "./etcd-data")
		r.terminal(block, "ready to serve client requests")

		var addrs []string
		for _, b := range []struct{ key, dataDir, port string }{{etcdReplicaA, "/tmp/replica-a", "8080"}, {etcdReplicaB, "/tmp/replica-b", "8081"}} {
			block := replace(t, blocks[b.key], "go run ./cmd/eventsd", "eventsd")
			block = replace(t, block, "127.0.0.1:2379", "127.0.0.1:"+client)
			block = replace(t, block, "--listen=127.0.0.1:"+b.port, "--listen=127.0.0.1:0")
			block = replace(t, block, b.dataDir, "."+strings.TrimPrefix(b.dataDir, "/tmp"))
			term, _ := r.terminal(block, `msg="eventsd serving"`)
			addrs = append(addrs, servingAddr(t, term))
		}
		block = replace(t, blocks[etcdReplicated], "127.0.0.1:8080", addrs[0])
		block = replace(t, block, "127.0.0.1:8081", addrs[1])
		out, err := r.run(block)
		if err != nil {
			t.Fatalf("the block failed: %v", err)
		}
		// resourceVersions are etcd's revisions, the same on every
		// replica.
		a, errA := eventsdClient(addrs[0]).CoreV1().Events("default").Get(context.Background(), "web-1.replicated", metav1.GetOptions{})
		b, errB := eventsdClient(addrs[1]).CoreV1().Events("default").Get(context.Background(), "web-1.replicated", metav1.GetOptions{})
		if errA != nil || errB != nil || a.ResourceVersion != b.ResourceVersion {
			t.Errorf("the event through each replica: %v %v, %v %v; want one resourceVersion", a, errA, b, errB)
		}
		// Created through the first, listed at once through the second.
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if !strings.Contains(out, "event/web-1.replicated created") || !containsAll(lines[len(lines)-1], []string{"default", "Warning", "BackOff", "pod/web-1", "Back-off restarting failed container web"}) {
			t.Errorf("the second replica did not list the event created through the first:\n%s", out)
		}
	})

	t.Run("devcluster", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		defer func() { t.Logf("%v", time.Since(start).Round(time.Millisecond)) }()
		r := newReader(t, t.TempDir(), bin, "")
		cfg, events := devcluster(t, r, blocks[etcdDevcluster])

		block := replace(t, blocks[etcdBesideDev], "go run ./cmd/eventsd", "eventsd --listen 127.0.0.1:0")
		block = replace(t, block, "127.0.0.1:2379", "127.0.0.1:"+events)
		block = replace(t, block, "/tmp/beside-cluster", "./beside-cluster")
		term, _ := r.terminal(block, `msg="eventsd serving"`)
		addr := servingAddr(t, term)

		out, err := r.run(replace(t, blocks[etcdBothSides], "127.0.0.1:8080", addr))
		if err != nil {
			t.Fatalf("the block failed: %v", err)
		}
		printedInOrder(t, out, []line{
			{"kube-apiserver creating", []string{"event/web-1.fromapiserver created"}},
			{"eventsd listing it by involves.uid", []string{"default", "Warning", "BackOff", "pod/web-1", "Back-off restarting failed container web"}},
			{"eventsd creating in events.k8s.io/v1", []string{"event.events.k8s.io/web-1.fromeventsd created"}},
			{"kube-apiserver's columns", []string{"NAME", "RV", "REASON", "SRC"}},
			{"kube-apiserver listing its own", []string{"web-1.fromapiserver", "BackOff"}},
			{"kube-apiserver listing eventsd's", []string{"web-1.fromeventsd", "Pulled", "kubelet"}},
		})
		// One set of resourceVersions: each event has the same one on
		// both sides; and the same leases (3660 s: the 1 h TTL and the
		// 60 s reuse window) whichever side wrote it.
		etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:" + events}, DialTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer etcd.Close()
		cluster := kubernetes.NewForConfigOrDie(cfg)
		for _, name := range []string{"web-1.fromapiserver", "web-1.fromeventsd"} {
			a, err := cluster.CoreV1().Events("default").Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			e, err := eventsdClient(addr).CoreV1().Events("default").Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if a.ResourceVersion != e.ResourceVersion {
				t.Errorf("%s: resourceVersion %s through kube-apiserver, %s through eventsd", name, a.ResourceVersion, e.ResourceVersion)
			}
			kv, err := etcd.Get(context.Background(), "/registry/events/default/"+name)
			if err != nil || len(kv.Kvs) != 1 {
				t.Fatalf("%s in the events etcd: %v %v", name, kv, err)
			}
			ttl, err := etcd.TimeToLive(context.Background(), clientv3.LeaseID(kv.Kvs[0].Lease))
			if err != nil || ttl.GrantedTTL != 3660 {
				t.Errorf("%s's lease: %+v %v, want one granted for 3660 s", name, ttl, err)
			}
		}
	})
}
