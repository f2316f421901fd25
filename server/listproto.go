package server

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
)

// listItemsTag is the protobuf tag of an EventList's items (field 2,
// length-delimited), in both groups; listMetaTag its metadata's (field 1).
const (
	listMetaTag  = 1<<3 | 2
	listItemsTag = 2<<3 | 2
)

// protoList is a list of every event being encoded in protobuf: its
// items' fields, encoded page by page as the list is read, so that it
// holds the encoded bytes (a few hundred per event) rather than the
// decoded events. The Kubernetes protobuf envelope starts with the
// list's length, so nothing can be sent before the last page is read.
type protoList struct {
	version eventapi.Version
	// pages are the EventList's item fields (tag, length, Event), in
	// order, a page each.
	pages []protoPage
	// size is the pages' length in all.
	size int
	// sizes is add's scratch.
	sizes []int
	// objs is add's scratch, the items in the list's group (nil for
	// those the store gave encoded).
	objs []protoObject
}

// protoPage is a page's item fields: those encoded here in one buffer of
// the exact size (a buffer grown for the whole list copied it over and
// over: a tenth of a family query's CPU), and between them the store's
// encodings of events (storage.ListResult.Protobuf), shared rather than
// copied (a copy was half of what a family query allocated).
type protoPage struct {
	// buf holds the fields encoded here, and the tag and length of
	// those the store gave encoded.
	buf []byte
	// encoded is the page's ListResult.Protobuf, its events let go
	// (Of cleared: the decoded page is not kept).
	encoded []storage.Encoded
	// splices are pairs (offset in buf, item): encoded[item]'s bytes
	// come at that offset of buf, in order.
	splices []int32
}

// add encodes items as the list's next item fields. encoded, when not
// nil, is the store's core/v1 protobuf of each item
// (storage.ListResult.Protobuf): used as it is for a core/v1 list rather
// than encoded again; an item without it (or whose encoding is another
// object's: a wrapper's copy) is encoded. add keeps encoded.
func (pl *protoList) add(items []*corev1.Event, encoded []storage.Encoded) error {
	pl.objs, pl.sizes = pl.objs[:0], pl.sizes[:0]
	core := pl.version.Shape() != eventapi.EventsV1
	if !core || len(encoded) != len(items) {
		encoded = nil
	}
	own, total, spliced := 0, 0, 0 // bytes encoded here; bytes of the fields in all; items given encoded
	for i, ev := range items {
		var po protoObject = ev
		if !core {
			po = eventapi.ToEventsV1(ev)
		}
		var n int
		var raw []byte
		if encoded != nil {
			raw = encoded[i].Matches(ev)
		}
		if raw != nil {
			po, n = nil, len(raw)
			own -= n
			spliced++
		} else {
			n = po.Size()
		}
		pl.objs, pl.sizes = append(pl.objs, po), append(pl.sizes, n)
		own += 1 + varintLen(n) + n
		total += 1 + varintLen(n) + n
	}
	if total == 0 {
		return nil
	}
	pg := protoPage{buf: make([]byte, 0, own)}
	if spliced > 0 {
		pg.encoded, pg.splices = encoded, make([]int32, 0, 2*spliced)
	}
	b := pg.buf
	for i, po := range pl.objs {
		n := pl.sizes[i]
		b = binary.AppendUvarint(append(b, listItemsTag), uint64(n))
		if po == nil {
			pg.splices = append(pg.splices, int32(len(b)), int32(i))
			continue
		}
		m, err := po.MarshalToSizedBuffer(b[len(b) : len(b)+n])
		if err == nil && m != n {
			err = fmt.Errorf("%d bytes, sized %d", m, n)
		}
		if err != nil {
			return fmt.Errorf("encoding %s/%s: %w", items[i].Namespace, items[i].Name, err)
		}
		b = b[:len(b)+n]
	}
	pg.buf = b
	for i := range pg.encoded {
		pg.encoded[i].Of = nil
	}
	clear(pl.objs) // the decoded page is not kept
	pl.pages = append(pl.pages, pg)
	pl.size += total
	return nil
}

// write writes the item fields to w.
func (pl *protoList) write(w io.Writer) error {
	for _, pg := range pl.pages {
		at := 0
		for k := 0; k < len(pg.splices); k += 2 {
			off, item := int(pg.splices[k]), pg.splices[k+1]
			if _, err := w.Write(pg.buf[at:off]); err != nil {
				return err
			}
			if _, err := w.Write(pg.encoded[item].Bytes); err != nil {
				return err
			}
			at = off
		}
		if _, err := w.Write(pg.buf[at:]); err != nil {
			return err
		}
	}
	return nil
}

// envelope returns what comes before and after the items in the
// answer: the protobuf envelope ("k8s\x00" and a runtime.Unknown whose
// raw bytes are the EventList: its metadata, then the items), byte for
// byte what protobufEnvelope gives for the whole list.
func (pl *protoList) envelope(meta metav1.ListMeta) (head, tail []byte, err error) {
	tm := runtime.TypeMeta{APIVersion: pl.version.APIVersion(), Kind: "EventList"}
	tmSize, metaSize := tm.Size(), meta.Size()
	rawSize := 1 + varintLen(metaSize) + metaSize + pl.size
	head = make([]byte, 0, len(protobufMagic)+1+varintLen(tmSize)+tmSize+1+varintLen(rawSize)+1+varintLen(metaSize)+metaSize)
	head = append(head, protobufMagic...)
	head = binary.AppendUvarint(append(head, unknownTypeMetaTag), uint64(tmSize))
	n, err := tm.MarshalToSizedBuffer(head[len(head) : len(head)+tmSize])
	if err != nil {
		return nil, nil, err
	}
	head = head[:len(head)+n]
	head = binary.AppendUvarint(append(head, unknownRawTag), uint64(rawSize))
	head = binary.AppendUvarint(append(head, listMetaTag), uint64(metaSize))
	if n, err = meta.MarshalToSizedBuffer(head[len(head) : len(head)+metaSize]); err != nil {
		return nil, nil, err
	}
	head = head[:len(head)+n]
	return head, []byte{unknownContentEncodingTag, 0, unknownContentTypeTag, 0}, nil
}

// byteBudget bounds the bytes that requests hold at once.
type byteBudget struct {
	mu          sync.Mutex
	used, limit int64
}

// take reserves n bytes if they fit.
func (b *byteBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

// give returns n bytes taken.
func (b *byteBudget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// listAllProtobuf answers a list of every event in protobuf, the first
// page read (first) and the others read through next: each page is
// encoded as it is read, and the answer is written once the last is,
// with its Content-Length. The encoded pages are held against the
// server's ProtobufListBytes: when the list outgrows what is left of it
// and the client accepts plain JSON too (canFallBack), it gives up
// before writing anything and returns false, and the caller streams the
// list in JSON from first (a page at a time, as before). A client that
// accepts only protobuf gets its list whatever its size, as it got the
// whole list built before. A page that fails to be read is answered
// with a Status: nothing has been written yet.
func (s *Server) listAllProtobuf(w http.ResponseWriter, rr resourceRequest, meta metav1.ListMeta, first *storage.ListResult,
	next func(cont string) (*storage.ListResult, error), canFallBack bool) bool {
	pl := &protoList{version: rr.version}
	var held int64
	defer func() { s.listBytes.give(held) }()
	// hold reserves what the list has grown by since it last held; it
	// reports false when the list should be answered in JSON instead.
	hold := func() bool {
		grown := int64(pl.size) - held
		if grown <= 0 || s.listBytes.take(grown) {
			held += max(grown, 0)
			return true
		}
		return !canFallBack
	}
	if err := pl.add(first.Items, first.Protobuf); err != nil {
		writeStatus(w, statusError(err, rr, ""))
		return true
	}
	if !hold() {
		return false
	}
	for cont := first.Continue; cont != ""; {
		page, err := next(cont)
		if err != nil {
			writeStatus(w, statusError(err, rr, ""))
			return true
		}
		err = pl.add(page.Items, page.Protobuf)
		s.readGate.release()
		if err != nil {
			writeStatus(w, statusError(err, rr, ""))
			return true
		}
		cont = page.Continue
		if !hold() {
			return false
		}
	}
	head, tail, err := pl.envelope(meta)
	if err != nil {
		writeStatus(w, statusError(err, rr, ""))
		return true
	}
	w.Header().Set("Content-Type", protobufMediaType)
	w.Header().Set("Content-Length", strconv.Itoa(len(head)+pl.size+len(tail)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(head)
	// The items go straight to the connection, not through the timeout
	// writer's buffer (a copy of the whole answer).
	if sw, ok := w.(streamer); ok {
		if err := sw.stream(); err != nil {
			return true
		}
	}
	// Many parts are one event's: write them through a buffer, not each
	// through the connection's writer.
	bw := bufio.NewWriterSize(w, 32<<10)
	if err := pl.write(bw); err != nil {
		return true
	}
	_, _ = bw.Write(tail)
	_ = bw.Flush()
	return true
}
