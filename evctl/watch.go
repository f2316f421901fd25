package evctl

import (
	"context"
	"encoding/json"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// Reconnect backoff of a watch: at once, then doubling to a cap, so that a
// restarting server is picked up within seconds without hammering it.
const (
	reconnectInitial = 250 * time.Millisecond
	reconnectMax     = 5 * time.Second
)

// follower keeps a watch going across disconnects and server restarts:
// it resumes from the last resourceVersion it saw (events, bookmarks),
// relists when that is too old (410), and prints every change of an event
// once, in order: no duplicates, no gaps.
type follower struct {
	q        *querier
	ns       string
	selector func() string // asked again on each (re)connect
	// labelSelector is the watch's label selector, if any.
	labelSelector string
	// match turns a watched event into the row to print, if it is one.
	match func(*eventsv1.Event) (*row, bool)
	// relist lists again after a 410, returning rows and the revision.
	relist func(ctx context.Context) ([]*row, string, error)
	print  func(rows []*row) error
	log    klog.Logger

	printed map[types.UID]int64 // the newest revision printed per event
}

// seen records r and reports whether it is news: a revision of the event
// newer than any printed (resourceVersions that are not numbers are
// compared for equality only).
func (f *follower) seen(r *row) bool {
	if f.printed == nil {
		f.printed = map[types.UID]int64{}
	}
	n, ok := revision(r.ev.ResourceVersion)
	if !ok {
		n = -1
	}
	last, had := f.printed[r.ev.UID]
	if had && (n <= last && ok) {
		return false
	}
	f.printed[r.ev.UID] = n
	return true
}

// fresh keeps the rows not printed yet.
func (f *follower) fresh(rows []*row) []*row {
	var out []*row
	for _, r := range rows {
		if f.seen(r) {
			out = append(out, r)
		}
	}
	return out
}

// run follows from resourceVersion rv until ctx ends.
func (f *follower) run(ctx context.Context, rv string) error {
	delay := reconnectInitial
	for ctx.Err() == nil {
		w, err := f.q.watch(ctx, f.ns, metav1.ListOptions{
			FieldSelector: f.selector(), LabelSelector: f.labelSelector, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err == nil {
			var progressed bool
			rv, progressed, err = f.consume(ctx, w, rv)
			w.Stop()
			if progressed {
				delay = reconnectInitial
			}
		}
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			rows, newRV, lerr := f.relist(ctx)
			if lerr == nil {
				sortByLast(rows)
				if err := f.print(f.fresh(rows)); err != nil {
					return err
				}
				rv, delay = newRV, reconnectInitial
				continue
			}
			err = lerr
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			f.log.V(2).Info("watch interrupted; reconnecting", "err", err, "resourceVersion", rv, "in", delay)
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, reconnectMax)
	}
	return nil
}

// consume prints what w delivers and returns the revision reached.
func (f *follower) consume(ctx context.Context, w watch.Interface, rv string) (string, bool, error) {
	progressed := false
	for {
		select {
		case <-ctx.Done():
			return rv, progressed, nil
		case e, ok := <-w.ResultChan():
			if !ok {
				return rv, progressed, nil // the server ended the stream: resume
			}
			switch e.Type {
			case watch.Error:
				return rv, progressed, apierrors.FromObject(e.Object)
			case watch.Bookmark, watch.Deleted:
				if m, err := meta.Accessor(e.Object); err == nil {
					rv, progressed = m.GetResourceVersion(), true
				}
			case watch.Added, watch.Modified:
				ev, ok := e.Object.(*eventsv1.Event)
				if !ok {
					continue
				}
				rv, progressed = ev.ResourceVersion, true
				if r, ok := f.match(ev); ok && f.seen(r) {
					if err := f.print([]*row{r}); err != nil {
						return rv, progressed, err
					}
				}
			}
		}
	}
}

// stream prints watched rows: the table's rows, or one JSON object per
// line, or YAML documents.
func (p *printer) stream(rows []*row, timeline bool) error {
	switch p.output {
	case "json", "yaml":
		for _, r := range rows {
			ev := *r.ev
			ev.TypeMeta = metav1.TypeMeta{Kind: "Event", APIVersion: "events.k8s.io/v1"}
			b, err := json.Marshal(&ev)
			if err != nil {
				return err
			}
			if p.output == "yaml" {
				if b, err = yaml.JSONToYAML(b); err != nil {
					return err
				}
				b = append([]byte("---\n"), b...)
			} else {
				b = append(b, '\n')
			}
			if _, err := p.out.Write(b); err != nil {
				return err
			}
		}
		return nil
	}
	if timeline {
		return p.timeline(rows)
	}
	return p.table(rows)
}
