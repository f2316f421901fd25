package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubevents/kubevents/internal/etcdproc"
	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// etcdkPost creates ev with a JSON POST that client-go does not retry
// (a 503's Retry-After would otherwise hide the failure), and returns the
// HTTP status (0 when there was no answer) and the acknowledgement.
func etcdkPost(ctx context.Context, cs kubernetes.Interface, ev *corev1.Event) (int, cgAck, error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return 0, cgAck{}, err
	}
	code, raw, err := cgDo(ctx, cs.CoreV1().RESTClient().Post().Namespace(ev.Namespace).Resource("events").
		SetHeader("Content-Type", "application/json").MaxRetries(0).Body(body))
	if err != nil {
		return code, cgAck{}, err
	}
	out := &corev1.Event{}
	if err := json.Unmarshal(raw, out); err != nil {
		return code, cgAck{}, fmt.Errorf("decoding the created event: %w", err)
	}
	if out.Name != ev.Name || out.UID == "" {
		return code, cgAck{}, fmt.Errorf("created %q with uid %q, asked for %q", out.Name, out.UID, ev.Name)
	}
	var rv int64
	if _, err := fmt.Sscan(out.ResourceVersion, &rv); err != nil {
		return code, cgAck{}, fmt.Errorf("resourceVersion %q: %w", out.ResourceVersion, err)
	}
	return code, cgAck{uid: out.UID, rv: rv}, nil
}

// etcdkReadyz is the status code and body of p's /readyz.
func etcdkReadyz(p *eventsdtest.Process) (int, string) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(p.URL + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Status + " " + string(b)
}

// TestEtcdClusterKillLeaderUnderLoad: two eventsd replicas over a cluster
// of three real etcd processes; eight writers create through both; the
// etcd leader's process is killed (SIGKILL) in the middle. Creates fail
// only with 503 or 504 (those in flight on the killed leader after etcd's
// own request timeout), then both replicas acknowledge creates again and
// their /readyz passes with two members of three. Every acknowledged create is stored with
// its content, uid and resourceVersion, read through each replica; an
// event stored without acknowledgement is one whose create failed. The
// killed member, restarted over its data, has them all.
func TestEtcdClusterKillLeaderUnderLoad(t *testing.T) {
	t.Parallel()
	c := etcdproc.Start(t, 3)
	servers := strings.Join(c.Endpoints(), ",")
	var procs [2]*eventsdtest.Process
	var clients [2]kubernetes.Interface
	for i := range procs {
		procs[i] = eventsdtest.Start(t, eventsdtest.Options{
			Args: []string{"--storage-backend=etcd", "--etcd-servers=" + servers, "--etcd-prefix=/registry"},
		})
		clients[i] = procs[i].Clientset()
	}
	ctx := cgCtx(t)
	const (
		ns       = "etcdkill"
		writers  = 8
		maxTotal = 2000
		runFor   = 4 * time.Second
		// maxRun bounds the load, whatever happens.
		maxRun = 20 * time.Second
		killAt = 1500 * time.Millisecond // or when half of maxTotal are sent
		// reqTimeout is above eventsd's --etcd-request-timeout (10 s), so
		// that eventsd answers first.
		reqTimeout = 15 * time.Second
	)
	var (
		mu             sync.Mutex
		acked          = map[string]cgAck{}
		failedNames    = map[string]bool{}
		failures       = map[string]int{} // by kind: HTTP code or "no answer"
		unexpected     []string
		slowest        time.Duration
		slowestWas     string
		ackedBy        [2]int
		ackedAfterKill [2]int
		total          atomic.Int64
		killed         atomic.Bool
		wg             sync.WaitGroup
	)
	loadStart := time.Now()
	deadline, hardStop := loadStart.Add(runFor), loadStart.Add(maxRun)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep := w % 2
			// A writer stops at the deadline or at maxTotal creates, but
			// not before a create it sent after the kill was acknowledged
			// (a create in flight at the kill can take etcd's own request
			// timeout to fail), nor after hardStop.
			ackedAfter := false
			more := func() bool {
				if time.Now().After(hardStop) {
					return false
				}
				if time.Now().Before(deadline) && total.Add(1) <= maxTotal {
					return true
				}
				return !ackedAfter
			}
			for i := 0; more(); i++ {
				afterKill := killed.Load()
				ev := cgCoreEvent(ns, fmt.Sprintf("w%d-%05d", w, i), fmt.Sprintf("pod-%d", w))
				rctx, cancel := context.WithTimeout(ctx, reqTimeout)
				sent := time.Now()
				code, ack, err := etcdkPost(rctx, clients[rep], ev)
				cancel()
				mu.Lock()
				if d := time.Since(sent); d > slowest {
					slowest, slowestWas = d, fmt.Sprintf("%s: %d %v", ev.Name, code, err)
				}
				switch {
				case err == nil && code == http.StatusCreated:
					acked[ev.Name] = ack
					ackedBy[rep]++
					if afterKill {
						ackedAfterKill[rep]++
						ackedAfter = true
					}
				default:
					failedNames[ev.Name] = true
					kind := fmt.Sprint(code)
					if code == 0 {
						kind = "no answer"
					}
					failures[kind]++
					if code != http.StatusServiceUnavailable && code != http.StatusGatewayTimeout && len(unexpected) < 10 {
						unexpected = append(unexpected, fmt.Sprintf("%s through replica %d: %d %v", ev.Name, rep, code, err))
					}
				}
				mu.Unlock()
			}
		}()
	}
	for time.Since(loadStart) < killAt && total.Load() < maxTotal/2 {
		time.Sleep(10 * time.Millisecond)
	}
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killStart := time.Now()
	c.Kill(leader)
	killed.Store(true)
	// A new leader among the two left.
	var next int
	cgPoll(t, etcdproc.StartTimeout, "a new etcd leader", func() (bool, string) {
		next, err = c.Leader(ctx)
		return err == nil && next != leader, fmt.Sprint(next, err)
	})
	elected := time.Since(killStart)
	wg.Wait()

	nFailed := 0
	for _, n := range failures {
		nFailed += n
	}
	t.Logf("etcd leader m%d killed %v into the load; m%d elected %v later", leader, killStart.Sub(loadStart).Round(time.Millisecond), next, elected.Round(time.Millisecond))
	t.Logf("creates: %d acknowledged (%d, %d by the replicas; %d, %d after the kill), %d failed %v",
		len(acked), ackedBy[0], ackedBy[1], ackedAfterKill[0], ackedAfterKill[1], nFailed, failures)
	// Creates in flight on the killed leader wait for etcd's own request
	// timeout (5 s + 2 election timeouts), then get 503 "request timed
	// out, possibly due to previous leader failure".
	t.Logf("slowest create: %v, %s", slowest.Round(time.Millisecond), slowestWas)
	if len(unexpected) > 0 {
		t.Errorf("creates failed other than with 503 or 504: %s", strings.Join(unexpected, "; "))
	}
	if ackedAfterKill[0] < writers/2 || ackedAfterKill[1] < writers/2 {
		t.Errorf("acknowledged after the kill: %v by the replicas, want at least one per writer", ackedAfterKill)
	}

	// Both replicas ready with two members of three.
	for i, p := range procs {
		cgPoll(t, 10*time.Second, fmt.Sprintf("/readyz of replica %d with two etcd members", i), func() (bool, string) {
			code, s := etcdkReadyz(p)
			return code == http.StatusOK, s
		})
	}

	// Every acknowledged create, through each replica; whatever is stored
	// unacknowledged had its create fail.
	var stored int
	for i, cs := range clients {
		cgCheckAcked(t, cs, ns, acked, false)
		l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stored = len(l.Items)
		var extra []string
		for _, ev := range l.Items {
			if want := "message of " + ev.Name; ev.Message != want {
				t.Errorf("replica %d: %s: message %q, want %q", i, ev.Name, ev.Message, want)
			}
			if _, ok := acked[ev.Name]; !ok {
				if !failedNames[ev.Name] {
					t.Errorf("replica %d: %s is stored, but was neither acknowledged nor failed", i, ev.Name)
				}
				extra = append(extra, ev.Name)
			}
		}
		slices.Sort(extra)
		t.Logf("replica %d: %d stored: %d acknowledged, %d whose create failed %v", i, stored, len(acked), len(extra), extra)
	}

	// The killed member, restarted over its data, catches up: a
	// linearizable read from it alone (which waits until it has applied
	// what the leader committed) has every event.
	c.Restart(leader)
	one, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Endpoint(leader)}, DialTimeout: etcdproc.StartTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	r, err := one.Get(ctx, "/registry/events/"+ns+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if r.Count != int64(stored) {
		t.Errorf("the restarted member m%d has %d events, the replicas list %d", leader, r.Count, stored)
	}
	for i, p := range procs {
		if code, s := etcdkReadyz(p); code != http.StatusOK {
			t.Errorf("/readyz of replica %d after the restart: %s", i, s)
		}
	}
}
