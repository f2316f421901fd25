// Package seriesstate names the annotation in which this project's events
// recorder keeps a series' state, for the recorder (package events, which
// exports it as SeriesStateAnnotation) and for readers such as evctl that
// should not depend on the recorder.
package seriesstate

// Annotation is set on events in a series written by package events:
// "ongoing" while occurrences may still be counted, "finished" once the
// series is over. client-go's recorders do not set it.
const Annotation = "events.kubevents.io/series-state"
