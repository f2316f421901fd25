package record

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

// epochStamp is how the zero point client-go diffs lastTimestamp against
// (Unix(0,0)) serialises.
const epochStamp = "1970-01-01T00:00:00Z"

// countPatch returns the strategic-merge patch client-go sends for a repeat
// of ev: the two-way merge patch between ev with count 0, lastTimestamp
// Unix(0,0) and message "" and ev itself. That is always
// {"count":N,"lastTimestamp":"<RFC3339 seconds>","message":"<msg>"}, keys
// sorted, each present only when it differs from that zero point (so an
// empty message is left out), encoded as encoding/json encodes. Building it
// directly avoids two JSON encodings, two decodings and a map diff per
// repeat; TestCountPatchMatchesStrategicPatch checks the bytes against
// apimachinery's strategicpatch.
func countPatch(ev *corev1.Event) []byte {
	buf := make([]byte, 0, 64+len(ev.Message))
	buf = append(buf, '{')
	sep := false
	field := func(name string) {
		if sep {
			buf = append(buf, ',')
		}
		sep = true
		buf = append(buf, '"')
		buf = append(buf, name...)
		buf = append(buf, '"', ':')
	}
	if ev.Count != 0 {
		field("count")
		buf = strconv.AppendInt(buf, int64(ev.Count), 10)
	}
	if ev.LastTimestamp.IsZero() {
		field("lastTimestamp")
		buf = append(buf, "null"...)
	} else if stamp := ev.LastTimestamp.UTC().Format(time.RFC3339); stamp != epochStamp {
		field("lastTimestamp")
		buf = append(buf, '"')
		buf = append(buf, stamp...)
		buf = append(buf, '"')
	}
	if ev.Message != "" {
		field("message")
		buf = appendJSONString(buf, ev.Message)
	}
	return append(buf, '}')
}

// appendJSONString appends s as it appears in client-go's patch: plain
// printable ASCII as is; anything else (quotes, backslashes, control
// characters, HTML-sensitive <, > and &, non-ASCII) through json.Marshal,
// after replacing each invalid UTF-8 byte with U+FFFD (client-go's patch
// is a JSON encoding of a decoded JSON encoding, and the first encoding
// replaces invalid bytes).
func appendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			if !utf8.ValidString(s) {
				s = replaceInvalidUTF8(s)
			}
			b, _ := json.Marshal(s) // a string always marshals
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// replaceInvalidUTF8 replaces each byte that is not part of a valid UTF-8
// sequence with U+FFFD, as encoding/json does.
func replaceInvalidUTF8(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
