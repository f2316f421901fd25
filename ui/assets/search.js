// The search page: a CEL filter and field filters over every event, a
// histogram of occurrences over time and the loudest reasons, kinds and
// namespaces (eventsd's facets), and the matching events, kept live. The
// logic is in searchmodel.js; this file draws and wires the DOM.
//
// Live updates: the page lists with the filter, the field selectors and
// the time range, then watches from the list's resourceVersion with the
// same filter and field selectors (a watch takes no time range) and keeps
// only the changes last observed in the range. A range that ends in the
// past is not watched. Changes are applied as they come but drawn at most
// every REPAINT ms, and the facets read again at most every
// FACETS_REFRESH ms, so a burst of thousands of events is a handful of
// repaints.

import { API, ApiError } from "./api.js";
import { $, askToken, el, errorText, follow, iso, setupClusterPicker, svg } from "./page.js";
import {
  EventStore, FLEET, clusterFromURL, clusterOfEvent, clusterPrefix, formatTarget, objectRef, rangeOfDrag, timeTicks, withCluster,
} from "./model.js";
import {
  Batcher, FILTER_EXAMPLES, LOUDEST_FIELDS, barAt, fieldSelectorOf, histogram, listParams, liveRange, loudest, parseBound,
  results, searchFromURL, searchToURL, watchParams, withFacet, zoomedTo,
} from "./searchmodel.js";

// MAX_ITEMS bounds the events a search reads; beyond it the page says
// the list is cut and the facets still count everything.
const MAX_ITEMS = 20000;
// ROWS are the rows drawn at first, and added by "Show more".
const ROWS = 200;
// REPAINT is the least time between two repaints of live changes.
const REPAINT = 500;
// FACETS_REFRESH is the least time between two reads of the facets while
// changes arrive.
const FACETS_REFRESH = 5000;
// TICK redraws a search whose range starts a duration back from now, so
// that what falls out of it leaves the list.
const TICK = 10000;
// TOP is how many values of each field the facets give.
const TOP = 10;
// HISTOGRAM_HEIGHT is the bars' height in px, under them the axis.
const HISTOGRAM_HEIGHT = 110;
const AXIS_HEIGHT = 18;

// cluster is the cluster of a fleet the page searches (its URL's cluster
// parameter): "" for the server's root, FLEET for every cluster at once,
// each result then with its cluster.
const cluster = clusterFromURL(location.search);
const api = new API(askToken, () => { $("#forget-token").hidden = !api.token; }, clusterPrefix(cluster));
let state = searchFromURL(location.search);
let session = null;
let rowLimit = ROWS;
let repaints = 0;
let shownHistogram = null;
let lastFacets = null;
let searchGen = 0;

function setStatus(msg, isError) {
  const s = $("#status");
  s.textContent = msg;
  s.classList.toggle("error", !!isError);
}

// SearchSession lists a search's events and keeps them current: a watch
// from the list's resourceVersion (resumed after errors, the list read
// again after a 410), its changes applied once by the EventStore and
// drawn in batches.
class SearchSession {
  constructor(s) {
    this.s = s;
    this.namespace = s.namespace;
    this.selector = fieldSelectorOf(s);
    this.store = new EventStore();
    this.abort = new AbortController();
    this.changes = 0;
    this.batch = new Batcher((n) => this.flush(n), REPAINT);
    this.facetsBatch = new Batcher(() => loadFacets(this), FACETS_REFRESH);
  }

  stop() {
    this.abort.abort();
    this.batch.stop();
    this.facetsBatch.stop();
  }

  async list() {
    const l = await api.list(this.namespace, this.selector, { params: listParams(this.s), maxItems: MAX_ITEMS, signal: this.abort.signal });
    this.store.reset(l.items, l.rv);
    this.truncated = l.truncated;
  }

  // watch follows the changes until the session stops.
  watch() {
    return follow({
      signal: this.abort.signal,
      setLive: (s) => this.setLive(s),
      watch: (onEvent) => api.watch(this.namespace, this.selector, this.store.rv, onEvent, this.abort.signal, watchParams(this.s)),
      onEvent: (e) => {
        // A bookmark only moves the resume point.
        if (!this.store.apply(e.type, e.object)) return;
        this.changes++;
        this.batch.add();
      },
      relist: async () => {
        await this.list();
        this.batch.add();
      },
    });
  }

  flush() {
    if (this !== session) return;
    render();
    this.facetsBatch.add();
  }

  setLive(s) {
    if (this.abort.signal.aborted) return;
    $("#search-view").dataset.live = s.split(" ")[0];
    $("#live").textContent = s === "watching" ? "live" : s;
  }
}

// search lists what s selects. A refused search (an invalid filter or
// time range: the API's 400) shows the API's message under the filter
// and keeps the previous results; an accepted one replaces them, and the
// URL (push: a new history entry).
async function search(s, push) {
  const gen = ++searchGen;
  const view = $("#search-view");
  view.dataset.status = "loading";
  const next = new SearchSession(s);
  try {
    await next.list();
  } catch (err) {
    next.stop();
    if (gen !== searchGen) return;
    if (err instanceof ApiError && err.code === 400) {
      showFilterError(err.message);
      view.dataset.status = "invalid";
    } else {
      view.dataset.status = "error";
      setStatus(`Searching failed: ${errorText(err)}`, true);
    }
    return;
  }
  if (gen !== searchGen) {
    next.stop();
    return;
  }
  showFilterError("");
  setStatus("");
  if (session) session.stop();
  session = next;
  state = s;
  rowLimit = ROWS;
  const url = location.pathname + withCluster(searchToURL(s), cluster);
  if (push) history.pushState(null, "", url);
  else history.replaceState(null, "", url);
  fillForm(s);
  render();
  view.dataset.status = "ready";
  view.dataset.facets = "loading";
  loadFacets(next);
  const r = liveRange(s, Date.now());
  if (r.live) {
    next.watch();
  } else {
    view.dataset.live = "off";
    $("#live").textContent = "not live: the time range ends in the past";
  }
}

function showFilterError(msg) {
  const p = $("#filter-error");
  p.textContent = msg;
  p.hidden = !msg;
  if (msg) $("#filter").setAttribute("aria-invalid", "true");
  else $("#filter").removeAttribute("aria-invalid");
}

// fillForm shows s in the form.
function fillForm(s) {
  $("#filter").value = s.filter;
  $("#f-namespace").value = s.namespace;
  $("#f-type").value = s.type;
  $("#f-reason").value = s.reason;
  $("#f-kind").value = s.kind;
  $("#f-since").value = s.since;
  $("#f-until").value = s.until;
}

function formState() {
  return {
    filter: $("#filter").value.trim(),
    namespace: $("#f-namespace").value.trim(),
    type: $("#f-type").value,
    reason: $("#f-reason").value.trim(),
    kind: $("#f-kind").value.trim(),
    since: $("#f-since").value.trim(),
    until: $("#f-until").value.trim(),
  };
}

// render draws the result rows: the newest first, at most rowLimit.
function render() {
  if (!session) return;
  const started = performance.now();
  const view = $("#search-view");
  const r = liveRange(session.s, Date.now());
  const res = results(session.store.events(), r.error ? { since: NaN, until: NaN } : r, rowLimit);
  $("#results tbody").replaceChildren(...res.rows.map(rowElement));
  $("#result-summary").textContent = `${res.events} events, ${res.occurrences} occurrences`;
  $("#result-note").textContent = session.truncated ? `Only the first ${MAX_ITEMS} events were read: narrow the search or the time range.` : "";
  $("#more").hidden = res.more === 0;
  $("#more-text").textContent = `${res.more} more, older.`;
  repaints++;
  view.dataset.repaints = String(repaints);
  view.dataset.events = String(res.events);
  view.dataset.occurrences = String(res.occurrences);
  view.dataset.changes = String(session.changes);
  // The longest repaint, for tests.
  view.dataset.renderMs = String(Math.max(+view.dataset.renderMs || 0, Math.ceil(performance.now() - started)));
}

function rowElement(row) {
  const ev = row.ev;
  const ref = ev.regarding || {};
  const object = formatTarget({ namespace: ref.namespace || "", kind: ref.kind || "", name: ref.name || "" });
  // The object's timeline in the event's cluster.
  const evCluster = clusterOfEvent(ev);
  const href = "./" + withCluster("?" + new URLSearchParams({ object }), evCluster || cluster);
  const objectCell = ref.kind && ref.name ? el("a", { href }, objectRef(ref)) : "";
  return el("tr", { class: row.type, "data-uid": row.uid },
    cluster === FLEET ? el("td", { class: "cluster" }, evCluster) : null,
    el("td", {}, iso(row.last)),
    el("td", {}, (ev.metadata && ev.metadata.namespace) || ""),
    el("td", {}, objectCell),
    el("td", {}, el("span", { class: `badge ${row.type}` }, row.type)),
    el("td", { class: "reason" }, row.reason),
    el("td", { class: "num" }, String(row.count)),
    el("td", { class: "note" }, ev.note || ""));
}

// loadFacets reads the search's facets and draws the histogram and the
// loudest panel; a server without facets (404) leaves them out, saying
// so.
async function loadFacets(s) {
  const params = { ...listParams(s.s), top: String(TOP) };
  let facets;
  try {
    facets = await api.facets(s.namespace, s.selector, params, { signal: s.abort.signal });
  } catch (err) {
    if (s !== session || s.abort.signal.aborted) return;
    $("#histogram").dataset.status = "error";
    $("#histo").replaceChildren();
    $("#loudest-tables").replaceChildren();
    const msg = err instanceof ApiError && err.code === 404
      ? "This server does not summarize events (eventsd's facets): no histogram or loudest panel."
      : `Reading the facets failed: ${errorText(err)}`;
    $("#histogram-note").textContent = msg;
    $("#search-view").dataset.facets = "error";
    return;
  }
  if (s !== session) return;
  drawHistogram(facets);
  drawLoudest(facets);
  $("#search-view").dataset.facets = "ready";
}

function drawHistogram(facets) {
  lastFacets = facets;
  const box = $("#histo");
  // The panel's width, not the drawing's (which an earlier, wider one
  // would keep).
  const width = Math.max(300, Math.floor($("#histogram").clientWidth || 600));
  const h = histogram(facets, width);
  shownHistogram = h && { h, width };
  const panel = $("#histogram");
  panel.dataset.status = "ready";
  panel.dataset.buckets = String(h ? h.bars.length : 0);
  panel.dataset.occurrences = String(h ? h.bars.reduce((n, b) => n + b.occurrences, 0) : 0);
  $("#histogram-note").textContent = "Drag across the bars, or click one, to zoom the list into that time.";
  if (!h) {
    box.replaceChildren(el("p", { class: "hint" }, "No events to count."));
    $("#histogram-range").textContent = "";
    return;
  }
  $("#histogram-range").textContent = `${iso(h.win.from)} to ${iso(h.win.to)}, ${facets.bucketSeconds} s a bar, highest ${h.max}`;
  const root = svg("svg", { width, height: HISTOGRAM_HEIGHT + AXIS_HEIGHT, role: "img", "aria-label": "Occurrences per time bucket" });
  for (const b of h.bars) {
    const bh = Math.max(b.occurrences > 0 ? 1 : 0, b.h * HISTOGRAM_HEIGHT);
    const rect = svg("rect", { class: "bar", x: b.x, y: HISTOGRAM_HEIGHT - bh, width: b.w, height: bh, "data-from": iso(b.from), "data-to": iso(b.to), "data-occurrences": b.occurrences });
    const title = svg("title");
    title.textContent = `${iso(b.from)}: ${b.occurrences} occurrences in ${b.events} events`;
    rect.append(title);
    root.append(rect);
  }
  root.append(svg("line", { x1: 0, x2: width, y1: HISTOGRAM_HEIGHT + 0.5, y2: HISTOGRAM_HEIGHT + 0.5, stroke: "#555" }));
  for (const t of timeTicks(h.win.from, h.win.to, width)) {
    const text = svg("text", { x: Math.min(Math.max(t.x, 16), width - 16), y: HISTOGRAM_HEIGHT + 14, "text-anchor": "middle", class: "tick" });
    text.textContent = t.label;
    root.append(text);
  }
  box.replaceChildren(root);
}

function drawLoudest(facets) {
  const l = loudest(facets);
  const names = { reason: "Reasons", kind: "Kinds", namespace: "Namespaces" };
  $("#loudest-tables").replaceChildren(...LOUDEST_FIELDS.map((f) => el("div", { class: "loudest-field", "data-field": f },
    el("h3", {}, names[f]),
    l[f].length ? el("table", {}, el("tbody", {}, ...l[f].map((v) => {
      if (v.other) return el("tr", { class: "other" }, el("td", { class: "hint" }, "(all others)"), el("td", { class: "num" }, String(v.occurrences)));
      const b = el("button", { type: "button", class: "facet", "data-field": f, "data-value": v.value, title: `Only ${f} ${v.value || "(none)"}` }, v.value || "(none)");
      b.addEventListener("click", () => search(withFacet(state, f, v.value), true));
      return el("tr", {}, el("td", {}, b), el("td", { class: "num" }, String(v.occurrences)));
    }))) : el("p", { class: "hint" }, "none"))));
}

// setupHistogram zooms the list into a dragged range, or a clicked bar.
function setupHistogram() {
  const box = $("#histo");
  const xOf = (e) => e.clientX - box.getBoundingClientRect().left;
  box.addEventListener("pointerdown", (e) => {
    if (!shownHistogram || e.button !== 0) return;
    e.preventDefault();
    const x0 = xOf(e);
    const band = el("div", { class: "drag-range", "aria-hidden": "true" });
    box.append(band);
    const move = (ev) => {
      const x1 = Math.max(0, Math.min(shownHistogram.width, xOf(ev)));
      band.style.left = `${Math.min(x0, x1)}px`;
      band.style.width = `${Math.abs(x1 - x0)}px`;
    };
    const up = (ev) => {
      window.removeEventListener("pointermove", move);
      window.removeEventListener("pointerup", up);
      band.remove();
      if (!shownHistogram) return;
      const { h, width } = shownHistogram;
      let r = rangeOfDrag(h.win, width, x0, xOf(ev));
      if (!r) {
        const bar = barAt(h, x0);
        r = bar && { from: bar.from, to: bar.to };
      }
      if (r) search(zoomedTo(state, r), true);
    };
    move(e);
    window.addEventListener("pointermove", move);
    window.addEventListener("pointerup", up);
  });
}

function setup() {
  $("#examples").replaceChildren(...FILTER_EXAMPLES.map((x) => {
    const b = el("button", { type: "button", class: "example", title: x.expr }, x.label);
    b.addEventListener("click", () => {
      $("#filter").value = x.expr;
      $("#filter").focus();
    });
    return b;
  }));
  $("#query-form").addEventListener("submit", (e) => {
    e.preventDefault();
    search(formState(), true);
  });
  $("#clear-range").addEventListener("click", () => search({ ...formState(), since: "", until: "" }, true));
  $("#show-more").addEventListener("click", () => {
    rowLimit += ROWS;
    render();
  });
  $("#forget-token").addEventListener("click", () => {
    api.token = "";
    setStatus("Token forgotten for this tab.");
  });
  $("#forget-token").hidden = !api.token;
  window.addEventListener("popstate", () => search(searchFromURL(location.search), false));
  setupHistogram();
  window.addEventListener("resize", () => lastFacets && drawHistogram(lastFacets));
  setInterval(() => {
    if (session && session.s.since && parseBound(session.s.since, Date.now()).absolute === false) render();
  }, TICK);
  $("#timeline-link").href = "./" + withCluster("", cluster);
  $("header .brand").href = "./" + withCluster("", cluster);
  if (cluster === FLEET) $("#results thead tr").prepend(el("th", { scope: "col" }, "Cluster"));
  setupClusterPicker(api, cluster, (c) => location.pathname + withCluster(searchToURL(state), c));
  fillForm(state);
  search(state, false);
}

setup();

// For tests and debugging: the page's state.
window.kubevents = { get state() { return state; }, get session() { return session; } };
