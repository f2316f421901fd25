package webhook

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubevents/kubevents/export"
)

// slackMessage is the body of a Slack incoming webhook POST.
type slackMessage struct {
	Text string `json:"text"`
}

// slackEscaper escapes what Slack's message text reserves for markup
// (links and mentions), as Slack's documentation asks.
var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// ellipsis marks a shortened message.
const ellipsis = "…"

// SlackLine is the line of the slack format for r:
//
//	<type> <reason> <kind> <namespace>/<name>: <message> (count N) [<key>]
//
// prefixed with "[<cluster>] " for the events of a fleet's cluster (not
// the root cluster's),
// with "(count N)" only for a repeated event (the larger of count and
// series.count) and "(deleted)" after it for a deletion; ": <message>"
// is left out when the message is empty. The message's
// line breaks become spaces, and &, < and > are escaped as Slack asks.
func SlackLine(r export.Record) string {
	head, tail := slackLineParts(r)
	return head + tail
}

// slackLineParts splits r's line into the part that may be shortened (up
// to the message's end) and the part kept whole (count, deletion, key).
func slackLineParts(r export.Record) (head, tail string) {
	var h, t strings.Builder
	if r.Cluster != "" {
		h.WriteString("[")
		h.WriteString(r.Cluster)
		h.WriteString("] ")
	}
	ev := r.Event
	if ev == nil {
		h.WriteString("(no event)")
	} else {
		obj := ev.InvolvedObject
		name := obj.Name
		if obj.Namespace != "" {
			name = obj.Namespace + "/" + name
		}
		sep := ""
		for _, f := range []string{ev.Type, ev.Reason, obj.Kind, name} {
			if f != "" {
				h.WriteString(sep)
				h.WriteString(f)
				sep = " "
			}
		}
		if msg := strings.Join(strings.Fields(ev.Message), " "); msg != "" {
			h.WriteString(": ")
			h.WriteString(msg)
		}
		count := ev.Count
		if ev.Series != nil && ev.Series.Count > count {
			count = ev.Series.Count
		}
		if count > 1 {
			t.WriteString(" (count ")
			t.WriteString(strconv.FormatInt(int64(count), 10))
			t.WriteString(")")
		}
	}
	if r.Type == watch.Deleted {
		t.WriteString(" (deleted)")
	}
	t.WriteString(" [")
	t.WriteString(r.Key)
	t.WriteString("]")
	return slackEscaper.Replace(h.String()), slackEscaper.Replace(t.String())
}

// slackTexts renders batch as message texts of at most max bytes each,
// whole lines per message, in order; a line longer than max alone is
// shortened in its message part.
func slackTexts(batch []export.Record, max int) []string {
	var texts []string
	var b strings.Builder
	for _, r := range batch {
		head, tail := slackLineParts(r)
		line := head + tail
		if len(line) > max {
			line = shorten(head, max-len(tail)-len(ellipsis)) + ellipsis + tail
			if len(line) > max {
				// A key longer than max: nothing sensible fits.
				line = shorten(line, max)
			}
		}
		if b.Len() > 0 && b.Len()+1+len(line) > max {
			texts = append(texts, b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(line)
	}
	if b.Len() > 0 {
		texts = append(texts, b.String())
	}
	return texts
}

// shorten cuts s to at most n bytes at a rune boundary, and not inside an
// escape (&amp; &lt; &gt;).
func shorten(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	s = s[:n]
	if i := strings.LastIndexByte(s, '&'); i >= 0 && !strings.Contains(s[i:], ";") {
		s = s[:i]
	}
	return s
}
