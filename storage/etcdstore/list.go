package etcdstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	"go.etcd.io/etcd/client/v3/kubernetes"
	corev1 "k8s.io/api/core/v1"
)

// continueToken is kube-apiserver's continue token: the list's revision
// and the key to start from, relative to the prefix the list reads
// (<prefix>/events/, or <prefix>/events/<namespace>/ for a list in one
// namespace), so that a token from either server continues the other's
// list. rv -1 means "at the current revision" (the inconsistent
// continuation offered when the list's revision was compacted).
type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
}

// continueAPIVersion is the version kube-apiserver writes in its tokens.
const continueAPIVersion = "meta.k8s.io/v1"

// maxListBatch bounds one range read while a selector filters most keys
// out, as kube-apiserver's list does.
const maxListBatch = 10000

// continueAt is the token that continues a list of sel at rev from the
// etcd key start.
func (s *Store) continueAt(sel storage.Selector, rev int64, start string) string {
	prefix, _ := s.scope(sel)
	return encodeContinue(rev, strings.TrimPrefix(start, prefix))
}

func encodeContinue(rev int64, start string) string {
	b, _ := json.Marshal(continueToken{APIVersion: continueAPIVersion, ResourceVersion: rev, StartKey: start})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return t, fmt.Errorf("%w: %v", storage.ErrInvalidContinue, err)
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return t, fmt.Errorf("%w: %v", storage.ErrInvalidContinue, err)
	}
	switch {
	case t.APIVersion != continueAPIVersion:
		return t, fmt.Errorf("%w: unknown token version %q", storage.ErrInvalidContinue, t.APIVersion)
	case t.ResourceVersion == 0 || t.ResourceVersion < -1:
		return t, fmt.Errorf("%w: bad resourceVersion %d", storage.ErrInvalidContinue, t.ResourceVersion)
	case t.StartKey == "" || strings.HasPrefix(t.StartKey, "/") || strings.Contains(t.StartKey, ".."):
		return t, fmt.Errorf("%w: bad start key", storage.ErrInvalidContinue)
	}
	return t, nil
}

// scope returns the key prefix a selector's events live under: the
// namespace's when it names one (directly or as metadata.namespace=), or
// its clusters' (storage.Selector.Clusters), and false when the two
// disagree (nothing can match). The root cluster's keys are not a prefix
// but those before every named cluster's: scan stops at stopKey.
func (s *Store) scope(sel storage.Selector) (string, bool) {
	ns := sel.Namespace
	if fns, ok := sel.Fields.Equal(eventapi.FieldNamespace); ok {
		if ns != "" && ns != fns {
			return "", false
		}
		ns = fns
	}
	if ns == "" {
		from, _ := sel.Clusters.KeyRange()
		return s.root + from, true
	}
	if strings.Contains(ns, "/") {
		return "", false
	}
	return s.root + ns + "/", true
}

// List implements storage.Interface. A selector the index plans lookups
// for (see index.Set.Plan) is served from the store's index (in memory or on disk):
// the candidate keys, fetched from etcd at the list's revision and
// filtered with the selector, O(matches). Other lists read the range
// under the selector's namespace at one revision, in key order, and
// filter the decoded events. Values it cannot decode are skipped, counted
// and logged.
func (s *Store) List(ctx context.Context, opts storage.ListOptions) (*storage.ListResult, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	var rev int64
	var start string
	prefix, ok := s.scope(opts.Selector)
	if opts.Continue != "" {
		tok, err := decodeContinue(opts.Continue)
		if err != nil {
			return nil, err
		}
		if tok.ResourceVersion > 0 {
			rev = tok.ResourceVersion
		}
		start = prefix + tok.StartKey
		opts.Revision, opts.Exact = 0, false
	} else if opts.Revision > 0 && opts.Exact {
		rev = opts.Revision
	}
	if !ok {
		return s.emptyList(ctx, rev)
	}
	if h := s.idx.Load(); h != nil {
		if plan := h.m.Set().WithClock(s.opts.Clock).Plan(opts.Selector); !plan.None && plan.Name == "" && (plan.Lookups != nil || plan.Range != nil) {
			res, err := s.indexedList(ctx, opts, plan, rev, strings.TrimPrefix(start, s.root))
			switch {
			case err == nil:
				return res, nil
			case opts.Continue != "" && errors.Is(err, storage.ErrCompacted):
				return nil, &storage.ContinueExpiredError{Inconsistent: s.continueAt(opts.Selector, -1, start)}
			case !errors.Is(err, errNotIndexed):
				return nil, err
			}
			// The index's history does not reach the list's revision:
			// read the range.
		}
	}
	if start < prefix {
		start = prefix
	}
	res, err := s.scan(ctx, prefix, start, rev, opts.Selector, opts.Limit)
	if err != nil {
		if opts.Continue != "" && errors.Is(err, storage.ErrCompacted) {
			return nil, &storage.ContinueExpiredError{Inconsistent: s.continueAt(opts.Selector, -1, start)}
		}
		return nil, err
	}
	if opts.Continue == "" && opts.Revision > 0 && res.Revision < opts.Revision {
		return nil, fmt.Errorf("revision %d, current %d: %w", opts.Revision, res.Revision, storage.ErrFutureRevision)
	}
	return res, nil
}

// emptyList answers a list nothing can match, at the revision asked for or
// the current one.
func (s *Store) emptyList(ctx context.Context, rev int64) (*storage.ListResult, error) {
	resp, err := s.kv.Get(ctx, s.root, kubernetes.GetOptions{Revision: rev})
	if err != nil {
		return nil, fmt.Errorf("etcdstore: list: %w", mapErr(err))
	}
	s.observe(resp.Revision)
	if rev == 0 {
		rev = resp.Revision
	}
	return &storage.ListResult{Items: []*corev1.Event{}, Revision: rev}, nil
}

// scan reads the keys from start up to the end of prefix at rev (0: the
// current revision, which later batches then keep), returning up to limit
// matching events and a continue token when more keys follow, with the
// number of keys that follow when sel selects all of them.
// stopKey is the key at which a scan of sel's scope stops ("" for none):
// the first named cluster's, when sel selects the root cluster's events
// without a namespace.
func (s *Store) stopKey(sel storage.Selector) string {
	if sel.Namespace != "" {
		return ""
	}
	if _, ok := sel.Fields.Equal(eventapi.FieldNamespace); ok {
		return ""
	}
	from, to := sel.Clusters.KeyRange()
	if from != "" || to == "" {
		return "" // a prefix, or every key
	}
	return s.root + to
}

func (s *Store) scan(ctx context.Context, prefix, start string, rev int64, sel storage.Selector, limit int64) (*storage.ListResult, error) {
	res := &storage.ListResult{Items: []*corev1.Event{}}
	batch := limit
	stop := s.stopKey(sel)
	for {
		resp, err := s.kv.List(ctx, prefix, kubernetes.ListOptions{Revision: rev, Limit: batch, Continue: start})
		if err != nil {
			return nil, fmt.Errorf("etcdstore: list %s: %w", prefix, mapErr(err))
		}
		s.observe(resp.Revision)
		s.countListKeys(listPathRange, len(resp.Kvs))
		if rev == 0 {
			rev = resp.Revision
		}
		res.Revision = rev
		var last string
		for i, kv := range resp.Kvs {
			last = string(kv.Key)
			if stop != "" && last >= stop {
				return res, nil // past the root cluster's keys
			}
			ev, err := s.decodeKV(kv, kv.ModRevision)
			if err != nil || !sel.Matches(ev) {
				continue
			}
			res.Items = append(res.Items, ev)
			if limit > 0 && int64(len(res.Items)) >= limit {
				if i < len(resp.Kvs)-1 || resp.Count > int64(len(resp.Kvs)) {
					res.Continue = encodeContinue(rev, strings.TrimPrefix(last, prefix)+"\x00")
					if sel.SelectsAll() {
						// etcd's count of the keys from this batch's
						// start to the end of the prefix, at rev, as
						// kube-apiserver reads it: less the keys up to
						// and including the last returned, the keys the
						// later pages hold.
						remaining := resp.Count - int64(i+1)
						res.RemainingItemCount = &remaining
					}
				}
				return res, nil
			}
		}
		if batch == 0 || resp.Count <= int64(len(resp.Kvs)) || len(resp.Kvs) == 0 {
			return res, nil
		}
		// The selector filtered the batch out: read on with bigger ones.
		start = last + "\x00"
		batch = min(batch*2, maxListBatch)
	}
}
