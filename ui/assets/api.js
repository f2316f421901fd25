// The page's client of the events.k8s.io/v1 API of the server that served
// it (and of eventsd's lineages, for the family view): requests with the user's bearer token (kept in sessionStorage, asked
// for when the API answers 401), paginated lists, and watches read as JSON
// lines from a fetch stream. On an eventsd serving a fleet, the API of one
// of its clusters, or of all at once (every path under a prefix,
// /clusters/NAME or /clusters/*), and the list of its clusters.

import { LineSplitter, lineageWarnings } from "./model.js";

const TOKEN_KEY = "kubevents.token";
const EVENTS = "/apis/events.k8s.io/v1";
const KUBEVENTS = "/apis/events.kubevents.io/v1";
// CLUSTERS lists a fleet's clusters, at the server's root.
const CLUSTERS = "/clusters/";
// PAGE is the limit of each list request, as evctl's pages.
const PAGE = 500;

// ApiError is a refused request: its HTTP code and Status body.
export class ApiError extends Error {
  constructor(code, status) {
    super((status && status.message) || `HTTP ${code}`);
    this.code = code;
    this.status = status;
  }
}

export function eventsPath(namespace) {
  return namespace ? `${EVENTS}/namespaces/${encodeURIComponent(namespace)}/events` : `${EVENTS}/events`;
}

// lineagesPath is eventsd's list of a family's objects (eventapi.LineageList).
export function lineagesPath(namespace) {
  return namespace ? `${KUBEVENTS}/namespaces/${encodeURIComponent(namespace)}/lineages` : `${KUBEVENTS}/lineages`;
}

// facetsPath is eventsd's summary of events (eventapi.FacetList).
export function facetsPath(namespace) {
  return namespace ? `${KUBEVENTS}/namespaces/${encodeURIComponent(namespace)}/facets` : `${KUBEVENTS}/facets`;
}

export class API {
  // askToken is called when the API answers 401; it resolves to a token
  // to try, or rejects.
  // onTokenChange, if given, is called whenever the token is set or
  // dropped. prefix, if given, starts every API path: a cluster's
  // (model.js's clusterPrefix).
  constructor(askToken, onTokenChange, prefix) {
    this.askToken = askToken;
    this.onTokenChange = onTokenChange || (() => {});
    this.prefix = prefix || "";
  }

  get token() {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  }

  set token(v) {
    if (v) sessionStorage.setItem(TOKEN_KEY, v);
    else sessionStorage.removeItem(TOKEN_KEY);
    this.onTokenChange();
  }

  // fetch sends a GET of path (under the API's prefix, unless
  // opts.root) with the token, asking for a token again as long as the
  // API answers 401.
  async fetch(path, opts = {}) {
    const url = opts.root ? path : this.prefix + path;
    for (;;) {
      const headers = { Accept: opts.accept || "application/json" };
      if (this.token) headers.Authorization = `Bearer ${this.token}`;
      const resp = await fetch(url, { headers, signal: opts.signal, cache: "no-store" });
      if (resp.status !== 401) return resp;
      const status = await resp.json().catch(() => null);
      const refused = this.token;
      // Concurrent requests share one prompt.
      if (!this.asking) {
        this.asking = this.askToken(refused ? `The token was refused: ${(status && status.message) || "401"}` : "This server needs a bearer token.")
          .finally(() => { this.asking = null; });
      }
      const token = await this.asking;
      if (this.token === refused) this.token = token;
    }
  }

  async json(path, opts = {}) {
    const resp = await this.fetch(path, opts);
    const body = await resp.json().catch(() => null);
    if (!resp.ok) throw new ApiError(resp.status, body);
    return body;
  }

  // list reads every page of the events matching fieldSelector in
  // namespace ("" for all), up to maxItems: {items, rv, truncated}.
  // opts.params are more query parameters (eventsd's filter, since,
  // until).
  async list(namespace, fieldSelector, opts = {}) {
    const items = [];
    let rv = "", cont = "";
    for (;;) {
      const q = new URLSearchParams({ ...opts.params, limit: String(PAGE) });
      if (fieldSelector) q.set("fieldSelector", fieldSelector);
      if (cont) q.set("continue", cont);
      const l = await this.json(`${eventsPath(namespace)}?${q}`, opts);
      if (!rv) rv = l.metadata.resourceVersion;
      items.push(...(l.items || []));
      cont = l.metadata.continue || "";
      if (!cont) return { items, rv, truncated: false };
      if (opts.maxItems && items.length >= opts.maxItems) return { items, rv, truncated: true };
    }
  }

  // clusters reads the clusters of the fleet the server serves (GET
  // /clusters/ at its root, eventapi.ClusterList's items: {name, root,
  // readOnly}); none from a server without a fleet (an empty list, or
  // 404 from a server that knows no fleets).
  async clusters(opts = {}) {
    const resp = await this.fetch(CLUSTERS, { ...opts, root: true });
    if (resp.status === 404) return [];
    const body = await resp.json().catch(() => null);
    if (!resp.ok) throw new ApiError(resp.status, body);
    return (body && body.items) || [];
  }

  // lineages reads the objects of the family fieldSelector names (in
  // namespace, "" for all): {items, warnings}, warnings being the texts
  // of the answer's Warning headers (ownership not learned, object
  // unknown).
  async lineages(namespace, fieldSelector, opts = {}) {
    const q = new URLSearchParams({ fieldSelector });
    const resp = await this.fetch(`${lineagesPath(namespace)}?${q}`, opts);
    const body = await resp.json().catch(() => null);
    if (!resp.ok) throw new ApiError(resp.status, body);
    return { items: (body && body.items) || [], warnings: lineageWarnings(resp.headers.get("Warning")) };
  }

  // facets reads eventsd's summary (eventapi.FacetList) of the events
  // fieldSelector and params (filter, since, until, top) select in
  // namespace ("" for all).
  async facets(namespace, fieldSelector, params, opts = {}) {
    const q = new URLSearchParams(params);
    if (fieldSelector) q.set("fieldSelector", fieldSelector);
    return this.json(`${facetsPath(namespace)}?${q}`, opts);
  }

  // watch streams the changes after rv; onEvent gets each {type, object}.
  // It returns when the server ends the stream and throws on errors (an
  // ApiError for a refusal, with code 410 when rv is too old). params are
  // more query parameters (eventsd's filter).
  async watch(namespace, fieldSelector, rv, onEvent, signal, params) {
    const q = new URLSearchParams({ ...params, watch: "1", allowWatchBookmarks: "true" });
    if (rv) q.set("resourceVersion", rv);
    if (fieldSelector) q.set("fieldSelector", fieldSelector);
    const resp = await this.fetch(`${eventsPath(namespace)}?${q}`, { signal });
    if (!resp.ok) throw new ApiError(resp.status, await resp.json().catch(() => null));
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    const lines = new LineSplitter();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        for (const line of lines.push(value)) {
          const ev = JSON.parse(line);
          if (ev.type === "ERROR") throw new ApiError((ev.object && ev.object.code) || 500, ev.object);
          onEvent(ev);
        }
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }
}
