// The page: overview, object timeline, family timeline, live updates. The logic it relies
// on is in model.js; this file draws and wires the DOM.

import { API, ApiError } from "./api.js";
import { $, askToken, el, errorText, follow, iso, setupClusterPicker, svg } from "./page.js";
import {
  DEFAULT_ZOOM, EventStore, FLEET, ZOOMS, clusterFromURL, clusterOfEvent, clusterPrefix, describe, familySelector, familyTree,
  familyWindow, formatTarget, guessKind, involvement, involvesSelector, isUnsupportedField, layoutFamily, layoutTimeline, lineageHas,
  objectRef, overview, parseDiscovery, parseTarget, rangeOfDrag, resolveKind, rowOf, stateFromURL, stateToURL, timeAt, timeTicks,
  viewFor, wheelFactor, windowFor, withCluster, zoomAround,
} from "./model.js";

// TRACK_HEIGHT is the height of one row of bars in a lane, in pixels.
const TRACK_HEIGHT = 24;
// LANE_LIMIT lanes are drawn at first; more on request.
const LANE_LIMIT = 200;
// DETAIL_LIMIT events of a selected mark are shown in full.
const DETAIL_LIMIT = 50;
// OVERVIEW_MAX_ITEMS bounds the events the overview reads.
const OVERVIEW_MAX_ITEMS = 20000;
// TICK re-draws the timeline so that its window follows the clock.
const TICK = 10000;
// LINEAGE_REFRESH is the least time between two reads of a family's
// lineage when its events name objects it does not list yet.
const LINEAGE_REFRESH = 2000;
// FAMILY_INDENT is how far each level of ownership is indented, in pixels.
const FAMILY_INDENT = 18;

// showTokenState shows "Forget token" only while the tab keeps a token.
function showTokenState() {
  $("#forget-token").hidden = !api.token;
}

// cluster is the cluster of a fleet the page reads (its URL's cluster
// parameter): "" for the server's root, FLEET for every cluster at once,
// where a family cannot be shown (it is one cluster's).
const cluster = clusterFromURL(location.search);
const api = new API(askToken, showTokenState, clusterPrefix(cluster));
let state = stateFromURL(location.search);

// pageURL is the page's URL for state s, in the page's cluster.
function pageURL(s) {
  return location.pathname + withCluster(stateToURL(s), cluster);
}
let session = null;
let resources = null;

function setStatus(msg, isError) {
  const s = $("#status");
  s.textContent = msg;
  s.classList.toggle("error", !!isError);
}

// navigate changes the page's state, in the URL (a new history entry
// unless replace) and on the page.
function navigate(changes, replace) {
  const next = { ...state, ...changes };
  const url = pageURL(next);
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  const reload = next.object !== state.object || next.warnings !== state.warnings && !next.object || next.namespace !== state.namespace ||
    next.view !== state.view || next.nodes !== state.nodes;
  state = next;
  show(reload);
}

window.addEventListener("popstate", () => {
  state = stateFromURL(location.search);
  show(true);
});

// objectLink is a link to an object's timeline that the page follows
// itself (a real href, so it can be opened elsewhere or copied).
// An object of another cluster (ref.cluster, read across a fleet's
// clusters) is linked to its timeline in its own cluster: another load
// of the page.
function objectLink(ref, cls) {
  const object = formatTarget({ namespace: ref.namespace || "", kind: ref.kind, name: ref.name });
  const s = { ...state, object, event: "", view: "" };
  if (ref.cluster && ref.cluster !== cluster) {
    return el("a", { href: location.pathname + withCluster(stateToURL(s), ref.cluster), class: cls || "", "data-ref": object }, objectRef(ref));
  }
  // The linked object opens in its kind's default view.
  const a = el("a", { href: pageURL(s), class: cls || "", "data-ref": object }, objectRef(ref));
  if (ref.namespace) a.title = `${ref.namespace}/${objectRef(ref)}`;
  a.addEventListener("click", (e) => {
    if (e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey) return;
    e.preventDefault();
    navigate({ object, event: "", view: "" });
  });
  return a;
}

// discover reads aggregated discovery (once it has worked), to resolve
// kinds the way kubectl does (pod, po, pods: Pod); without it kinds are
// taken as typed.
async function discover() {
  if (resources) return resources;
  const accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
  try {
    const [core, groups] = await Promise.all([api.json("/api", { accept }), api.json("/apis", { accept })]);
    resources = parseDiscovery(core, groups);
    return resources;
  } catch (err) {
    return [];
  }
}

async function resolve(text) {
  const t = parseTarget(text);
  const k = resolveKind(t.kind, await discover());
  if (k) {
    t.kind = k.kind;
    if (!k.namespaced) t.namespace = "";
  } else {
    t.kind = guessKind(t.kind);
  }
  return t;
}

// ---------------------------------------------------------------------
// Overview

async function showOverview() {
  $("#timeline").hidden = true;
  const view = $("#overview");
  view.hidden = false;
  view.dataset.status = "loading";
  document.title = "Events overview · kubevents";
  try {
    const { items, truncated } = await api.list("", state.warnings ? "type=Warning" : "", { maxItems: OVERVIEW_MAX_ITEMS });
    const o = overview(items, Date.now(), { warningsOnly: state.warnings, namespace: state.namespace });
    const nsBody = $("#namespaces tbody");
    nsBody.replaceChildren(...o.namespaces.map((n) => {
      const a = el("a", { href: pageURL({ ...state, object: "", namespace: n.name }) }, n.name || "(cluster)");
      a.addEventListener("click", (e) => { e.preventDefault(); navigate({ namespace: n.name === state.namespace ? "" : n.name }); });
      return el("tr", { class: n.name === state.namespace ? "current" : "" }, el("td", {}, a), el("td", { class: "num" }, String(n.events)), el("td", { class: "num" }, String(n.warnings)));
    }));
    const objBody = $("#top-objects tbody");
    objBody.replaceChildren(...o.objects.map((x) => el("tr", {},
      cluster === FLEET ? el("td", { class: "cluster" }, x.cluster) : null,
      el("td", {}, x.namespace), el("td", {}, objectLink(x)), el("td", { class: "num" }, String(x.warnings)),
      el("td", {}, x.reason), el("td", {}, iso(x.last)))));
    $("#top-empty").hidden = o.objects.length > 0;
    $("#overview-scope").textContent = (state.namespace ? `in namespace ${state.namespace}` : "in all namespaces") +
      (cluster === FLEET ? " of every cluster" : "");
    $("#overview-note").textContent = truncated ? `Counted over the first ${items.length} events only.` : `${items.length} events read.`;
    view.dataset.status = "ready";
    setStatus("");
  } catch (err) {
    view.dataset.status = "error";
    setStatus(`Reading events failed: ${errorText(err)}`, true);
  }
}

// ---------------------------------------------------------------------
// Timeline

// TimelineSession lists an object's events (or, family, those of its
// family, with the family's objects from eventsd's lineages) and keeps them
// current with a watch from the list's resourceVersion: after an error it
// resumes from the last resourceVersion seen (or lists again when the
// server no longer has it, 410), and the store applies each change once.
// A family's lineage is read again when an event names an object it does
// not list yet, and on the page's tick (deletions).
class TimelineSession {
  constructor(target, onChange, family, withNodes) {
    this.target = target;
    this.onChange = onChange;
    this.family = !!family;
    this.withNodes = !!withNodes;
    this.lineage = [];
    this.warnings = [];
    this.knows = lineageHas([]);
    this.store = new EventStore();
    this.abort = new AbortController();
    this.mode = "extensions";
    this.namespace = "";
    this.live = "connecting";
  }

  stop() {
    this.abort.abort();
  }

  selector() {
    if (this.family) return familySelector(this.target, this.withNodes);
    return this.mode === "extensions" ? involvesSelector(this.target) : "";
  }

  // list reads the target's events: one involves.* query on eventsd; on a
  // server that refuses it (400), every event, joined here, as evctl does.
  // A family is read with the family.* selector, after its lineage; a
  // server without them is an error the page shows.
  async list() {
    const t = this.target;
    for (;;) {
      try {
        if (this.family) await this.readLineage();
        const l = await api.list(this.namespace, this.selector(), { signal: this.abort.signal });
        this.store.reset(this.family ? l.items : l.items.filter((ev) => involvement(ev, t)), l.rv);
        this.listed = true;
        return;
      } catch (err) {
        if (this.family && err instanceof ApiError && (err.code === 404 || isUnsupportedField(err.code, err.status))) {
          throw new Error(`this server has no family view (eventsd's lineages and family.* selectors): ${errorText(err)}; the Object view shows the object's own events`);
        }
        if (this.mode === "extensions" && err instanceof ApiError && isUnsupportedField(err.code, err.status)) {
          this.mode = "client-join";
          continue;
        }
        if (err instanceof ApiError && err.code === 403 && !this.namespace && t.namespace) {
          // Not allowed across namespaces: the target's namespace only.
          this.namespace = t.namespace;
          continue;
        }
        throw err;
      }
    }
  }

  // readLineage reads the family's objects and the server's warnings.
  async readLineage() {
    const l = await api.lineages(this.namespace, this.selector(), { signal: this.abort.signal });
    this.lineage = l.items;
    this.warnings = l.warnings;
    this.knows = lineageHas(l.items);
  }

  // refreshLineage reads the lineage again, at most once per
  // LINEAGE_REFRESH, and repaints; a failure keeps what the page has.
  refreshLineage() {
    if (!this.family || !this.listed || this.abort.signal.aborted) return;
    if (this.refreshing) {
      this.again = true;
      return;
    }
    this.refreshing = (async () => {
      try {
        await this.readLineage();
        this.onChange();
      } catch (err) {
        // Kept as it was; the next tick tries again.
      }
      await new Promise((r) => setTimeout(r, LINEAGE_REFRESH));
      this.refreshing = null;
      if (this.again) {
        this.again = false;
        this.refreshLineage();
      }
    })();
  }

  async run() {
    await this.list();
    this.onChange();
    await follow({
      signal: this.abort.signal,
      setLive: (s) => this.setLive(s),
      watch: (onEvent) => api.watch(this.namespace, this.selector(), this.store.rv, onEvent, this.abort.signal),
      onEvent: (e) => {
        const obj = e.object;
        if (!this.family && this.mode !== "extensions" && e.type !== "BOOKMARK" && !involvement(obj, this.target) && !this.store.byUID.has(obj.metadata.uid)) {
          this.store.advance(obj.metadata.resourceVersion);
          return;
        }
        // An object that joined the family: its lane comes with the
        // lineage read again.
        if (this.family && e.type !== "BOOKMARK" && !this.knows(obj.regarding) && !this.knows(obj.related)) this.refreshLineage();
        if (this.store.apply(e.type, obj)) this.onChange();
      },
      relist: async () => {
        await this.list();
        this.onChange();
      },
    });
  }

  setLive(s) {
    if (this.abort.signal.aborted) return;
    this.live = s;
    const v = $("#timeline");
    v.dataset.live = s.split(" ")[0];
    $("#live").textContent = s === "watching" ? "live" : s;
  }
}

let renderTimer = null;
function scheduleRender() {
  if (renderTimer) return;
  renderTimer = setTimeout(() => {
    renderTimer = null;
    renderTimeline();
  }, 30);
}
setInterval(() => {
  if (!session) return;
  scheduleRender();
  session.refreshLineage();
}, TICK);
window.addEventListener("resize", scheduleRender);

let laneLimit = LANE_LIMIT;
// zoomRange is the family view's window zoomed by drag, wheel or the zoom
// buttons ({from, to}), or null for the time window's; shown is the window
// and track width last drawn, which the zooms start from.
let zoomRange = null;
let shown = null;
// timelineGen tells the latest showTimeline from earlier ones still
// waiting for discovery.
let timelineGen = 0;

async function showTimeline() {
  $("#overview").hidden = true;
  const view = $("#timeline");
  view.hidden = false;
  view.dataset.status = "loading";
  if (session) session.stop();
  session = null;
  laneLimit = LANE_LIMIT;
  zoomRange = null;
  const gen = ++timelineGen;
  $("#lanes").replaceChildren();
  $("#details").replaceChildren(el("p", { class: "hint" }, "Hover over, focus or click an event to see it in full."));
  let target;
  try {
    target = await resolve(state.object);
  } catch (err) {
    if (gen !== timelineGen) return;
    view.dataset.status = "error";
    setStatus(errorText(err), true);
    return;
  }
  if (gen !== timelineGen) return;
  const resolved = formatTarget(target);
  if (resolved !== state.object) {
    state = { ...state, object: resolved };
    history.replaceState(null, "", pageURL(state));
  }
  $("#search").value = resolved;
  $("#object-title").textContent = (target.namespace ? target.namespace + "/" : "") + objectRef(target);
  const family = cluster !== FLEET && viewFor(state.view, target.kind) === "family";
  view.dataset.view = family ? "family" : "object";
  $("#title-prefix").textContent = family ? "Family of" : "Timeline of";
  for (const b of document.querySelectorAll("#view button")) b.setAttribute("aria-pressed", String(b.dataset.view === view.dataset.view));
  $("#nodes").checked = state.nodes;
  $("#notice").hidden = true;
  document.title = `${objectRef(target)}${family ? " family" : ""} · kubevents`;
  const s = new TimelineSession(target, scheduleRender, family, state.nodes);
  session = s;
  try {
    const started = s.run();
    // Wait for the list before reporting readiness.
    while (s === session && !s.listed && !s.abort.signal.aborted) {
      await Promise.race([started, new Promise((r) => setTimeout(r, 20))]);
    }
    if (s !== session) return;
    setStatus("");
    renderTimeline();
    started.catch((err) => {
      if (s !== session) return;
      s.failed = true;
      view.dataset.status = "error";
      setStatus(`Reading events failed: ${errorText(err)}`, true);
    });
  } catch (err) {
    if (s !== session) return;
    s.failed = true;
    view.dataset.status = "error";
    setStatus(`Reading events failed: ${errorText(err)}`, true);
  }
}

function renderZoom() {
  for (const b of document.querySelectorAll("#zoom button")) {
    b.setAttribute("aria-pressed", String(b.dataset.zoom === state.zoom));
  }
}

function trackWidth() {
  const lanes = $("#lanes");
  const label = parseFloat(getComputedStyle(document.documentElement).getPropertyValue("--label-width")) || 300;
  return Math.max(200, Math.floor(lanes.clientWidth - label - 8));
}

function renderTimeline() {
  if (!session || session.failed) return;
  if (session.family) {
    renderFamily();
    return;
  }
  const started = performance.now();
  const events = session.store.events();
  const target = session.target;
  const now = Date.now();
  const width = trackWidth();
  // "all" spans the times of the object's events.
  const win = windowFor(state.zoom, now, state.zoom === "all" ? events.filter((ev) => involvement(ev, target)).map(rowOf) : []);
  itemsByID = new Map();
  const lay = layoutTimeline(events, target, { from: win.from, to: win.to, width, warningsOnly: state.warnings });
  renderZoom();
  drawLanes(win, width, lay.lanes.slice(0, laneLimit).map((lane, li) => renderLane(lane, li, width)), lay.lanes.length);
  const total = lay.shown + lay.hidden;
  $("#summary").textContent = `${lay.shown} of ${total} events shown in ${lay.lanes.length} lanes` +
    (lay.hidden ? ` (${lay.hidden} outside the window${state.warnings ? " or not Warning" : ""})` : "") +
    (session.mode === "client-join" ? " · server without extensions: events joined in the page" : "");
  $("#empty").hidden = lay.lanes.length > 0;
  finishRender(started);
}

// drawLanes puts the time axis and the lanes drawn on the page (total
// lanes in all, a button drawing more), keeping the focus.
function drawLanes(win, width, laneEls, total) {
  shown = { win, width };
  const axis = svg("svg", { class: "axis", width, height: 22, "aria-hidden": "true" });
  for (const tk of timeTicks(win.from, win.to, width)) {
    axis.append(svg("line", { x1: tk.x, x2: tk.x, y1: 16, y2: 22 }));
    // Labels centred on their tick, kept inside the axis.
    const tx = svg("text", { x: Math.min(Math.max(tk.x, 16), width - 16), y: 12, "text-anchor": "middle" });
    tx.textContent = tk.label;
    axis.append(tx);
  }
  const header = el("div", { class: "lane axis-row" }, el("div", { class: "lane-label", title: `${iso(win.from)} – ${iso(win.to)}` }, "time (UTC)"), axis);
  const all = [header, ...laneEls];
  if (total > laneLimit) {
    const more = el("button", { type: "button", class: "more" }, `Show ${Math.min(LANE_LIMIT, total - laneLimit)} more of ${total - laneLimit} lanes`);
    more.addEventListener("click", () => { laneLimit += LANE_LIMIT; renderTimeline(); });
    all.push(more);
  }
  const focused = document.activeElement && document.activeElement.dataset && document.activeElement.dataset.id;
  $("#lanes").replaceChildren(...all);
  placeBarLabels(width);
  if (focused) {
    const again = document.querySelector(`#lanes [data-id="${CSS.escape(focused)}"]`);
    if (again) again.focus();
  }
  const view = $("#timeline");
  view.dataset.from = iso(win.from);
  view.dataset.to = iso(win.to);
}

// finishRender records what was drawn on the view (for tests) and
// restores the selection from the URL.
function finishRender(started) {
  const view = $("#timeline");
  view.dataset.mode = session.mode;
  view.dataset.events = String(session.store.size);
  view.dataset.status = "ready";
  view.dataset.version = String(session.store.version);

  // Restore the selection from the URL.
  if (state.event) {
    const item = document.querySelector(`#lanes .item[data-uids~="${CSS.escape(state.event)}"]`);
    if (item) {
      item.classList.add("selected");
      showDetails(itemsByID.get(item.dataset.id));
    }
  }
  view.dataset.renderMs = String(Math.round(performance.now() - started));
}

let itemsByID = new Map();

// BAR_LABEL_GAP is the space between a bar and its label, and inside a
// bar around it.
const BAR_LABEL_GAP = 4;

// placeBarLabels puts each series' label (×4 ongoing) where it is whole
// within the track's width: inside its bar when it fits there, else after
// the bar, else before it, else against the track's right edge. Labels are
// measured, so a long count or a wide zoom, where a recent series is a
// sliver at the right edge, does not push its label past the edge.
function placeBarLabels(width) {
  for (const text of document.querySelectorAll("#lanes .item.bar text.bar-label")) {
    const x = +text.dataset.barX, w = +text.dataset.barW;
    const len = text.getComputedTextLength();
    let at = x + w + BAR_LABEL_GAP, anchor = "start", inside = false;
    // Inside, the label is bold: a tenth longer than measured here.
    if (1.1 * len + 2 * BAR_LABEL_GAP <= w) {
      at = x + BAR_LABEL_GAP;
      inside = true;
    } else if (at + len > width) {
      if (x - BAR_LABEL_GAP - len >= 0) {
        at = x - BAR_LABEL_GAP;
        anchor = "end";
      } else {
        at = Math.max(0, width - len);
      }
    }
    text.setAttribute("x", at);
    text.setAttribute("text-anchor", anchor);
    text.classList.toggle("inside", inside);
  }
}

function renderLane(lane, li, width) {
  const roleText = lane.role === "regarding" ? (lane.counterpart ? "related: " : "") : "about ";
  const label = el("div", { class: "lane-label" },
    el("span", { class: `badge ${lane.type}` }, lane.type),
    " ",
    el("span", { class: "reason" }, lane.reason),
    lane.counterpart ? el("span", { class: "counterpart-wrap" }, ` ${roleText}`, objectLink(lane.counterpart, "counterpart")) : null,
    el("span", { class: "lane-total" }, ` (${lane.total})`));
  const track = svg("svg", { class: "track", width, height: lane.tracks * TRACK_HEIGHT, role: "list", "aria-label": `${lane.type} ${lane.reason}` });
  drawItems(track, lane, li, width);
  const row = el("div", { class: `lane ${lane.type}`, "data-lane": lane.key, "data-role": lane.role }, label);
  row.append(track);
  return row;
}

// drawItems draws a lane's marks and bars on its track.
function drawItems(track, lane, li, width) {
  lane.items.forEach((it, ii) => {
    const id = `${li}.${ii}`;
    it.lane = lane;
    itemsByID.set(id, it);
    const g = svg("g", {
      class: `item ${it.kind} ${it.type}${it.state ? " " + it.state : ""}`, tabindex: "0", role: "listitem",
      "data-id": id, "data-kind": it.kind, "data-type": it.type, "data-reason": it.rows[0].reason,
      "data-count": String(it.count), "data-events": String(it.rows.length),
      "data-uids": it.rows.slice(0, DETAIL_LIMIT).map((r) => r.uid).join(" "),
      "data-first": iso(it.first), "aria-label": describe(it),
    });
    if (it.state) g.setAttribute("data-state", it.state);
    const title = svg("title");
    title.textContent = describe(it);
    g.append(title);
    const y = (it.track || 0) * TRACK_HEIGHT;
    const cy = y + TRACK_HEIGHT / 2;
    if (it.kind === "bar") {
      // At least 3 px wide, and within the track (a series ending now
      // is a sliver at its right edge).
      const w = Math.max(3, it.w);
      const x = Math.max(0, Math.min(it.x, width - w));
      g.append(svg("rect", { x, y: y + 4, width: w, height: TRACK_HEIGHT - 8, rx: 3 }));
      // Placed once drawn (placeBarLabels), when its length is known.
      const text = svg("text", { y: cy + 4, class: "bar-label", x: x + w + 4, "data-bar-x": x, "data-bar-w": w });
      text.textContent = it.state ? `×${it.count} ${it.state}` : `×${it.count}`;
      g.append(text);
    } else {
      const r = it.kind === "agg" ? 7 : 5;
      if (it.type === "Warning") {
        g.append(svg("path", { d: `M${it.x} ${cy - r - 1}L${it.x + r + 1} ${cy}L${it.x} ${cy + r + 1}L${it.x - r - 1} ${cy}Z` }));
      } else {
        g.append(svg("circle", { cx: it.x, cy, r }));
      }
      if (it.kind === "agg") {
        // Above the mark when there is room, else inside it (in white).
        const above = cy - r - 3 > 8;
        const text = svg("text", { x: it.x, y: above ? cy - r - 3 : cy + 3, "text-anchor": "middle", class: above ? "agg-label" : "agg-label inside" });
        text.textContent = String(it.rows.length);
        g.append(text);
      }
    }
    track.append(g);
  });
}

// renderFamily draws the family view: one lane per object of the lineage,
// indented under its owner, with its lifespan and events.
function renderFamily() {
  const started = performance.now();
  const events = session.store.events();
  const now = Date.now();
  const width = trackWidth();
  const tree = familyTree(session.lineage);
  const win = zoomRange || familyWindow(state.zoom, now, state.zoom === "all" ? events.map(rowOf) : [], tree);
  itemsByID = new Map();
  const lay = layoutFamily(session.lineage, events, { from: win.from, to: win.to, width, warningsOnly: state.warnings });
  renderZoom();
  $("#zoom-reset").disabled = !zoomRange;
  drawLanes(win, width, lay.lanes.slice(0, laneLimit).map((lane, li) => renderFamilyLane(lane, li, width)), lay.lanes.length);
  const objects = tree.filter((o) => o.group === "family").length;
  const deleted = tree.filter((o) => o.deleted).length;
  const total = lay.shown + lay.hidden;
  $("#summary").textContent = `${lay.shown} of ${total} events shown on ${objects} objects${deleted ? ` (${deleted} deleted)` : ""}` +
    (tree.length > objects ? `, ${tree.length - objects} node${tree.length - objects === 1 ? "" : "s"}` : "") +
    (lay.hidden ? ` (${lay.hidden} events outside the window${state.warnings ? " or not Warning" : ""})` : "");
  const notice = $("#notice");
  notice.textContent = session.warnings.join(" · ");
  notice.hidden = session.warnings.length === 0;
  $("#empty").hidden = lay.shown > 0;
  finishRender(started);
}

function renderFamilyLane(lane, li, width) {
  const ref = lane.ref;
  const link = objectLink({ namespace: ref.namespace, kind: ref.kind, name: ref.name }, "object-name");
  link.textContent = ref.name || ref.uid || "";
  const label = el("div", { class: "lane-label" },
    el("span", { class: "kind" }, lane.kind),
    lane.deleted ? el("s", {}, link) : link,
    lane.deleted ? el("span", { class: "badge deleted", title: `deleted; last seen ${iso(lane.lastSeen)}` }, "deleted") : null,
    lane.group === "other" ? el("span", { class: "hint" }, " not in the lineage") : null,
    el("span", { class: "lane-total" }, ` (${lane.total})`));
  label.style.paddingLeft = `${lane.depth * FAMILY_INDENT}px`;
  if (!isNaN(lane.firstSeen)) label.title = `${ref.kind}/${ref.name}: first seen ${iso(lane.firstSeen)}${lane.deleted ? `, deleted (last seen ${iso(lane.lastSeen)})` : ""}`;
  const height = lane.tracks * TRACK_HEIGHT;
  const track = svg("svg", { class: "track", width, height, role: "list", "aria-label": `${ref.kind} ${ref.name}${lane.deleted ? " (deleted)" : ""}` });
  if (lane.life) {
    // Its lifespan: a thin line under its events, ending in a stroke when
    // it was deleted within the window.
    // Along the first track, where the marks are.
    const cy = TRACK_HEIGHT / 2;
    track.append(svg("rect", { class: "life", x: lane.life.x1, y: cy - 1, width: Math.max(1, lane.life.x2 - lane.life.x1), height: 2, "aria-hidden": "true" }));
    if (lane.life.ended) track.append(svg("line", { class: "life-end", x1: lane.life.x2, x2: lane.life.x2, y1: cy - 6, y2: cy + 6, "aria-hidden": "true" }));
  }
  drawItems(track, lane, li, width);
  const row = el("div", {
    class: `lane family-lane ${lane.group}${lane.deleted ? " deleted" : ""}`, "data-lane": lane.key,
    "data-object-kind": lane.kind, "data-name": ref.name || "", "data-depth": String(lane.depth), "data-deleted": String(lane.deleted),
    "data-group": lane.group,
  }, label);
  row.append(track);
  return row;
}

function showDetails(it) {
  if (!it) return;
  const box = $("#details");
  const rows = it.rows.slice(0, DETAIL_LIMIT);
  const parts = [el("h3", {}, describe(it))];
  for (const r of rows) {
    const ev = r.ev;
    const fields = [
      ["cluster", clusterOfEvent(ev)], ["type", ev.type], ["reason", ev.reason], ["note", ev.note],
      ["regarding", fullRef(ev.regarding)], ["related", fullRef(ev.related)], ["your object is", r.role],
      ["action", ev.action], ["reporting", [ev.reportingController, ev.reportingInstance].filter(Boolean).join(" / ")],
      ["first", iso(r.first)], ["last", r.series ? iso(r.last) : ""],
      ["count", r.series ? String(r.count) : ""], ["series state", r.series ? r.state : ""],
      ["name", `${ev.metadata.namespace}/${ev.metadata.name}`], ["resourceVersion", ev.metadata.resourceVersion],
    ];
    const dl = el("dl");
    for (const [k, v] of fields) {
      if (!v) continue;
      dl.append(el("dt", {}, k), el("dd", {}, v));
    }
    parts.push(el("article", { class: `event ${ev.type}`, "data-uid": r.uid }, dl,
      el("details", {}, el("summary", {}, "JSON"), el("pre", {}, JSON.stringify(ev, null, 2)))));
  }
  if (it.rows.length > rows.length) parts.push(el("p", { class: "hint" }, `and ${it.rows.length - rows.length} more events; zoom in to see them apart.`));
  box.replaceChildren(...parts);
}

function fullRef(ref) {
  if (!ref || !ref.kind) return "";
  return `${ref.namespace ? ref.namespace + "/" : ""}${objectRef(ref)}${ref.fieldPath ? " (" + ref.fieldPath + ")" : ""}`;
}

function itemOf(target) {
  const g = target && target.closest && target.closest("#lanes .item");
  return g ? { g, it: itemsByID.get(g.dataset.id) } : null;
}

function select(g, it) {
  for (const s of document.querySelectorAll("#lanes .item.selected")) s.classList.remove("selected");
  g.classList.add("selected");
  showDetails(it);
  navigate({ event: it.rows[0].uid }, true);
}

function setupTimelineEvents() {
  const lanes = $("#lanes");
  lanes.addEventListener("mouseover", (e) => {
    const x = itemOf(e.target);
    if (x) showDetails(x.it);
  });
  lanes.addEventListener("focusin", (e) => {
    const x = itemOf(e.target);
    if (x) showDetails(x.it);
  });
  lanes.addEventListener("mouseleave", () => {
    // Back to the selected event, if any.
    const g = document.querySelector("#lanes .item.selected");
    if (g) showDetails(itemsByID.get(g.dataset.id));
  });
  lanes.addEventListener("click", (e) => {
    const x = itemOf(e.target);
    if (x) select(x.g, x.it);
  });
  lanes.addEventListener("keydown", (e) => {
    const x = itemOf(e.target);
    if (!x) return;
    const { g } = x;
    const laneEl = g.closest(".lane");
    const siblings = [...laneEl.querySelectorAll(".item")];
    const i = siblings.indexOf(g);
    let next = null;
    switch (e.key) {
      case "ArrowRight": next = siblings[i + 1]; break;
      case "ArrowLeft": next = siblings[i - 1]; break;
      case "Home": next = siblings[0]; break;
      case "End": next = siblings[siblings.length - 1]; break;
      case "ArrowDown":
      case "ArrowUp": {
        const all = [...lanes.querySelectorAll(".lane[data-lane]")];
        const other = all[all.indexOf(laneEl) + (e.key === "ArrowDown" ? 1 : -1)];
        if (other) {
          const x0 = g.getBBox().x;
          next = [...other.querySelectorAll(".item")].reduce((best, c) =>
            !best || Math.abs(c.getBBox().x - x0) < Math.abs(best.getBBox().x - x0) ? c : best, null);
        }
        break;
      }
      case "Enter":
      case " ":
        select(g, x.it);
        e.preventDefault();
        return;
      case "Escape":
        g.classList.remove("selected");
        navigate({ event: "" }, true);
        return;
      default:
        return;
    }
    e.preventDefault();
    if (next) next.focus();
  });
}

// zoomTo shows the family view over range (null: the time window).
function zoomTo(range) {
  zoomRange = range;
  renderTimeline();
}

// setupFamilyZoom zooms the family view: a drag across the lanes (or the
// axis) zooms into the dragged range, the wheel over the axis (or with
// Ctrl over the lanes) around the pointer; the page scrolls as usual
// otherwise.
function setupFamilyZoom() {
  const lanes = $("#lanes");
  const family = () => session && session.family && shown;
  // trackX is the pointer's x on the tracks, which all start where the
  // axis does.
  const trackX = (e) => {
    const axis = lanes.querySelector("svg.axis");
    return axis ? e.clientX - axis.getBoundingClientRect().left : NaN;
  };
  lanes.addEventListener("wheel", (e) => {
    if (!family() || !(e.ctrlKey || e.target.closest("svg.axis"))) return;
    const x = trackX(e);
    if (isNaN(x) || x < 0 || x > shown.width) return;
    e.preventDefault();
    zoomTo(zoomAround(shown.win, timeAt(shown.win, shown.width, x), wheelFactor(e.deltaY)));
  }, { passive: false });
  let drag = null;
  lanes.addEventListener("pointerdown", (e) => {
    if (!family() || e.button !== 0 || !e.target.closest("svg.track, svg.axis") || e.target.closest(".item")) return;
    const x = trackX(e);
    if (isNaN(x) || x < 0 || x > shown.width) return;
    e.preventDefault();
    const band = el("div", { class: "drag-range", "aria-hidden": "true" });
    lanes.append(band);
    drag = { x0: x, band, offset: lanes.querySelector("svg.axis").getBoundingClientRect().left - lanes.getBoundingClientRect().left };
    const move = (ev) => {
      const x1 = Math.max(0, Math.min(shown.width, trackX(ev)));
      band.style.left = `${drag.offset + Math.min(drag.x0, x1)}px`;
      band.style.width = `${Math.abs(x1 - drag.x0)}px`;
    };
    const up = (ev) => {
      window.removeEventListener("pointermove", move);
      window.removeEventListener("pointerup", up);
      band.remove();
      const r = drag && shown ? rangeOfDrag(shown.win, shown.width, drag.x0, trackX(ev)) : null;
      drag = null;
      if (r) zoomTo(r);
    };
    move(e);
    window.addEventListener("pointermove", move);
    window.addEventListener("pointerup", up);
  });
}

// ---------------------------------------------------------------------
// Wiring

function show(reload) {
  $("#warnings").checked = state.warnings;
  if (state.object) {
    if (reload || !session) showTimeline();
    else renderTimeline();
  } else {
    if (session) session.stop();
    session = null;
    $("#search").value = "";
    showOverview();
  }
}

function setup() {
  $("#search-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = $("#search").value.trim();
    try {
      parseTarget(text);
    } catch (err) {
      setStatus(err.message, true);
      $("#search").setAttribute("aria-invalid", "true");
      return;
    }
    $("#search").removeAttribute("aria-invalid");
    setStatus("");
    navigate({ object: text, event: "", view: "" });
  });
  $("#warnings").addEventListener("change", (e) => navigate({ warnings: e.target.checked }));
  for (const b of document.querySelectorAll("#zoom button")) {
    b.addEventListener("click", () => {
      zoomRange = null;
      navigate({ zoom: b.dataset.zoom });
    });
  }
  for (const b of document.querySelectorAll("#view button")) {
    b.addEventListener("click", () => navigate({ view: b.dataset.view, event: "" }));
  }
  $("#nodes").addEventListener("change", (e) => navigate({ nodes: e.target.checked }));
  $("#zoom-reset").addEventListener("click", () => zoomTo(null));
  $("#zoom-in").addEventListener("click", () => shown && zoomTo(zoomAround(shown.win, (shown.win.from + shown.win.to) / 2, 0.5)));
  $("#zoom-out").addEventListener("click", () => shown && zoomTo(zoomAround(shown.win, (shown.win.from + shown.win.to) / 2, 2)));
  setupFamilyZoom();
  $("#home").addEventListener("click", (e) => {
    e.preventDefault();
    navigate({ object: "", event: "" });
  });
  $("#forget-token").addEventListener("click", () => {
    api.token = "";
    setStatus("Token forgotten for this tab.");
  });
  showTokenState();
  setupTimelineEvents();
  $("#search-link").href = "search.html" + withCluster("", cluster);
  $("#home").href = "./" + withCluster("", cluster);
  if (cluster === FLEET) {
    $("#top-objects thead tr").prepend(el("th", { scope: "col" }, "Cluster"));
    const b = $('#view button[data-view="family"]');
    b.disabled = true;
    b.title = "A family is one cluster's: pick a cluster to see it";
    $("#family-note").hidden = false;
  }
  setupClusterPicker(api, cluster, (c) => location.pathname + withCluster(stateToURL(state), c));
  show(true);
}

setup();

// For tests and debugging: the page's state.
window.kubevents = { get state() { return state; }, get session() { return session; }, ZOOMS, DEFAULT_ZOOM };
