package evctl

import (
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
)

func TestRowOfBothStyles(t *testing.T) {
	evs := fixture()
	legacy, series, single := newRow(evs[0]), newRow(evs[1]), newRow(evs[4])
	if legacy.count != 25 || !legacy.first.Equal(at(20*time.Minute)) || !legacy.last.Equal(at(47*time.Second)) || legacy.state != "" {
		t.Errorf("legacy row %+v", legacy)
	}
	if series.count != 600 || series.state != "finished" || !series.last.Equal(at(29*time.Minute)) {
		t.Errorf("series row %+v", series)
	}
	if single.count != 1 || !single.first.Equal(single.last) {
		t.Errorf("singleton row %+v", single)
	}
}

func TestFilterMatches(t *testing.T) {
	clock := func() time.Time { return now }
	pod := &target{kind: "Pod", name: "web-1", namespace: "default", namespaced: true}
	node := &target{kind: "Node", name: "node-1"}
	cases := []struct {
		f    filter
		want []string
	}{
		{filter{now: clock}, []string{"web-1.legacy", "web-1.series", "web-1.ongoing", "node-1.cg", "node-1.single"}},
		{filter{target: pod, now: clock}, []string{"web-1.legacy", "web-1.series", "web-1.ongoing"}},
		{filter{target: node, typ: "Warning", now: clock}, []string{"node-1.cg"}},
		{filter{action: "Binding", now: clock}, []string{"web-1.series"}},
		{filter{controller: "kubelet", now: clock}, []string{"web-1.legacy", "web-1.ongoing", "node-1.single"}}, // legacy: source component
		{filter{instance: "kubelet-node-1", now: clock}, []string{"web-1.ongoing", "node-1.single"}},
		{filter{since: time.Minute, now: clock}, []string{"web-1.legacy", "web-1.ongoing"}},
		{filter{reason: "Scheduled", since: 30 * time.Minute, now: clock}, []string{"web-1.series"}},
	}
	for i, c := range cases {
		var got []string
		for _, ev := range fixture() {
			if c.f.matches(newRow(ev)) {
				got = append(got, ev.Name)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("case %d: got %v, want %v", i, got, c.want)
			continue
		}
		for j := range got {
			if got[j] != c.want[j] {
				t.Errorf("case %d: got %v, want %v", i, got, c.want)
			}
		}
	}
}

func TestFollowerPrintsEachRevisionOnce(t *testing.T) {
	f := &follower{}
	ev := fixture()[1]
	r := func(rv string) *row {
		c := *ev
		c.ResourceVersion = rv
		return newRow(&c)
	}
	for _, c := range []struct {
		rv   string
		want bool
	}{{"12", true}, {"12", false}, {"11", false}, {"20", true}, {"19", false}} {
		if got := f.seen(r(c.rv)); got != c.want {
			t.Errorf("revision %s: seen=%v, want %v", c.rv, got, c.want)
		}
	}
	other := newRow(&eventsv1.Event{})
	other.ev.UID, other.ev.ResourceVersion = "x", "1"
	if !f.seen(other) {
		t.Error("another event's first revision must print")
	}
}
