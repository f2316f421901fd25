// The search page's logic that needs no DOM: its state in the URL, the
// list's query (CEL filter, field selectors, time range), the client's
// check of the time range for live changes, batching of repaints, the
// result rows, and the histogram and loudest panels read from a FacetList
// (events.kubevents.io/v1 facets). Unit-tested in testdata/search_test.js.

import { escapeFieldValue, parseTime, rowOf } from "./model.js";

// FILTER_EXAMPLES are CEL filters the page offers as starting points
// (object is the event in events.k8s.io/v1's shape).
export const FILTER_EXAMPLES = [
  { label: "Warnings about Pods", expr: 'object.type == "Warning" && object.regarding.kind == "Pod"' },
  { label: "Note mentions OOM", expr: 'object.note.contains("OOM")' },
  { label: "Series of more than 10", expr: "has(object.series) && object.series.count > 10" },
  { label: "Objects named web-*", expr: 'object.regarding.name.startsWith("web-")' },
];

// TYPES are the event types the type filter offers.
export const TYPES = ["Normal", "Warning"];

// The state's fields, as the URL's query parameters name them.
const PARAMS = { filter: "filter", namespace: "ns", type: "type", reason: "reason", kind: "kind", since: "since", until: "until" };

// searchFromURL reads the search's state from a URL's query: the CEL
// filter, the namespace, type, reason and regarding kind, and the time
// range's since and until as the API takes them (RFC 3339 or a duration
// back from now). Never the token.
export function searchFromURL(search) {
  const q = new URLSearchParams(search);
  const s = {};
  for (const [k, p] of Object.entries(PARAMS)) s[k] = (q.get(p) || "").trim();
  return s;
}

// searchToURL is the query of a state, "" when it is empty.
export function searchToURL(s) {
  const q = new URLSearchParams();
  for (const [k, p] of Object.entries(PARAMS)) if (s[k]) q.set(p, s[k]);
  const str = q.toString();
  return str ? "?" + str : "";
}

// fieldSelectorOf is the field selector of the type, reason and kind
// filters, values escaped as apimachinery escapes them; the namespace is
// the list's path, not a term.
export function fieldSelectorOf(s) {
  const terms = [];
  if (s.type) terms.push(`type=${escapeFieldValue(s.type)}`);
  if (s.reason) terms.push(`reason=${escapeFieldValue(s.reason)}`);
  if (s.kind) terms.push(`regarding.kind=${escapeFieldValue(s.kind)}`);
  return terms.join(",");
}

// listParams are the list's parameters beyond the field selector: the
// filter and the time range, each only when given.
export function listParams(s) {
  const p = {};
  if (s.filter) p.filter = s.filter;
  if (s.since) p.since = s.since;
  if (s.until) p.until = s.until;
  return p;
}

// watchParams are a watch's: the filter alone (a watch refuses since
// and until; the page keeps the range itself).
export function watchParams(s) {
  return s.filter ? { filter: s.filter } : {};
}

const DURATION_UNITS = { ns: 1e-6, us: 1e-3, "µs": 1e-3, ms: 1, s: 1000, m: 60000, h: 3600000 };

// parseDuration reads a Go duration (1h, 90m, 2h30m, 1.5s) in
// milliseconds, or NaN.
export function parseDuration(v) {
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/gy;
  let ms = 0, m, end = 0;
  if (!v) return NaN;
  while ((m = re.exec(v))) {
    ms += parseFloat(m[1]) * DURATION_UNITS[m[2]];
    end = re.lastIndex;
  }
  return end === v.length ? ms : NaN;
}

// parseBound reads a time range's bound as the server does: an RFC 3339
// time, or a positive duration back from now. It returns {at} (ms), or
// {error}.
export function parseBound(v, now) {
  if (/^\d{4}-\d\d-\d\dT/.test(v)) {
    const at = parseTime(v);
    if (!isNaN(at)) return { at, absolute: true };
  }
  const d = parseDuration(v);
  if (isNaN(d)) return { error: `invalid value "${v}": give an RFC 3339 time (2006-01-02T15:04:05Z) or a duration back from now (1h, 15m)` };
  if (d <= 0) return { error: `invalid value "${v}": a duration back from now must be positive` };
  return { at: now - d, absolute: false };
}

// liveRange is how the page keeps a search's time range on live changes:
// {since, until} in ms (NaN when open), and whether to watch at all. A
// range that ends in the past (an until before now, or any duration
// back from now) gets no changes: the list is all there is. With a
// duration since, the range's start moves with now.
export function liveRange(s, now) {
  const since = s.since ? parseBound(s.since, now) : { at: NaN };
  const until = s.until ? parseBound(s.until, now) : { at: NaN };
  if (since.error || until.error) return { error: since.error || until.error };
  const live = !s.until || (until.absolute && until.at > now);
  return { since: since.at, until: until.at, live };
}

// inRange reports whether a row (rowOf) was last observed in the range,
// as the server's since (at or after) and until (before) select.
export function inRange(row, r) {
  return !(row.last < r.since) && !(row.last >= r.until);
}

// Batcher calls flush at most once per delay however often changes
// come: the first change schedules a flush, later ones before it join it.
// timers defaults to the window's setTimeout and clearTimeout.
export class Batcher {
  constructor(flush, delay, timers) {
    this.flush = flush;
    this.delay = delay;
    this.timers = timers || { setTimeout: (f, d) => setTimeout(f, d), clearTimeout: (t) => clearTimeout(t) };
    this.timer = null;
    this.pending = 0;
  }

  // add notes n changes (1 by default).
  add(n = 1) {
    this.pending += n;
    if (this.timer !== null) return;
    this.timer = this.timers.setTimeout(() => this.run(), this.delay);
  }

  // run flushes now what is pending.
  run() {
    if (this.timer !== null) this.timers.clearTimeout(this.timer);
    this.timer = null;
    const n = this.pending;
    this.pending = 0;
    if (n > 0) this.flush(n);
  }

  // stop drops what is pending.
  stop() {
    if (this.timer !== null) this.timers.clearTimeout(this.timer);
    this.timer = null;
    this.pending = 0;
  }
}

// results reads events as rows, keeps those in range, and orders them by
// last observation, newest first: {rows (at most limit), events,
// occurrences (their counts summed), more (rows left out)}.
export function results(events, range, limit) {
  const rows = [];
  let occurrences = 0;
  for (const ev of events) {
    const r = rowOf(ev);
    if (!inRange(r, range)) continue;
    rows.push(r);
    occurrences += r.count;
  }
  rows.sort((a, b) => b.last - a.last || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return { rows: rows.slice(0, limit), events: rows.length, occurrences, more: Math.max(0, rows.length - limit) };
}

// LOUDEST_FIELDS are the facets the loudest panel shows, in order.
export const LOUDEST_FIELDS = ["reason", "kind", "namespace"];

// loudest reads a FacetList's values of each of fields, most
// occurrences first as the server orders them: {field: [{value,
// occurrences, events, other}]}; other marks the facet counting the
// values beyond the top ones together, which is not a value to filter by.
export function loudest(facets, fields = LOUDEST_FIELDS) {
  const out = {};
  for (const f of fields) out[f] = [];
  for (const it of (facets && facets.items) || []) {
    if (out[it.field]) out[it.field].push({ value: it.value, occurrences: it.occurrences, events: it.events, other: !!it.other });
  }
  return out;
}

// withFacet is the state with a loudest value added as a filter: a
// reason, kind, namespace or type replaces that filter's value.
export function withFacet(s, field, value) {
  const key = { reason: "reason", kind: "kind", namespace: "namespace", type: "type" }[field];
  if (!key) throw new Error(`no filter for the facet field ${field}`);
  return { ...s, [key]: value };
}

// histogram lays out a FacetList's time buckets over width px: the
// window {from, to} (the list's since and until, else its buckets'
// extent), and a bar per bucket {from, to, occurrences, events, x, w, h}
// with h a fraction of the highest bucket. null without buckets.
export function histogram(facets, width) {
  const step = ((facets && facets.bucketSeconds) || 0) * 1000;
  const buckets = ((facets && facets.items) || []).filter((it) => it.field === "time")
    .map((it) => ({ from: parseTime(it.value), occurrences: it.occurrences, events: it.events }))
    .filter((b) => !isNaN(b.from));
  if (!buckets.length || step <= 0) return null;
  buckets.sort((a, b) => a.from - b.from);
  let from = parseTime(facets.since), to = parseTime(facets.until);
  if (isNaN(from) || buckets[0].from < from) from = buckets[0].from;
  const lastEnd = buckets[buckets.length - 1].from + step;
  if (isNaN(to) || to < lastEnd) to = lastEnd;
  const px = width / (to - from);
  const max = Math.max(...buckets.map((b) => b.occurrences), 1);
  const bars = buckets.map((b) => ({
    from: b.from, to: b.from + step, occurrences: b.occurrences, events: b.events,
    x: (b.from - from) * px, w: Math.max(1, step * px - 1), h: b.occurrences / max,
  }));
  return { win: { from, to }, bars, max };
}

// barAt is the bar under x, or null.
export function barAt(h, x) {
  return (h && h.bars.find((b) => x >= b.x && x < b.x + Math.max(b.w, 1) + 1)) || null;
}

// rfc3339 formats ms as the API's RFC 3339 time, in whole seconds when it
// has no fraction.
export function rfc3339(ms) {
  return new Date(ms).toISOString().replace(".000Z", "Z");
}

// zoomedTo is the state with the time range set to r ({from, to} ms):
// since at r.from, until at r.to, in RFC 3339.
export function zoomedTo(s, r) {
  return { ...s, since: rfc3339(Math.floor(r.from / 1000) * 1000), until: rfc3339(Math.ceil(r.to / 1000) * 1000) };
}
