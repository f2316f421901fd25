package main

import (
	"crypto/sha1"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubevents/kubevents/lineage"
)

// familyShape is the shape of one Deployment's family: Rollouts
// ReplicaSets of PodsPerRS Pods each, the Pods of all but the last
// rollout deleted.
type familyShape struct {
	Namespace, Name string
	Rollouts        int
	PodsPerRS       int
	// ExtraPerPod is how many kubelet events each Pod gets beyond its
	// five (Scheduled, Pulling, Pulled, Created, Started); the first
	// ExtraRemainder Pods get one more.
	ExtraPerPod, ExtraRemainder int
}

// familyEvents is the number of events a family of shape s has: the
// Deployment's ScalingReplicaSet events (one up per rollout, one down per
// later rollout), each ReplicaSet's "Created pod" per Pod, and each Pod's
// five kubelet and scheduler events plus its extras.
func (s familyShape) events() int {
	pods := s.Rollouts * s.PodsPerRS
	return 2*s.Rollouts - 1 + pods*(1+podBaseEvents+s.ExtraPerPod) + s.ExtraRemainder
}

// objects is the number of objects of the family.
func (s familyShape) objects() int { return 1 + s.Rollouts + s.Rollouts*s.PodsPerRS }

// podBaseEvents are the events every generated Pod gets: Scheduled,
// Pulling, Pulled, Created, Started.
const podBaseEvents = 5

// benchUID returns a uid of RFC 4122's shape derived from key, stable
// across runs.
func benchUID(key string) types.UID {
	h := sha1.Sum([]byte(key))
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16]))
}

// familyObjects are the objects of one generated family.
type familyObjects struct {
	Deployment  lineage.Object
	ReplicaSets []lineage.Object
	// Pods[r] are the Pods of ReplicaSets[r].
	Pods [][]lineage.Object
}

// all returns every object of the family, the Deployment first.
func (f *familyObjects) all() []lineage.Object {
	out := append([]lineage.Object{f.Deployment}, f.ReplicaSets...)
	for _, ps := range f.Pods {
		out = append(out, ps...)
	}
	return out
}

// genFamily returns the objects of family s (as a metadata follower would
// observe them: owners by uid, created at base) and calls emit with each
// of its events, in the order a cluster would write them, timestamped
// from base on. Pod names are "<rs>-<5 chars>" as the ReplicaSet
// controller makes them, ReplicaSets "<deployment>-<10 chars>".
func genFamily(s familyShape, base time.Time, emit func(*corev1.Event)) familyObjects {
	key := s.Namespace + "/" + s.Name
	d := lineage.Object{ID: lineage.ID(benchUID("deploy/" + key)), APIVersion: "apps/v1", Kind: "Deployment",
		Namespace: s.Namespace, Name: s.Name, FirstSeen: base}
	fo := familyObjects{Deployment: d}
	at := base
	seq := 0
	next := func() time.Time {
		at = at.Add(time.Millisecond)
		return at
	}
	ev := func(o *lineage.Object, reason, typ, msg string, src corev1.EventSource, fieldPath string) {
		t := metav1.NewTime(next())
		seq++
		emit(&corev1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: o.Name + "." + strconv.FormatInt(t.UnixNano(), 16) + strconv.Itoa(seq%10)},
			InvolvedObject: corev1.ObjectReference{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: types.UID(o.ID),
				APIVersion: o.APIVersion, FieldPath: fieldPath},
			Reason: reason, Message: msg, Type: typ, Source: src, Count: 1,
			FirstTimestamp: t, LastTimestamp: t, ReportingController: src.Component, ReportingInstance: src.Host,
		})
	}
	podNo := 0
	for r := range s.Rollouts {
		h := fmt.Sprintf("%x", sha1.Sum([]byte(key+"/"+strconv.Itoa(r))))
		rs := lineage.Object{ID: lineage.ID(benchUID("rs/" + key + "/" + strconv.Itoa(r))), APIVersion: "apps/v1", Kind: "ReplicaSet",
			Namespace: s.Namespace, Name: s.Name + "-" + h[:10], Owners: []lineage.ID{d.ID}, FirstSeen: base}
		fo.ReplicaSets = append(fo.ReplicaSets, rs)
		deploySrc := corev1.EventSource{Component: "deployment-controller"}
		ev(&d, "ScalingReplicaSet", corev1.EventTypeNormal, fmt.Sprintf("Scaled up replica set %s from 0 to %d", rs.Name, s.PodsPerRS), deploySrc, "")
		if r > 0 {
			ev(&d, "ScalingReplicaSet", corev1.EventTypeNormal, fmt.Sprintf("Scaled down replica set %s from %d to 0", fo.ReplicaSets[r-1].Name, s.PodsPerRS), deploySrc, "")
		}
		var pods []lineage.Object
		for i := range s.PodsPerRS {
			name := rs.Name + "-" + h[10+i%20:10+i%20+1] + fmt.Sprintf("%04x", i)
			node := fmt.Sprintf("node-%02d", (podNo*7)%50)
			p := lineage.Object{ID: lineage.ID(benchUID("pod/" + key + "/" + name)), APIVersion: "v1", Kind: "Pod",
				Namespace: s.Namespace, Name: name, Owners: []lineage.ID{rs.ID}, Node: node, FirstSeen: base}
			pods = append(pods, p)
			ev(&rs, "SuccessfulCreate", corev1.EventTypeNormal, "Created pod: "+name, corev1.EventSource{Component: "replicaset-controller"}, "")
			ev(&p, "Scheduled", corev1.EventTypeNormal, fmt.Sprintf("Successfully assigned %s/%s to %s", s.Namespace, name, node),
				corev1.EventSource{Component: "default-scheduler"}, "")
			kubelet := corev1.EventSource{Component: "kubelet", Host: node}
			n := podBaseEvents - 1 + s.ExtraPerPod
			if podNo < s.ExtraRemainder {
				n++
			}
			for j := range n {
				l := lifecycle[j%len(lifecycle)]
				msg := l.message
				if l.reason == "BackOff" {
					msg = fmt.Sprintf(msg, name, s.Namespace, p.ID)
				}
				ev(&p, l.reason, l.typ, msg, kubelet, "spec.containers{app}")
			}
			podNo++
		}
		fo.Pods = append(fo.Pods, pods)
	}
	return fo
}

// newAnnouncingEvent is the create load's event mix with controllers'
// announcements: of every 10 events about a pod, one is its ReplicaSet's
// "Created pod" (the ReplicaSet of pods j/10) and, of every 50, one its
// Deployment's "Scaled up replica set"; the rest are newEvent's kubelet
// events. The event learner resolves owners and children for the
// announcements and the node of each Pod for the kubelet's.
func newAnnouncingEvent(p pod, seq int) *corev1.Event {
	switch seq % 50 {
	case 0, 10, 20, 30:
		rs := replicaSetOf(p)
		return announcement(p.Namespace, rs, "ReplicaSet", "apps/v1", "replicaset-controller", "SuccessfulCreate", "Created pod: "+p.Name)
	case 40:
		rs := replicaSetOf(p)
		d := rs[:len(rs)-len("-rs")]
		return announcement(p.Namespace, d, "Deployment", "apps/v1", "deployment-controller", "ScalingReplicaSet",
			"Scaled up replica set "+rs+" from 0 to 10")
	}
	return newEvent(p, seq)
}

// replicaSetOf names the ReplicaSet of the create load's pod p: pods
// "<prefix>-<j>" are in ReplicaSet "<prefix>-d<j/10>-rs" of Deployment
// "<prefix>-d<j/10>".
func replicaSetOf(p pod) string {
	i := len(p.Name) - 1
	for i >= 0 && p.Name[i] >= '0' && p.Name[i] <= '9' {
		i--
	}
	j, _ := strconv.Atoi(p.Name[i+1:])
	return p.Name[:i+1] + "d" + strconv.Itoa(j/10) + "-rs"
}

// announcement is a controller's event about name announcing a child.
func announcement(ns, name, kind, apiVersion, component, reason, msg string) *corev1.Event {
	nano := uniqueNano()
	t := metav1.Time{Time: time.Unix(0, nano)}
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: name + "." + strconv.FormatInt(nano, 16), Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: name, UID: benchUID(kind + "/" + ns + "/" + name),
			APIVersion: apiVersion, ResourceVersion: "4242"},
		Reason: reason, Message: msg, Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: component},
		FirstTimestamp: t, LastTimestamp: t, Count: 1, ReportingController: component,
	}
}
