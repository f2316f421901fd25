package pleg

import (
	"context"
	"fmt"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// runtimePod is one pod as a relist sees it: its sandboxes, newest first,
// and its containers.
type runtimePod struct {
	ID              types.UID
	Name, Namespace string
	Sandboxes       []*runtimeapi.PodSandbox
	Containers      []*runtimeapi.Container
}

// states returns the diff state of every sandbox and container of the
// pod, keyed by ID (sandboxes are treated as containers, as upstream).
func (p *runtimePod) states() map[string]containerState {
	if p == nil {
		return nil
	}
	m := make(map[string]containerState, len(p.Sandboxes)+len(p.Containers))
	for _, s := range p.Sandboxes {
		m[s.Id] = fromSandboxState(s.State)
	}
	for _, c := range p.Containers {
		m[c.Id] = fromContainerState(c.State)
	}
	return m
}

// listPods lists every sandbox and container and groups them by pod UID.
func listPods(ctx context.Context, rt Runtime) (map[types.UID]*runtimePod, error) {
	sandboxes, err := rt.ListPodSandbox(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing pod sandboxes: %w", err)
	}
	containers, err := rt.ListContainers(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	pods := map[types.UID]*runtimePod{}
	get := func(uid types.UID) *runtimePod {
		p := pods[uid]
		if p == nil {
			p = &runtimePod{ID: uid}
			pods[uid] = p
		}
		return p
	}
	for _, s := range sandboxes {
		if s == nil || s.Metadata == nil || s.Metadata.Uid == "" {
			continue // not a pod's sandbox
		}
		p := get(types.UID(s.Metadata.Uid))
		p.Name, p.Namespace = s.Metadata.Name, s.Metadata.Namespace
		p.Sandboxes = append(p.Sandboxes, s)
	}
	// A container belongs to its sandbox's pod, as the runtime's event
	// stream reports it (containerd sends a container's events with its
	// sandbox's status, whatever its labels); the kubelet's pod-UID label
	// decides only for a container whose sandbox is not listed.
	sandboxPod := make(map[string]string, len(sandboxes))
	for _, s := range sandboxes {
		if s != nil && s.Metadata != nil && s.Metadata.Uid != "" {
			sandboxPod[s.Id] = s.Metadata.Uid
		}
	}
	for _, c := range containers {
		uid := sandboxPod[c.GetPodSandboxId()]
		if uid == "" {
			uid = c.GetLabels()[podUIDLabel]
		}
		if uid == "" {
			continue // not a kubelet-managed container
		}
		p := get(types.UID(uid))
		p.Containers = append(p.Containers, c)
		if p.Name == "" {
			// No sandbox listed (created between the two lists, or gone):
			// the container's labels name the pod.
			p.Name, p.Namespace = c.GetLabels()[podNameLabel], c.GetLabels()[podNamespaceLabel]
		}
	}
	for _, p := range pods {
		sort.SliceStable(p.Sandboxes, func(i, j int) bool { return p.Sandboxes[i].CreatedAt > p.Sandboxes[j].CreatedAt })
	}
	return pods, nil
}

// inspect builds a pod's status from the runtime, as the kubelet's
// GetPodStatus: each sandbox's PodSandboxStatus (NotFound skipped), and
// the containers either from the newest sandbox's response, when the
// runtime stamped it and listed containers, or from ContainerStatus of
// each container the relist found. The status's TimeStamp is the time it
// describes: the runtime's stamp when it gave one, else relistTime (taken
// before listing, so the status is at least that fresh).
func inspect(ctx context.Context, rt Runtime, p *runtimePod, relistTime, now time.Time) (*PodStatus, error) {
	st := &PodStatus{ID: p.ID, Name: p.Name, Namespace: p.Namespace}
	var newest *runtimeapi.PodSandboxStatusResponse
	for i, sb := range p.Sandboxes {
		resp, err := rt.PodSandboxStatus(ctx, sb.Id)
		if status.Code(err) == codes.NotFound {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("inspecting sandbox %s of pod %s: %w", sb.Id, p.ID, err)
		}
		if resp.GetStatus() == nil {
			continue
		}
		st.SandboxStatuses = append(st.SandboxStatuses, resp.Status)
		if i == 0 {
			newest = resp
			st.IPs = sandboxIPs(resp.Status)
		}
	}
	ts := relistTime
	if newest != nil && newest.Timestamp != 0 && len(newest.ContainersStatuses) > 0 {
		st.ContainerStatuses = append(st.ContainerStatuses, newest.ContainersStatuses...)
		ts = runtimeTime(newest.Timestamp, now)
	} else {
		// A zero timestamp means the runtime does not report containers
		// with the sandbox (containerd); a timestamp with no containers is
		// containerd 2.0.0-2.0.2's half-done report, which upstream takes
		// for "no containers".
		for _, c := range p.Containers {
			cs, err := rt.ContainerStatus(ctx, c.Id)
			if status.Code(err) == codes.NotFound {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("inspecting container %s of pod %s: %w", c.Id, p.ID, err)
			}
			if cs != nil {
				st.ContainerStatuses = append(st.ContainerStatuses, cs)
			}
		}
	}
	sortContainers(st.ContainerStatuses)
	st.TimeStamp = ts
	return st, nil
}

// sandboxIPs returns a ready sandbox's IPs.
func sandboxIPs(s *runtimeapi.PodSandboxStatus) []string {
	if s == nil || s.State != runtimeapi.PodSandboxState_SANDBOX_READY || s.Network == nil || s.Network.Ip == "" {
		return nil
	}
	ips := []string{s.Network.Ip}
	for _, ip := range s.Network.AdditionalIps {
		if ip.GetIp() != "" {
			ips = append(ips, ip.Ip)
		}
	}
	return ips
}

// sortContainers orders statuses newest first, as upstream, with the ID
// breaking ties so that equal content compares equal.
func sortContainers(cs []*runtimeapi.ContainerStatus) {
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].CreatedAt != cs[j].CreatedAt {
			return cs[i].CreatedAt > cs[j].CreatedAt
		}
		return cs[i].Id < cs[j].Id
	})
}

// Bounds of runtime timestamps.
const (
	// secondsBelow: a stamp below this many units cannot be nanoseconds
	// since 1970 of any real clock (it would be 1970-01-01T00:01:40Z), but
	// is a plausible count of seconds (up to the year 5138). Old CRI-O
	// sent PodSandboxStatusResponse.timestamp in seconds.
	secondsBelow = 1e11
	// maxFutureSkew: a stamp further ahead of the node's clock than this
	// is clamped to now, so that it cannot make the cache refuse every
	// later update (upstream #127814).
	maxFutureSkew = 10 * time.Second
)

// runtimeTime converts a runtime stamp (nanoseconds, or seconds from old
// runtimes) to a time, clamping far-future stamps to now.
func runtimeTime(v int64, now time.Time) time.Time {
	var t time.Time
	if v > 0 && v < secondsBelow {
		t = time.Unix(v, 0)
	} else {
		t = time.Unix(0, v)
	}
	if t.After(now.Add(maxFutureSkew)) {
		return now
	}
	return t
}
