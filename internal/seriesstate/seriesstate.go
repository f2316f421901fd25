// Package seriesstate names the annotation in which this project's events
// recorder keeps a series' state, and its values, for the recorder (package
// events, which exports them as SeriesStateAnnotation, SeriesOngoing, ...)
// and for readers such as evctl that should not depend on the recorder.
package seriesstate

// Annotation is set on events in a series written by package events, to
// one of the values below. client-go's recorders do not set it.
const Annotation = "events.kubevents.io/series-state"

// The values of Annotation: the redesign's EventSeriesState (client-go's
// EventSeriesStateOngoing, EventSeriesStateFinished and
// EventSeriesStateUnknown), lower-cased.
const (
	// Ongoing: occurrences may still be counted.
	Ongoing = "ongoing"
	// Finished: the series is over and its count final.
	Finished = "finished"
	// Unknown: the recorder stopped while the series was ongoing; the
	// count is what it had then.
	Unknown = "unknown"
)
