// Unit tests of searchmodel.js, run in headless Chromium by
// TestSearchModelJS (ui/search_browser_test.go), which reports each
// failure. window.testResults holds {done, results: [{name, error}]}.

import * as s from "/searchmodel.js";
import { eq, ok, run, test } from "/test/harness.js";

const T0 = Date.parse("2026-11-20T10:00:00Z");
const at = (min) => new Date(T0 + min * 60000).toISOString();

let n = 0;
function ev(o) {
  n++;
  return {
    metadata: { namespace: o.ns || "default", name: o.name || `e${n}`, uid: `uid-${n}`, resourceVersion: String(n) },
    eventTime: at(o.at || 0),
    type: o.type || "Normal",
    reason: o.reason || "Started",
    regarding: { kind: "Pod", namespace: "default", name: "web-1" },
    series: o.series,
    note: "",
  };
}

test("the state goes to the URL and back, empty fields left out", () => {
  const st = { filter: 'object.note.contains("a&b")', namespace: "shop", type: "Warning", reason: "BackOff", kind: "Pod", since: "1h", until: "" };
  const q = s.searchToURL(st);
  ok(!q.includes("until"), `empty until in ${q}`);
  eq(s.searchFromURL(q), st);
  eq(s.searchToURL(s.searchFromURL("")), "");
});

test("fieldSelectorOf escapes values and leaves the namespace to the path", () => {
  eq(s.fieldSelectorOf({ namespace: "shop", type: "Warning", reason: "a,b=c", kind: "Pod" }), "type=Warning,reason=a\\,b\\=c,regarding.kind=Pod");
  eq(s.fieldSelectorOf({ namespace: "shop" }), "");
});

test("listParams carry the filter and range, watchParams the filter only", () => {
  const st = { filter: "true", since: "1h", until: "2026-11-20T10:00:00Z" };
  eq(s.listParams(st), { filter: "true", since: "1h", until: "2026-11-20T10:00:00Z" });
  eq(s.watchParams(st), { filter: "true" });
  eq(s.listParams({ filter: "", since: "", until: "" }), {});
  eq(s.watchParams({ filter: "" }), {});
});

test("parseDuration reads Go durations", () => {
  eq(s.parseDuration("1h"), 3600000);
  eq(s.parseDuration("2h30m"), 9000000);
  eq(s.parseDuration("1.5s"), 1500);
  eq(s.parseDuration("250ms"), 250);
  ok(isNaN(s.parseDuration("1d")), "1d read");
  ok(isNaN(s.parseDuration("h")), "h read");
  ok(isNaN(s.parseDuration("1h ")), "trailing space read");
  ok(isNaN(s.parseDuration("")), "empty read");
});

test("parseBound takes RFC 3339 or a positive duration back from now", () => {
  eq(s.parseBound("2026-11-20T10:00:00Z", T0 + 5), { at: T0, absolute: true });
  eq(s.parseBound("15m", T0), { at: T0 - 15 * 60000, absolute: false });
  ok(/RFC 3339/.test(s.parseBound("yesterday", T0).error), "yesterday accepted");
  ok(/positive/.test(s.parseBound("0s", T0).error), "0s accepted");
});

test("liveRange watches only a range that does not end in the past", () => {
  eq(s.liveRange({ since: "1h", until: "" }, T0), { since: T0 - 3600000, until: NaN, live: true });
  eq(s.liveRange({ since: "", until: at(-1) }, T0).live, false);
  eq(s.liveRange({ since: "", until: at(1) }, T0).live, true);
  eq(s.liveRange({ since: "", until: "5m" }, T0).live, false);
  ok(s.liveRange({ since: "nope", until: "" }, T0).error, "bad since accepted");
});

test("inRange keeps since inclusive and until exclusive", () => {
  const r = { since: T0, until: T0 + 60000 };
  ok(s.inRange({ last: T0 }, r), "since excluded");
  ok(!s.inRange({ last: T0 - 1 }, r), "before since kept");
  ok(!s.inRange({ last: T0 + 60000 }, r), "until kept");
  ok(s.inRange({ last: T0 }, { since: NaN, until: NaN }), "open range excluded");
});

test("Batcher flushes once per delay whatever the number of changes", () => {
  const timers = [];
  const fake = { setTimeout: (f) => { timers.push(f); return timers.length; }, clearTimeout: () => {} };
  const flushed = [];
  const b = new s.Batcher((k) => flushed.push(k), 500, fake);
  for (let i = 0; i < 1000; i++) b.add();
  eq(timers.length, 1, "timers scheduled");
  timers[0]();
  eq(flushed, [1000]);
  b.add(); b.add(3);
  eq(timers.length, 2, "timers after the flush");
  b.stop();
  timers[1]();
  eq(flushed, [1000], "flushed after stop");
});

test("results keep the range, newest first, capped, occurrences summed", () => {
  const evs = [ev({ at: 0 }), ev({ at: 5, series: { count: 7, lastObservedTime: at(20) } }), ev({ at: 10 }), ev({ at: -30 })];
  const r = s.results(evs, { since: T0 - 60000, until: NaN }, 2);
  eq(r.events, 3);
  eq(r.occurrences, 9);
  eq(r.more, 1);
  eq(r.rows.map((x) => x.last), [T0 + 20 * 60000, T0 + 10 * 60000]);
});

const facets = {
  since: at(0), until: at(30), bucketSeconds: 600, occurrences: 40, events: 6,
  items: [
    { field: "reason", value: "BackOff", occurrences: 30, events: 2 },
    { field: "reason", value: "Pulled", occurrences: 10, events: 4 },
    { field: "type", value: "Warning", occurrences: 30, events: 2 },
    { field: "kind", value: "Pod", occurrences: 40, events: 6 },
    { field: "namespace", value: "shop", occurrences: 40, events: 6 },
    { field: "namespace", value: "", other: true, occurrences: 3, events: 1 },
    { field: "time", value: at(0), occurrences: 10, events: 4 },
    { field: "time", value: at(20), occurrences: 30, events: 2 },
  ],
};

test("loudest reads each field's values in the server's order", () => {
  const l = s.loudest(facets);
  eq(Object.keys(l), ["reason", "kind", "namespace"]);
  eq(l.reason.map((v) => `${v.value}:${v.occurrences}`), ["BackOff:30", "Pulled:10"]);
  eq(l.kind, [{ value: "Pod", occurrences: 40, events: 6, other: false }]);
  eq(l.namespace.map((v) => v.other), [false, true]);
  eq(s.loudest(null).reason, []);
});

test("withFacet adds a loudest value as its filter", () => {
  const st = { filter: "x", reason: "", kind: "", namespace: "", type: "" };
  eq(s.withFacet(st, "reason", "BackOff").reason, "BackOff");
  eq(s.withFacet(st, "kind", "Pod").kind, "Pod");
  eq(s.withFacet(st, "namespace", "shop").filter, "x");
  let threw = false;
  try { s.withFacet(st, "time", "x"); } catch (e) { threw = true; }
  ok(threw, "a time facet taken as a filter");
});

test("histogram lays buckets over the range, heights relative to the highest", () => {
  const h = s.histogram(facets, 300);
  eq(h.win, { from: T0, to: T0 + 30 * 60000 });
  eq(h.bars.map((b) => [b.x, b.w, b.h, b.occurrences]), [[0, 99, 10 / 30, 10], [200, 99, 1, 30]]);
  eq(s.barAt(h, 250).from, T0 + 20 * 60000);
  eq(s.barAt(h, 150), null);
  eq(s.histogram({ items: [], bucketSeconds: 60 }, 300), null);
  eq(s.histogram({ items: facets.items }, 300), null, "without bucketSeconds");
});

test("zoomedTo sets since and until in whole seconds around the range", () => {
  const z = s.zoomedTo({ filter: "f", since: "1h", until: "" }, { from: T0 + 1500, to: T0 + 60000 + 200 });
  eq(z, { filter: "f", since: "2026-11-20T10:00:01Z", until: "2026-11-20T10:01:01Z" });
});

await run();
