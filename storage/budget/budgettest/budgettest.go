// Package budgettest is the storage budget's scenario, run against every
// backend that has one: fill a store over its budget and check that the
// events closest to their expiry, and only they, are expired early, that
// watchers get DELETED for each, that every write succeeds and that the
// expirations are counted by retention rule.
package budgettest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kubevents/kubevents/internal/metricstest"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/budget"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
)

// Store is what the scenario needs of a store with a budget.
type Store interface {
	storage.Interface
	// StoredBytes is what the budget measures, as of now.
	StoredBytes() int64
	// BudgetBusy reports whether a round of early expiry is under way.
	BudgetBusy() bool
}

// Harness opens stores for the scenario.
type Harness struct {
	// Open opens an empty store in dir with the budget maxBytes, the
	// clock clk, RuleOf ruleOf and Registerer reg; the store is closed
	// by the caller.
	Open func(t *testing.T, dir string, maxBytes int64, clk *clocktesting.FakeClock,
		ruleOf func(*corev1.Event) string, reg prometheus.Registerer) Store
}

// TTLs of the scenario's events (by reason: Short, Lasts, Later; of one
// length, so that every event counts alike): phase one mixes short and long, phase
// two's outlive both.
const (
	shortTTL = 10 * time.Minute
	longTTL  = time.Hour
	laterTTL = 2 * time.Hour
)

// Rule names the scenario's RuleOf gives.
const (
	ruleShort = "short"
	ruleLater = "later"
)

func ruleOf(ev *corev1.Event) string {
	switch ev.Reason {
	case "Short":
		return ruleShort
	case "Later":
		return ruleLater
	}
	return budget.DefaultRuleName
}

func event(i int, reason string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "budget", Name: fmt.Sprintf("ev-%03d", i)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "budget", Name: "pod", UID: "uid-1"},
		Reason:         reason,
		Message:        "a message of a fixed length, so that every event counts alike",
		Type:           corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "budgettest"},
	}
}

// Run runs the scenario.
func Run(t *testing.T, h Harness) {
	ctx := context.Background()
	ttlOf := map[string]time.Duration{"Short": shortTTL, "Lasts": longTTL, "Later": laterTTL}
	create := func(t *testing.T, s Store, i int, reason string) {
		t.Helper()
		if _, err := s.Create(ctx, event(i, reason), storage.WriteOptions{TTL: ttlOf[reason]}); err != nil {
			t.Fatalf("create %d under the budget: %v", i, err)
		}
	}

	// One event's bytes, measured on a store with a budget far away.
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	probe := h.Open(t, t.TempDir(), 1<<40, clk, ruleOf, prometheus.NewRegistry())
	create(t, probe, 0, "Short")
	one := eventually(t, probe.StoredBytes) // etcd: once its watch delivers it
	probe.Close()
	if one <= 0 {
		t.Fatalf("one event measures %d bytes", one)
	}

	const phaseOne, phaseTwo = 18, 10
	maxBytes := 20 * one
	reg := prometheus.NewRegistry()
	s := h.Open(t, t.TempDir(), maxBytes, clk, ruleOf, reg)
	defer s.Close()
	w, err := s.Watch(ctx, storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// Phase one, under the budget: short and long TTLs alternate, one
	// second apart, so the short ones written last still expire before
	// the long ones written first.
	type written struct {
		name   string
		rule   string
		expiry time.Time
	}
	var all []written
	for i := range phaseOne {
		reason := "Lasts"
		if i%2 == 1 {
			reason = "Short"
		}
		create(t, s, i, reason)
		all = append(all, written{event(i, reason).Name, ruleOf(event(i, reason)), clk.Now().Add(ttlOf[reason])})
		clk.Step(time.Second)
	}
	if got := s.StoredBytes(); got > maxBytes {
		t.Fatalf("phase one stores %d bytes, over the budget of %d", got, maxBytes)
	}
	// Phase two goes over the budget, with events outliving all of phase
	// one: every create must succeed.
	for i := phaseOne; i < phaseOne+phaseTwo; i++ {
		create(t, s, i, "Later")
		all = append(all, written{event(i, "Later").Name, ruleLater, clk.Now().Add(laterTTL)})
	}
	// Every create has reached the store's measure once the watch has
	// delivered it (etcd measures what its watch delivers).
	var deleted []string
	next := func() (storage.Event, bool) {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended")
			}
			if e.Type == watch.Deleted {
				deleted = append(deleted, e.Object.Name)
			}
			return e, true
		case <-time.After(10 * time.Second):
			return storage.Event{}, false
		}
	}
	last := all[len(all)-1].name
	for {
		e, ok := next()
		if !ok {
			t.Fatalf("watch: no ADDED for %s", last)
		}
		if e.Type == watch.Added && e.Object.Name == last {
			break
		}
	}

	// Once no round is under way and the bytes are within the budget,
	// nothing more will be expired: no write follows.
	deadline := time.Now().Add(10 * time.Second)
	for s.StoredBytes() > maxBytes || s.BudgetBusy() {
		if time.Now().After(deadline) {
			t.Fatalf("stored bytes %d, still over the budget %d (round under way: %v)", s.StoredBytes(), maxBytes, s.BudgetBusy())
		}
		time.Sleep(10 * time.Millisecond)
	}
	res, err := s.List(ctx, storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	left := int64(len(res.Items))
	if left*one > maxBytes {
		t.Fatalf("%d events left, %d bytes: over the budget of %d", left, left*one, maxBytes)
	}

	// The victims must be the events closest to their expiry: a prefix of
	// phase one's events in expiry order (phase two's outlive them all).
	slices.SortStableFunc(all, func(a, b written) int { return a.expiry.Compare(b.expiry) })
	var want []string
	wantByRule := map[string]int{}
	for _, e := range all[:len(all)-int(left)] {
		want = append(want, e.name)
		wantByRule[e.rule]++
	}
	if len(want) == 0 || len(want) > phaseOne {
		t.Fatalf("%d events expired early; want between 1 and %d", len(want), phaseOne)
	}

	// Watchers get DELETED for each victim, closest to expiry first.
	for len(deleted) < len(want) {
		if _, ok := next(); !ok {
			t.Fatalf("watch: DELETED for %v, want %v", deleted, want)
		}
	}
	if !slices.Equal(deleted, want) {
		t.Fatalf("expired early, in order: %v\nwant the events closest to their expiry: %v", deleted, want)
	}
	for _, name := range want {
		if _, err := s.Get(ctx, "budget", name); !storageNotFound(err) {
			t.Errorf("get %s after its early expiry: %v, want not found", name, err)
		}
	}
	for _, rule := range []string{ruleShort, budget.DefaultRuleName, ruleLater} {
		if got := metricstest.Sum(t, reg, budget.ExpirationsMetric, "rule", rule); int(got) != wantByRule[rule] {
			t.Errorf("%s{rule=%q} = %v, want %d", budget.ExpirationsMetric, rule, got, wantByRule[rule])
		}
	}
	if got := metricstest.Sum(t, reg, budget.LimitMetric); int64(got) != maxBytes {
		t.Errorf("%s = %v, want %d", budget.LimitMetric, got, maxBytes)
	}

	// Phase three: one write at a time, each measured and settled before
	// the next, until one takes the bytes over the budget. No write races
	// the round it starts, so the round ends at the low-water mark.
	lowWater := maxBytes / 100 * budget.LowWaterPercent
	for i := phaseOne + phaseTwo; ; i++ {
		if i == phaseOne+phaseTwo+int(maxBytes/one)+2 {
			t.Fatalf("%d writes one at a time never went over the budget %d (stored %d)", i-phaseOne-phaseTwo, maxBytes, s.StoredBytes())
		}
		before, expiredBefore := s.StoredBytes(), metricstest.Sum(t, reg, budget.ExpirationsMetric)
		create(t, s, i, "Later")
		// Measured (bytes changed, or a round already expired some), and
		// no round under way or due.
		deadline := time.Now().Add(10 * time.Second)
		for (s.StoredBytes() == before && metricstest.Sum(t, reg, budget.ExpirationsMetric) == expiredBefore) ||
			s.StoredBytes() > maxBytes || s.BudgetBusy() {
			if time.Now().After(deadline) {
				t.Fatalf("write %d: stored bytes %d (before it %d), budget %d, round under way: %v",
					i, s.StoredBytes(), before, maxBytes, s.BudgetBusy())
			}
			time.Sleep(5 * time.Millisecond)
		}
		if metricstest.Sum(t, reg, budget.ExpirationsMetric) > expiredBefore {
			if after := s.StoredBytes(); after > lowWater {
				t.Fatalf("a round of early expiry with no write racing it ended at %d bytes, above the low-water mark %d (budget %d)",
					after, lowWater, maxBytes)
			}
			return
		}
	}
}

func storageNotFound(err error) bool { return errors.Is(err, storage.ErrNotFound) }

// eventually returns f's first positive value, failing after 10 s.
func eventually(t *testing.T, f func() int64) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if v := f(); v > 0 {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatal("not measured within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
