package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubevents/kubevents/internal/kubeapiserver"
	"github.com/kubevents/kubevents/lineage"
)

// followNamespace holds the follow phase's objects.
const followNamespace = "lineage-bench"

// followCost is the follow phase's result.
type followCost struct {
	Pods        int     `json:"pods"`
	ReplicaSets int     `json:"replicasets"`
	Deployments int     `json:"deployments"`
	SetupS      float64 `json:"setup_s"`
	// InitialListS is how long the Follower took to list every default
	// kind; GraphObjects what its graph then held.
	InitialListS float64        `json:"initial_list_s"`
	GraphObjects int            `json:"graph_objects"`
	Windows      []followWindow `json:"windows"`
	// LearnedChurn says whether the Follower's graph held the last Pod
	// the churn created.
	LearnedChurn bool `json:"learned_churn"`
}

// followWindow is kube-apiserver's cost over one window.
type followWindow struct {
	Name     string  `json:"name"`
	Follower bool    `json:"follower"`
	Churn    bool    `json:"churn"`
	Seconds  float64 `json:"seconds"`
	// KubeAPIServerCPUS and EtcdCPUS are their CPU seconds in the window.
	KubeAPIServerCPUS float64 `json:"kube_apiserver_cpu_s"`
	EtcdCPUS          float64 `json:"etcd_cpu_s"`
	// ServerRequests is the growth of kube-apiserver's
	// apiserver_request_total (all labels; watches count when they end).
	ServerRequests float64 `json:"server_requests"`
	// FollowerLists and FollowerWatches are the Follower's requests
	// (discovery counts as lists).
	FollowerLists   int64 `json:"follower_lists"`
	FollowerWatches int64 `json:"follower_watches"`
	ChurnOps        int64 `json:"churn_ops"`
}

// requestCounter counts a client's requests: watches and the rest.
type requestCounter struct {
	rt             http.RoundTripper
	lists, watches *atomic.Int64
}

func (c requestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1" {
		c.watches.Add(1)
	} else {
		c.lists.Add(1)
	}
	return c.rt.RoundTrip(req)
}

// runningFollower is a Follower running in this process.
type runningFollower struct {
	f      *lineage.Follower
	g      *lineage.Graph
	cancel context.CancelFunc
	done   chan error
}

func (r *runningFollower) stop() error {
	r.cancel()
	return <-r.done
}

// followPhase measures kube-apiserver's cost of a lineage Follower.
func (cfg *familyBenchConfig) followPhase(ctx context.Context, kas *kubeapiserver.Cluster) (*followCost, error) {
	fc := &followCost{Pods: cfg.FollowPods, ReplicaSets: cfg.FollowPods / 100, Deployments: cfg.FollowPods / 100}
	cs, err := newClientsetAuth(kas.URL(), wireProtobuf, kas.AdminToken(), nil)
	if err != nil {
		return fc, err
	}
	t0 := time.Now()
	rsUIDs, err := cfg.followSetup(ctx, kas, cs, fc)
	if err != nil {
		return fc, err
	}
	fc.SetupS = round3(time.Since(t0).Seconds())
	cfg.logf("follow: %d Pods in %d ReplicaSets of %d Deployments created in %.0fs", fc.Pods, fc.ReplicaSets, fc.Deployments, fc.SetupS)

	var lists, watches atomic.Int64
	start := func() (*runningFollower, error) {
		rc := rest.CopyConfig(kas.RESTConfig())
		rc.ContentType, rc.AcceptContentTypes = "", ""
		rc.QPS, rc.Burst = 50, 100
		rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return requestCounter{rt: rt, lists: &lists, watches: &watches}
		})
		mc, err := metadata.NewForConfig(rc)
		if err != nil {
			return nil, err
		}
		mapper, err := lineage.NewMapper(rc)
		if err != nil {
			return nil, err
		}
		g := lineage.New(lineage.Options{})
		f, err := lineage.NewFollower(lineage.FollowerOptions{Metadata: mc, Mapper: mapper, Graph: g})
		if err != nil {
			return nil, err
		}
		fctx, cancel := context.WithCancel(ctx)
		r := &runningFollower{f: f, g: g, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- f.Run(fctx) }()
		return r, nil
	}
	waitSynced := func(r *runningFollower) error {
		for !r.f.HasSynced() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case err := <-r.done:
				return fmt.Errorf("the follower stopped: %v", err)
			case <-time.After(10 * time.Millisecond):
			}
		}
		return nil
	}
	var churnPods, churnOps atomic.Int64
	churn := func(wctx context.Context) error { return cfg.churn(wctx, cs, rsUIDs[0], &churnPods, &churnOps) }
	window := func(name string, follower, churning bool, during func(context.Context) error) (*followWindow, error) {
		w := &followWindow{Name: name, Follower: follower, Churn: churning}
		cpu0, err := procCPU(kas.PID())
		if err != nil {
			return nil, err
		}
		etcd0 := etcdCPU(kas)
		req0, err := serverRequests(ctx, kas)
		if err != nil {
			return nil, err
		}
		l0, w0, c0 := lists.Load(), watches.Load(), churnOps.Load()
		t := time.Now()
		wctx, cancel := context.WithTimeout(ctx, cfg.Window)
		var churnErr error
		var wg sync.WaitGroup
		if churning {
			wg.Go(func() { churnErr = churn(wctx) })
		}
		var derr error
		if during != nil {
			derr = during(wctx)
		}
		<-wctx.Done()
		cancel()
		wg.Wait()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := errors.Join(derr, churnErr); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		w.Seconds = round3(time.Since(t).Seconds())
		cpu1, err := procCPU(kas.PID())
		if err != nil {
			return nil, err
		}
		req1, err := serverRequests(ctx, kas)
		if err != nil {
			return nil, err
		}
		w.KubeAPIServerCPUS = round3((cpu1 - cpu0).Seconds())
		w.EtcdCPUS = round3((etcdCPU(kas) - etcd0).Seconds())
		w.ServerRequests = req1 - req0
		w.FollowerLists, w.FollowerWatches, w.ChurnOps = lists.Load()-l0, watches.Load()-w0, churnOps.Load()-c0
		cfg.logf("follow: %s: kube-apiserver %.2f CPU s, etcd %.2f, %0.f requests (the follower's %d lists, %d watches), %d churn ops",
			name, w.KubeAPIServerCPUS, w.EtcdCPUS, w.ServerRequests, w.FollowerLists, w.FollowerWatches, w.ChurnOps)
		fc.Windows = append(fc.Windows, *w)
		return w, nil
	}

	if _, err := window("idle", false, false, nil); err != nil {
		return fc, err
	}
	var f1 *runningFollower
	if _, err := window("follower starts (initial list, then watches)", true, false, func(context.Context) error {
		t := time.Now()
		var err error
		if f1, err = start(); err != nil {
			return err
		}
		if err := waitSynced(f1); err != nil {
			return err
		}
		fc.InitialListS, fc.GraphObjects = round3(time.Since(t).Seconds()), f1.g.Len()
		return nil
	}); err != nil {
		if f1 != nil {
			_ = f1.stop()
		}
		return fc, err
	}
	if fc.GraphObjects < fc.Pods+fc.ReplicaSets+fc.Deployments {
		_ = f1.stop()
		return fc, fmt.Errorf("the follower's graph holds %d objects after its initial list, fewer than the %d created", fc.GraphObjects, fc.Pods+fc.ReplicaSets+fc.Deployments)
	}
	if _, err := window("follower watching, idle", true, false, nil); err != nil {
		_ = f1.stop()
		return fc, err
	}
	if err := f1.stop(); err != nil {
		return fc, err
	}
	if _, err := window("churn, no follower", false, true, nil); err != nil {
		return fc, err
	}
	f2, err := start()
	if err != nil {
		return fc, err
	}
	defer f2.stop()
	if err := waitSynced(f2); err != nil {
		return fc, err
	}
	if _, err := window("churn, follower watching", true, true, nil); err != nil {
		return fc, err
	}
	// The last Pod the churn created is in the graph once its watch
	// event arrived.
	lastPod := churnPodName(churnPods.Load() - 1)
	deadline := time.Now().Add(10 * time.Second)
	for !fc.LearnedChurn && time.Now().Before(deadline) {
		for _, o := range f2.g.Lookup("Pod", followNamespace, lastPod) {
			fc.LearnedChurn = fc.LearnedChurn || len(o.Owners) == 1 && o.Owners[0] == lineage.ID(rsUIDs[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !fc.LearnedChurn {
		return fc, fmt.Errorf("the follower did not learn the churn's Pod %s within 10s", lastPod)
	}
	return fc, nil
}

// followSetup creates the follow phase's Deployments, ReplicaSets and
// Pods and returns the ReplicaSets' uids.
func (cfg *familyBenchConfig) followSetup(ctx context.Context, kas *kubeapiserver.Cluster, cs kubernetes.Interface, fc *followCost) ([]types.UID, error) {
	if err := kas.EnsureNamespace(ctx, followNamespace); err != nil {
		return nil, err
	}
	// No controller-manager creates the namespace's default
	// ServiceAccount, which the ServiceAccount admission plugin wants.
	if _, err := cs.CoreV1().ServiceAccounts(followNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	labels := map[string]string{"app": "x"}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: followPodSpec()}
	rsUIDs := make([]types.UID, fc.ReplicaSets)
	for i := range fc.Deployments {
		name := fmt.Sprintf("deploy-%03d", i)
		d, err := cs.AppsV1().Deployments(followNamespace).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](100), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}},
			metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		rs, err := cs.AppsV1().ReplicaSets(followNamespace).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-5d8f7c9b6d", OwnerReferences: []metav1.OwnerReference{ownerRef("apps/v1", "Deployment", d.Name, d.UID)}},
			Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](100), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}},
			metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		rsUIDs[i] = rs.UID
	}
	errs := make(chan error, cfg.KubeFillClients)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range cfg.KubeFillClients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= fc.Pods || ctx.Err() != nil {
					return
				}
				rs := i / 100
				p := followPod(fmt.Sprintf("deploy-%03d-5d8f7c9b6d-%05d", rs, i), rsUIDs[rs], rs)
				if _, err := cs.CoreV1().Pods(followNamespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("creating Pod %s: %w", p.Name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return rsUIDs, <-errs
}

func ownerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

func followPodSpec() corev1.PodSpec {
	return corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false),
		Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}
}

// followPod is a Pod of the ReplicaSet deploy-<rs> with uid rsUID.
func followPod(name string, rsUID types.UID, rs int) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "x"},
		OwnerReferences: []metav1.OwnerReference{ownerRef("apps/v1", "ReplicaSet", fmt.Sprintf("deploy-%03d-5d8f7c9b6d", rs), rsUID)}},
		Spec: followPodSpec()}
}

func churnPodName(i int64) string { return "deploy-000-5d8f7c9b6d-churn-" + strconv.FormatInt(i, 10) }

// churn creates a Pod of the first ReplicaSet cfg.ChurnRate times a
// second, and deletes the one created two seconds before, until ctx
// ends; ops counts both. The churn's Pods are numbered across calls by
// next, the number of Pods created so far.
func (cfg *familyBenchConfig) churn(ctx context.Context, cs kubernetes.Interface, rsUID types.UID, next, ops *atomic.Int64) error {
	tick := time.NewTicker(time.Second / time.Duration(cfg.ChurnRate))
	defer tick.Stop()
	lag := int64(2 * cfg.ChurnRate)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		// A create whose answer a cancel lost is found by the next.
		i := next.Load()
		if _, err := cs.CoreV1().Pods(followNamespace).Create(ctx, followPod(churnPodName(i), rsUID, 0), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("churn: %w", err)
		}
		next.Add(1)
		ops.Add(1)
		if i >= lag {
			err := cs.CoreV1().Pods(followNamespace).Delete(ctx, churnPodName(i-lag), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("churn: %w", err)
			}
			ops.Add(1)
		}
	}
}

// etcdCPU is the CPU time of kas's etcds so far (0 when unreadable).
func etcdCPU(kas *kubeapiserver.Cluster) time.Duration {
	var sum time.Duration
	for _, pid := range kas.EtcdPIDs() {
		if v, err := procCPU(pid); err == nil {
			sum += v
		}
	}
	return sum
}

// serverRequests sums kube-apiserver's apiserver_request_total over its
// labels.
func serverRequests(ctx context.Context, kas *kubeapiserver.Cluster) (float64, error) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // our own kube-apiserver on loopback
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, kas.URL()+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+kas.AdminToken())
	req.Header.Set("Accept", "text/plain")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("kube-apiserver /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	var sum float64
	for _, m := range fams["apiserver_request_total"].GetMetric() {
		sum += m.GetCounter().GetValue()
	}
	return sum, nil
}

// lineageCreate is the create phase's result.
type lineageCreate struct {
	Runs []lineageCreateRun `json:"runs"`
	// OnMsPerCreate and OffMsPerCreate are the means of eventsd's CPU per
	// create over the runs with and without the lineage; Ratio on / off.
	OnMsPerCreate  float64 `json:"on_cpu_ms_per_create"`
	OffMsPerCreate float64 `json:"off_cpu_ms_per_create"`
	Ratio          float64 `json:"ratio"`
	// Profile is the CPU profile of eventsd with the lineage, if taken.
	Profile string `json:"profile,omitempty"`
}

// lineageCreateRun is one create run.
type lineageCreateRun struct {
	Lineage bool          `json:"lineage"`
	Result  *createResult `json:"result"`
}

// createPhase runs the create load against eventsd with the lineage and
// without, alternating (on off off on ...) so that drift of the machine
// falls on both.
func (cfg *familyBenchConfig) createPhase(ctx context.Context, bin, dir string) (*lineageCreate, error) {
	lc := &lineageCreate{}
	onArgs := []string{"--lineage=true"}
	if cfg.ProfileDir != "" {
		onArgs = append(onArgs, "--profiling")
	}
	on, err := startEventsd(ctx, bin, filepath.Join(dir, "on"), onArgs...)
	if err != nil {
		return lc, err
	}
	defer on.stop()
	off, err := startEventsd(ctx, bin, filepath.Join(dir, "off"), "--lineage=false")
	if err != nil {
		return lc, err
	}
	defer off.stop()
	mk := func(ev *child) createConfig {
		return createConfig{Server: ev.URL, Clients: cfg.CreateClients, Duration: cfg.CreateDuration, Warmup: cfg.CreateWarmup,
			Namespaces: 10, Objects: cfg.CreateObjects, PID: ev.pid(), PodPrefix: "pod", Wire: wireProtobuf, NewEvent: newAnnouncingEvent}
	}
	during := func(p int, lin bool, ev *child) func() error {
		if !lin || cfg.ProfileDir == "" || p != cfg.Pairs-1 {
			return nil
		}
		lc.Profile = filepath.Join(cfg.ProfileDir, "eventsd-lineage-create.pprof")
		done := make(chan error, 1)
		go func() {
			sleepUntil(ctx, time.Now().Add(cfg.CreateWarmup))
			done <- fetchProfile(ctx, ev.URL, "", nil, int(cfg.CreateDuration.Seconds()), lc.Profile)
		}()
		return func() error { return <-done }
	}
	lc.OnMsPerCreate, lc.OffMsPerCreate, lc.Ratio, err = alternateCreates(ctx, cfg.Pairs, on, off, mk, during, func(lin bool, res *createResult) {
		lc.Runs = append(lc.Runs, lineageCreateRun{Lineage: lin, Result: res})
		cfg.logf("create, lineage %v: %.0f creates/s, %.4f ms CPU/create", lin, res.CreatesPerSec, *res.ServerCPUMsPerReq)
	})
	return lc, err
}

// alternateCreates runs the create load of mk(server) pairs times against
// on and off in turn (on off, off on, on off ...), so that drift of the
// machine falls on both, and returns the means of the server's CPU per
// create with on and with off and their ratio. during, when it returns a
// function, runs beside a run (a profile) and is waited for after it;
// record is told of each run.
func alternateCreates(ctx context.Context, pairs int, on, off *child, mk func(*child) createConfig,
	during func(pair int, isOn bool, ev *child) func() error, record func(isOn bool, res *createResult)) (onMean, offMean, ratio float64, err error) {
	var sums [2]float64
	var counts [2]int
	for p := range pairs {
		order := []bool{true, false}
		if p%2 == 1 {
			order = []bool{false, true}
		}
		for _, isOn := range order {
			ev := off
			if isOn {
				ev = on
			}
			var wait func() error
			if during != nil {
				wait = during(p, isOn, ev)
			}
			res, err := runCreate(ctx, mk(ev))
			if wait != nil {
				err = errors.Join(err, wait())
			}
			if err = errors.Join(err, ev.exited()); err != nil {
				return 0, 0, 0, err
			}
			if res.Errors > 0 {
				return 0, 0, 0, fmt.Errorf("%d creates failed, the first with: %s", res.Errors, res.FirstError)
			}
			if res.ServerCPUMsPerReq == nil {
				return 0, 0, 0, errors.New("the server's CPU time was not measured")
			}
			record(isOn, res)
			i := 0
			if isOn {
				i = 1
			}
			sums[i] += *res.ServerCPUMsPerReq
			counts[i]++
		}
	}
	onMean, offMean = sums[1]/float64(counts[1]), sums[0]/float64(counts[0])
	return round4(onMean), round4(offMean), round3(onMean / offMean), nil
}

// round4 keeps four decimals.
func round4(f float64) float64 { return math.Round(f*1e4) / 1e4 }
