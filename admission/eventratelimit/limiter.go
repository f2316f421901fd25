package eventratelimit

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
)

// Source is who reports an event: for events.k8s.io/v1 writes the
// reportingController and reportingInstance, for core/v1 writes
// source.component and source.host.
type Source struct {
	Controller, Instance string
}

// Object is the object an event is about (regarding, involvedObject).
type Object struct {
	Kind, Namespace, Name, UID, APIVersion string
}

// Request is one write to admit or refuse.
type Request struct {
	// Namespace is the namespace written to.
	Namespace string
	// User is the name of the user writing.
	User string
	// Source and Object key the SourceAndObject buckets.
	Source Source
	Object Object
	// Novel, when set, reports whether the event is the first for its
	// (object, reason), that is whether no event for them is stored yet.
	// It is called only when SourceAndObject buckets alone refuse, outside
	// the limiter's lock; true admits the write (the novelty rule), and an
	// error counts as false.
	Novel func(context.Context) (bool, error)
}

// Refusal names a bucket that had no token for a write.
type Refusal struct {
	// Type is the limit whose bucket refused.
	Type LimitType
	// Key names the bucket, readably: the namespace, the user, or the
	// source and object; empty for Server.
	Key string
}

// Decision is the outcome of Admit.
type Decision struct {
	// Allowed is true when the write may proceed; its tokens are taken.
	Allowed bool
	// Novel is true when the write was allowed by the novelty rule despite
	// SourceAndObject refusals, which Refusals then lists.
	Novel bool
	// Refusals are the buckets that had no token, in limit-type order.
	Refusals []Refusal
	// RetryAfter, for a refused write, is how long until every bucket that
	// refused has a token again.
	RetryAfter time.Duration
}

// Message says why a write was refused, in upstream's words for each
// bucket ("limit reached on type Namespace for key default").
func (d Decision) Message() string {
	parts := make([]string, len(d.Refusals))
	for i, r := range d.Refusals {
		parts[i] = fmt.Sprintf("limit reached on type %s for key %s", r.Type, r.Key)
	}
	return strings.Join(parts, ", ")
}

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up and at least
// 1, as a Retry-After header carries it.
func (d Decision) RetryAfterSeconds() int32 {
	s := int32(math.Ceil(d.RetryAfter.Seconds()))
	return max(s, 1)
}

// Options configure a Limiter.
type Options struct {
	// Clock times the buckets; the real clock when nil.
	Clock clock.PassiveClock
}

// Limiter admits or refuses event writes by the limits of a
// Configuration. It is safe for concurrent use.
type Limiter struct {
	clock    clock.PassiveClock
	mu       sync.Mutex // guards the buckets' state across a decision
	limiters []*limiter
}

// limiter is one configured limit and its buckets.
type limiter struct {
	typ        LimitType
	qps        rate.Limit
	burst      int
	server     *rate.Limiter // for Server
	cache      *lru.Cache    // bucket key -> *rate.Limiter, for the others
	isSAO      bool
	keyOf      func(*Request) string
	describeOf func(*Request) string
}

// New builds a Limiter for c, which it validates.
func New(c *Configuration, o Options) (*Limiter, error) {
	if errs := c.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("invalid %s configuration: %w", PluginName, errs.ToAggregate())
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	l := &Limiter{clock: o.Clock}
	for _, lc := range c.Limits {
		x := &limiter{typ: lc.Type, qps: rate.Limit(lc.QPS), burst: int(lc.Burst)}
		switch lc.Type {
		case ServerLimitType:
			x.server = rate.NewLimiter(x.qps, x.burst)
			x.keyOf = func(*Request) string { return "" }
			x.describeOf = x.keyOf
		case NamespaceLimitType:
			x.keyOf = func(r *Request) string { return r.Namespace }
			x.describeOf = x.keyOf
		case UserLimitType:
			x.keyOf = func(r *Request) string { return r.User }
			x.describeOf = x.keyOf
		case SourceAndObjectLimitType:
			x.isSAO = true
			x.keyOf = sourceAndObjectKey
			x.describeOf = describeSourceAndObject
		}
		if x.server == nil {
			size := int(lc.CacheSize)
			if size == 0 {
				size = DefaultCacheSize
			}
			x.cache = lru.New(size)
		}
		l.limiters = append(l.limiters, x)
	}
	return l, nil
}

// typicalLimits is how many limits a configuration usually has (one of
// each type): up to that many, a decision does not allocate its list of
// buckets.
const typicalLimits = 4

// keySeparator separates the parts of a SourceAndObject key; it cannot
// occur in the names it separates.
const keySeparator = "\x00"

func sourceAndObjectKey(r *Request) string {
	o := r.Object
	return strings.Join([]string{r.Source.Controller, r.Source.Instance, o.Kind, o.Namespace, o.Name, o.UID, o.APIVersion}, keySeparator)
}

func describeSourceAndObject(r *Request) string {
	o := r.Object
	s := fmt.Sprintf("%s/%s %s %s/%s", r.Source.Controller, r.Source.Instance, o.Kind, o.Namespace, o.Name)
	if o.UID != "" {
		s += " (" + o.UID + ")"
	}
	return s
}

// bucket returns the bucket for key, a full one if it had none.
func (x *limiter) bucket(key string) *rate.Limiter {
	if x.server != nil {
		return x.server
	}
	if b, ok := x.cache.Get(key); ok {
		return b.(*rate.Limiter)
	}
	b := rate.NewLimiter(x.qps, x.burst)
	x.cache.Add(key, b)
	return b
}

// Admit decides whether r may be written, taking a token from each of its
// buckets if so and from none if not.
func (l *Limiter) Admit(ctx context.Context, r *Request) Decision {
	var small [typicalLimits]*rate.Limiter
	buckets := small[:0]
	now := l.clock.Now()
	l.mu.Lock()
	for _, x := range l.limiters {
		buckets = append(buckets, x.bucket(x.keyOf(r)))
	}
	d := l.check(r, buckets, now, false)
	if len(d.Refusals) == 0 {
		l.take(buckets, now)
		l.mu.Unlock()
		d.Allowed = true
		return d.Decision
	}
	l.mu.Unlock()
	if !d.onlySourceAndObject || r.Novel == nil {
		return d.Decision
	}
	if novel, err := r.Novel(ctx); err != nil || !novel {
		return d.Decision
	}
	// Novel: admitted if the other buckets still have tokens (the lock was
	// released while novelty was asked).
	now = l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if other := l.check(r, buckets, now, true); len(other.Refusals) > 0 {
		// Refused by another limit after all: report every limit reached.
		other.Refusals = append(other.Refusals, d.Refusals...)
		other.RetryAfter = max(other.RetryAfter, d.RetryAfter)
		return other.Decision
	}
	for i, x := range l.limiters {
		if !x.isSAO {
			buckets[i].AllowN(now, 1)
		}
	}
	d.Allowed, d.Novel, d.RetryAfter = true, true, 0
	return d.Decision
}

// checked is a Decision with whether only SourceAndObject buckets refused.
type checked struct {
	Decision
	onlySourceAndObject bool
}

// check finds the buckets without a token at now (ignoring SourceAndObject
// ones with skipSAO) and how long until they have one. The caller holds
// l.mu, so that what it finds holds until it takes the tokens.
func (l *Limiter) check(r *Request, buckets []*rate.Limiter, now time.Time, skipSAO bool) checked {
	d := checked{onlySourceAndObject: true}
	for i, x := range l.limiters {
		if skipSAO && x.isSAO {
			continue
		}
		tokens := buckets[i].TokensAt(now)
		if tokens >= 1 {
			continue
		}
		d.Refusals = append(d.Refusals, Refusal{Type: x.typ, Key: x.describeOf(r)})
		wait := time.Duration((1 - tokens) / float64(x.qps) * float64(time.Second))
		d.RetryAfter = max(d.RetryAfter, wait)
		d.onlySourceAndObject = d.onlySourceAndObject && x.isSAO
	}
	return d
}

// take takes a token from each bucket; check has found that each has one.
func (l *Limiter) take(buckets []*rate.Limiter, now time.Time) {
	for _, b := range buckets {
		b.AllowN(now, 1)
	}
}
