package record

import "k8s.io/client-go/tools/record"

// FakeRecorder is client-go's fake recorder: it writes
// "<type> <reason> <message>" to its Events channel instead of a sink.
type FakeRecorder = record.FakeRecorder

// NewFakeRecorder returns client-go's FakeRecorder with a channel of
// bufferSize events, so tests written against client-go's package keep
// working after the import change.
func NewFakeRecorder(bufferSize int) *FakeRecorder {
	return record.NewFakeRecorder(bufferSize)
}

// EventRecorderAdapter is client-go's adapter presenting a core/v1
// recorder as an events.k8s.io recorder (it drops related and action).
type EventRecorderAdapter = record.EventRecorderAdapter

// NewEventRecorderAdapter returns client-go's adapter over r, which may be
// a recorder of this package.
func NewEventRecorderAdapter(r EventRecorderLogger) *EventRecorderAdapter {
	return record.NewEventRecorderAdapter(r)
}
