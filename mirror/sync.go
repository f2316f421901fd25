package mirror

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubevents/kubevents/storage"
)

// initialState is a sync in progress: the source's state being read
// (from a WatchList stream, or a list before the watch).
type initialState struct {
	// watchList: the state comes in the watch, up to its end bookmark.
	watchList bool
	// keys are the events the source has (namespace/name), kept only to
	// propagate deletions.
	keys map[string]struct{}
}

func (st *initialState) see(e *corev1.Event) {
	if st.keys != nil {
		st.keys[e.Namespace+"/"+e.Name] = struct{}{}
	}
}

// startSync reads the source's state: as a WatchList stream, returned for
// follow to read (the state, its end bookmark, then the changes), or by a
// paginated list whose events are queued here, then a watch from the
// list's resourceVersion. rv is where a failed watch resumes.
func (m *Mirror) startSync(ctx context.Context, a *applier, reason string) (w watch.Interface, initial *initialState, rv string, err error) {
	m.metrics.relists.WithLabelValues(reason).Inc()
	st := &initialState{}
	if m.opts.Deletions == DeletionsPropagate {
		st.keys = map[string]struct{}{}
	}
	if m.opts.InitialSync != InitialSyncList {
		yes := true
		w, err := m.opts.Source.Watch(ctx, metav1.ListOptions{SendInitialEvents: &yes,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
		if err == nil {
			st.watchList = true
			m.log.Info("reading the source's events (WatchList)", "reason", reason)
			return w, st, "", nil
		}
		if m.opts.InitialSync == InitialSyncWatchList || !refusesWatchList(err) {
			return nil, nil, "", fmt.Errorf("WatchList of the source's events: %w", err)
		}
		m.log.Info("the source does not serve WatchList for events; listing them page by page", "err", err)
	}
	m.log.Info("reading the source's events (paginated list)", "reason", reason)
	rv, err = m.list(ctx, a, st)
	if err != nil {
		return nil, nil, "", err
	}
	m.endSync(a, st, rv)
	w, err = m.opts.Source.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	return w, nil, rv, err
}

// refusesWatchList reports whether err is a source's answer that it does
// not serve WatchList (an older server, a feature gate off), rather than
// a failure worth trying again.
func refusesWatchList(err error) bool {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return false
	}
	switch se.Status().Code {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusMethodNotAllowed, http.StatusNotImplemented, http.StatusNotAcceptable:
		return true
	}
	return false
}

// list reads the source's events page by page, at one resourceVersion,
// and queues them; it returns the list's resourceVersion. A list whose
// continuation expired (410) starts again.
func (m *Mirror) list(ctx context.Context, a *applier, st *initialState) (string, error) {
	opts := metav1.ListOptions{Limit: m.opts.PageSize}
	for {
		l, err := m.opts.Source.List(ctx, opts)
		if err != nil {
			if opts.Continue != "" && isExpired(err) {
				m.log.Warn("the source's list expired between pages; listing again", "err", err)
				opts.Continue = ""
				continue
			}
			return "", fmt.Errorf("listing the source's events: %w", err)
		}
		for i := range l.Items {
			e := &l.Items[i]
			st.see(e)
			if !a.dispatch(change{typ: watch.Added, ev: e}) {
				return "", ctx.Err()
			}
		}
		if l.Continue == "" {
			m.observe(l.ResourceVersion)
			return l.ResourceVersion, nil
		}
		opts.Continue = l.Continue
	}
}

// endSync queues the end of a sync at rv: once every change before it is
// applied, the cursor moves to rv, the mirror is synced and, when
// deletions are propagated, the events the source no longer has are
// deleted.
func (m *Mirror) endSync(a *applier, st *initialState, rv string) {
	a.mark(rv, func() {
		m.mu.Lock()
		m.synced = true
		m.mu.Unlock()
		m.log.Info("the source's events are mirrored; following its changes", "resourceVersion", rv)
		if st.keys != nil {
			a.goBackground(func(ctx context.Context) { m.deleteAbsent(ctx, st.keys, rv) })
		}
	})
}

// follow reads a watch of the source and queues its changes until it
// ends; it returns the resourceVersion reached and the error it ended
// with (nil when the source closed it). With initial set, the watch is a
// WatchList stream whose initial state comes first.
func (m *Mirror) follow(ctx context.Context, w watch.Interface, a *applier, rv string, initial *initialState) (string, error) {
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return rv, nil
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			if initial != nil {
				return rv, errors.New("the WatchList stream ended before its initial events did")
			}
			return rv, nil
		}
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			e, isEvent := ev.Object.(*corev1.Event)
			if !isEvent {
				return rv, fmt.Errorf("the source's watch sent a %T, not an Event", ev.Object)
			}
			if initial != nil {
				// Part of the state: applied, but the cursor moves only
				// with the end bookmark.
				initial.see(e)
				if !a.dispatch(change{typ: ev.Type, ev: e}) {
					return rv, nil
				}
				continue
			}
			m.observe(e.ResourceVersion)
			if !a.dispatch(change{typ: ev.Type, ev: e, rv: e.ResourceVersion}) {
				return rv, nil
			}
			rv = e.ResourceVersion
		case watch.Bookmark:
			obj, err := meta.Accessor(ev.Object)
			if err != nil {
				return rv, fmt.Errorf("the source's bookmark: %w", err)
			}
			brv := obj.GetResourceVersion()
			if initial != nil {
				if obj.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
					continue
				}
				m.observe(brv)
				m.endSync(a, initial, brv)
				initial = nil
			} else {
				m.observe(brv)
				a.mark(brv, nil)
			}
			rv = brv
		case watch.Error:
			return rv, apierrors.FromObject(ev.Object)
		}
	}
}

// deleteAbsent deletes the mirrored events the source did not have in
// the state read at rv (keys): deletions the mirror missed while it was
// away. An event mirrored from a change after rv is left alone.
func (m *Mirror) deleteAbsent(ctx context.Context, keys map[string]struct{}, rv string) {
	at, ok := parseRV(rv)
	if !ok {
		m.log.Warn("cannot compare the source's resourceVersions; deletions missed while away are not propagated", "resourceVersion", rv)
		return
	}
	deleted := 0
	opts := storage.ListOptions{Limit: 1000}
	for {
		res, err := m.opts.Store.List(ctx, opts)
		if err != nil {
			if ctx.Err() == nil {
				m.log.Warn("listing the mirrored events to propagate deletions", "err", err)
			}
			return
		}
		for _, e := range res.Items {
			if _, ok := keys[e.Namespace+"/"+e.Name]; ok {
				continue
			}
			src, ok := parseRV(e.Annotations[SourceResourceVersionAnnotation])
			if !ok || src > at {
				continue
			}
			rev, _ := strconv.ParseInt(e.ResourceVersion, 10, 64)
			_, err := m.opts.Store.Delete(ctx, e.Namespace, e.Name, storage.Preconditions{Revision: rev, UID: string(e.UID)})
			switch {
			case err == nil:
				deleted++
				m.metrics.applied.WithLabelValues("deleted").Inc()
			case errors.Is(err, storage.ErrNotFound), errors.Is(err, storage.ErrConflict):
				// Gone or changed meanwhile: the change that did it wins.
			default:
				if ctx.Err() == nil {
					m.log.Warn("propagating a deletion missed while away", "namespace", e.Namespace, "name", e.Name, "err", err)
				}
				return
			}
		}
		if res.Continue == "" {
			break
		}
		opts.Continue = res.Continue
	}
	if deleted > 0 {
		m.log.Info("deleted the mirrored events the source no longer has", "events", deleted, "resourceVersion", rv)
	}
}
