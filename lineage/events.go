package lineage

import (
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// announcement is an event by which a controller says it created (or
// deleted) an object it owns, naming it in the message: upstream's
// controllers write these, and they are what keeps a family whole when
// its Pods came and went while nothing watched them.
type announcement struct {
	ownerKind, reason string
	re                *regexp.Regexp // the child's name is the first group
	childKind         string
	childAPIVersion   string
	deleted           bool
}

// announcements are upstream controllers' messages (kube-controller-manager
// v1.37: RealPodControl's, the deployment, StatefulSet and CronJob
// controllers').
var announcements = func() []announcement {
	created := regexp.MustCompile(`^Created pod: (\S+)$`)
	deleted := regexp.MustCompile(`^Deleted pod: (\S+)$`)
	var out []announcement
	for _, k := range []string{"ReplicaSet", "ReplicationController", "Job", "DaemonSet"} {
		out = append(out,
			announcement{k, "SuccessfulCreate", created, "Pod", "v1", false},
			announcement{k, "SuccessfulDelete", deleted, "Pod", "v1", true})
	}
	return append(out,
		announcement{"Deployment", "ScalingReplicaSet", regexp.MustCompile(`^Scaled (?:up|down) replica set (\S+) (?:from|to) `), "ReplicaSet", "apps/v1", false},
		announcement{"StatefulSet", "SuccessfulCreate", regexp.MustCompile(`^create Pod (\S+) in StatefulSet \S+ successful$`), "Pod", "v1", false},
		announcement{"StatefulSet", "SuccessfulDelete", regexp.MustCompile(`^delete Pod (\S+) in StatefulSet \S+ successful$`), "Pod", "v1", true},
		announcement{"CronJob", "SuccessfulCreate", regexp.MustCompile(`^Created job (\S+)$`), "Job", "batch/v1", false},
		announcement{"CronJob", "SuccessfulDelete", regexp.MustCompile(`^Deleted job (\S+)$`), "Job", "batch/v1", true},
	)
}()

// scheduled is the scheduler's message when it binds a Pod.
var scheduled = regexp.MustCompile(`^Successfully assigned (\S+)/(\S+) to (\S+)$`)

// ObserveEvent learns what an event tells about ownership and placement:
//   - the node of a Pod, from the kubelet's source host (or reporting
//     instance) and from the scheduler's Scheduled event;
//   - the children a controller announces (ReplicaSet "Created pod: X",
//     Deployment "Scaled up replica set X ...", StatefulSet, Job,
//     DaemonSet, CronJob), kept as objects known by name, owned by the
//     announcing object, until their metadata gives their uid.
//
// Objects are added only when the event teaches something; the regarding
// object of such an event is recorded too (by its uid), so that its own
// children can name it as their owner.
func (g *Graph) ObserveEvent(ev *corev1.Event) {
	ref := &ev.InvolvedObject
	if ref.Name == "" || ref.Kind == "" {
		return
	}
	first, last := EventSpan(ev)
	if node := podNode(ev); node != "" {
		g.learnNode(ref, node, first, last)
		return
	}
	for i := range announcements {
		a := &announcements[i]
		if ref.Kind != a.ownerKind || ev.Reason != a.reason {
			continue
		}
		m := a.re.FindStringSubmatch(ev.Message)
		if m == nil {
			continue
		}
		g.learnChild(ref, a, m[1], first, last)
		return
	}
}

// podNode returns the node an event about a Pod places it on, if any.
func podNode(ev *corev1.Event) string {
	if ev.InvolvedObject.Kind != "Pod" {
		return ""
	}
	if ev.Reason == "Scheduled" {
		if m := scheduled.FindStringSubmatch(ev.Message); m != nil &&
			m[1] == ev.InvolvedObject.Namespace && m[2] == ev.InvolvedObject.Name {
			return m[3]
		}
	}
	if ev.Source.Component == "kubelet" && ev.Source.Host != "" {
		return ev.Source.Host
	}
	if ev.ReportingController == "kubelet" && ev.ReportingInstance != "" {
		return ev.ReportingInstance
	}
	return ""
}

// refID returns the ID of the object ref names: its uid, or its name.
func refID(ref *corev1.ObjectReference) ID {
	if ref.UID != "" {
		return ID(ref.UID)
	}
	return NameID(ref.Kind, ref.Namespace, ref.Name)
}

// fromRef returns the Object an event's reference describes, seen over
// [first, last].
func fromRef(ref *corev1.ObjectReference, first, last time.Time) Object {
	return Object{ID: refID(ref), APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: ref.Namespace,
		Name: ref.Name, FirstSeen: first, LastSeen: last}
}

// learnNode records that the Pod ref ran on node.
func (g *Graph) learnNode(ref *corev1.ObjectReference, node string, first, last time.Time) {
	// Most of a Pod's events repeat what is known: the kubelet writes a
	// dozen of them, each with its host. Those take only the read lock.
	g.mu.RLock()
	o := g.resolve(ref, first, last)
	known := o != nil && o.Node == node
	g.mu.RUnlock()
	if known {
		return
	}
	now := g.opts.Clock.Now()
	g.mu.Lock()
	var changed []ID
	if o := g.resolve(ref, first, last); o != nil {
		if o.Node != node {
			c := clone(o)
			c.Node = node
			g.put(&c, true)
			changed = []ID{c.ID}
		}
	} else {
		o := fromRef(ref, first, last)
		o.Node = node
		changed = g.observe(o, now)
	}
	subs := g.subscribers(changed)
	g.mu.Unlock()
	notify(subs, changed)
}

// resolve returns the object ref names at [first, last]: by uid, else by
// name among those alive then; under g.mu.
func (g *Graph) resolve(ref *corev1.ObjectReference, first, last time.Time) *Object {
	if ref.UID != "" {
		return g.objs[ID(ref.UID)]
	}
	var best *Object
	for id := range g.byName[identOf(ref.Kind, ref.Namespace, ref.Name)] {
		if o := g.objs[id]; alive(o, first, last) && (best == nil || o.FirstSeen.After(best.FirstSeen)) {
			best = o
		}
	}
	return best
}

// learnChild records the child an owner's event announces.
func (g *Graph) learnChild(owner *corev1.ObjectReference, a *announcement, child string, first, last time.Time) {
	now := g.opts.Clock.Now()
	g.mu.Lock()
	var changed []ID
	parent := g.resolve(owner, first, last)
	if parent == nil {
		changed = g.observe(fromRef(owner, first, last), now)
		parent = g.objs[refID(owner)]
	}
	cref := &corev1.ObjectReference{Kind: a.childKind, APIVersion: a.childAPIVersion, Namespace: owner.Namespace, Name: child}
	c := g.resolve(cref, first, last)
	switch {
	case c == nil && !a.deleted:
		o := fromRef(cref, first, first)
		o.Owners = []ID{parent.ID}
		changed = append(changed, g.observe(o, now)...)
	case c != nil && len(c.Owners) == 0:
		nc := clone(c)
		nc.Owners = []ID{parent.ID}
		g.put(&nc, true)
		changed = append(changed, nc.ID)
		c = g.objs[nc.ID]
	}
	if c != nil && a.deleted && c.ID.ByName() {
		// Only a name-only child learns its deletion from its owner; one
		// with a uid has its metadata to say so.
		g.markDeleted(c.ID, last)
	}
	subs := g.subscribers(changed)
	g.mu.Unlock()
	notify(subs, changed)
}
