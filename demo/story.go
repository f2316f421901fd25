package demo

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The story's objects, by the names the documentation's examples use.
const (
	// Namespace is where the rollout and the OOM-killed Pod are.
	Namespace = "shop"
	// BatchNamespace is where the Pod that cannot be scheduled is.
	BatchNamespace = "batch"
	// Deployment is the Deployment whose rollout stalls.
	Deployment = "web"
	// OldReplicaSet is the Deployment's healthy ReplicaSet.
	OldReplicaSet = "web-5d8c7b9f4"
	// NewReplicaSet is the ReplicaSet whose Pod crashloops.
	NewReplicaSet = "web-7f6d9c8b5"
	// CrashingPod is the Pod whose container exits at once.
	CrashingPod = "web-7f6d9c8b5-xk2lp"
	// OOMPod is the Pod whose container the kernel kills.
	OOMPod = "worker-0"
	// PendingPod is the Pod that cannot be scheduled, then fits.
	PendingPod = "report-28741530-qz7kd"
	// Node1 runs the healthy Pods and the OOM-killed one.
	Node1 = "node-1"
	// Node2 goes NotReady and comes back.
	Node2 = "node-2"
)

// An object the story's events are about.
type object struct {
	kind, apiVersion, namespace, name string
}

func pod(ns, name string) object        { return object{"Pod", "v1", ns, name} }
func node(name string) object           { return object{"Node", "v1", "", name} }
func deployment(name string) object     { return object{"Deployment", "apps/v1", Namespace, name} }
func replicaSet(name string) object     { return object{"ReplicaSet", "apps/v1", Namespace, name} }
func batchObject(kind, n string) object { return object{kind, "batch/v1", BatchNamespace, n} }

// uid is the object's UID: stable across runs, so that a story written
// twice into one store names the same objects.
func (o object) uid() types.UID {
	return types.UID(fmt.Sprintf("de300000-0000-4000-8000-%012x", fnv(o.kind+"/"+o.namespace+"/"+o.name)))
}

// fnv is FNV-1a over s, cut to 48 bits.
func fnv(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h & (1<<48 - 1)
}

// eventNamespace is where an event about o is kept: its own namespace,
// and default for cluster-scoped objects, as the kubelet and controllers
// record Node events.
func (o object) eventNamespace() string {
	if o.namespace == "" {
		return metav1.NamespaceDefault
	}
	return o.namespace
}

func (o object) ref(fieldPath string) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: o.kind, APIVersion: o.apiVersion, Namespace: o.namespace, Name: o.name, UID: o.uid(), FieldPath: fieldPath}
}

// source is who records an event: a component, on a host for the
// kubelet and node-problem-detector.
type source struct{ component, host string }

var (
	kubelet1          = source{"kubelet", Node1}
	kubelet2          = source{"kubelet", Node2}
	kernelMonitor1    = source{"kernel-monitor", Node1}
	deploymentCtrl    = source{"deployment-controller", ""}
	replicaSetCtrl    = source{"replicaset-controller", ""}
	jobCtrl           = source{"job-controller", ""}
	cronJobCtrl       = source{"cronjob-controller", ""}
	nodeCtrl          = source{"node-controller", ""}
	schedulerInstance = "default-scheduler-control-plane"
)

// legacy is one core/v1 event as client-go's record package writes it:
// seen count times, first first and last last before the demo's start.
type legacy struct {
	obj         object
	fieldPath   string
	src         source
	typ, reason string
	message     string
	first, last time.Duration // before the start
	count       int32
	// live marks the crashloop's events, which Run goes on counting.
	live bool
}

// scheduled is one events.k8s.io/v1 event as the scheduler writes it;
// count > 1 makes it a series whose last occurrence was last before the
// start.
type scheduled struct {
	pod         object
	typ, reason string
	action      string
	note        string
	first, last time.Duration
	count       int32
}

// containerPath is the kubelet's fieldPath of a Pod's container.
func containerPath(name string) string { return "spec.containers{" + name + "}" }

// The images the story's Pods run.
const (
	imageOld    = "registry.example.com/shop/web:1.4.0"
	imageNew    = "registry.example.com/shop/web:1.5.0"
	imageWorker = "registry.example.com/shop/worker:2.1.0"
	imageReport = "registry.example.com/batch/report:0.9.2"
)

// oldPods are the old ReplicaSet's three healthy Pods.
var oldPods = []string{OldReplicaSet + "-2xq9m", OldReplicaSet + "-7hnbc", OldReplicaSet + "-ld4kp"}

// startPod is what the kubelet records for a Pod whose image it pulls and
// whose container it starts, at t before the start.
func startPod(p object, src source, container, image string, t time.Duration) []legacy {
	path := containerPath(container)
	return []legacy{
		{obj: p, fieldPath: path, src: src, typ: corev1.EventTypeNormal, reason: "Pulling", message: fmt.Sprintf("Pulling image %q", image), first: t, last: t, count: 1},
		{obj: p, fieldPath: path, src: src, typ: corev1.EventTypeNormal, reason: "Pulled", message: fmt.Sprintf("Successfully pulled image %q in 1.84s (1.84s including waiting). Image size: 48213377 bytes.", image), first: t - 2*time.Second, last: t - 2*time.Second, count: 1},
		{obj: p, fieldPath: path, src: src, typ: corev1.EventTypeNormal, reason: "Created", message: "Created container: " + container, first: t - 2*time.Second, last: t - 2*time.Second, count: 1},
		{obj: p, fieldPath: path, src: src, typ: corev1.EventTypeNormal, reason: "Started", message: "Started container " + container, first: t - 3*time.Second, last: t - 3*time.Second, count: 1},
	}
}

// legacyEvents is the core/v1 part of the story, as of its start.
func legacyEvents() []legacy {
	m := time.Minute
	var evs []legacy
	add := func(l ...legacy) { evs = append(evs, l...) }

	// The first rollout, half an hour ago: three healthy Pods on node-1.
	add(legacy{obj: deployment(Deployment), src: deploymentCtrl, typ: corev1.EventTypeNormal, reason: "ScalingReplicaSet",
		message: "Scaled up replica set " + OldReplicaSet + " from 0 to 3", first: 30 * m, last: 30 * m, count: 1})
	for i, p := range oldPods {
		t := 30*m - time.Duration(i+1)*time.Second
		add(legacy{obj: replicaSet(OldReplicaSet), src: replicaSetCtrl, typ: corev1.EventTypeNormal, reason: "SuccessfulCreate",
			message: "Created pod: " + p, first: t, last: t, count: 1})
		add(startPod(pod(Namespace, p), kubelet1, "web", imageOld, t-5*time.Second)...)
	}

	// The OOM-killed worker: started 25 minutes ago, killed 8 minutes
	// ago, restarted by the kubelet.
	worker := pod(Namespace, OOMPod)
	add(startPod(worker, kubelet1, "worker", imageWorker, 25*m)...)
	add(legacy{obj: node(Node1), src: kernelMonitor1, typ: corev1.EventTypeWarning, reason: "OOMKilling",
		message: "Memory cgroup out of memory: Killed process 31337 (worker) total-vm:1268420kB, anon-rss:524116kB, file-rss:0kB, shmem-rss:0kB, UID:65532 pgtables:1204kB oom_score_adj:999",
		first:   8 * m, last: 8 * m, count: 1})
	add(legacy{obj: worker, fieldPath: containerPath("worker"), src: kubelet1, typ: corev1.EventTypeNormal, reason: "Pulled",
		message: fmt.Sprintf("Container image %q already present on machine", imageWorker), first: 8*m - 2*time.Second, last: 8*m - 2*time.Second, count: 1})
	add(legacy{obj: worker, fieldPath: containerPath("worker"), src: kubelet1, typ: corev1.EventTypeNormal, reason: "Created",
		message: "Created container: worker", first: 8*m - 2*time.Second, last: 8*m - 2*time.Second, count: 1})
	add(legacy{obj: worker, fieldPath: containerPath("worker"), src: kubelet1, typ: corev1.EventTypeNormal, reason: "Started",
		message: "Started container worker", first: 8*m - 3*time.Second, last: 8*m - 3*time.Second, count: 1})

	// node-2 goes NotReady 21 minutes ago and is back five minutes later.
	add(legacy{obj: node(Node2), src: nodeCtrl, typ: corev1.EventTypeNormal, reason: "NodeNotReady",
		message: "Node " + Node2 + " status is now: NodeNotReady", first: 21 * m, last: 21 * m, count: 1})
	add(legacy{obj: node(Node2), src: kubelet2, typ: corev1.EventTypeNormal, reason: "NodeReady",
		message: "Node " + Node2 + " status is now: NodeReady", first: 16 * m, last: 16 * m, count: 1})

	// The report Job of CronJob batch/report, 20 minutes ago; its Pod
	// starts on node-2 once that is back.
	add(legacy{obj: batchObject("CronJob", "report"), src: cronJobCtrl, typ: corev1.EventTypeNormal, reason: "SuccessfulCreate",
		message: "Created job report-28741530", first: 20 * m, last: 20 * m, count: 1})
	add(legacy{obj: batchObject("Job", "report-28741530"), src: jobCtrl, typ: corev1.EventTypeNormal, reason: "SuccessfulCreate",
		message: "Created pod: " + PendingPod, first: 20*m - time.Second, last: 20*m - time.Second, count: 1})
	add(startPod(pod(BatchNamespace, PendingPod), kubelet2, "report", imageReport, 15*m)...)

	// The second rollout, 12 minutes ago: one new Pod on node-2 that
	// crashloops (its restarts and back-off go on while the demo runs:
	// see live).
	add(legacy{obj: deployment(Deployment), src: deploymentCtrl, typ: corev1.EventTypeNormal, reason: "ScalingReplicaSet",
		message: "Scaled up replica set " + NewReplicaSet + " from 0 to 1", first: 12 * m, last: 12 * m, count: 1})
	add(legacy{obj: replicaSet(NewReplicaSet), src: replicaSetCtrl, typ: corev1.EventTypeNormal, reason: "SuccessfulCreate",
		message: "Created pod: " + CrashingPod, first: 12*m - time.Second, last: 12*m - time.Second, count: 1})
	add(startPod(pod(Namespace, CrashingPod), kubelet2, "web", imageNew, 12*m-5*time.Second)...)
	add(crashLoopEvents()...)
	return evs
}

// crashLoopEvents is the crashing Pod's restarts and back-off as of the
// start: the container was started again 5 times, the last one a minute
// ago, and back-off was reported 41 times.
func crashLoopEvents() []legacy {
	p := pod(Namespace, CrashingPod)
	path := containerPath("web")
	first, last := 11*time.Minute+30*time.Second, time.Minute
	return []legacy{
		{obj: p, fieldPath: path, src: kubelet2, typ: corev1.EventTypeNormal, reason: "Pulled", message: fmt.Sprintf("Container image %q already present on machine", imageNew), first: first, last: last, count: 5, live: true},
		{obj: p, fieldPath: path, src: kubelet2, typ: corev1.EventTypeNormal, reason: "Created", message: "Created container: web", first: first, last: last, count: 5, live: true},
		{obj: p, fieldPath: path, src: kubelet2, typ: corev1.EventTypeNormal, reason: "Started", message: "Started container web", first: first, last: last, count: 5, live: true},
		{obj: p, fieldPath: path, src: kubelet2, typ: corev1.EventTypeWarning, reason: reasonBackOff,
			message: fmt.Sprintf("Back-off restarting failed container web in pod %s_%s(%s)", CrashingPod, Namespace, p.uid()), first: 11 * time.Minute, last: 10 * time.Second, count: 41, live: true},
	}
}

// reasonBackOff is the kubelet's reason for a container it waits to
// restart.
const reasonBackOff = "BackOff"

// schedulerEvents is the events.k8s.io/v1 part of the story: the
// scheduler's decisions.
func schedulerEvents() []scheduled {
	m := time.Minute
	var evs []scheduled
	for i, p := range oldPods {
		t := 30*m - time.Duration(i+1)*time.Second - 2*time.Second
		evs = append(evs, assigned(pod(Namespace, p), Node1, t))
	}
	evs = append(evs, assigned(pod(Namespace, OOMPod), Node1, 25*m+2*time.Second))
	evs = append(evs, scheduled{pod: pod(BatchNamespace, PendingPod), typ: corev1.EventTypeWarning, reason: "FailedScheduling", action: "Scheduling",
		note:  "0/2 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }. preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.",
		first: 20*m - 2*time.Second, last: 16*m + 10*time.Second, count: 5})
	evs = append(evs, assigned(pod(BatchNamespace, PendingPod), Node2, 15*m+2*time.Second))
	evs = append(evs, assigned(pod(Namespace, CrashingPod), Node2, 12*m-3*time.Second))
	return evs
}

// assigned is the scheduler's Scheduled event for p on n at t before the
// start.
func assigned(p object, n string, t time.Duration) scheduled {
	return scheduled{pod: p, typ: corev1.EventTypeNormal, reason: "Scheduled", action: "Binding",
		note: fmt.Sprintf("Successfully assigned %s/%s to %s", p.namespace, p.name, n), first: t, last: t, count: 1}
}

// name is the name client-go's recorders give an event about o first
// seen at t: the object's name and t's nanoseconds in hex. Events the
// story has at the same time are told apart by seq, their place in the
// story, added in nanoseconds (a recorder's clock never gives two
// events the same time).
func name(o object, t time.Time, seq int) string {
	return fmt.Sprintf("%s.%x", o.name, t.UnixNano()+int64(seq))
}

// core builds l's core/v1 event as of start; seq is its place in the
// story.
func (l legacy) core(start time.Time, seq int) *corev1.Event {
	first, last := start.Add(-l.first), start.Add(-l.last)
	return &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name(l.obj, first, seq), Namespace: l.obj.eventNamespace()},
		InvolvedObject:      l.obj.ref(l.fieldPath),
		Reason:              l.reason,
		Message:             l.message,
		Source:              corev1.EventSource{Component: l.src.component, Host: l.src.host},
		FirstTimestamp:      metav1.NewTime(first),
		LastTimestamp:       metav1.NewTime(last),
		Count:               l.count,
		Type:                l.typ,
		ReportingController: l.src.component,
		ReportingInstance:   l.src.host, // client-go's record package: the source's host, empty for controllers
	}
}

// event builds s's events.k8s.io/v1 event as of start; seq is its
// place in the story.
func (s scheduled) event(start time.Time, seq int) *eventsv1.Event {
	first := start.Add(-s.first)
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name(s.pod, first, seq), Namespace: s.pod.namespace},
		EventTime:           metav1.NewMicroTime(first),
		ReportingController: "default-scheduler",
		ReportingInstance:   schedulerInstance,
		Action:              s.action,
		Reason:              s.reason,
		Regarding:           s.pod.ref(""),
		Note:                s.note,
		Type:                s.typ,
	}
	if s.count > 1 {
		ev.Series = &eventsv1.EventSeries{Count: s.count, LastObservedTime: metav1.NewMicroTime(start.Add(-s.last))}
	}
	return ev
}
