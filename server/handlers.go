package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	jsonpatchv5 "github.com/evanphx/json-patch/v5"
	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/fold"
	"github.com/kubevents/kubevents/storage"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

const (
	// maxUpdateRetries bounds the read-modify-write retries of updates
	// and patches that carry no resourceVersion of their own.
	maxUpdateRetries = 16
	// maxGenerateNameAttempts is kube-apiserver's RetryGenerateName bound.
	maxGenerateNameAttempts = 8
	// generateNameBaseLimit and generateNameSuffixLen are
	// names.SimpleNameGenerator's: a 58-character base and 5 random
	// characters, at most 63 in all.
	generateNameBaseLimit = 58
	generateNameSuffixLen = 5
)

// writeOptions are the query parameters of create, update and patch.
type writeOptions struct {
	dryRun       bool
	validation   string
	fieldManager string // as given; see manager
	force        bool   // apply only
}

// parseWriteOptions reads the write options of a request; apply says
// it is a server-side apply, which alone takes force and needs a
// fieldManager (kube-apiserver's ValidatePatchOptions).
func parseWriteOptions(q url.Values, kind string, apply bool) (writeOptions, *apierrors.StatusError) {
	o := writeOptions{validation: validationWarn, fieldManager: q.Get("fieldManager")}
	errs := fieldManagerErrors(q, kind, &o, apply)
	for _, d := range q["dryRun"] {
		if d != metav1.DryRunAll {
			errs = append(errs, field.NotSupported(field.NewPath("dryRun"), d, []string{metav1.DryRunAll}))
		}
		o.dryRun = true
	}
	if v := q.Get("fieldValidation"); v != "" {
		switch v {
		case validationStrict, validationWarn, validationIgnore:
			o.validation = v
		default:
			errs = append(errs, field.NotSupported(field.NewPath("fieldValidation"), v, []string{validationIgnore, validationStrict, validationWarn}))
		}
	}
	if len(errs) > 0 {
		return o, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
	}
	return o, nil
}

// setWarnings adds RFC 7234 Warning headers, as kube-apiserver does for
// unknown fields under fieldValidation=Warn.
func setWarnings(w http.ResponseWriter, warnings []string) {
	for _, msg := range warnings {
		w.Header().Add("Warning", "299 - "+strconv.Quote(msg))
	}
}

// checkNamespace defaults the body namespace from the URL and rejects a
// mismatch.
func checkNamespace(ev *corev1.Event, ns string) *apierrors.StatusError {
	if ev.Namespace == "" {
		ev.Namespace = ns
	}
	if ev.Namespace != ns {
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return nil
}

func checkName(ev *corev1.Event, name string) *apierrors.StatusError {
	if ev.Name != name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", ev.Name, name))
	}
	return nil
}

// prepareForCreate sets what kube-apiserver sets on create and clears what
// clients may not set.
func (s *Server) prepareForCreate(ev *corev1.Event) *apierrors.StatusError {
	if ev.ResourceVersion != "" {
		return apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	ev.UID = uuid.NewUUID()
	ev.CreationTimestamp = metav1.NewTime(s.cfg.Clock.Now().Truncate(time.Second))
	ev.DeletionTimestamp = nil
	ev.DeletionGracePeriodSeconds = nil
	ev.SelfLink = "" // deprecated; kube-apiserver's storage never keeps it
	if ev.Name == "" && ev.GenerateName != "" {
		ev.Name = generateName(ev.GenerateName)
	}
	return nil
}

func generateName(base string) string {
	if len(base) > generateNameBaseLimit {
		base = base[:generateNameBaseLimit]
	}
	return base + utilrand.String(generateNameSuffixLen)
}

// prepareForUpdate carries over what an update may not change. The
// revision read is stamped on the new state, as kube-apiserver does for
// unconditional updates (the caller has checked any revision the client
// named against it).
func prepareForUpdate(ev, cur *corev1.Event) {
	ev.ResourceVersion = cur.ResourceVersion
	if ev.UID == "" {
		ev.UID = cur.UID
	}
	ev.CreationTimestamp = cur.CreationTimestamp
	ev.DeletionTimestamp = cur.DeletionTimestamp
	ev.DeletionGracePeriodSeconds = cur.DeletionGracePeriodSeconds
	ev.SelfLink = ""
	ev.Generation = cur.Generation
}

func parseRevision(rv string) (int64, *apierrors.StatusError) {
	if rv == "" {
		return 0, nil
	}
	r, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || r < 0 {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %q", rv))
	}
	return r, nil
}

// checkObjectSize refuses an event whose stored form (its protobuf
// encoding) is over the object size limit, as etcd refuses a request over
// its --max-request-bytes; dry runs are checked too, so that they answer
// what the write would.
func (s *Server) checkObjectSize(ev *corev1.Event) *apierrors.StatusError {
	limit := s.cfg.MaxObjectSizeBytes
	if limit < 0 {
		return nil
	}
	if n := ev.Size(); n > limit && !dropManagedFields(ev, limit) {
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("the event is %d bytes when stored, over the object size limit of %d bytes", n, limit))
	}
	return nil
}

// writeOptions are the storage options of a write of ev in the request's
// scope (ctx): its TTL is the retention policy's for ev in the scope's
// cluster ("" the root cluster's, or a fleet's cluster's name, whose rules
// may name it). rule names the policy's rule that chose it, for
// countRetention once the write is stored.
func (s *Server) writeOptions(ctx context.Context, ev *corev1.Event) (opts storage.WriteOptions, rule string) {
	ttl, rule := s.retention.ClusterTTL(s.scopeOf(ctx).name, ev)
	return storage.WriteOptions{TTL: ttl}, rule
}

// countRetention counts a stored write whose TTL rule chose.
func (s *Server) countRetention(rule string) {
	s.metrics.retentionWrites.WithLabelValues(rule).Inc()
}

// CountRetentionWrite counts a write of ev, an event of the root cluster,
// that another writer of the store (the mirror) stored:
// CountClusterRetentionWrite("", ev).
func (s *Server) CountRetentionWrite(ev *corev1.Event) {
	s.CountClusterRetentionWrite("", ev)
}

// CountClusterRetentionWrite counts a write of ev, an event of cluster
// cluster ("" the root) with the cluster's own namespace, that another
// writer of the store (a fleet's mirror of that cluster) stored, in
// eventsd_retention_rule_writes_total by the rule that chose its TTL
// (retention.Policy.ClusterTTL), as the API's own writes are counted.
func (s *Server) CountClusterRetentionWrite(cluster string, ev *corev1.Event) {
	_, rule := s.retention.ClusterTTL(cluster, ev)
	s.countRetention(rule)
}

// respondEvent writes ev in the format o that negotiateOutput returned.
func (s *Server) respondEvent(w http.ResponseWriter, rr resourceRequest, o output, status int, ev *corev1.Event) {
	s.respondEvents(w, rr, o, status, []*corev1.Event{ev}, metav1.ListMeta{}, true)
}

// respondEvents writes one event (single) or a list in the negotiated form.
func (s *Server) respondEvents(w http.ResponseWriter, rr resourceRequest, o output, status int, items []*corev1.Event, meta metav1.ListMeta, single bool) {
	switch o.kind {
	case outTable:
		t, err := table(rr.version, items, meta, o, tableOptions{includeObject: o.include}, s.cfg.Clock.Now())
		if err != nil {
			writeStatus(w, apierrors.NewInternalError(err))
			return
		}
		writeObject(w, o, status, t)
	case outPartial:
		if single {
			writeObject(w, o, status, partialMeta(items[0], o.metaVersion))
			return
		}
		l := &metav1.PartialObjectMetadataList{
			TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadataList", APIVersion: "meta.k8s.io/" + o.metaVersion},
			ListMeta: meta, Items: make([]metav1.PartialObjectMetadata, len(items)),
		}
		for i, ev := range items {
			l.Items[i] = *partialMeta(ev, o.metaVersion)
		}
		writeObject(w, o, status, l)
	default:
		if single {
			writeObject(w, o, status, externalEvent(rr.version, items[0]))
			return
		}
		writeObject(w, o, status, externalList(rr.version, items, meta))
	}
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, rr resourceRequest) {
	o, se := negotiateOutput(r)
	if se != nil {
		writeStatus(w, se)
		return
	}
	ev, err := s.store(r.Context()).Get(r.Context(), rr.namespace, rr.name)
	if err != nil {
		writeStatus(w, statusError(err, rr, rr.name))
		return
	}
	s.respondEvent(w, rr, o, http.StatusOK, ev)
}

// decodeWrite reads what a create or an update sends: its options (of the
// named kind, for error messages), its body as an Event in the storage
// form with the URL's namespace, and the warnings decoding produced. On
// failure it has written the error response and returns ok=false.
func decodeWrite(w http.ResponseWriter, r *http.Request, rr resourceRequest, optionsKind string) (ev *corev1.Event, opts writeOptions, warnings []string, ok bool) {
	opts, se := parseWriteOptions(rr.query, optionsKind, false)
	var body []byte
	if se == nil {
		body, se = readBody(w, r)
	}
	if se == nil {
		ev, warnings, se = decodeEvent(r.Header.Get("Content-Type"), body, rr.version, opts.validation)
	}
	if se == nil {
		se = checkNamespace(ev, rr.namespace)
	}
	if se != nil {
		writeStatus(w, se)
		return nil, opts, nil, false
	}
	return ev, opts, warnings, true
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, rr resourceRequest) {
	o, se := negotiateOutput(r)
	if se != nil {
		writeStatus(w, se)
		return
	}
	ev, opts, warnings, ok := decodeWrite(w, r, rr, "CreateOptions")
	if !ok {
		return
	}
	generated := ev.Name == "" && ev.GenerateName != ""
	if se := s.prepareForCreate(ev); se != nil {
		writeStatus(w, se)
		return
	}
	ev = s.fields.Update(rr.version, nil, ev, manager(r, opts))
	if errs := eventapi.ValidateCreate(ev, rr.version); len(errs) > 0 {
		writeStatus(w, invalid(ev.Name, errs))
		return
	}
	if se := s.checkObjectSize(ev); se != nil {
		writeStatus(w, se)
		return
	}
	setWarnings(w, warnings)
	rule, window, folding := s.foldable(ev)
	if opts.dryRun {
		if _, err := s.store(r.Context()).Get(r.Context(), ev.Namespace, ev.Name); err == nil {
			writeStatus(w, apierrors.NewAlreadyExists(rr.version.GroupResource(), ev.Name))
			return
		}
		if folding {
			// What the create would fold into, unwritten.
			target, err := s.foldTarget(r.Context(), ev, rr.version, window)
			if err != nil {
				writeStatus(w, statusError(err, rr, ev.Name))
				return
			}
			if target != nil {
				out, _ := fold.Fold(target, ev, rr.version, s.cfg.Clock.Now())
				s.respondFolded(w, rr, o, ev.Name, out)
				return
			}
		}
		s.respondEvent(w, rr, o, http.StatusCreated, ev)
		return
	}
	// The rate limits decide first, on the create as sent: folding
	// changes what is stored, not what is admitted.
	if !s.admitRate(w, r, rr, ev, true) {
		return
	}
	if folding {
		s.createFolded(w, r, rr, o, ev, generated, rule, window)
		return
	}
	out, se := s.storeCreate(r.Context(), rr, ev, generated)
	if se != nil {
		writeStatus(w, se)
		return
	}
	s.respondEvent(w, rr, o, http.StatusCreated, out)
}

// storeCreate stores ev as a new object, with a new generated name when
// the one generated is taken, and returns it, or the error to answer.
func (s *Server) storeCreate(ctx context.Context, rr resourceRequest, ev *corev1.Event, generated bool) (*corev1.Event, *apierrors.StatusError) {
	for attempt := 1; ; attempt++ {
		wo, rule := s.writeOptions(ctx, ev)
		out, err := s.store(ctx).Create(ctx, ev, wo)
		if errors.Is(err, storage.ErrExists) && generated {
			if attempt < maxGenerateNameAttempts {
				ev.Name = generateName(ev.GenerateName)
				continue
			}
			return nil, apierrors.NewConflict(rr.version.GroupResource(), ev.Name,
				fmt.Errorf("the provided generateName %q produced %d names that already exist", ev.GenerateName, attempt))
		}
		if err != nil {
			return nil, statusError(err, rr, ev.Name)
		}
		s.countRetention(rule)
		return out, nil
	}
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, rr resourceRequest) {
	o, se := negotiateOutput(r)
	if se != nil {
		writeStatus(w, se)
		return
	}
	ev, opts, warnings, ok := decodeWrite(w, r, rr, "UpdateOptions")
	if !ok {
		return
	}
	if se := checkName(ev, rr.name); se != nil {
		writeStatus(w, se)
		return
	}
	want, se := parseRevision(ev.ResourceVersion)
	if se != nil {
		writeStatus(w, se)
		return
	}
	setWarnings(w, warnings)
	s.guaranteedUpdate(w, r, rr, o, opts, want, func(cur *corev1.Event) (*corev1.Event, *apierrors.StatusError) {
		c := *ev
		return s.fields.Update(rr.version, cur, &c, manager(r, opts)), nil
	}, true)
}

// guaranteedUpdate runs a read-modify-write of rr's event: tryUpdate builds
// the new state from the current one; the write is conditional on the
// revision read and retried on a race unless the client named a revision
// (want), which must then be current. createMissing gives PUT semantics.
// The answer is written in the format o the caller negotiated.
func (s *Server) guaranteedUpdate(w http.ResponseWriter, r *http.Request, rr resourceRequest, o output, opts writeOptions, want int64,
	tryUpdate func(cur *corev1.Event) (*corev1.Event, *apierrors.StatusError), createMissing bool) {
	ctx := r.Context()
	conflict := func() {
		writeStatus(w, apierrors.NewConflict(rr.version.GroupResource(), rr.name, errors.New(registryOptimisticLockMsg)))
	}
	// The rate limits are applied once per request, to the first state
	// about to be stored, not again when a conflict makes it retry.
	admitted := false
	admit := func(ev *corev1.Event, create bool) bool {
		if admitted {
			return true
		}
		admitted = s.admitRate(w, r, rr, ev, create)
		return admitted
	}
	for attempt := 0; attempt < maxUpdateRetries; attempt++ {
		cur, err := s.store(ctx).Get(ctx, rr.namespace, rr.name)
		if errors.Is(err, storage.ErrNotFound) {
			if !createMissing {
				writeStatus(w, statusError(err, rr, rr.name))
				return
			}
			ev, se := tryUpdate(nil)
			if se == nil {
				ev.ResourceVersion = ""
				se = s.prepareForCreate(ev)
			}
			if se != nil {
				writeStatus(w, se)
				return
			}
			if errs := eventapi.ValidateCreate(ev, rr.version); len(errs) > 0 {
				writeStatus(w, invalid(ev.Name, errs))
				return
			}
			if se := s.checkObjectSize(ev); se != nil {
				writeStatus(w, se)
				return
			}
			if opts.dryRun {
				s.respondEvent(w, rr, o, http.StatusCreated, ev)
				return
			}
			if !admit(ev, true) {
				return
			}
			wo, rule := s.writeOptions(ctx, ev)
			out, err := s.store(ctx).Create(ctx, ev, wo)
			if errors.Is(err, storage.ErrExists) {
				continue // created concurrently: update it instead
			}
			if err != nil {
				writeStatus(w, statusError(err, rr, rr.name))
				return
			}
			s.countRetention(rule)
			s.respondEvent(w, rr, o, http.StatusCreated, out)
			return
		}
		if err != nil {
			writeStatus(w, statusError(err, rr, rr.name))
			return
		}
		curRev, _ := strconv.ParseInt(cur.ResourceVersion, 10, 64)
		if want != 0 && want != curRev {
			conflict()
			return
		}
		ev, se := tryUpdate(cur)
		if se != nil {
			writeStatus(w, se)
			return
		}
		prepareForUpdate(ev, cur)
		if errs := eventapi.ValidateUpdate(ev, cur, rr.version); len(errs) > 0 {
			writeStatus(w, invalid(ev.Name, errs))
			return
		}
		if se := s.checkObjectSize(ev); se != nil {
			writeStatus(w, se)
			return
		}
		if opts.dryRun {
			ev.ResourceVersion = cur.ResourceVersion
			s.respondEvent(w, rr, o, http.StatusOK, ev)
			return
		}
		if !admit(ev, false) {
			return
		}
		wo, rule := s.writeOptions(ctx, ev)
		wo.Precondition.Revision = curRev
		out, err := s.store(ctx).Update(ctx, ev, wo)
		if errors.Is(err, storage.ErrConflict) && want != 0 {
			// Changed since the read: the revision named is not current.
			conflict()
			return
		}
		if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound) {
			// Changed or deleted since the read: read it again. A deletion
			// is not a conflict even when the client named a revision:
			// kube-apiserver's next attempt finds the event missing and
			// creates it (PUT) or answers 404 (patch), and so does ours.
			continue
		}
		if err != nil {
			writeStatus(w, statusError(err, rr, rr.name))
			return
		}
		s.countRetention(rule)
		s.respondEvent(w, rr, o, http.StatusOK, out)
		return
	}
	conflict()
}

// Patch content types.
const (
	patchJSON      = "application/json-patch+json"
	patchMerge     = "application/merge-patch+json"
	patchStrategic = "application/strategic-merge-patch+json"
	patchApply     = "application/apply-patch+yaml"
)

func (s *Server) patch(w http.ResponseWriter, r *http.Request, rr resourceRequest) {
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil && ct == patchApply {
		s.apply(w, r, rr)
		return
	}
	if err != nil || (ct != patchJSON && ct != patchMerge && ct != patchStrategic) {
		msg := fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s, %s, %s, %s", patchJSON, patchMerge, patchStrategic, patchApply)
		writeStatus(w, newStatus(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType, msg))
		return
	}
	// Negotiated after the patch type is checked (kube-apiserver's order),
	// before anything is read or stored.
	o, se := negotiateOutput(r)
	if se != nil {
		writeStatus(w, se)
		return
	}
	opts, se := parseWriteOptions(rr.query, "PatchOptions", false)
	if se != nil {
		writeStatus(w, se)
		return
	}
	patch, se := readBody(w, r)
	if se != nil {
		writeStatus(w, se)
		return
	}
	var (
		want     int64
		warnings []string
	)
	apply := func(cur *corev1.Event) (*corev1.Event, *apierrors.StatusError) {
		curJSON, err := json.Marshal(externalEvent(rr.version, cur))
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		patched, se := applyPatch(ct, curJSON, patch, rr.version)
		if se != nil {
			return nil, se
		}
		ev, warns, se := decodeEvent("application/json", patched, rr.version, opts.validation)
		if se != nil {
			return nil, se
		}
		warnings = warns
		if ev.Namespace != rr.namespace {
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		if se := checkName(ev, rr.name); se != nil {
			return nil, se
		}
		ev = s.fields.Update(rr.version, cur, ev, manager(r, opts))
		if ev.ResourceVersion != cur.ResourceVersion {
			// The patch names a revision: it must be current.
			if want, se = parseRevision(ev.ResourceVersion); se != nil {
				return nil, se
			}
			if want != 0 {
				return nil, apierrors.NewConflict(rr.version.GroupResource(), rr.name, errors.New(registryOptimisticLockMsg))
			}
		}
		return ev, nil
	}
	ww := &warningWriter{ResponseWriter: w, warnings: &warnings}
	s.guaranteedUpdate(ww, r, rr, o, opts, 0, apply, false)
}

// warningWriter adds the warnings collected while patching before the
// response header is written.
type warningWriter struct {
	http.ResponseWriter
	warnings *[]string
}

// Unwrap returns the writer the warnings are added to.
func (w *warningWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// WriteHeader adds the warnings, then writes the header.
func (w *warningWriter) WriteHeader(code int) {
	setWarnings(w.ResponseWriter, *w.warnings)
	w.ResponseWriter.WriteHeader(code)
}

// Bounds on what one JSON patch may cost, as kube-apiserver's.
const (
	// maxJSONPatchOperations is kube-apiserver's bound on JSON patch
	// length; longer patches get 413.
	maxJSONPatchOperations = 10000
	// maxJSONPatchCopyBytes bounds the bytes that a JSON patch's copy
	// operations may add in all. kube-apiserver sets json-patch's
	// AccumulatedCopySizeLimit to its request body limit (3 MiB);
	// without it, a copy repeated onto itself doubles the object each
	// time (20 copies of 512 bytes: 512 MiB).
	maxJSONPatchCopyBytes = maxBodyBytes
)

// maxJSONPatchArrayMoves bounds the array items the operations of one
// JSON patch may shift. json-patch inserts, removes and moves array items
// by shifting the rest, so each such operation costs up to the array's
// length: 10,000 moves within a 10,000-item list took 3.5 CPU-seconds
// (kube-apiserver has the same cost, bounded only by its 10,000
// operations). 2^24 item moves take about 0.1 s.
const maxJSONPatchArrayMoves = 1 << 24

// jsonPatchArrayOps counts p's operations whose path or from goes
// through an array index (a segment that is a number or "-"), and, when
// there are any, the length of the longest array in cur. Each such
// operation shifts at most that many items plus one per operation before
// it.
func jsonPatchArrayOps(p jsonpatchv5.Patch, cur []byte) (ops int64, longest int) {
	for _, op := range p {
		if throughIndex(op, "path") || throughIndex(op, "from") {
			ops++
		}
	}
	if ops == 0 {
		return 0, 0
	}
	var doc any
	if err := utiljson.Unmarshal(cur, &doc); err != nil {
		return ops, 0
	}
	return ops, longestArray(doc)
}

// throughIndex reports whether op's JSON pointer named key has an array
// index segment.
func throughIndex(op jsonpatchv5.Operation, key string) bool {
	raw, ok := op[key]
	if !ok || raw == nil {
		return false
	}
	var ptr string
	if err := json.Unmarshal(*raw, &ptr); err != nil {
		return false
	}
	for _, seg := range strings.Split(ptr, "/")[1:] {
		if seg == "-" {
			return true
		}
		if _, err := strconv.Atoi(seg); err == nil {
			return true
		}
	}
	return false
}

// longestArray is the length of the longest array in doc.
func longestArray(doc any) int {
	n := 0
	switch d := doc.(type) {
	case map[string]any:
		for _, v := range d {
			n = max(n, longestArray(v))
		}
	case []any:
		n = len(d)
		for _, v := range d {
			n = max(n, longestArray(v))
		}
	}
	return n
}

// applyPatch applies a patch of type ct to the JSON object cur. Patch
// libraries can panic on some malformed patches; that is a bad request,
// not a server failure. The result is at most len(cur), the patch and
// maxJSONPatchCopyBytes (each possibly re-escaped); the caller bounds the
// stored object.
func applyPatch(ct string, cur, patch []byte, v eventapi.Version) (out []byte, se *apierrors.StatusError) {
	defer func() {
		if r := recover(); r != nil {
			out, se = nil, newStatus(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, fmt.Sprintf("the patch could not be applied: %v", r))
		}
	}()
	switch ct {
	case patchJSON:
		p, err := jsonpatchv5.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid JSON patch: %v", err))
		}
		if len(p) > maxJSONPatchOperations {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(p)))
		}
		if ops, longest := jsonPatchArrayOps(p, cur); ops*(int64(longest)+ops) > maxJSONPatchArrayMoves {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
				"the JSON patch has %d operations on array items and the longest array of the event has %d items: they would move up to %d items, more than the %d allowed",
				ops, longest, ops*(int64(longest)+ops), maxJSONPatchArrayMoves))
		}
		out, err := p.ApplyWithOptions(cur, &jsonpatchv5.ApplyOptions{
			// json-patch's defaults, as kube-apiserver applies them,
			// with its copy bound.
			SupportNegativeIndices:   true,
			AccumulatedCopySizeLimit: maxJSONPatchCopyBytes,
			EscapeHTML:               true,
		})
		if err != nil {
			// kube-apiserver: 422 with json-patch's message, which names
			// the copy limit when that is what was hit.
			return nil, newStatus(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, fmt.Sprintf("the JSON patch could not be applied: %v", err))
		}
		return out, nil
	case patchMerge:
		if !json.Valid(patch) {
			return nil, apierrors.NewBadRequest("invalid merge patch: the body is not valid JSON")
		}
		out, err := jsonpatch.MergePatch(cur, patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid merge patch: %v", err))
		}
		return out, nil
	default:
		var schemaObj any = corev1.Event{}
		if v.Shape() == eventapi.EventsV1 {
			schemaObj = eventsv1.Event{}
		}
		var curMap, patchMap map[string]any
		// apimachinery's decoder, as StrategicMergePatch's: integers stay
		// int64 instead of becoming float64.
		if err := utiljson.Unmarshal(patch, &patchMap); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid strategic merge patch: the body is not a JSON object: %v", err))
		}
		if err := utiljson.Unmarshal(cur, &curMap); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if c := strategicMergeCost(curMap, patchMap, ""); c.pairs > maxStrategicMergePairs {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
				"the strategic merge patch would compare %d pairs of list items (%d items merged into the %d of %s), more than the %d allowed",
				c.pairs, c.patchItems, c.curItems, c.path, maxStrategicMergePairs))
		}
		merged, err := strategicpatch.StrategicMergeMapPatch(curMap, patchMap, schemaObj)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid strategic merge patch: %v", err))
		}
		out, err := json.Marshal(merged)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		return out, nil
	}
}

// maxStrategicMergePairs bounds what one strategic merge patch may cost.
// apimachinery's strategic merge matches every item of a patch's list
// with every item of the stored list (and of the patch's own), so its
// time grows with their product: 10,000 ownerReferences merged into
// 10,000 took 65 CPU-seconds, which the request timeout cannot stop (the
// merge takes no context). 2^20 pairs take about 0.1 s; no event has
// lists near that long (1,000 ownerReferences merged into 500 is about
// 1.5M pairs).
const maxStrategicMergePairs = 1 << 20

// mergeCost is what strategicMergeCost found: the pairs of items a merge
// compares in all, and the list that costs most.
type mergeCost struct {
	pairs                int64
	path                 string
	patchItems, curItems int
	worst                int64
}

func (c *mergeCost) add(o mergeCost) {
	c.pairs += o.pairs
	if o.worst > c.worst {
		c.path, c.patchItems, c.curItems, c.worst = o.path, o.patchItems, o.curItems, o.worst
	}
}

// strategicMergeCost estimates the item comparisons of merging the
// strategic merge patch into cur, whatever the lists' strategies (a list
// replaced costs less than the estimate): each list of the patch at a
// path costs its length times the length of the stored list there plus
// its own; a directive list ($setElementOrder/x, $deleteFromPrimitiveList/x)
// is compared with the stored x. Maps are followed into both documents,
// lists of maps into the patch's items.
func strategicMergeCost(cur, patch map[string]any, at string) mergeCost {
	var c mergeCost
	for k, pv := range patch {
		field := k
		if strings.HasPrefix(k, "$") {
			if _, f, ok := strings.Cut(k, "/"); ok {
				field = f
			}
		}
		path := field
		if at != "" {
			path = at + "." + field
		}
		switch pv := pv.(type) {
		case map[string]any:
			cv, _ := cur[field].(map[string]any)
			c.add(strategicMergeCost(cv, pv, path))
		case []any:
			cv, _ := cur[field].([]any)
			n := int64(len(pv)) * int64(len(cv)+len(pv))
			c.add(mergeCost{pairs: n, path: path, patchItems: len(pv), curItems: len(cv), worst: n})
			for _, item := range pv {
				if m, ok := item.(map[string]any); ok {
					c.add(strategicMergeCost(nil, m, path+"[]"))
				}
			}
		}
	}
	return c
}

// deleteOptions reads metav1.DeleteOptions from the body and the query.
func deleteOptions(w http.ResponseWriter, r *http.Request) (*metav1.DeleteOptions, *apierrors.StatusError) {
	opts := &metav1.DeleteOptions{}
	body, se := readBody(w, r)
	if se != nil {
		return nil, se
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeDeleteOptions(r.Header.Get("Content-Type"), body, opts); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("decoding DeleteOptions: %v", err))
		}
	}
	q := r.URL.Query()
	if d := q["dryRun"]; len(d) > 0 {
		opts.DryRun = d
	}
	if o, ok := queryBool(q, "orphanDependents"); ok {
		opts.OrphanDependents = &o
	}
	if p := q.Get("propagationPolicy"); p != "" {
		pp := metav1.DeletionPropagation(p)
		opts.PropagationPolicy = &pp
	}
	if g := q.Get("gracePeriodSeconds"); g != "" {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid gracePeriodSeconds %q", g))
		}
		opts.GracePeriodSeconds = &n
	}
	var errs field.ErrorList
	for _, d := range opts.DryRun {
		if d != metav1.DryRunAll {
			errs = append(errs, field.NotSupported(field.NewPath("dryRun"), d, []string{metav1.DryRunAll}))
		}
	}
	if p := opts.PropagationPolicy; p != nil {
		switch *p {
		case metav1.DeletePropagationOrphan, metav1.DeletePropagationBackground, metav1.DeletePropagationForeground:
		default:
			errs = append(errs, field.NotSupported(field.NewPath("propagationPolicy"), *p, []string{"Foreground", "Background", "Orphan", "nil"}))
		}
	}
	if opts.OrphanDependents != nil && opts.PropagationPolicy != nil {
		errs = append(errs, field.Invalid(field.NewPath("propagationPolicy"), *opts.PropagationPolicy, "orphanDependents and deletionPropagation cannot be both set"))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "", errs)
	}
	return opts, nil
}

// decodeDeleteOptions decodes a DELETE body: JSON (kubectl), YAML, or the
// protobuf envelope client-go's typed clients send for built-in types.
func decodeDeleteOptions(contentType string, body []byte, opts *metav1.DeleteOptions) error {
	mt, err := mediaType(contentType)
	if err != nil {
		return err
	}
	switch mt {
	case protobufMediaType:
		u, err := unwrapProtobuf(body)
		if err != nil {
			return err
		}
		return opts.Unmarshal(u.Raw)
	case "application/yaml":
		return yaml.Unmarshal(body, opts)
	default:
		return json.Unmarshal(body, opts)
	}
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, rr resourceRequest) {
	opts, se := deleteOptions(w, r)
	if se != nil {
		writeStatus(w, se)
		return
	}
	// Without a resourceVersion precondition a delete that races a write
	// reads again, as kube-apiserver's does, rather than answer 409.
	for attempt := 1; s.deleteOnce(w, r, rr, opts, attempt == maxUpdateRetries); attempt++ {
	}
}

// deleteOnce reads rr's event and deletes that revision of it, answering
// the request, unless the delete lost a race to a write while opts has no
// resourceVersion precondition and this is not the last attempt: then it
// answers nothing and returns true, so that the caller tries again.
func (s *Server) deleteOnce(w http.ResponseWriter, r *http.Request, rr resourceRequest, opts *metav1.DeleteOptions, last bool) (retry bool) {
	ctx := r.Context()
	cur, err := s.store(ctx).Get(ctx, rr.namespace, rr.name)
	if err != nil {
		writeStatus(w, statusError(err, rr, rr.name))
		return false
	}
	if p := opts.Preconditions; p != nil {
		if p.UID != nil && *p.UID != cur.UID {
			writeStatus(w, apierrors.NewConflict(rr.version.GroupResource(), rr.name,
				fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, cur.UID)))
			return false
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != cur.ResourceVersion {
			writeStatus(w, apierrors.NewConflict(rr.version.GroupResource(), rr.name,
				fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, cur.ResourceVersion)))
			return false
		}
	}
	if len(opts.DryRun) == 0 {
		rev, _ := strconv.ParseInt(cur.ResourceVersion, 10, 64)
		if _, err := s.store(ctx).Delete(ctx, rr.namespace, rr.name, storage.Preconditions{Revision: rev}); err != nil {
			named := opts.Preconditions != nil && opts.Preconditions.ResourceVersion != nil
			if errors.Is(err, storage.ErrConflict) && !named && !last {
				return true
			}
			if errors.Is(err, storage.ErrConflict) {
				err = apierrors.NewConflict(rr.version.GroupResource(), rr.name, errors.New(registryOptimisticLockMsg))
			}
			writeStatus(w, statusError(err, rr, rr.name))
			return false
		}
	}
	writeObject(w, statusOutputOf(w), http.StatusOK, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details:  &metav1.StatusDetails{Name: rr.name, Group: rr.version.Group(), Kind: "events", UID: cur.UID},
	})
	return false
}

// deleteCollection deletes every event the selectors match and returns
// them, as kube-apiserver's generic registry does.
func (s *Server) deleteCollection(w http.ResponseWriter, r *http.Request, rr resourceRequest) {
	// The deleted events are a plain list: Table, metadata-only and
	// unacceptable Accept headers all get JSON.
	o, ok := negotiate(r.Header.Get("Accept"))
	if !ok || o.kind == outTable || o.kind == outPartial {
		o = output{kind: outJSON}
	}
	opts, se := deleteOptions(w, r)
	if se != nil {
		writeStatus(w, se)
		return
	}
	lo, se := s.parseListOptions(w, rr.query, rr)
	if se != nil {
		writeStatus(w, se)
		return
	}
	lo.Limit, lo.Revision, lo.Exact = 500, 0, false
	ctx, stop := bindFilter(r.Context(), lo.Selector)
	defer stop()
	var deleted []*corev1.Event
	for {
		res, err := s.store(ctx).List(ctx, lo)
		if se := filterFailure(lo.Selector); se != nil {
			// The filter was cut: what it selected so far is deleted,
			// and the answer says why the rest is not.
			writeStatus(w, se)
			return
		}
		if err != nil {
			writeStatus(w, statusError(err, rr, ""))
			return
		}
		for _, ev := range res.Items {
			if len(opts.DryRun) > 0 {
				deleted = append(deleted, ev)
				continue
			}
			rev, _ := strconv.ParseInt(ev.ResourceVersion, 10, 64)
			out, err := s.store(ctx).Delete(ctx, ev.Namespace, ev.Name, storage.Preconditions{Revision: rev})
			if errors.Is(err, storage.ErrNotFound) || errors.Is(err, storage.ErrConflict) {
				continue // deleted or rewritten meanwhile: not ours to delete
			}
			if err != nil {
				writeStatus(w, statusError(err, rr, ev.Name))
				return
			}
			deleted = append(deleted, out)
		}
		if res.Continue == "" {
			break
		}
		lo.Continue = res.Continue
	}
	s.respondEvents(w, rr, o, http.StatusOK, deleted, metav1.ListMeta{}, false)
}

// parseSelector reads the namespace of rr and the fieldSelector,
// labelSelector, filter, since and until parameters of a list or a watch, resolving
// family.* terms into the selector's object set (with their warnings on
// w).
func (s *Server) parseSelector(w http.ResponseWriter, q url.Values, rr resourceRequest) (storage.Selector, *apierrors.StatusError) {
	sel := storage.Selector{Namespace: rr.namespace}
	rawFields, se := rr.scope.fleetSelector(q.Get("fieldSelector"), &sel)
	if se != nil {
		return sel, se
	}
	fs, err := eventapi.ParseFieldSelector(rr.version, rawFields, eventapi.Extensions(!s.cfg.DisableExtensions))
	if err != nil {
		return sel, apierrors.NewBadRequest(err.Error())
	}
	sel.Fields = fs
	if se := s.resolveFamily(w, rr.scope, &sel); se != nil {
		return sel, se
	}
	if raw := q.Get("labelSelector"); raw != "" {
		ls, err := labels.Parse(raw)
		if err != nil {
			return sel, apierrors.NewBadRequest(fmt.Sprintf("invalid labelSelector %q: %v", raw, err))
		}
		sel.Labels = ls
	}
	if se := s.parseFilter(q, rr, &sel); se != nil {
		return sel, se
	}
	if se := s.parseTimeRange(q, rr, &sel); se != nil {
		return sel, se
	}
	return sel, nil
}

// parseListOptions reads the selectors, pagination and resourceVersion
// parameters of a list.
func (s *Server) parseListOptions(w http.ResponseWriter, q url.Values, rr resourceRequest) (storage.ListOptions, *apierrors.StatusError) {
	var lo storage.ListOptions
	sel, se := s.parseSelector(w, q, rr)
	if se != nil {
		return lo, se
	}
	lo.Selector = sel
	if l := q.Get("limit"); l != "" {
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil || n < 0 {
			return lo, apierrors.NewBadRequest(fmt.Sprintf("limit: invalid value %q: must be a non-negative integer", l))
		}
		lo.Limit = n
	}
	lo.Continue = q.Get("continue")
	rv, match := q.Get("resourceVersion"), q.Get("resourceVersionMatch")
	var errs field.ErrorList
	switch match {
	case "", string(metav1.ResourceVersionMatchNotOlderThan), string(metav1.ResourceVersionMatchExact):
	default:
		errs = append(errs, field.NotSupported(field.NewPath("resourceVersionMatch"), match,
			[]string{string(metav1.ResourceVersionMatchExact), string(metav1.ResourceVersionMatchNotOlderThan), ""}))
	}
	if match != "" && rv == "" {
		errs = append(errs, field.Forbidden(field.NewPath("resourceVersionMatch"), "resourceVersionMatch is forbidden unless resourceVersion is provided"))
	}
	if match != "" && lo.Continue != "" {
		errs = append(errs, field.Forbidden(field.NewPath("resourceVersionMatch"), "resourceVersionMatch is forbidden when continue is provided"))
	}
	if match == string(metav1.ResourceVersionMatchExact) && rv == "0" {
		errs = append(errs, field.Forbidden(field.NewPath("resourceVersionMatch"), "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""))
	}
	if len(errs) > 0 {
		return lo, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	r, se := parseRevision(rv)
	if se != nil {
		return lo, se
	}
	if lo.Continue == "" && r > 0 {
		lo.Revision = r
		// Without resourceVersionMatch, a non-zero resourceVersion with a
		// limit means exactly that revision (the legacy rule).
		lo.Exact = match == string(metav1.ResourceVersionMatchExact) || (match == "" && lo.Limit > 0)
	}
	return lo, nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, rr resourceRequest) {
	o, se := negotiateOutput(r)
	if se != nil {
		writeStatus(w, se)
		return
	}
	lo, se := s.parseListOptions(w, rr.query, rr)
	if se != nil {
		writeStatus(w, se)
		return
	}
	all := lo.Limit == 0
	if all {
		// Every event: read a page at a time (listAll); a core/v1
		// protobuf answer copies the store's encoding where it has it
		// (listAllProtobuf).
		lo.Limit = listPage
		lo.WithProtobuf = o.kind == outProtobuf && rr.version.Shape() != eventapi.EventsV1 && lo.Predicate == nil
	}
	ctx, stop := bindFilter(r.Context(), lo.Selector)
	defer stop()
	r = r.WithContext(ctx)
	res, err := s.store(ctx).List(ctx, lo)
	if se := filterFailure(lo.Selector); se != nil {
		writeStatus(w, se)
		return
	}
	if errors.Is(err, storage.ErrFutureRevision) {
		writeStatus(w, tooLargeResourceVersion(lo.Revision, s.store(ctx).Revision()))
		return
	}
	if err != nil {
		writeStatus(w, statusError(err, rr, ""))
		return
	}
	if all && res.Continue != "" {
		s.listAll(w, r, rr, o, lo, res)
		return
	}
	meta := metav1.ListMeta{ResourceVersion: strconv.FormatInt(res.Revision, 10), Continue: res.Continue, RemainingItemCount: res.RemainingItemCount}
	s.respondEvents(w, rr, o, http.StatusOK, res.Items, meta, false)
}
