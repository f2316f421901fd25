package robustness

import (
	"fmt"
	"strings"
)

// Selector is the one-term field selector the generator uses: reason or
// involvedObject.name equal to a value (both served from an index), or
// nothing.
type Selector struct {
	Field, Value string
}

// ParseSelector reads "", "reason=V" or "involvedObject.name=V".
func ParseSelector(s string) (Selector, error) {
	if s == "" {
		return Selector{}, nil
	}
	f, v, ok := strings.Cut(s, "=")
	if !ok || (f != "reason" && f != "involvedObject.name") {
		return Selector{}, fmt.Errorf("selector %q: want reason=V or involvedObject.name=V", s)
	}
	return Selector{f, v}, nil
}

// Matches reports whether o is selected.
func (s Selector) Matches(o Object) bool {
	switch s.Field {
	case "reason":
		return o.Reason == s.Value
	case "involvedObject.name":
		return o.Pod == s.Value
	}
	return true
}
