package record

import (
	"math"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of CorrelatorOptions (client-go's values).
const (
	// DefaultLRUCacheSize bounds each of the three correlator caches
	// (aggregate groups, deduplicated events, spam buckets) per sink.
	DefaultLRUCacheSize = 4096
	// DefaultAggregateMaxEvents distinct messages of one reason about one
	// object within the window fold into a combined event.
	DefaultAggregateMaxEvents = 10
	// DefaultAggregateIntervalInSeconds is the aggregation window.
	DefaultAggregateIntervalInSeconds = 600
	// DefaultSpamBurst is how many writes a spam bucket allows at once:
	// enough for a pod's whole start-up sequence of one reason.
	DefaultSpamBurst = 25
	// DefaultSpamQPS refills a bucket one write per 5 minutes, which
	// bounds the write rate of an object that is always unhealthy.
	DefaultSpamQPS = 1. / 300.
)

// correlator aggregates, deduplicates and rate-limits one sink's events. It
// is owned by the sink's worker goroutine and not safe for concurrent use.
//
// Every time it uses is an event's emission time (lastTimestamp, from the
// broadcaster's clock) or, for deferred flushes, the clock's time, so its
// decisions do not depend on how long events waited in the queue.
type correlator struct {
	maxEvents   int
	window      time.Duration
	burst, qps  float64
	keyFunc     EventAggregatorKeyFunc     // nil: aggregateKey
	messageFunc EventAggregatorMessageFunc // nil: AggregatePrefix + message
	spamKeyFunc EventSpamKeyFunc           // nil: defaultSpamKey

	groups  *lruCache[correlationKey, aggRecord]
	dedup   *lruCache[correlationKey, *dedupEntry] // pointers: deferred flushes hold entries
	buckets *lruCache[spamKey, tokenBucket]

	// onNew and onEvict report deduplication entries coming and going
	// (the active-series gauge, lost held-back occurrences).
	onNew   func()
	onEvict func(*dedupEntry)
}

func newCorrelator(o CorrelatorOptions, onNew func(), onEvict func(*dedupEntry)) *correlator {
	size := o.LRUCacheSize
	if size <= 0 {
		size = DefaultLRUCacheSize
	}
	c := &correlator{
		maxEvents:   o.MaxEvents,
		window:      time.Duration(o.MaxIntervalInSeconds) * time.Second,
		burst:       float64(o.BurstSize),
		qps:         float64(o.QPS),
		keyFunc:     o.KeyFunc,
		messageFunc: o.MessageFunc,
		spamKeyFunc: o.SpamKeyFunc,
		onNew:       onNew,
		onEvict:     onEvict,
	}
	if c.maxEvents <= 0 {
		c.maxEvents = DefaultAggregateMaxEvents
	}
	if c.window <= 0 {
		c.window = DefaultAggregateIntervalInSeconds * time.Second
	}
	if c.burst <= 0 {
		c.burst = DefaultSpamBurst
	}
	if c.qps <= 0 {
		c.qps = DefaultSpamQPS
	}
	c.groups = newLRU[correlationKey, aggRecord](size, nil)
	c.dedup = newLRU(size, func(_ correlationKey, e **dedupEntry) {
		(*e).evicted = true
		if c.onEvict != nil {
			c.onEvict(*e)
		}
	})
	c.buckets = newLRU[spamKey, tokenBucket](size, nil)
	return c
}

// dedupEntry is what the correlator knows about one event object: its name
// and resourceVersion on the server, its first timestamp, how many
// occurrences it counts (count: those seen, less those given up on, see
// dropPending) and how many the server has been told about (written).
// count > written means occurrences are held back by the spam filter (or
// a write is under way).
type dedupEntry struct {
	key     correlationKey
	spam    spamKey
	name    string
	rv      string
	first   metav1.Time
	count   int32
	written int32
	// last is the latest occurrence as correlated; a deferred flush
	// writes it with the current count.
	last *corev1.Event
	// scheduled: a deferred flush is queued, at heapIndex in the
	// worker's flush queue; evicted: dropped from the cache.
	scheduled, evicted bool
	heapIndex          int
}

func (e *dedupEntry) pending() int32 { return e.count - e.written }

// dropPending takes e's unwritten occurrences out of its count and returns
// how many there were: they are given up on (counted as dropped by the
// caller), so the count the next write carries is what the server stores
// plus the occurrences after them. A create given up on leaves count 0:
// the next occurrence creates the object with count 1.
func (e *dedupEntry) dropPending() int32 {
	n := e.pending()
	if n < 0 {
		return 0
	}
	e.count = e.written
	return n
}

// correlation is the outcome for one occurrence.
type correlation struct {
	// event is what to write: the occurrence, or the combined event it
	// was folded into, with the name, first timestamp and count of the
	// existing object on a repeat.
	event *corev1.Event
	// patch is the count patch for a repeat that is not skipped.
	patch []byte
	entry *dedupEntry
	// aggregated: folded into a combined event; repeat: counted on an
	// existing entry; skip: held back by the spam filter.
	aggregated, repeat, skip bool
}

// correlate runs client-go's pipeline on ev, which it may modify: aggregate,
// then deduplicate (updating the count even if the spam filter then holds
// the occurrence back, so the next write carries it), then the spam filter.
func (c *correlator) correlate(ev *corev1.Event) correlation {
	t := ev.LastTimestamp.Time
	var r correlation

	// Aggregation.
	var group correlationKey
	var local string
	if c.keyFunc == nil {
		group, local = aggregateKey(ev), ev.Message
	} else {
		var g string
		g, local = c.keyFunc(ev)
		group = correlationKey{custom: g, kind: keyCustom}
	}
	rec, ok := c.groups.get(group)
	if !ok {
		rec = c.groups.insert(group)
		rec.msgs = rec.msgs[:0] // a recycled record keeps its array
	}
	key := eventKey(ev)
	if rec.observe(local, t, c.window, c.maxEvents) {
		msg := AggregatePrefix + ev.Message
		if c.messageFunc != nil {
			msg = c.messageFunc(ev)
		}
		// As client-go: no annotations, reportingController or
		// reportingInstance on the combined event. Its name is the
		// occurrence's, made by eventName (client-go builds one without
		// the UUID fallback).
		ev = &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: ev.Name, Namespace: ev.Namespace},
			InvolvedObject: ev.InvolvedObject,
			Reason:         ev.Reason,
			Message:        msg,
			Source:         ev.Source,
			FirstTimestamp: ev.LastTimestamp,
			LastTimestamp:  ev.LastTimestamp,
			Count:          1,
			Type:           ev.Type,
		}
		key = group
		r.aggregated = true
	}

	// Deduplication.
	var e *dedupEntry
	if p, hit := c.dedup.get(key); hit {
		e = *p
		ev.Name = e.name
		ev.ResourceVersion = e.rv
		ev.FirstTimestamp = e.first
		ev.Count = e.count + 1
		e.count = ev.Count
		r.repeat = true
	} else {
		e = &dedupEntry{key: key, name: ev.Name, first: ev.FirstTimestamp, count: ev.Count}
		*c.dedup.insert(key) = e
		if c.onNew != nil {
			c.onNew()
		}
	}
	e.last = ev
	r.event, r.entry = ev, e

	// Spam filter.
	if c.spamKeyFunc == nil {
		e.spam = defaultSpamKey(ev)
	} else {
		e.spam = spamKey{custom: c.spamKeyFunc(ev), isCust: true}
	}
	r.skip = !c.take(e.spam, t)
	if r.repeat && !r.skip {
		r.patch = countPatch(ev)
	}
	return r
}

// written records that the server now stores e's object as out (after a
// successful write of count occurrences).
func (c *correlator) written(e *dedupEntry, count int32, out *corev1.Event) {
	e.written = max(e.written, count)
	if out == nil {
		return
	}
	if out.Name != "" {
		e.name = out.Name
	}
	e.rv = out.ResourceVersion
}

// seed records a stored event (WithResume) as already written, so the next
// occurrence of it is a PATCH with the stored count + 1. An aggregated event
// (client-go's or this package's, with the default key and message
// functions) is recorded under its group's key.
func (c *correlator) seed(ev *corev1.Event) {
	key := eventKey(ev)
	if c.keyFunc == nil && c.messageFunc == nil && ev.ReportingController == "" && strings.HasPrefix(ev.Message, AggregatePrefix) {
		g := *ev
		g.ReportingController, g.ReportingInstance = ev.Source.Component, ev.Source.Host
		key = aggregateKey(&g)
	}
	if ev.Count < 1 {
		return
	}
	var e *dedupEntry
	if p, ok := c.dedup.get(key); ok {
		e = *p
	} else {
		e = &dedupEntry{key: key}
		*c.dedup.insert(key) = e
		if c.onNew != nil {
			c.onNew()
		}
	}
	e.name, e.rv, e.first = ev.Name, ev.ResourceVersion, ev.FirstTimestamp
	e.count, e.written = ev.Count, ev.Count
}

// take takes a token from bucket k at time t, reporting whether there was
// one. A bucket not in the cache (new, or evicted) starts full.
func (c *correlator) take(k spamKey, t time.Time) bool {
	b := c.bucket(k, t)
	b.refill(t, c.burst, c.qps)
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	return false
}

func (c *correlator) bucket(k spamKey, t time.Time) *tokenBucket {
	b, ok := c.buckets.get(k)
	if !ok {
		b = c.buckets.insert(k)
		*b = tokenBucket{tokens: c.burst, last: t}
	}
	return b
}

// nextToken is when bucket k next has a token, at or after now.
func (c *correlator) nextToken(k spamKey, now time.Time) time.Time {
	b, ok := c.buckets.get(k)
	if !ok {
		return now
	}
	b.refill(now, c.burst, c.qps)
	if b.tokens >= 1 {
		return now
	}
	return now.Add(secondsToDuration((1 - b.tokens) / c.qps))
}

// refillInterval is the time the spam filter takes to refill one token.
func (c *correlator) refillInterval() time.Duration { return secondsToDuration(1 / c.qps) }

func secondsToDuration(s float64) time.Duration {
	const maxSeconds = float64(math.MaxInt64/int64(time.Second)) / 2
	return time.Duration(math.Ceil(min(s, maxSeconds) * float64(time.Second)))
}

// tokenBucket is a spam-filter bucket: burst tokens, refilled at qps. It is
// the same token bucket client-go gets from flowcontrol, kept here so that
// the worker can ask when the next token comes.
type tokenBucket struct {
	tokens float64
	last   time.Time
}

func (b *tokenBucket) refill(t time.Time, burst, qps float64) {
	if t.After(b.last) {
		b.tokens = min(burst, b.tokens+t.Sub(b.last).Seconds()*qps)
		b.last = t
	}
}

// aggRecord is an aggregate group's distinct messages within the window,
// least recently seen first.
type aggRecord struct {
	msgs []seenMessage
}

type seenMessage struct {
	local string
	at    time.Time
}

// observe records local at t and reports whether the group has reached
// maxEvents distinct messages within window, in which case it forgets the
// least recently seen one (client-go forgets a random one). Messages last
// seen more than window before t are forgotten first: a true rolling
// window, where client-go keeps every message until the whole group has
// been idle for the window.
func (r *aggRecord) observe(local string, t time.Time, window time.Duration, maxEvents int) bool {
	n := 0
	for n < len(r.msgs) && t.Sub(r.msgs[n].at) > window {
		n++
	}
	if n > 0 {
		r.msgs = r.msgs[:copy(r.msgs, r.msgs[n:])]
	}
	for i := range r.msgs {
		if r.msgs[i].local == local {
			r.msgs = append(r.msgs[:i], r.msgs[i+1:]...)
			break
		}
	}
	r.msgs = append(r.msgs, seenMessage{local: local, at: t})
	if len(r.msgs) < maxEvents {
		return false
	}
	r.msgs = r.msgs[:copy(r.msgs, r.msgs[1:])]
	return true
}
