package pebblestore

// WithoutTimeIndex returns o for a store that keeps no time index, as
// before issue 32 (Options.noTimeIndex): for benchmarks comparing its
// write cost.
func WithoutTimeIndex(o Options) Options {
	o.noTimeIndex = true
	return o
}

// ServeTimeIndex sets whether s's lists plan with its time index (false:
// they scan), for benchmarks comparing both on the same data.
func (s *Store) ServeTimeIndex(on bool) { s.timeServed.Store(on) }
