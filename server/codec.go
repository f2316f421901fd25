package server

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// outputKind is the representation a client asked for.
type outputKind int

const (
	outJSON outputKind = iota
	outYAML
	outTable
	outPartial  // PartialObjectMetadata(List)
	outProtobuf // Kubernetes protobuf envelope
)

// output is a negotiated response format.
type output struct {
	kind outputKind
	// metaVersion is the meta.k8s.io version of Table and
	// PartialObjectMetadata output ("v1" or "v1beta1").
	metaVersion string
	// include is what the rows of Table output carry as their object
	// (the includeObject parameter: Metadata, Object or None); set by
	// negotiateOutput for Table output only.
	include string
	// protobuf encodes PartialObjectMetadata(List) output in the
	// Kubernetes protobuf envelope (outProtobuf always is).
	protobuf bool
}

// isProtobuf reports whether o is encoded in the protobuf envelope.
func (o output) isProtobuf() bool { return o.kind == outProtobuf || o.protobuf }

// negotiate picks the first media type in accept that eventsd can produce.
func negotiate(accept string) (output, bool) {
	if strings.TrimSpace(accept) == "" {
		return output{kind: outJSON}, true
	}
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/json", "*/*", "application/*":
			as := params["as"]
			if as == "" {
				return output{kind: outJSON}, true
			}
			if params["g"] != "meta.k8s.io" || (params["v"] != "v1" && params["v"] != "v1beta1") {
				continue
			}
			switch as {
			case "Table":
				return output{kind: outTable, metaVersion: params["v"]}, true
			case "PartialObjectMetadata", "PartialObjectMetadataList":
				return output{kind: outPartial, metaVersion: params["v"]}, true
			}
		case "application/yaml":
			if params["as"] == "" {
				return output{kind: outYAML}, true
			}
		case protobufMediaType:
			switch params["as"] {
			case "":
				return output{kind: outProtobuf}, true
			case "PartialObjectMetadata", "PartialObjectMetadataList":
				// metav1's metadata types have protobuf encodings (the
				// metadata client asks for them first); Table has none.
				if params["g"] == "meta.k8s.io" && (params["v"] == "v1" || params["v"] == "v1beta1") {
					return output{kind: outPartial, metaVersion: params["v"], protobuf: true}, true
				}
			}
		}
	}
	return output{}, false
}

// negotiateOutput negotiates the response format of r from its Accept
// header and, for Table output, reads its includeObject parameter. Handlers
// call it before they read the body or touch the store, so that a request
// whose response could not be produced is refused without effect.
func negotiateOutput(r *http.Request) (output, *apierrors.StatusError) {
	o, ok := negotiate(r.Header.Get("Accept"))
	if !ok {
		return o, notAcceptable()
	}
	if o.kind == outTable {
		include, se := parseIncludeObject(r.URL.Query().Get("includeObject"))
		if se != nil {
			return o, se
		}
		o.include = include
	}
	return o, nil
}

// statusOutput is the form of a Status answer to a request with this
// Accept header, as kube-apiserver negotiates errors: protobuf when the
// client's first acceptable plain type is protobuf, JSON otherwise (a
// Status is never a Table or metadata).
func statusOutput(accept string) output {
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || params["as"] != "" {
			continue
		}
		switch mt {
		case protobufMediaType:
			return output{kind: outProtobuf}
		case "application/json", "application/yaml", "*/*", "application/*":
			return output{kind: outJSON}
		}
	}
	return output{kind: outJSON}
}

// negotiatedWriter carries the form a request's Status answers take to
// writeStatus, through the writers wrapped around it.
type negotiatedWriter struct {
	http.ResponseWriter
	status output
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *negotiatedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush lets watches stream through the writer.
func (w *negotiatedWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *negotiatedWriter) statusOutput() output { return w.status }

// statusOutputOf finds the Status form negotiated for the request that w
// answers: JSON if none was.
func statusOutputOf(w http.ResponseWriter) output {
	for w != nil {
		if n, ok := w.(interface{ statusOutput() output }); ok {
			return n.statusOutput()
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	return output{kind: outJSON}
}

func notAcceptable() *apierrors.StatusError {
	return newStatus(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
		"only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf, application/json;as=Table;v=v1;g=meta.k8s.io, application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io, application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io")
}

// externalEvent returns ev in the wire form of v.
func externalEvent(v eventapi.Version, ev *corev1.Event) any {
	if v.Shape() == eventapi.EventsV1 {
		out := eventapi.ToEventsV1(ev)
		out.APIVersion = v.APIVersion()
		return out
	}
	if ev.Kind == "" {
		c := *ev
		eventapi.SetCoreTypeMeta(&c)
		return &c
	}
	return ev
}

// externalList returns items as an EventList of v.
func externalList(v eventapi.Version, items []*corev1.Event, meta metav1.ListMeta) any {
	if v.Shape() == eventapi.EventsV1 {
		l := &eventsv1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: v.APIVersion()}, ListMeta: meta,
			Items: make([]eventsv1.Event, len(items))}
		for i, ev := range items {
			l.Items[i] = *eventapi.ToEventsV1(ev)
			l.Items[i].APIVersion = v.APIVersion()
		}
		return l
	}
	l := &corev1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: "v1"}, ListMeta: meta,
		Items: make([]corev1.Event, len(items))}
	for i, ev := range items {
		l.Items[i] = *ev
		eventapi.SetCoreTypeMeta(&l.Items[i])
	}
	return l
}

func partialMeta(ev *corev1.Event, metaVersion string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/" + metaVersion},
		ObjectMeta: ev.ObjectMeta,
	}
}

// tableOptions are the Table knobs of a request.
type tableOptions struct {
	includeObject string // Metadata (default), Object, None
	noHeaders     bool
}

// parseIncludeObject reads the includeObject parameter of Table output
// ("" means Metadata).
func parseIncludeObject(q string) (string, *apierrors.StatusError) {
	switch q {
	case "", "Metadata":
		return "Metadata", nil
	case "Object", "None":
		return q, nil
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("unrecognized includeObject value: %q", q))
}

// table renders events as a meta.k8s.io Table.
func table(v eventapi.Version, items []*corev1.Event, meta metav1.ListMeta, o output, to tableOptions, now time.Time) (*metav1.Table, error) {
	t := &metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/" + o.metaVersion},
		ListMeta: meta,
		Rows:     make([]metav1.TableRow, len(items)),
	}
	if !to.noHeaders {
		t.ColumnDefinitions = eventapi.TableColumns
	}
	for i, ev := range items {
		row := metav1.TableRow{Cells: eventapi.TableCells(ev, now)}
		var obj any
		switch to.includeObject {
		case "Object":
			obj = externalEvent(v, ev)
		case "Metadata":
			obj = partialMeta(ev, o.metaVersion)
		}
		if obj != nil {
			raw, err := json.Marshal(obj)
			if err != nil {
				return nil, err
			}
			row.Object = runtime.RawExtension{Raw: raw}
		}
		t.Rows[i] = row
	}
	return t, nil
}

// protobufMediaType is the Kubernetes protobuf wire format.
const protobufMediaType = "application/vnd.kubernetes.protobuf"

// protoObject is a generated Kubernetes type with its protobuf codec.
type protoObject interface {
	Size() int
	MarshalToSizedBuffer(dAtA []byte) (int, error)
}

// Protobuf field tags of runtime.Unknown (field number << 3 | wire type
// 2, length-delimited): typeMeta, raw, contentEncoding, contentType.
const (
	unknownTypeMetaTag        = 1<<3 | 2
	unknownRawTag             = 2<<3 | 2
	unknownContentEncodingTag = 3<<3 | 2
	unknownContentTypeTag     = 4<<3 | 2
)

// protobufEnvelope wraps obj as kube-apiserver does: "k8s\x00" and a
// runtime.Unknown carrying the type and the object's bytes (no content
// encoding or type). The object is encoded once, in place, into the one
// buffer that is the answer: the bytes are runtime.Unknown's Marshal's
// (TestProtobufEnvelopeIsUnknowns), without encoding the object apart and
// copying it twice.
func protobufEnvelope(obj any) ([]byte, error) {
	po, ok := obj.(protoObject)
	tm, ok2 := obj.(interface{ GetObjectKind() schema.ObjectKind })
	if !ok || !ok2 {
		return nil, fmt.Errorf("%T has no protobuf encoding", obj)
	}
	gvk := tm.GetObjectKind().GroupVersionKind()
	meta := runtime.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}
	metaSize, rawSize := meta.Size(), po.Size()
	b := make([]byte, 0, len(protobufMagic)+
		1+varintLen(metaSize)+metaSize+1+varintLen(rawSize)+rawSize+4)
	b = append(b, protobufMagic...)
	b = binary.AppendUvarint(append(b, unknownTypeMetaTag), uint64(metaSize))
	n, err := meta.MarshalToSizedBuffer(b[len(b) : len(b)+metaSize])
	if err != nil {
		return nil, err
	}
	b = b[:len(b)+n]
	b = binary.AppendUvarint(append(b, unknownRawTag), uint64(rawSize))
	if n, err = po.MarshalToSizedBuffer(b[len(b) : len(b)+rawSize]); err != nil {
		return nil, err
	}
	b = b[:len(b)+n]
	return append(b, unknownContentEncodingTag, 0, unknownContentTypeTag, 0), nil
}

// varintLen is the length of v as a protobuf varint.
func varintLen(v int) int {
	return len(binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64), uint64(v)))
}

// writeObject writes obj with status in the negotiated plain format.
func writeObject(w http.ResponseWriter, o output, status int, obj any) {
	if o.isProtobuf() {
		if body, err := protobufEnvelope(obj); err == nil {
			w.Header().Set("Content-Type", protobufMediaType)
			w.WriteHeader(status)
			_, _ = w.Write(body)
			return
		}
		// No protobuf form (Table): JSON, which every client accepts.
	}
	body, err := json.Marshal(obj)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	ct := "application/json"
	if o.kind == outYAML {
		if body, err = yaml.JSONToYAML(body); err != nil {
			writeStatus(w, apierrors.NewInternalError(err))
			return
		}
		ct = "application/yaml"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Field validation directives (the fieldValidation query parameter).
const (
	validationStrict = "Strict"
	validationWarn   = "Warn"
	validationIgnore = "Ignore"
)

var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00} // "k8s\x00"

// errNoEnvelope is unwrapProtobuf's error for a body without the magic.
var errNoEnvelope = errors.New("the protobuf body does not start with the Kubernetes envelope")

// unwrapProtobuf returns the runtime.Unknown that a Kubernetes protobuf
// envelope ("k8s\x00" and the Unknown) carries: errNoEnvelope when body
// does not start with the magic, else the Unknown's decoding error.
func unwrapProtobuf(body []byte) (*runtime.Unknown, error) {
	if !bytes.HasPrefix(body, protobufMagic) {
		return nil, errNoEnvelope
	}
	u := &runtime.Unknown{}
	if err := u.Unmarshal(body[len(protobufMagic):]); err != nil {
		return nil, err
	}
	return u, nil
}

// mediaType returns the media type of a request's Content-Type header,
// application/json when there is none.
func mediaType(contentType string) (string, error) {
	if contentType == "" {
		return "application/json", nil
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return mt, err
}

// readBody reads at most maxBodyBytes of the request body. A body
// readBodyFirst has read already is handed over as it is, not copied.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apierrors.StatusError) {
	if b, ok := r.Body.(*readBody1st); ok {
		return b.take(), nil
	}
	body, err := readAllSized(http.MaxBytesReader(w, r.Body, maxBodyBytes), r.ContentLength)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", maxBodyBytes))
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("reading the request body: %v", err))
	}
	return body, nil
}

// readAllSized is io.ReadAll with its buffer sized for the n bytes the
// request declared (its Content-Length; -1 when unknown), so that a
// body is read into one allocation instead of a growing series. A body
// longer than declared still reads whole (net/http does not let it).
func readAllSized(r io.Reader, n int64) ([]byte, error) {
	if n <= 0 || n > maxBodyBytes {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, n+1) // +1: room for the read that sees EOF
	for {
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// readBody1st is a body readBodyFirst has read: handlers reading it
// through readBody get its bytes without a copy, other readers read
// them as from the request.
type readBody1st struct {
	bytes.Reader
	data []byte
}

// take returns the unread rest of the body and marks it read.
func (b *readBody1st) take() []byte {
	rest := b.data[len(b.data)-b.Len():]
	_, _ = b.Seek(0, io.SeekEnd)
	return rest
}

// Close implements io.Closer.
func (b *readBody1st) Close() error { return nil }

// decodeEvent decodes a request body holding an Event of version v into
// its core/v1 storage form. Unknown and duplicate fields are errors with
// fieldValidation=Strict and warnings with Warn (the default).
func decodeEvent(contentType string, body []byte, v eventapi.Version, validation string) (*corev1.Event, []string, *apierrors.StatusError) {
	mt, err := mediaType(contentType)
	if err != nil {
		return nil, nil, unsupportedMediaType(contentType)
	}
	switch mt {
	case "application/json":
	case "application/yaml":
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("couldn't get version/kind; yaml parse error: %v", err))
		}
		body = j
	case protobufMediaType:
		ev, err := decodeProtobuf(body, v)
		return ev, nil, err
	default:
		return nil, nil, unsupportedMediaType(mt)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil, apierrors.NewBadRequest("the request body is empty; an Event is required")
	}
	var (
		ev         *corev1.Event
		tm         metav1.TypeMeta
		strictErrs []error
	)
	if v.Shape() == eventapi.EventsV1 {
		var ext eventsv1.Event
		strictErrs, err = sigsjson.UnmarshalStrict(body, &ext, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
		tm, ev = ext.TypeMeta, eventapi.FromEventsV1(&ext)
	} else {
		ev = &corev1.Event{}
		strictErrs, err = sigsjson.UnmarshalStrict(body, ev, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
		tm = ev.TypeMeta
	}
	if err != nil {
		if !json.Valid(body) {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("couldn't get version/kind; json parse error: %v", err))
		}
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("Event in version %q cannot be handled as a Event: %v", v.APIVersion(), err))
	}
	if se := checkTypeMeta(tm, v); se != nil {
		return nil, nil, se
	}
	var warnings []string
	if len(strictErrs) > 0 {
		msgs := make([]string, len(strictErrs))
		for i, e := range strictErrs {
			msgs[i] = e.Error()
		}
		switch validation {
		case validationStrict:
			return nil, nil, apierrors.NewBadRequest("strict decoding error: " + strings.Join(msgs, ", "))
		case validationWarn:
			warnings = msgs
		}
	}
	eventapi.SetCoreTypeMeta(ev)
	return ev, warnings, nil
}

func checkTypeMeta(tm metav1.TypeMeta, v eventapi.Version) *apierrors.StatusError {
	if tm.APIVersion != "" && tm.APIVersion != v.APIVersion() {
		return apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", tm.APIVersion, v.APIVersion()))
	}
	if tm.Kind != "" && tm.Kind != "Event" {
		return apierrors.NewBadRequest(fmt.Sprintf("the kind in the data (%s) does not match the expected kind (Event)", tm.Kind))
	}
	return nil
}

// decodeProtobuf decodes the Kubernetes protobuf envelope that the kubelet,
// kube-scheduler and kube-controller-manager send.
func decodeProtobuf(body []byte, v eventapi.Version) (*corev1.Event, *apierrors.StatusError) {
	u, err := unwrapProtobuf(body)
	if errors.Is(err, errNoEnvelope) {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decoding the protobuf envelope: %v", err))
	}
	if se := checkTypeMeta(metav1.TypeMeta{APIVersion: u.APIVersion, Kind: u.Kind}, v); se != nil {
		return nil, se
	}
	if v.Shape() == eventapi.EventsV1 {
		var ext eventsv1.Event
		if err := ext.Unmarshal(u.Raw); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("decoding the protobuf Event: %v", err))
		}
		return eventapi.FromEventsV1(&ext), nil
	}
	ev := &corev1.Event{}
	if err := ev.Unmarshal(u.Raw); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decoding the protobuf Event: %v", err))
	}
	eventapi.SetCoreTypeMeta(ev)
	return ev, nil
}

func unsupportedMediaType(mt string) *apierrors.StatusError {
	return newStatus(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
		fmt.Sprintf("the body of the request was in an unknown format (%s) - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf", mt))
}
