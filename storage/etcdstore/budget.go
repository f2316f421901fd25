package etcdstore

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/kubevents/kubevents/storage/budget"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	corev1 "k8s.io/api/core/v1"
)

// The storage budget (Options.MaxBytes) on etcd.
//
// What is counted: the keys and values of the events under the prefix,
// as the replica's shared watch last delivered them (usage, kept beside
// the keys-only index and rebuilt with it). Not etcd's dbSizeInUse: that
// holds every revision until compaction and lags deletes by a compaction
// interval, so early expiry would overshoot while it catches up.
//
// Victims are the events whose leases expire first (a lease expires for
// all its keys at once; without a lease, never), then the earliest
// written (mod revision), then by key: an order every replica computes
// alike. Each is deleted on the condition that it is still at the mod
// revision it was chosen at, so a write racing the round wins, and
// replicas enforcing the budget at once delete each victim once.

// budgetCheckInterval is how often the budget is checked besides after
// each batch of the shared watch: a round cut short (etcd unavailable, a
// victim changed meanwhile) is tried again this long after.
const budgetCheckInterval = time.Second

// budgetVictimsMax bounds one pass of early expiry; passes repeat until
// the low-water mark is reached.
const budgetVictimsMax = 1024

// usageEntry is what the budget knows of one stored key.
type usageEntry struct {
	size   int64
	lease  int64
	modRev int64
	rule   string
}

// usage is the bytes of the events under the prefix, by key relative to
// the store's root. Safe for concurrent use.
type usage struct {
	mu    sync.Mutex
	keys  map[string]usageEntry
	total int64
}

func newUsage() *usage { return &usage{keys: map[string]usageEntry{}} }

// put records kv (relative key rel), whose event's TTL came from the
// retention rule rule.
func (u *usage) put(rel string, kv *mvccpb.KeyValue, rule string) {
	e := usageEntry{size: int64(len(kv.Key) + len(kv.Value)), lease: kv.Lease, modRev: kv.ModRevision, rule: rule}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.total += e.size - u.keys[rel].size
	u.keys[rel] = e
}

// remove forgets rel; with modRev > 0, only if it is still at modRev.
func (u *usage) remove(rel string, modRev int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	e, ok := u.keys[rel]
	if !ok || (modRev > 0 && e.modRev != modRev) {
		return
	}
	u.total -= e.size
	delete(u.keys, rel)
}

func (u *usage) bytes() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.total
}

// budgetUsage is what the budget reads of the events' bytes: usage (a map
// entry per key, beside the in-memory index) or diskUsage (the on-disk
// index's records, with only totals by lease in memory).
type budgetUsage interface {
	// bytes is the events' bytes.
	bytes() int64
	// leaseBytes is the bytes of each lease's keys (0: no lease).
	leaseBytes() map[int64]int64
	// keysOf returns the keys of leases, with their sizes, mod
	// revisions, rules and leases.
	keysOf(leases []int64) ([]victim, error)
	// expired records that the store deleted rel at modRev.
	expired(rel string, modRev int64)
	// settle returns once the usage reflects the store's writes up to
	// rev.
	settle(ctx context.Context, rev int64) error
}

// victimsPerLease bounds the keys the on-disk index returns of one lease
// (a lease holds at most Options.LeaseMaxObjects of eventsd's keys; only
// keys without a lease, or other writers', can be more).
const victimsPerLease = 4 * budgetVictimsMax

func (u *usage) leaseBytes() map[int64]int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := map[int64]int64{}
	for _, e := range u.keys {
		out[e.lease] += e.size
	}
	return out
}

func (u *usage) keysOf(leases []int64) ([]victim, error) {
	chosen := make(map[int64]bool, len(leases))
	for _, l := range leases {
		chosen[l] = true
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	var vs []victim
	for rel, e := range u.keys {
		if chosen[e.lease] {
			vs = append(vs, victim{rel: rel, modRev: e.modRev, rule: e.rule, size: e.size, lease: e.lease})
		}
	}
	return vs, nil
}

func (u *usage) expired(rel string, modRev int64) { u.remove(rel, modRev) }

func (u *usage) settle(context.Context, int64) error { return nil }

// ruleOf names ev's retention rule for the budget's metric.
func (s *Store) ruleOf(ev *corev1.Event) string {
	if ev == nil || s.opts.RuleOf == nil {
		return budget.DefaultRuleName
	}
	return s.opts.RuleOf(ev)
}

// StoredBytes is the bytes of the events under the prefix as the budget
// counts them (see Options.MaxBytes); 0 without a budget.
func (s *Store) StoredBytes() int64 {
	if h := s.idx.Load(); h != nil && h.usage != nil {
		return h.usage.bytes()
	}
	return 0
}

// BudgetExpirations is the number of events this replica expired early
// to keep within Options.MaxBytes since it opened.
func (s *Store) BudgetExpirations() int64 {
	if s.budget == nil {
		return 0
	}
	return s.budget.Expirations()
}

// BudgetBusy reports whether a round of early expiry is under way.
func (s *Store) BudgetBusy() bool { return s.budget != nil && s.budget.Busy() }

// budgetCheck wakes the budget loop when u is over the budget.
func (s *Store) budgetCheck(u budgetUsage) {
	if u == nil || u.bytes() <= s.budget.Max() {
		return
	}
	select {
	case s.budgetWake <- struct{}{}:
	default:
	}
}

// budgetLoop runs rounds of early expiry when woken by the shared watch
// and every budgetCheckInterval.
func (s *Store) budgetLoop() {
	defer s.wg.Done()
	t := s.opts.Clock.NewTicker(budgetCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C():
		case <-s.budgetWake:
		}
		s.enforceBudget()
	}
}

// enforceBudget, when the events' bytes exceed the budget, deletes those
// whose leases expire first until the bytes are at the low-water mark.
func (s *Store) enforceBudget() {
	h := s.idx.Load()
	if h == nil || h.usage == nil {
		return
	}
	u := h.usage
	before := u.bytes()
	if !s.budget.Over(before) {
		return
	}
	s.budget.Begin()
	defer s.budget.End()
	expired := 0
	for s.ctx.Err() == nil {
		excess := s.budget.Excess(u.bytes())
		if excess == 0 {
			break
		}
		victims := s.budgetVictims(u, excess)
		if len(victims) == 0 {
			break
		}
		n, complete := s.expireEarly(u, victims)
		expired += n
		if n > 0 {
			// Count what is left once the usage has seen the deletions
			// (the on-disk index learns them from the shared watch).
			ctx, cancel := context.WithTimeout(s.ctx, s.opts.RequestTimeout)
			err := u.settle(ctx, s.Revision())
			cancel()
			if err != nil {
				break
			}
		}
		if !complete {
			// A victim changed or went meanwhile (another replica's
			// round, a write, its lease), or etcd failed: the next check
			// goes on from what the shared watch delivers by then.
			break
		}
	}
	s.budget.Logged(expired, before, u.bytes())
}

// victim is a key chosen for early expiry.
type victim struct {
	rel    string
	modRev int64
	rule   string
	expiry time.Time
	size   int64
	lease  int64
}

// budgetVictims chooses the keys whose leases expire first (then the
// earliest written, then by key) whose bytes add up to excess, at most
// budgetVictimsMax.
func (s *Store) budgetVictims(u budgetUsage, excess int64) []victim {
	// The leases in use, and their bytes.
	leaseBytes := u.leaseBytes()
	expiries := s.leaseExpiries(leaseBytes)
	leases := make([]int64, 0, len(leaseBytes))
	for l := range leaseBytes {
		leases = append(leases, l)
	}
	slices.SortFunc(leases, func(a, b int64) int {
		return cmp.Or(expiries[a].Compare(expiries[b]), cmp.Compare(a, b))
	})
	// The fewest leases, first to expire, holding excess bytes.
	var chosen []int64
	var held int64
	for _, l := range leases {
		if held >= excess {
			break
		}
		chosen = append(chosen, l)
		held += leaseBytes[l]
	}
	vs, err := u.keysOf(chosen)
	if err != nil {
		s.log.Warn("etcdstore: storage budget: reading the keys of the leases to expire failed", "err", err)
		return nil
	}
	for i := range vs {
		vs[i].expiry = expiries[vs[i].lease]
	}
	slices.SortFunc(vs, func(a, b victim) int {
		return cmp.Or(a.expiry.Compare(b.expiry), cmp.Compare(a.modRev, b.modRev), cmp.Compare(a.rel, b.rel))
	})
	var freed int64
	for i, v := range vs {
		if freed >= excess || i == budgetVictimsMax {
			return vs[:i]
		}
		freed += v.size
	}
	return vs
}

// leaseExpiries returns when each lease expires on the store's clock:
// asked of etcd (TimeToLive) once per lease and remembered, since a lease
// is never extended; a lease etcd no longer has expires now, and no lease
// never.
func (s *Store) leaseExpiries(leases map[int64]int64) map[int64]time.Time {
	never := time.Unix(math.MaxInt64/2, 0)
	now := s.opts.Clock.Now()
	out := make(map[int64]time.Time, len(leases))
	s.leaseExpiryMu.Lock()
	defer s.leaseExpiryMu.Unlock()
	for l := range leases {
		if l == 0 {
			out[l] = never
			continue
		}
		if t, ok := s.leaseExpiry[l]; ok {
			out[l] = t
			continue
		}
		rctx, cancel := s.requestCtx(s.ctx)
		r, err := s.cli.TimeToLive(rctx, clientv3.LeaseID(l))
		cancel()
		switch {
		case err != nil:
			out[l] = never // unknown for now: chosen last, asked again next round
			continue
		case r.TTL < 0:
			out[l] = now // gone: its keys are going anyway
		default:
			out[l] = now.Add(time.Duration(r.TTL) * time.Second)
		}
		s.leaseExpiry[l] = out[l]
	}
	// Forget the leases no key holds any more.
	for l := range s.leaseExpiry {
		if _, ok := leases[l]; !ok {
			delete(s.leaseExpiry, l)
		}
	}
	return out
}

// expireEarly deletes victims, each if still at its mod revision, and
// counts those it deleted. complete is false when one could not be
// deleted (changed, gone, or etcd failing).
func (s *Store) expireEarly(u budgetUsage, victims []victim) (n int, complete bool) {
	complete = true
	for _, v := range victims {
		if s.ctx.Err() != nil {
			return n, false
		}
		key := s.root + v.rel
		// The last state, for the count by rule, is what the watch
		// delivered: v.rule. The delete needs no read.
		resp, err := s.kv.OptimisticDelete(s.ctx, key, v.modRev, kubernetes.DeleteOptions{})
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				s.log.Warn("etcdstore: storage budget: deleting an event early failed", "key", key, "err", mapErr(err))
			}
			return n, false
		}
		s.observe(resp.Revision)
		if !resp.Succeeded {
			complete = false
			continue
		}
		s.ownDeletes.Add(1)
		s.writes.Add(1)
		u.expired(v.rel, v.modRev)
		s.budget.ExpiredRule(v.rule)
		n++
	}
	return n, complete
}
