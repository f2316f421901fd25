package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubevents/kubevents/storage"
)

// listPage is how many events a list of every event (no limit) reads from
// the store at a time. A list that fits in one page is answered as any
// other; a longer one is streamed page by page, so that it holds one page
// in memory instead of every event twice (decoded, then encoded): 1,000
// concurrent lists of 5,000 events took eventsd to 4.8 GB.
const listPage = 256

// listStream writes a list of every event as one JSON document, page by
// page: the document's start (everything before the first item), the
// items of each page, and its end, byte for byte what json.Marshal of the
// whole list gives.
type listStream struct {
	s  *Server
	rr resourceRequest
	o  output
	// meta is every page's metadata: the list's revision, no continue.
	meta metav1.ListMeta
	// prefix is the document up to and including the items' "[".
	prefix []byte
}

// listSuffix ends a list document: the items' "]" and the object's "}";
// listComma separates the items of two pages.
var (
	listSuffix = []byte("]}")
	listComma  = []byte(",")
)

func (s *Server) newListStream(rr resourceRequest, o output, meta metav1.ListMeta) (*listStream, error) {
	ls := &listStream{s: s, rr: rr, o: o, meta: meta}
	empty, err := ls.marshal(nil)
	if err != nil {
		return nil, err
	}
	if !bytes.HasSuffix(empty, []byte("[]}")) {
		return nil, fmt.Errorf("an empty list encodes as %q, not ending with its items", empty)
	}
	ls.prefix = empty[:len(empty)-len(listSuffix)]
	return ls, nil
}

// marshal encodes items as a whole list (EventList, or Table with rows).
func (ls *listStream) marshal(items []*corev1.Event) ([]byte, error) {
	if ls.o.kind == outTable {
		t, err := table(ls.rr.version, items, ls.meta, ls.o, tableOptions{includeObject: ls.o.include}, ls.s.cfg.Clock.Now())
		if err != nil {
			return nil, err
		}
		return json.Marshal(t)
	}
	return json.Marshal(externalList(ls.rr.version, items, ls.meta))
}

// items encodes items as the list's elements, without brackets.
func (ls *listStream) items(items []*corev1.Event) ([]byte, error) {
	b, err := ls.marshal(items)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(b, ls.prefix) || !bytes.HasSuffix(b, listSuffix) {
		return nil, fmt.Errorf("a page of %d events does not encode as the list's start, items and end", len(items))
	}
	return b[len(ls.prefix) : len(b)-len(listSuffix)], nil
}

// streamable reports whether a list answered in o can be streamed a page
// at a time: JSON and Table (JSON), and protobuf when the client accepts
// plain JSON too (client-go's typed clients do) and listAllProtobuf gave
// it up (the protobuf envelope needs the list's length before its first
// byte, so a protobuf list is sent once encoded whole). Other answers
// (YAML, metadata-only) are built whole.
func streamable(o output, accept string) (output, bool) {
	switch {
	case o.kind == outJSON || o.kind == outTable:
		return o, true
	case o.kind == outProtobuf && acceptsPlainJSON(accept):
		return output{kind: outJSON}, true
	}
	return o, false
}

// acceptsPlainJSON reports whether an Accept header allows a plain JSON
// answer.
func acceptsPlainJSON(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || params["as"] != "" {
			continue
		}
		switch mt {
		case "application/json", "*/*", "application/*":
			return true
		}
	}
	return false
}

// listAll answers a list without a limit, whose first page (listPage
// events) has been read and has a continuation: streamed when the answer's
// form allows, else built whole. Pages after the first are read and
// encoded under a permit of the readGate. A failure once the answer has
// started cuts the connection (the client sees an incomplete answer,
// never a truncated list that parses).
func (s *Server) listAll(w http.ResponseWriter, r *http.Request, rr resourceRequest, o output, lo storage.ListOptions, page *storage.ListResult) {
	ctx := r.Context()
	meta := metav1.ListMeta{ResourceVersion: strconv.FormatInt(page.Revision, 10)}
	ticket := s.readGate.ticket()
	// next reads the page after cont holding a permit, which the caller
	// releases once it has encoded the page.
	next := func(cont string) (*storage.ListResult, error) {
		if err := s.readGate.acquire(ticket, ctx.Done(), nil); err != nil {
			return nil, err
		}
		res, err := s.store(ctx).List(ctx, storage.ListOptions{Selector: lo.Selector, Limit: listPage, Continue: cont, WithProtobuf: lo.WithProtobuf})
		if err != nil {
			s.readGate.release()
			return nil, err
		}
		return res, nil
	}
	accept := r.Header.Get("Accept")
	if o.kind == outProtobuf && lo.Predicate == nil &&
		s.listAllProtobuf(w, rr, meta, page, next, acceptsPlainJSON(accept)) {
		return
	}
	so, ok := streamable(o, accept)
	if !ok || lo.Predicate != nil {
		// A filtered list is not streamed: a filter that reaches its
		// cost limit on a later page cuts the list with a Status.
		items := page.Items
		for page.Continue != "" {
			var err error
			if page, err = next(page.Continue); err != nil {
				if se := filterFailure(lo.Selector); se != nil {
					err = se
				}
				writeStatus(w, statusError(err, rr, ""))
				return
			}
			items = append(items, page.Items...)
			s.readGate.release()
		}
		s.respondEvents(w, rr, o, http.StatusOK, items, meta, false)
		return
	}
	ls, err := s.newListStream(rr, so, meta)
	sw, canStream := w.(streamer)
	if err != nil || !canStream {
		s.cfg.Logger.Error("cannot stream a list", "err", err, "streamer", canStream)
		panic(http.ErrAbortHandler)
	}
	body, err := ls.items(page.Items)
	if err != nil {
		s.cfg.Logger.Error("encoding a list page", "err", err)
		panic(http.ErrAbortHandler)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(ls.prefix)
	_, _ = w.Write(body)
	if err := sw.stream(); err != nil {
		return
	}
	wrote := len(page.Items) > 0
	for cont := page.Continue; cont != ""; {
		page, err := next(cont)
		if err != nil {
			if ctx.Err() == nil {
				s.errorLog.Warn("a list of every event failed after its first page was sent; its connection is cut", "namespace", rr.namespace, "err", err)
			}
			panic(http.ErrAbortHandler)
		}
		body, err := ls.items(page.Items)
		s.readGate.release()
		if err != nil {
			s.cfg.Logger.Error("encoding a list page", "err", err)
			panic(http.ErrAbortHandler)
		}
		// The decoded page is not kept while a slow client takes the
		// encoded one.
		cont, page = page.Continue, nil
		if len(body) == 0 {
			continue
		}
		if wrote {
			if _, err := w.Write(listComma); err != nil {
				return
			}
		}
		if _, err := w.Write(body); err != nil {
			return
		}
		wrote = true
	}
	_, _ = w.Write(listSuffix)
}
