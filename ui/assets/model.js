// The timeline's logic without the DOM: reading events, which object they
// concern, series and their state, the layout of a timeline, the overview,
// the page's state in its URL, the watch stream's lines and deduplication.
// It mirrors evctl (evctl/model.go, evctl/query.go) so that the page and
// the CLI agree. Unit tests: ui/testdata/model_test.js.

// SERIES_STATE_ANNOTATION is where this project's events recorder keeps a
// series' state (internal/seriesstate).
export const SERIES_STATE_ANNOTATION = "events.kubevents.io/series-state";

// SERIES_STATES are the annotation's values; a series without it (another
// recorder's, such as client-go's) has state "unknown" on the page, and a
// legacy count (core/v1, no series) none.
export const SERIES_STATES = ["ongoing", "finished", "unknown"];

const MINUTE = 60 * 1000;
const HOUR = 60 * MINUTE;

// ZOOMS are the timeline's windows, ending now; "all" spans every event.
export const ZOOMS = { "15m": 15 * MINUTE, "1h": HOUR, "6h": 6 * HOUR, "24h": 24 * HOUR, "all": 0 };
export const DEFAULT_ZOOM = "1h";

// OVERVIEW_WINDOW is how far back the overview counts Warning events.
export const OVERVIEW_WINDOW = HOUR;

// parseTarget reads the search box: "kind/name" or "namespace/kind/name".
// It throws an Error saying what it expects otherwise.
export function parseTarget(s) {
  const parts = String(s).trim().split("/");
  if (parts.some((p) => p === "") || parts.length < 2 || parts.length > 3) {
    throw new Error(`"${s}" is not kind/name or namespace/kind/name (for example pod/web-1 or default/pod/web-1)`);
  }
  if (parts.length === 2) return { namespace: "", kind: parts[0], name: parts[1] };
  return { namespace: parts[0], kind: parts[1], name: parts[2] };
}

// formatTarget is parseTarget's inverse.
export function formatTarget(t) {
  return (t.namespace ? t.namespace + "/" : "") + t.kind + "/" + t.name;
}

// objectRef renders a reference as kubectl events does: Kind/name.
export function objectRef(ref) {
  if (!ref) return "";
  return ref.name ? `${ref.kind}/${ref.name}` : ref.kind || "";
}

// parseDiscovery turns aggregated discovery documents
// (APIGroupDiscoveryList, from /api and /apis) into the resources a kind
// typed by a user can name.
export function parseDiscovery(...lists) {
  const out = [];
  for (const list of lists) {
    for (const g of (list && list.items) || []) {
      const v = (g.versions || [])[0];
      for (const r of (v && v.resources) || []) {
        if (!r.responseKind || !r.responseKind.kind) continue;
        out.push({
          kind: r.responseKind.kind,
          group: g.metadata && g.metadata.name ? g.metadata.name : "",
          resource: r.resource,
          singular: r.singularResource || "",
          shortNames: r.shortNames || [],
          namespaced: r.scope === "Namespaced",
        });
      }
    }
  }
  return out;
}

// resolveKind finds what a user's kind names (pod, pods, po, Pod,
// deployment.apps, as kubectl accepts them) among the discovered
// resources: {kind, namespaced}, or null when nothing matches.
export function resolveKind(arg, resources) {
  const [name, ...groupParts] = String(arg).split(".");
  const group = groupParts.join(".");
  const lower = name.toLowerCase();
  const inGroup = (r) => !groupParts.length || r.group === group;
  const tests = [
    (r) => r.kind === name,
    (r) => r.resource === lower || r.singular === lower,
    (r) => r.shortNames.includes(lower),
    (r) => r.kind.toLowerCase() === lower,
  ];
  for (const test of tests) {
    const r = resources.find((r) => inGroup(r) && test(r));
    if (r) return { kind: r.kind, namespaced: r.namespaced };
  }
  return null;
}

// guessKind is the kind a user's word names when discovery cannot tell
// (refused, or a kind it does not list): the word with a capital first
// letter (pod: Pod, deployment: Deployment; short names and plurals need
// discovery).
export function guessKind(arg) {
  const s = String(arg);
  return s.charAt(0).toUpperCase() + s.slice(1);
}

// parseTime reads an API timestamp (RFC 3339, with up to nanoseconds) as
// milliseconds since the epoch, or NaN.
export function parseTime(s) {
  if (!s) return NaN;
  // Date.parse takes at most milliseconds in the fraction everywhere.
  return Date.parse(String(s).replace(/(\.\d{3})\d+/, "$1"));
}

// rowOf reads an events.k8s.io/v1 event of either style, new (eventTime,
// series) or legacy (deprecated first and last timestamps and count), as
// evctl's newRow does: when it first and last happened, how often, and
// for a series its state.
export function rowOf(ev) {
  let first = parseTime(ev.eventTime);
  if (isNaN(first)) first = parseTime(ev.deprecatedFirstTimestamp);
  if (isNaN(first)) first = parseTime(ev.metadata && ev.metadata.creationTimestamp);
  let last = first;
  const dl = parseTime(ev.deprecatedLastTimestamp);
  if (!isNaN(dl)) last = dl;
  let count = ev.deprecatedCount > 1 ? ev.deprecatedCount : 1;
  let state = "";
  if (ev.series) {
    count = ev.series.count;
    const lo = parseTime(ev.series.lastObservedTime);
    if (!isNaN(lo)) last = lo;
    const annotations = (ev.metadata && ev.metadata.annotations) || {};
    state = SERIES_STATES.includes(annotations[SERIES_STATE_ANNOTATION]) ? annotations[SERIES_STATE_ANNOTATION] : "unknown";
  }
  if (last < first) last = first;
  // A legacy count (core/v1's count, no series) has no state: it is not
  // a series any recorder keeps going, only how often it happened.
  const series = !!ev.series || count > 1;
  return {
    ev,
    uid: (ev.metadata && ev.metadata.uid) || "",
    key: `${ev.metadata && ev.metadata.namespace}/${ev.metadata && ev.metadata.name}`,
    type: ev.type || "Normal",
    reason: ev.reason || "",
    first,
    last,
    count,
    series,
    state,
  };
}

// sameObject reports whether ref is the target t: kind and name, and the
// namespace when t has one.
function sameObject(ref, t) {
  return !!ref && ref.kind === t.kind && ref.name === t.name && (!t.namespace || ref.namespace === t.namespace);
}

// involvement says how ev concerns t: "regarding", "related" or "".
export function involvement(ev, t) {
  if (sameObject(ev.regarding, t)) return "regarding";
  if (sameObject(ev.related, t)) return "related";
  return "";
}

// escapeFieldValue escapes a value for a field selector term as
// apimachinery's fields.EscapeValue does (\ , and = get a backslash), so
// that the server reads it back as the same value: an object named "a=b"
// or "x,type=Warning" is one value, not a broken or an extra term.
export function escapeFieldValue(v) {
  return String(v).replace(/[\\,=]/g, (c) => "\\" + c);
}

// involvesSelector is eventsd's one-query field selector for t's events,
// its values escaped.
export function involvesSelector(t) {
  const terms = [`involves.kind=${escapeFieldValue(t.kind)}`, `involves.name=${escapeFieldValue(t.name)}`];
  if (t.namespace) terms.push(`involves.namespace=${escapeFieldValue(t.namespace)}`);
  return terms.join(",");
}

// isUnsupportedField reports whether an answer (its HTTP status and its
// Status body) is a server refusing a field label, as kube-apiserver does
// for eventsd's extensions: the page then joins on the client.
export function isUnsupportedField(code, status) {
  return code === 400 && !!status && /field label not supported/.test(status.message || "");
}

// compareRows orders rows by first occurrence, then last, then key.
export function compareRows(a, b) {
  return a.first - b.first || a.last - b.last || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
}

// compareRevisions orders resourceVersions: numerically when both are
// numbers (eventsd's and etcd's are), else as strings.
export function compareRevisions(a, b) {
  if (/^\d+$/.test(a) && /^\d+$/.test(b)) {
    const x = BigInt(a), y = BigInt(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  return a < b ? -1 : a > b ? 1 : 0;
}

// EventStore holds the events of a list kept current by a watch. Each
// change is applied once: a change whose resourceVersion is not newer than
// what the store has for that uid (a duplicate after a reconnect) is
// ignored, and a deleted event is remembered so that a late replay does
// not bring it back.
export class EventStore {
  constructor() {
    this.reset([], "");
  }

  // reset replaces everything with a list's items and resourceVersion.
  reset(items, rv) {
    this.byUID = new Map();
    this.deleted = new Map();
    this.rv = rv || "";
    this.version = (this.version || 0) + 1;
    for (const ev of items) this.byUID.set(ev.metadata.uid, ev);
  }

  // apply applies a watch event; it returns whether anything changed.
  apply(type, obj) {
    const md = (obj && obj.metadata) || {};
    if (type === "BOOKMARK") {
      this.advance(md.resourceVersion);
      return false;
    }
    if (type !== "ADDED" && type !== "MODIFIED" && type !== "DELETED") return false;
    this.advance(md.resourceVersion);
    const uid = md.uid;
    const rv = md.resourceVersion || "";
    const have = this.byUID.get(uid);
    const gone = this.deleted.get(uid);
    if (have && compareRevisions(rv, have.metadata.resourceVersion || "") <= 0) return false;
    if (gone !== undefined && compareRevisions(rv, gone) <= 0) return false;
    if (type === "DELETED") {
      this.byUID.delete(uid);
      this.deleted.set(uid, rv);
    } else {
      this.byUID.set(uid, obj);
      this.deleted.delete(uid);
    }
    this.version++;
    return true;
  }

  // advance moves the resourceVersion to resume a watch from forward.
  advance(rv) {
    if (rv && (!this.rv || compareRevisions(rv, this.rv) > 0)) this.rv = rv;
  }

  get size() {
    return this.byUID.size;
  }

  events() {
    return [...this.byUID.values()];
  }
}

// LineSplitter cuts a watch stream's text into its JSON lines, whatever
// the chunks it arrives in.
export class LineSplitter {
  constructor() {
    this.rest = "";
  }

  // push takes a chunk and returns the complete, non-empty lines in it.
  push(chunk) {
    const parts = (this.rest + chunk).split("\n");
    this.rest = parts.pop();
    return parts.filter((l) => l.trim() !== "");
  }
}

// windowFor is the time range [from, to] a zoom shows at now: the zoom's
// length ending now, or for "all" from the first occurrence to the later
// of now and the last.
export function windowFor(zoom, now, rows) {
  const len = ZOOMS[zoom];
  if (len) return { from: now - len, to: now };
  let from = now, to = now;
  for (const r of rows) {
    if (r.first < from) from = r.first;
    if (r.last > to) to = r.last;
  }
  if (to - from < MINUTE) from = to - MINUTE;
  const pad = (to - from) * 0.02;
  return { from: from - pad, to: to + pad };
}

// LAYOUT defaults: items closer than bucketPx merge (marks into one mark
// with a count), at most maxTracks rows of bars per lane.
export const LAYOUT = { bucketPx: 8, maxTracks: 4 };

// laneKey groups events into a lane: the object's role in them, type,
// reason, and the other object.
function counterpartOf(ev, role) {
  return role === "regarding" ? ev.related || null : ev.regarding || null;
}

// layoutTimeline places t's events (rows of rowOf with their role) on a
// time axis of width pixels between from and to. Events are grouped into
// lanes (role, type, reason, other object), ordered by first occurrence;
// within a lane, series wide enough are bars (packed into at most
// maxTracks tracks), and singletons and narrow series falling within
// bucketPx of each other are merged into one mark that counts them, so the
// number of items drawn is bounded by the width, not by the events.
export function layoutTimeline(events, t, opts) {
  const { from, to, width } = opts;
  const bucketPx = opts.bucketPx || LAYOUT.bucketPx;
  const maxTracks = opts.maxTracks || LAYOUT.maxTracks;
  const span = Math.max(1, to - from);
  const px = (ms) => ((ms - from) / span) * width;
  const lanes = new Map();
  let shown = 0, hidden = 0;
  for (const ev of events) {
    const role = involvement(ev, t);
    if (!role) continue;
    const r = rowOf(ev);
    if ((opts.warningsOnly && r.type !== "Warning") || r.last < from || r.first > to) {
      hidden++;
      continue;
    }
    shown++;
    r.role = role;
    const other = counterpartOf(ev, role);
    const key = [role, r.type, r.reason, other ? `${other.namespace || ""}/${other.kind}/${other.name}` : ""].join("|");
    let lane = lanes.get(key);
    if (!lane) {
      lane = { key, role, type: r.type, reason: r.reason, counterpart: other, first: r.first, rows: [] };
      lanes.set(key, lane);
    }
    lane.rows.push(r);
    if (r.first < lane.first) lane.first = r.first;
  }
  const out = [...lanes.values()];
  out.sort((a, b) => a.first - b.first || (a.key < b.key ? -1 : 1));
  for (const lane of out) {
    lane.rows.sort(compareRows);
    Object.assign(lane, layoutItems(lane.rows, px, width, bucketPx, maxTracks));
  }
  return { lanes: out, shown, hidden };
}

// layoutItems lays out one lane's rows (in time order) on a track of width
// pixels, px mapping a time to its x: series wide enough are bars (packed
// into at most maxTracks tracks), singletons and narrow series within
// bucketPx of each other merge into one mark that counts them. It returns
// {items, tracks, total}.
function layoutItems(rows, px, width, bucketPx, maxTracks) {
  const items = [];
  const trackEnds = [];
  const points = [];
  for (const r of rows) {
    const x1 = Math.max(0, px(r.first));
    const x2 = Math.min(width, px(r.last));
    if (r.series && x2 - x1 >= bucketPx) {
      let track = trackEnds.findIndex((end) => end < x1);
      if (track < 0) track = trackEnds.length < maxTracks ? trackEnds.length : maxTracks - 1;
      trackEnds[track] = x2;
      items.push({ kind: "bar", x: x1, w: x2 - x1, track, rows: [r], type: r.type, count: r.count, state: r.state, first: r.first, last: r.last });
    } else {
      points.push({ r, x: (x1 + x2) / 2 });
    }
  }
  // Merge points by pixel bucket: rows are in time order, so each
  // bucket's points are consecutive.
  let cur = null;
  for (const p of points) {
    const b = Math.floor(p.x / bucketPx);
    if (cur && cur.bucket === b) {
      cur.rows.push(p.r);
      continue;
    }
    cur = { bucket: b, rows: [p.r], x: p.x };
    items.push(cur);
  }
  for (const it of items) {
    if (it.kind) continue;
    delete it.bucket;
    const rs = it.rows;
    it.first = rs[0].first;
    it.last = Math.max(...rs.map((r) => r.last));
    it.count = rs.reduce((n, r) => n + r.count, 0);
    it.type = rs.some((r) => r.type === "Warning") ? "Warning" : "Normal";
    if (rs.length > 1) {
      it.kind = "agg";
      it.x = (Math.max(0, px(it.first)) + Math.min(width, px(it.last))) / 2;
    } else if (rs[0].series) {
      it.kind = "bar";
      it.x = Math.max(0, px(rs[0].first));
      it.w = Math.max(0, Math.min(width, px(rs[0].last)) - it.x);
      it.track = 0;
      it.state = rs[0].state;
    } else {
      it.kind = "mark";
    }
  }
  items.sort((a, b) => a.first - b.first || a.x - b.x);
  return { items, tracks: Math.max(1, trackEnds.length), total: rows.reduce((n, r) => n + r.count, 0) };
}

// ticks are the time axis' labelled positions: about one per 100 px, at
// round intervals.
const SECOND = 1000;
const TICK_STEPS = [SECOND, 2 * SECOND, 5 * SECOND, 10 * SECOND, 15 * SECOND, 30 * SECOND, MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 15 * MINUTE, 30 * MINUTE, HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, 24 * HOUR, 2 * 24 * HOUR, 7 * 24 * HOUR];

export function timeTicks(from, to, width) {
  const want = Math.max(1, Math.floor(width / 100));
  const span = to - from;
  const step = TICK_STEPS.find((s) => span / s <= want) || TICK_STEPS[TICK_STEPS.length - 1];
  const out = [];
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) {
    const d = new Date(t);
    const hm = d.toISOString().slice(11, 16);
    const label = step >= 24 * HOUR ? d.toISOString().slice(5, 10) : step < MINUTE ? d.toISOString().slice(11, 19) : hm;
    out.push({ x: ((t - from) / span) * width, t, label });
  }
  return out;
}

// overview counts, from a list of events, each namespace's events and
// Warning occurrences in the last hour, and the objects (regarding) with
// the most Warning occurrences in the last hour (each with its cluster,
// when the events were read across a fleet's clusters).
export function overview(events, now, opts = {}) {
  const since = now - OVERVIEW_WINDOW;
  const namespaces = new Map();
  const objects = new Map();
  for (const ev of events) {
    const r = rowOf(ev);
    const ns = (ev.metadata && ev.metadata.namespace) || "";
    let n = namespaces.get(ns);
    if (!n) namespaces.set(ns, (n = { name: ns, events: 0, warnings: 0 }));
    n.events++;
    if (r.type !== "Warning" || r.last < since) continue;
    n.warnings += r.count;
    if (opts.namespace && ns !== opts.namespace) continue;
    const reg = ev.regarding || {};
    // Across a fleet's clusters, same-named objects of two clusters are two.
    const cluster = clusterOfEvent(ev);
    const key = `${cluster}/${reg.namespace || ""}/${reg.kind}/${reg.name}`;
    let o = objects.get(key);
    if (!o) objects.set(key, (o = { cluster, namespace: reg.namespace || "", kind: reg.kind, name: reg.name, warnings: 0, last: 0, reason: "" }));
    o.warnings += r.count;
    if (r.last >= o.last) {
      o.last = r.last;
      o.reason = r.reason;
    }
  }
  let ns = [...namespaces.values()];
  if (opts.warningsOnly) ns = ns.filter((n) => n.warnings > 0);
  ns.sort((a, b) => (a.name < b.name ? -1 : 1));
  const top = [...objects.values()].sort((a, b) => b.warnings - a.warnings || b.last - a.last);
  return { namespaces: ns, objects: top.slice(0, opts.top || 20) };
}

// The page's state in its URL's query: the object shown (namespace/Kind/
// name, Kind resolved), the zoom, the warnings-only toggle, the overview's
// namespace, the selected event's uid, the view (object or family; empty
// for the kind's default, viewFor) and the family's Nodes toggle. Never
// the token.
export function stateFromURL(search) {
  const q = new URLSearchParams(search);
  const zoom = q.get("zoom");
  return {
    object: q.get("object") || "",
    zoom: zoom in ZOOMS ? zoom : DEFAULT_ZOOM,
    warnings: q.get("warnings") === "1",
    namespace: q.get("ns") || "",
    event: q.get("event") || "",
    view: VIEWS.includes(q.get("view")) ? q.get("view") : "",
    nodes: q.get("nodes") === "1",
  };
}

export function stateToURL(s) {
  const q = new URLSearchParams();
  if (s.object) q.set("object", s.object);
  if (s.zoom && s.zoom !== DEFAULT_ZOOM) q.set("zoom", s.zoom);
  if (s.warnings) q.set("warnings", "1");
  if (s.namespace && !s.object) q.set("ns", s.namespace);
  if (s.event && s.object) q.set("event", s.event);
  if (s.view && s.object) q.set("view", s.view);
  if (s.nodes && s.object) q.set("nodes", "1");
  const str = q.toString();
  return str ? "?" + str : "";
}

// describe is a one-line summary of an item for labels and tooltips.
export function describe(item) {
  const r = item.rows[0];
  const when = (ms) => new Date(ms).toISOString().replace(".000Z", "Z");
  if (item.kind === "agg") {
    return `${item.rows.length} events (${item.count} occurrences) from ${when(item.first)} to ${when(item.last)}`;
  }
  if (item.kind === "bar") {
    return `${r.type} ${r.reason}: ×${r.count}${r.state ? " " + r.state : ""} from ${when(r.first)} to ${when(r.last)}`;
  }
  return `${r.type} ${r.reason} at ${when(r.first)}`;
}

// ---------------------------------------------------------------------
// The family view: an object and everything it owns, one lane each, from
// eventsd's lineage (events.kubevents.io/v1 lineages) and the events of
// its family.* field selector.

// VIEWS are the timeline's views: the object's own events, or its family.
export const VIEWS = ["object", "family"];

// OWNER_KINDS are the kinds whose timeline opens on their family: the
// workloads that own other objects.
export const OWNER_KINDS = ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob"];

// viewFor is the view shown for kind: the one asked for, else the family
// for kinds that own things and the object's own events for the rest.
export function viewFor(asked, kind) {
  if (VIEWS.includes(asked)) return asked;
  return OWNER_KINDS.includes(kind) ? "family" : "object";
}

// familySelector is eventsd's field selector for t's family (with the
// Nodes its Pods ran on when withNodes), its values escaped.
export function familySelector(t, withNodes) {
  const terms = [`family.kind=${escapeFieldValue(t.kind)}`, `family.name=${escapeFieldValue(t.name)}`];
  if (t.namespace) terms.push(`family.namespace=${escapeFieldValue(t.namespace)}`);
  if (withNodes) terms.push("family.withNodes=true");
  return terms.join(",");
}

// refKey names an object by kind, namespace and name; uidKey by uid.
const refKey = (r) => `${r.kind || ""}/${r.namespace || ""}/${r.name || ""}`;

// lineageHas returns whether an object reference (by uid, else by kind,
// namespace and name) is among a LineageList's items.
export function lineageHas(items) {
  const uids = new Set(), refs = new Set();
  for (const it of items || []) {
    const o = it.object || {};
    if (o.uid) uids.add(o.uid);
    refs.add(refKey(o));
  }
  return (ref) => !!ref && ((!!ref.uid && uids.has(ref.uid)) || refs.has(refKey(ref)));
}

// familyTree reads a LineageList's items (in tree order: the root, then
// depth first with owners before what they own, then Nodes) as the lanes'
// objects: {key, ref, kind, depth, deleted, firstSeen, lastSeen, node,
// group}. An object's depth is one more than its first owner's in the list
// (0 for the root, for an object whose owners are not listed, and for
// Nodes, which are grouped apart: group "node").
export function familyTree(items) {
  const depthOf = new Map();
  const out = [];
  for (const it of items || []) {
    const ref = it.object || {};
    const key = ref.uid || (it.metadata && it.metadata.name) || refKey(ref);
    const isNode = ref.kind === "Node" && !(it.owners || []).length;
    let depth = 0;
    if (!isNode) {
      for (const o of it.owners || []) {
        if (o.uid && depthOf.has(o.uid)) {
          depth = depthOf.get(o.uid) + 1;
          break;
        }
      }
    }
    if (ref.uid) depthOf.set(ref.uid, depth);
    out.push({
      key, ref, kind: ref.kind || "", depth, deleted: !!it.deleted,
      firstSeen: parseTime(it.firstSeen), lastSeen: parseTime(it.lastSeen), node: it.node || "",
      group: isNode ? "node" : "family",
    });
  }
  return out;
}

// layoutFamily places a family's events on one lane per object of
// familyTree(lineage), in its order, on a time axis of width pixels
// between from and to. An event belongs to the lane of its regarding
// object (by uid, else by kind, namespace and name), else of its related
// one; events about objects the lineage does not list get lanes of their
// own after the family's (group "other", in order of first occurrence).
// Each lane has its items as layoutTimeline's, and life: the pixels from
// when its object was first seen to when it was deleted (or the window's
// end), clipped to the window, or null outside it.
export function layoutFamily(lineage, events, opts) {
  const { from, to, width } = opts;
  const bucketPx = opts.bucketPx || LAYOUT.bucketPx;
  const maxTracks = opts.maxTracks || LAYOUT.maxTracks;
  const span = Math.max(1, to - from);
  const px = (ms) => ((ms - from) / span) * width;
  const lanes = familyTree(lineage).map((o) => ({ ...o, rows: [] }));
  const byUID = new Map(), byRef = new Map();
  for (const l of lanes) {
    if (l.ref.uid && !byUID.has(l.ref.uid)) byUID.set(l.ref.uid, l);
    if (!byRef.has(refKey(l.ref))) byRef.set(refKey(l.ref), l);
  }
  const laneOf = (ref) => ref && ((ref.uid && byUID.get(ref.uid)) || byRef.get(refKey(ref)));
  const others = new Map();
  let shown = 0, hidden = 0;
  for (const ev of events) {
    const r = rowOf(ev);
    if ((opts.warningsOnly && r.type !== "Warning") || r.last < from || r.first > to) {
      hidden++;
      continue;
    }
    shown++;
    let lane = laneOf(ev.regarding) || laneOf(ev.related);
    r.role = lane && laneOf(ev.regarding) === lane ? "regarding" : lane ? "related" : "regarding";
    if (!lane) {
      const ref = ev.regarding || {};
      const key = "other:" + refKey(ref);
      lane = others.get(key);
      if (!lane) {
        lane = { key, ref, kind: ref.kind || "", depth: 0, deleted: false, firstSeen: NaN, lastSeen: NaN, node: "", group: "other", rows: [], first: r.first };
        others.set(key, lane);
      }
      if (r.first < lane.first) lane.first = r.first;
    }
    lane.rows.push(r);
  }
  const rest = [...others.values()].sort((a, b) => a.first - b.first || (a.key < b.key ? -1 : 1));
  const out = [...lanes, ...rest];
  for (const lane of out) {
    lane.rows.sort(compareRows);
    Object.assign(lane, layoutItems(lane.rows, px, width, bucketPx, maxTracks));
    lane.life = null;
    if (!isNaN(lane.firstSeen)) {
      const end = lane.deleted && !isNaN(lane.lastSeen) ? lane.lastSeen : to;
      if (end >= from && lane.firstSeen <= to) {
        lane.life = { x1: Math.max(0, px(lane.firstSeen)), x2: Math.min(width, px(end)), ended: lane.deleted && end <= to };
      }
    }
  }
  return { lanes: out, shown, hidden };
}

// familyWindow is windowFor for a family: "all" spans its events and when
// its objects were first seen (and, deleted, last seen) too.
export function familyWindow(zoom, now, rows, tree) {
  if (ZOOMS[zoom]) return windowFor(zoom, now, rows);
  const spans = rows.slice();
  for (const o of tree) {
    if (!isNaN(o.firstSeen)) spans.push({ first: o.firstSeen, last: o.deleted && !isNaN(o.lastSeen) ? o.lastSeen : o.firstSeen });
  }
  return windowFor(zoom, now, spans);
}

// MIN_SPAN is the narrowest window zooming in reaches.
export const MIN_SPAN = 10 * 1000;
// MAX_SPAN is the widest window zooming out reaches: a year.
export const MAX_SPAN = 365 * 24 * HOUR;

// clampSpan keeps a window between MIN_SPAN and MAX_SPAN wide, around its
// middle.
function clampSpan(from, to) {
  const span = to - from;
  if (span >= MIN_SPAN && span <= MAX_SPAN) return { from, to };
  const mid = (from + to) / 2;
  const w = Math.min(MAX_SPAN, Math.max(MIN_SPAN, span));
  return { from: mid - w / 2, to: mid + w / 2 };
}

// timeAt is the time at x pixels on a track of width showing win.
export function timeAt(win, width, x) {
  return win.from + (x / Math.max(1, width)) * (win.to - win.from);
}

// zoomAround scales win by factor (below 1 zooms in) keeping the time at
// stays at the same place, within MIN_SPAN and MAX_SPAN.
export function zoomAround(win, at, factor) {
  if (!(factor > 0) || !isFinite(factor)) throw new Error(`zoom factor ${factor} is not a positive number`);
  const span = win.to - win.from;
  const w = Math.min(MAX_SPAN, Math.max(MIN_SPAN, span * factor));
  const k = span > 0 ? (at - win.from) / span : 0.5;
  return { from: at - k * w, to: at - k * w + w };
}

// wheelFactor is the zoom of a wheel's deltaY (pixels): each 100 px zoom
// out by a fifth, upwards zoom in as much.
export function wheelFactor(deltaY) {
  return Math.pow(1.2, Math.max(-10, Math.min(10, deltaY / 100)));
}

// rangeOfDrag is the window a drag from x1 to x2 on a track of width
// showing win selects, or null for a drag under minPx (a click).
export function rangeOfDrag(win, width, x1, x2, minPx = 4) {
  const a = Math.max(0, Math.min(width, Math.min(x1, x2)));
  const b = Math.max(0, Math.min(width, Math.max(x1, x2)));
  if (b - a < minPx) return null;
  return clampSpan(timeAt(win, width, a), timeAt(win, width, b));
}

// lineageWarnings reads the Warning headers of an answer (RFC 9111's
// 299 - "text", as apiserver writes them, comma-joined by fetch) as their
// texts.
export function lineageWarnings(header) {
  const out = [];
  const re = /\d{3}\s+\S+\s+"((?:[^"\\]|\\.)*)"/g;
  let m;
  while ((m = re.exec(header || ""))) out.push(m[1].replace(/\\(.)/g, "$1"));
  return out;
}

// ---------------------------------------------------------------------
// Clusters of a fleet: an eventsd serving several clusters serves each at
// /clusters/NAME/ and every one at once at /clusters/*/ (FLEET), each
// event there annotated with its cluster (CLUSTER_ANNOTATION). A page
// reads the cluster of its URL's cluster parameter, so that a link names
// the cluster.

// FLEET is the cluster name of every cluster at once.
export const FLEET = "*";

// CLUSTER_ANNOTATION is the annotation (eventapi.ClusterAnnotation) with
// an event's cluster, on the events read across clusters.
export const CLUSTER_ANNOTATION = "events.kubevents.io/cluster";

// clusterFromURL is the cluster a page's URL names ("" for the server's
// root).
export function clusterFromURL(search) {
  return (new URLSearchParams(search).get("cluster") || "").trim();
}

// clusterPrefix is the API paths' prefix of cluster: "" for the root,
// /clusters/NAME for a cluster, /clusters/* for every cluster.
export function clusterPrefix(cluster) {
  return cluster ? `/clusters/${encodeURIComponent(cluster)}` : "";
}

// withCluster returns query ("" or "?..."), a page's state in its URL,
// naming cluster too (last), or no cluster for "".
export function withCluster(query, cluster) {
  const q = new URLSearchParams(query);
  q.delete("cluster");
  if (cluster) q.set("cluster", cluster);
  const str = q.toString();
  return str ? "?" + str : "";
}

// clusterOfEvent is the cluster an event read across clusters names, ""
// for another.
export function clusterOfEvent(ev) {
  return (ev && ev.metadata && ev.metadata.annotations && ev.metadata.annotations[CLUSTER_ANNOTATION]) || "";
}
