package server

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/fold"
	"github.com/kubevents/kubevents/storage"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

const (
	// foldCandidateLimit bounds the stored events about one object with
	// one reason and type that a folded create reads to find the event it
	// folds into. With folding on they are few (one per series); events
	// stored before folding was turned on may be more, and a candidate
	// beyond the first page is not found (the create is then stored, or
	// folded into an earlier-named candidate).
	foldCandidateLimit = 500
	// foldLockStripes is the number of mutexes a replica's folded creates
	// take by the hash of their isomorphism key.
	foldLockStripes = 256
	// maxFoldReasonLabels bounds the distinct event reasons the fold
	// metrics label (reasons are the clients' to choose); later ones are
	// counted as "other".
	maxFoldReasonLabels = 200
)

// folder is the server's folding: the policy, the per-key locks and the
// metrics. Its zero policy folds nothing.
type folder struct {
	policy *fold.Policy
	// locks serialize the folded creates of one series on this replica:
	// the lookup and the write they decide on, so that two creates of a
	// new series here never store two objects.
	locks [foldLockStripes]sync.Mutex

	folds, fallbacks *prometheus.CounterVec
	races            *prometheus.CounterVec
	log              *logLimiter

	mu      sync.Mutex
	reasons map[string]bool
}

func newFolder(policy *fold.Policy, reg prometheus.Registerer, log *logLimiter) (*folder, error) {
	f := &folder{policy: policy, log: log, reasons: map[string]bool{},
		folds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_fold_creates_total",
			Help: "Creates folded into a stored isomorphic event (--fold-config) instead of stored as new objects, by fold rule and event reason (\"other\" beyond the first 200 reasons).",
		}, []string{"rule", "reason"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_fold_fallbacks_total",
			Help: "Creates a fold rule matched that were stored as new objects although an isomorphic event was found, by rule and cause: conflict (the event kept changing under the fold's retries), too_large (folding would take the event over the object size limit).",
		}, []string{"rule", "cause"}),
		races: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_fold_races_total",
			Help: "Creates of a new series that found, once stored, an earlier isomorphic event another replica stored at the same time, by outcome: merged (the create was folded into it and its own object deleted), kept (it changed meanwhile, so both stay), lost (it was deleted but could not be folded or stored again: its occurrences are lost, and logged).",
		}, []string{"outcome"}),
	}
	for _, r := range policy.RuleNames() {
		f.folds.WithLabelValues(r, "other")
	}
	for _, c := range []prometheus.Collector{f.folds, f.fallbacks, f.races} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// lock takes the mutex of key's stripe and returns its unlock.
func (f *folder) lock(key string) func() {
	h := fnv.New32a()
	h.Write([]byte(key))
	m := &f.locks[h.Sum32()%foldLockStripes]
	m.Lock()
	return m.Unlock
}

// reasonLabel is reason, or "other" once the metrics label enough.
func (f *folder) reasonLabel(reason string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reasons[reason] {
		return reason
	}
	if len(f.reasons) >= maxFoldReasonLabels {
		return "other"
	}
	f.reasons[reason] = true
	return reason
}

// foldable reports whether ev, a create through v, is one folding looks
// at: a rule matches it (its name and window are returned) and it is
// about an object (by uid or name: the index that narrows the lookup).
func (s *Server) foldable(ev *corev1.Event) (rule string, window time.Duration, ok bool) {
	if ev.InvolvedObject.UID == "" && ev.InvolvedObject.Name == "" {
		return "", 0, false
	}
	return s.folder.policy.Match(ev)
}

// foldTarget returns the stored event ev folds into, or nil: an indexed
// list of the events about ev's object with its reason and type (by the
// object's uid, else its name, kind and namespace), then fold.Choose.
// On etcd the list reflects every write acknowledged before it started,
// on any replica.
func (s *Server) foldTarget(ctx context.Context, ev *corev1.Event, v eventapi.Version, window time.Duration) (*corev1.Event, error) {
	cands, err := s.foldCandidates(ctx, ev)
	if err != nil {
		return nil, err
	}
	return fold.Choose(cands, ev, v, s.cfg.Clock.Now(), window), nil
}

// foldCandidates lists the stored events about ev's object with its
// reason and type.
func (s *Server) foldCandidates(ctx context.Context, ev *corev1.Event) ([]*corev1.Event, error) {
	o := ev.InvolvedObject
	fs := eventapi.FieldSelector{{Field: eventapi.FieldReason, Value: ev.Reason}, {Field: eventapi.FieldType, Value: ev.Type}}
	if o.UID != "" {
		fs = append(fs, eventapi.Requirement{Field: eventapi.FieldInvolvedUID, Value: string(o.UID)})
	} else {
		fs = append(fs,
			eventapi.Requirement{Field: eventapi.FieldInvolvedName, Value: o.Name},
			eventapi.Requirement{Field: eventapi.FieldInvolvedKind, Value: o.Kind},
			eventapi.Requirement{Field: eventapi.FieldInvolvedNamespace, Value: o.Namespace})
	}
	res, err := s.store(ctx).List(ctx, storage.ListOptions{Selector: storage.Selector{Namespace: ev.Namespace, Fields: fs}, Limit: foldCandidateLimit})
	if err != nil {
		return nil, fmt.Errorf("looking up the event to fold into: %w", err)
	}
	return res.Items, nil
}

// errFoldConflict: the target kept changing under the fold's retries.
var errFoldConflict = errors.New("the event to fold into kept changing")

// foldInto writes ev folded into target (re-read on a conflict) with a
// revision precondition and returns the stored result; ev's occurrences
// are counted exactly once, whatever the retries. A target that is gone,
// or no longer the one ev folds into, gives (nil, nil): the caller looks
// again. A fold that adds nothing (a repeated create) writes nothing.
func (s *Server) foldInto(ctx context.Context, target, ev *corev1.Event, v eventapi.Version, rule string) (*corev1.Event, *apierrors.StatusError, error) {
	folded, added := fold.Fold(target, ev, v, s.cfg.Clock.Now())
	if added == 0 {
		return target, nil, nil
	}
	if se := s.checkObjectSize(folded); se != nil {
		return nil, se, nil
	}
	wo, retentionRule := s.writeOptions(ctx, folded)
	wo.Precondition.Revision, _ = strconv.ParseInt(target.ResourceVersion, 10, 64)
	out, err := s.store(ctx).Update(ctx, folded, wo)
	if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	s.countRetention(retentionRule)
	s.folder.folds.WithLabelValues(rule, s.folder.reasonLabel(ev.Reason)).Inc()
	return out, nil, nil
}

// foldLoop folds ev into the event it folds into, looking it up again
// after each conflict. It returns the stored result, or nil when there is
// nothing to fold into (or it kept changing: errFoldConflict); a
// StatusError to answer, or a storage error.
func (s *Server) foldLoop(ctx context.Context, ev *corev1.Event, v eventapi.Version, rule string, window time.Duration) (*corev1.Event, *apierrors.StatusError, error) {
	for range maxUpdateRetries {
		target, err := s.foldTarget(ctx, ev, v, window)
		if err != nil || target == nil {
			return nil, nil, err
		}
		out, se, err := s.foldInto(ctx, target, ev, v, rule)
		if out != nil || se != nil || err != nil {
			return out, se, err
		}
	}
	return nil, nil, errFoldConflict
}

// respondFolded answers a create folded into out with out, and a Warning
// header, as kube-apiserver sends warnings, naming the event it was
// folded into.
func (s *Server) respondFolded(w http.ResponseWriter, rr resourceRequest, o output, sent string, out *corev1.Event) {
	setWarnings(w, []string{fmt.Sprintf("event %q was folded into the isomorphic event %s/%s (count %d): eventsd stores repeats of an event as one series (--fold-config)",
		sent, out.Namespace, out.Name, fold.Occurrences(out))})
	s.respondEvent(w, rr, o, http.StatusCreated, out)
}

// createFolded stores a create a fold rule matched: folded into the
// isomorphic event stored within the rule's window, or, when there is
// none, as a new object, which then becomes the series later creates fold
// into. Creates of one series on this replica take turns (a per-key
// lock), so they never both store a new object; one that races a
// create on another replica finds the other's object once stored, and
// the later created of the two is folded into the earlier and deleted.
// It writes the answer.
func (s *Server) createFolded(w http.ResponseWriter, r *http.Request, rr resourceRequest, o output, ev *corev1.Event, generated bool, rule string, window time.Duration) {
	// The lock is released before the answer is written: a slow client
	// does not hold up the series.
	unlock := s.folder.lock(fold.Key(ev, rr.version))
	out, folded, se := s.storeFolded(r, rr, ev, generated, rule, window)
	unlock()
	switch {
	case se != nil:
		writeStatus(w, se)
	case folded:
		s.respondFolded(w, rr, o, ev.Name, out)
	default:
		s.respondEvent(w, rr, o, http.StatusCreated, out)
	}
}

// storeFolded is createFolded's work under the series' lock: it returns
// the stored event and whether it is another event ev was folded into,
// or the error to answer.
func (s *Server) storeFolded(r *http.Request, rr resourceRequest, ev *corev1.Event, generated bool, rule string, window time.Duration) (*corev1.Event, bool, *apierrors.StatusError) {
	ctx := r.Context()
	out, se, err := s.foldLoop(ctx, ev, rr.version, rule, window)
	switch {
	case se != nil && se.Status().Code == http.StatusRequestEntityTooLarge:
		// The event folded into is at the size limit (its note and
		// annotations): store the create as its own object.
		s.folder.fallbacks.WithLabelValues(rule, "too_large").Inc()
		s.folder.log.Warn("create stored unfolded: folding would take the event over the object size limit",
			"namespace", ev.Namespace, "name", ev.Name, "rule", rule, "err", se.Error())
	case se != nil:
		return nil, false, se
	case errors.Is(err, errFoldConflict):
		s.folder.fallbacks.WithLabelValues(rule, "conflict").Inc()
		s.folder.log.Warn("create stored unfolded: the event to fold into kept changing", "namespace", ev.Namespace, "name", ev.Name, "rule", rule)
	case err != nil:
		return nil, false, statusError(err, rr, ev.Name)
	case out != nil:
		return out, true, nil
	}
	created, se := s.storeCreate(ctx, rr, ev, generated)
	if se != nil {
		return nil, false, se
	}
	if merged := s.resolveRace(ctx, created, rr.version, rule, window); merged != nil {
		return merged, true, nil
	}
	return created, false, nil
}

// resolveRace looks, once created is stored as the first of its series,
// for an isomorphic event stored before it, which another replica stored
// while this one did (both lookups found nothing): fold.StoredBefore. If
// there is one, created is deleted (on the condition that nothing was
// written to it meanwhile) and folded into that event, whose stored state
// is returned; otherwise nil. Of two racing creates, the later stored
// finds the earlier, so at most one stays, unless the earlier was written
// to in between (a fold, a recorder's patch): then both stay, and later
// creates fold into the one fold.Choose prefers.
func (s *Server) resolveRace(ctx context.Context, created *corev1.Event, v eventapi.Version, rule string, window time.Duration) *corev1.Event {
	cands, err := s.foldCandidates(ctx, created)
	if err != nil {
		return nil
	}
	if fold.StoredBefore(cands, created, v, s.cfg.Clock.Now(), window) == nil {
		return nil
	}
	rev, _ := strconv.ParseInt(created.ResourceVersion, 10, 64)
	if _, err := s.store(ctx).Delete(ctx, created.Namespace, created.Name, storage.Preconditions{Revision: rev, UID: string(created.UID)}); err != nil {
		s.folder.races.WithLabelValues("kept").Inc()
		return nil
	}
	incoming := created.DeepCopy()
	incoming.ResourceVersion = ""
	out, se, err := s.foldLoop(ctx, incoming, v, rule, window)
	if out != nil {
		s.folder.races.WithLabelValues("merged").Inc()
		return out
	}
	// The earlier event vanished or would grow too large: store this one
	// again rather than lose its occurrences.
	if _, cerr := s.store(ctx).Create(ctx, incoming, storage.WriteOptions{TTL: s.ttl(ctx, incoming)}); cerr == nil {
		s.folder.races.WithLabelValues("kept").Inc()
		return nil
	} else if err == nil && se != nil {
		err = se
	} else if err == nil {
		err = cerr
	}
	s.folder.races.WithLabelValues("lost").Inc()
	s.folder.log.Warn("occurrences lost resolving a fold race: the create's own object was deleted and could not be folded or stored again",
		"namespace", created.Namespace, "name", created.Name, "count", fold.Occurrences(created), "err", err)
	return nil
}

// ttl is the retention policy's TTL of a write of ev in the request's
// scope.
func (s *Server) ttl(ctx context.Context, ev *corev1.Event) time.Duration {
	wo, _ := s.writeOptions(ctx, ev)
	return wo.TTL
}
