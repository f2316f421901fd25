package eventratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func newLimiter(t *testing.T, limits ...Limit) (*Limiter, *clocktesting.FakePassiveClock) {
	t.Helper()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l, err := New(&Configuration{Limits: limits}, Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}

func req(ns, user, controller, object string) *Request {
	return &Request{Namespace: ns, User: user, Source: Source{Controller: controller, Instance: "node-1"},
		Object: Object{Kind: "Pod", Namespace: ns, Name: object, UID: object + "-uid", APIVersion: "v1"}}
}

// admitN admits r n times and returns how many were allowed.
func admitN(l *Limiter, r *Request, n int) int {
	ok := 0
	for range n {
		if l.Admit(context.Background(), r).Allowed {
			ok++
		}
	}
	return ok
}

// TestEachTypeKeysItsBuckets: every limit type allows burst writes per
// bucket, then refuses with the bucket named and a Retry-After until it
// has a token again; other buckets are untouched.
func TestEachTypeKeysItsBuckets(t *testing.T) {
	cases := []struct {
		typ          LimitType
		first, other *Request // same bucket as first, unless other is nil
		key          string
	}{
		{ServerLimitType, req("a", "u", "c", "p"), nil, ""},
		{NamespaceLimitType, req("a", "u", "c", "p"), req("b", "u", "c", "p"), "a"},
		{UserLimitType, req("a", "alice", "c", "p"), req("a", "bob", "c", "p"), "alice"},
		{SourceAndObjectLimitType, req("a", "u", "kubelet", "web"), req("a", "u", "kubelet", "db"), "kubelet/node-1 Pod a/web (web-uid)"},
	}
	for _, c := range cases {
		t.Run(string(c.typ), func(t *testing.T) {
			l, clk := newLimiter(t, Limit{Type: c.typ, QPS: 2, Burst: 3})
			if got := admitN(l, c.first, 3); got != 3 {
				t.Fatalf("allowed %d of the burst of 3", got)
			}
			d := l.Admit(context.Background(), c.first)
			if d.Allowed || len(d.Refusals) != 1 || d.Refusals[0] != (Refusal{Type: c.typ, Key: c.key}) {
				t.Fatalf("decision %+v", d)
			}
			if d.RetryAfter != 500*time.Millisecond || d.RetryAfterSeconds() != 1 {
				t.Errorf("retry after %v (%ds), want 500ms (1s) at 2 qps", d.RetryAfter, d.RetryAfterSeconds())
			}
			if want := "limit reached on type " + string(c.typ) + " for key " + c.key; d.Message() != want {
				t.Errorf("message %q, want %q", d.Message(), want)
			}
			if c.other != nil && admitN(l, c.other, 3) != 3 {
				t.Errorf("another bucket was limited too")
			}
			clk.SetTime(clk.Now().Add(499 * time.Millisecond))
			if l.Admit(context.Background(), c.first).Allowed {
				t.Fatal("allowed before the bucket refilled")
			}
			clk.SetTime(clk.Now().Add(time.Millisecond))
			if !l.Admit(context.Background(), c.first).Allowed {
				t.Fatal("refused once the bucket had a token")
			}
		})
	}
}

// TestRefusedWritesTakeNoTokens: a write one bucket refuses leaves the
// other buckets' tokens (upstream's plugin takes them), so a noisy object
// does not drain its namespace's allowance.
func TestRefusedWritesTakeNoTokens(t *testing.T) {
	l, _ := newLimiter(t, Limit{Type: NamespaceLimitType, QPS: 1, Burst: 5}, Limit{Type: SourceAndObjectLimitType, QPS: 1, Burst: 1})
	noisy, quiet := req("a", "u", "c", "noisy"), req("a", "u", "c", "quiet")
	if admitN(l, noisy, 10) != 1 {
		t.Fatal("the noisy object got more than its burst")
	}
	// The namespace has 4 tokens left: one write each for 4 objects.
	for i, name := range []string{"q1", "q2", "q3", "q4"} {
		if !l.Admit(context.Background(), req("a", "u", "c", name)).Allowed {
			t.Fatalf("write %d refused: refused writes took namespace tokens", i)
		}
	}
	if d := l.Admit(context.Background(), quiet); d.Allowed || d.Refusals[0].Type != NamespaceLimitType {
		t.Fatalf("namespace not exhausted: %+v", d)
	}
}

// TestRetryAfterIsTheLongestWait: with several buckets refusing, the
// Retry-After covers the slowest, and every refusal is named.
func TestRetryAfterIsTheLongestWait(t *testing.T) {
	l, _ := newLimiter(t, Limit{Type: ServerLimitType, QPS: 4, Burst: 1}, Limit{Type: UserLimitType, QPS: 1, Burst: 1})
	r := req("a", "alice", "c", "p")
	admitN(l, r, 1)
	d := l.Admit(context.Background(), r)
	if d.Allowed || len(d.Refusals) != 2 || d.RetryAfter != time.Second {
		t.Fatalf("decision %+v", d)
	}
	if want := "limit reached on type Server for key , limit reached on type User for key alice"; d.Message() != want {
		t.Errorf("message %q", d.Message())
	}
}

// TestNovelty: when only SourceAndObject refuses, a write the caller says
// is novel is admitted, still taking the other buckets' tokens; a write
// refused by another limit is not, and Novel is not even asked.
func TestNovelty(t *testing.T) {
	l, _ := newLimiter(t, Limit{Type: NamespaceLimitType, QPS: 1, Burst: 3}, Limit{Type: SourceAndObjectLimitType, QPS: 1, Burst: 1})
	asked := 0
	novel := func(v bool, err error) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) { asked++; return v, err }
	}
	r := req("a", "u", "c", "p")
	if !l.Admit(context.Background(), r).Allowed {
		t.Fatal("first write refused")
	}
	r.Novel = novel(false, nil)
	if d := l.Admit(context.Background(), r); d.Allowed || asked != 1 {
		t.Fatalf("a repeat was admitted (%+v, asked %d)", d, asked)
	}
	r.Novel = novel(true, errors.New("store down"))
	if d := l.Admit(context.Background(), r); d.Allowed {
		t.Fatalf("admitted when novelty could not be told: %+v", d)
	}
	r.Novel = novel(true, nil)
	d := l.Admit(context.Background(), r)
	if !d.Allowed || !d.Novel || len(d.Refusals) != 1 || d.Refusals[0].Type != SourceAndObjectLimitType {
		t.Fatalf("a novel write was not admitted: %+v", d)
	}
	// The namespace had 3 tokens; the first and the novel write took 2,
	// the refused repeats none.
	if !l.Admit(context.Background(), req("a", "u", "c", "other")).Allowed {
		t.Fatal("the namespace's last token is gone")
	}
	asked = 0
	r.Novel = novel(true, nil)
	if d := l.Admit(context.Background(), r); d.Allowed || asked != 0 {
		t.Fatalf("novelty overrode the namespace limit (%+v, asked %d)", d, asked)
	}
}

// TestCacheEvictionResetsBuckets: beyond cacheSize buckets, the least
// recently used is dropped and comes back full, as upstream's LRU.
func TestCacheEvictionResetsBuckets(t *testing.T) {
	l, _ := newLimiter(t, Limit{Type: NamespaceLimitType, QPS: 1, Burst: 1, CacheSize: 2})
	admitN(l, req("a", "u", "c", "p"), 1)
	if l.Admit(context.Background(), req("a", "u", "c", "p")).Allowed {
		t.Fatal("bucket a not exhausted")
	}
	admitN(l, req("b", "u", "c", "p"), 1)
	admitN(l, req("c", "u", "c", "p"), 1) // evicts a
	if !l.Admit(context.Background(), req("a", "u", "c", "p")).Allowed {
		t.Fatal("evicted bucket a did not come back full")
	}
}

// TestDefaultCacheSize: cacheSize 0 keeps DefaultCacheSize buckets.
func TestDefaultCacheSize(t *testing.T) {
	l, _ := newLimiter(t, Limit{Type: UserLimitType, QPS: 1, Burst: 1})
	if got := l.limiters[0].cache; got == nil {
		t.Fatal("no cache")
	}
	for i := range DefaultCacheSize + 1 {
		l.Admit(context.Background(), req("a", string(rune('a'+i%26))+time.Duration(i).String(), "c", "p"))
	}
	if n := l.limiters[0].cache.Len(); n != DefaultCacheSize {
		t.Errorf("cache holds %d buckets, want %d", n, DefaultCacheSize)
	}
}

// TestNewValidates: New refuses an invalid configuration.
func TestNewValidates(t *testing.T) {
	if _, err := New(&Configuration{}, Options{}); err == nil {
		t.Fatal("empty configuration accepted")
	}
}

// BenchmarkAdmit is the cost of admitting a write against one limit of
// each type, from parallel writers of distinct objects.
func BenchmarkAdmit(b *testing.B) {
	const generous = 1 << 30
	var limits []Limit
	for _, t := range limitTypes {
		limits = append(limits, Limit{Type: t, QPS: generous, Burst: generous})
	}
	l, err := New(&Configuration{Limits: limits}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		r := req("default", "system:node:node-1", "kubelet", fmt.Sprintf("web-%d", n.Add(1)))
		for pb.Next() {
			if !l.Admit(context.Background(), r).Allowed {
				b.Fatal("refused")
			}
		}
	})
}

// TestNoveltyRaceLost: when another write takes the namespace's last token
// while novelty is asked, the novel write is refused, naming both limits.
func TestNoveltyRaceLost(t *testing.T) {
	l, _ := newLimiter(t, Limit{Type: NamespaceLimitType, QPS: 1, Burst: 2}, Limit{Type: SourceAndObjectLimitType, QPS: 1, Burst: 1})
	r := req("a", "u", "c", "p")
	admitN(l, r, 1)
	r.Novel = func(context.Context) (bool, error) {
		if !l.Admit(context.Background(), req("a", "u", "c", "other")).Allowed {
			t.Error("the concurrent write was refused")
		}
		return true, nil
	}
	d := l.Admit(context.Background(), r)
	if d.Allowed || len(d.Refusals) != 2 || d.Refusals[0].Type != NamespaceLimitType || d.Refusals[1].Type != SourceAndObjectLimitType {
		t.Fatalf("decision %+v", d)
	}
}
