// Unit tests of model.js, run in headless Chromium by TestModelJS
// (ui/browser_test.go), which reports each failure. window.testResults
// holds {done, results: [{name, error}]}.

import * as m from "/model.js";
import { eq, ok, run, test } from "/test/harness.js";

const T0 = Date.parse("2026-11-20T10:00:00Z");
const at = (min) => new Date(T0 + min * 60000).toISOString();

let n = 0;
function ev(o) {
  n++;
  return {
    metadata: { namespace: o.ns || "default", name: o.name || `e${n}`, uid: o.uid || `uid-${n}`, resourceVersion: o.rv || String(n), annotations: o.annotations },
    eventTime: o.eventTime === undefined ? at(o.at || 0) : o.eventTime,
    type: o.type || "Normal",
    reason: o.reason || "Started",
    regarding: o.regarding || { kind: "Pod", namespace: "default", name: "web-1" },
    related: o.related,
    series: o.series,
    deprecatedFirstTimestamp: o.dft,
    deprecatedLastTimestamp: o.dlt,
    deprecatedCount: o.dc,
    note: o.note || "",
  };
}

const pod = { namespace: "default", kind: "Pod", name: "web-1" };
const node = { namespace: "", kind: "Node", name: "node-1" };

test("parseTarget reads kind/name and namespace/kind/name and refuses the rest", () => {
  eq(m.parseTarget("pod/web-1"), { namespace: "", kind: "pod", name: "web-1" });
  eq(m.parseTarget(" prod/Pod/web-1 "), { namespace: "prod", kind: "Pod", name: "web-1" });
  for (const bad of ["web-1", "a/b/c/d", "/web-1", "pod/", "a//b"]) {
    let threw = false;
    try { m.parseTarget(bad); } catch (e) { threw = /kind\/name/.test(e.message); }
    ok(threw, `parseTarget(${bad}) should throw naming the forms`);
  }
  eq(m.formatTarget(m.parseTarget("prod/Pod/web-1")), "prod/Pod/web-1");
  eq(m.formatTarget({ namespace: "", kind: "Node", name: "n" }), "Node/n");
});

test("resolveKind finds kinds as kubectl does, with their scope", () => {
  const disc = { items: [{ metadata: { name: "" }, versions: [{ version: "v1", resources: [
    { resource: "pods", singularResource: "pod", shortNames: ["po"], scope: "Namespaced", responseKind: { kind: "Pod" } },
    { resource: "nodes", singularResource: "node", shortNames: ["no"], scope: "Cluster", responseKind: { kind: "Node" } },
  ] }] }] };
  const apps = { items: [{ metadata: { name: "apps" }, versions: [{ version: "v1", resources: [
    { resource: "deployments", singularResource: "deployment", shortNames: ["deploy"], scope: "Namespaced", responseKind: { kind: "Deployment" } },
  ] }] }] };
  const rs = m.parseDiscovery(disc, apps);
  eq(rs.length, 3);
  for (const k of ["pod", "pods", "po", "Pod", "POD"]) eq(m.resolveKind(k, rs), { kind: "Pod", namespaced: true }, k);
  eq(m.resolveKind("no", rs), { kind: "Node", namespaced: false });
  eq(m.resolveKind("deployment.apps", rs), { kind: "Deployment", namespaced: true });
  eq(m.resolveKind("deployment.batch", rs), null);
  eq(m.resolveKind("widget", rs), null);
  // Without discovery: the word, capitalized.
  eq(m.guessKind("pod"), "Pod");
  eq(m.guessKind("Deployment"), "Deployment");
});

test("rowOf reads new-style singletons and series with their state", () => {
  const single = m.rowOf(ev({ at: 1 }));
  eq([single.first, single.last, single.count, single.series, single.state], [T0 + 60000, T0 + 60000, 1, false, ""]);
  const ongoing = m.rowOf(ev({ at: 1, series: { count: 600, lastObservedTime: at(31) }, annotations: { [m.SERIES_STATE_ANNOTATION]: "ongoing" } }));
  eq([ongoing.first, ongoing.last, ongoing.count, ongoing.series, ongoing.state], [T0 + 60000, T0 + 31 * 60000, 600, true, "ongoing"]);
  const finished = m.rowOf(ev({ series: { count: 2, lastObservedTime: at(1) }, annotations: { [m.SERIES_STATE_ANNOTATION]: "finished" } }));
  eq(finished.state, "finished");
  // client-go's recorder keeps no state: unknown.
  eq(m.rowOf(ev({ series: { count: 2, lastObservedTime: at(1) } })).state, "unknown");
  // Microseconds (eventTime is a MicroTime) are read.
  eq(m.rowOf(ev({ eventTime: "2026-11-20T10:00:00.123456Z" })).first, T0 + 123);
});

test("rowOf reads legacy events: deprecated timestamps and count", () => {
  const r = m.rowOf(ev({ eventTime: null, dft: at(0), dlt: at(5), dc: 7 }));
  eq([r.first, r.last, r.count, r.series, r.state], [T0, T0 + 5 * 60000, 7, true, ""]);
  const once = m.rowOf(ev({ eventTime: null, dft: at(2), dlt: at(2), dc: 1 }));
  eq([once.first, once.count, once.series], [T0 + 2 * 60000, 1, false]);
  const created = ev({ eventTime: null });
  created.metadata.creationTimestamp = at(3);
  eq(m.rowOf(created).first, T0 + 3 * 60000);
});

test("involvement and involvesSelector match regarding or related, namespace when given", () => {
  const e = ev({ regarding: { kind: "Pod", namespace: "default", name: "web-1" }, related: { kind: "Node", name: "node-1" } });
  eq(m.involvement(e, pod), "regarding");
  eq(m.involvement(e, node), "related");
  eq(m.involvement(e, { namespace: "prod", kind: "Pod", name: "web-1" }), "");
  eq(m.involvement(e, { namespace: "", kind: "Pod", name: "web-1" }), "regarding");
  eq(m.involvement(e, { namespace: "", kind: "Pod", name: "web-2" }), "");
  eq(m.involvesSelector(pod), "involves.kind=Pod,involves.name=web-1,involves.namespace=default");
  eq(m.involvesSelector(node), "involves.kind=Node,involves.name=node-1");
});

test("escapeFieldValue and involvesSelector escape as apimachinery's fields.EscapeValue", () => {
  eq(m.escapeFieldValue("plain-name.1"), "plain-name.1");
  eq(m.escapeFieldValue("a=b"), "a\\=b");
  eq(m.escapeFieldValue("victim,type=Warning"), "victim\\,type\\=Warning");
  eq(m.escapeFieldValue("back\\slash"), "back\\\\slash");
  eq(m.involvesSelector({ namespace: "n=s", kind: "Pod", name: "victim,type=Warning" }),
    "involves.kind=Pod,involves.name=victim\\,type\\=Warning,involves.namespace=n\\=s");
});

test("isUnsupportedField recognizes kube-apiserver's refusal only", () => {
  ok(m.isUnsupportedField(400, { message: 'field label not supported: involves.kind' }), "400 field label");
  ok(!m.isUnsupportedField(400, { message: "bad selector" }), "other 400");
  ok(!m.isUnsupportedField(403, { message: "field label not supported" }), "403");
});

test("EventStore applies each change once across reconnects and relists", () => {
  const s = new m.EventStore();
  const a = ev({ uid: "a", rv: "5" });
  s.reset([a], "10");
  eq([s.size, s.rv], [1, "10"]);
  const a2 = { ...a, metadata: { ...a.metadata, resourceVersion: "11" } };
  ok(s.apply("MODIFIED", a2), "newer change applies");
  ok(!s.apply("MODIFIED", a2), "the same change again (a replay after a reconnect) does not");
  ok(!s.apply("ADDED", a), "an older state does not");
  eq(s.byUID.get("a").metadata.resourceVersion, "11");
  ok(!s.apply("BOOKMARK", { metadata: { resourceVersion: "15" } }), "bookmarks change nothing");
  eq(s.rv, "15", "but move the resume point");
  ok(s.apply("DELETED", { ...a, metadata: { ...a.metadata, resourceVersion: "16" } }), "delete");
  ok(!s.apply("ADDED", a2), "a replayed older ADDED does not bring it back");
  eq(s.size, 0);
  // Numeric order, not string order.
  eq(m.compareRevisions("9", "10"), -1);
  eq(m.compareRevisions("100", "99"), 1);
  s.reset([], "20");
  eq([s.size, s.rv], [0, "20"]);
});

test("LineSplitter joins lines split across chunks", () => {
  const l = new m.LineSplitter();
  eq(l.push('{"a":1}\n{"b"'), ['{"a":1}']);
  eq(l.push(':2}\n\n{"c":3}'), ['{"b":2}']);
  eq(l.push("\n"), ['{"c":3}']);
});

test("windowFor: zooms end now; all spans the events", () => {
  const now = T0 + 60 * 60000;
  eq(m.windowFor("15m", now, []), { from: now - 15 * 60000, to: now });
  eq(m.windowFor("24h", now, []), { from: now - 24 * 3600000, to: now });
  const w = m.windowFor("all", now, [{ first: T0 - 10 * 3600000, last: T0 }]);
  ok(w.from < T0 - 10 * 3600000 && w.to > now, `all covers the events and now: ${JSON.stringify(w)}`);
});

test("layoutTimeline: lanes in time order, marks, bars with count and state, related lanes", () => {
  const events = [
    ev({ at: 10, reason: "BackOff", type: "Warning", series: { count: 5, lastObservedTime: at(40) }, annotations: { [m.SERIES_STATE_ANNOTATION]: "ongoing" } }),
    ev({ at: 0, reason: "Scheduled", related: { kind: "Node", name: "node-1" } }),
    ev({ at: 5, reason: "NodeNotReady", type: "Warning", regarding: { kind: "Node", name: "node-1" }, related: { kind: "Pod", namespace: "default", name: "web-1" } }),
    ev({ at: 20, reason: "Other", regarding: { kind: "Pod", namespace: "default", name: "other" } }),
  ];
  const lay = m.layoutTimeline(events, pod, { from: T0 - 60000, to: T0 + 59 * 60000, width: 600 });
  eq(lay.lanes.map((l) => [l.reason, l.role, l.type]), [["Scheduled", "regarding", "Normal"], ["NodeNotReady", "related", "Warning"], ["BackOff", "regarding", "Warning"]]);
  eq(lay.lanes[0].counterpart, { kind: "Node", name: "node-1" });
  eq(lay.lanes[1].counterpart.name, "node-1", "the regarding object of an event about web-1 as related");
  eq(lay.lanes[0].items.map((i) => i.kind), ["mark"]);
  const bar = lay.lanes[2].items[0];
  eq([bar.kind, bar.count, bar.state], ["bar", 5, "ongoing"]);
  eq(Math.round(bar.x), 110, "bar starts at its first occurrence");
  eq(Math.round(bar.w), 300, "and ends at its last");
  eq([lay.shown, lay.hidden], [3, 0]);
  // Warnings only.
  const w = m.layoutTimeline(events, pod, { from: T0 - 60000, to: T0 + 59 * 60000, width: 600, warningsOnly: true });
  eq(w.lanes.map((l) => l.reason), ["NodeNotReady", "BackOff"]);
  eq(w.hidden, 1);
  // Outside the window.
  const narrow = m.layoutTimeline(events, pod, { from: T0 + 50 * 60000, to: T0 + 60 * 60000, width: 600 });
  eq([narrow.shown, narrow.hidden], [0, 3]);
});

test("layoutTimeline merges thousands of marks into at most one per bucket, counting all", () => {
  const events = [];
  for (let i = 0; i < 3000; i++) events.push(ev({ at: i / 60, reason: "Pulled" })); // one a second for 50 min
  const lay = m.layoutTimeline(events, pod, { from: T0, to: T0 + 60 * 60000, width: 800, bucketPx: 8 });
  eq(lay.lanes.length, 1);
  const items = lay.lanes[0].items;
  ok(items.length <= 800 / 8 + 1, `items bounded by the width: ${items.length}`);
  eq(items.reduce((s, i) => s + i.rows.length, 0), 3000, "every event is in one item");
  ok(items.every((i) => i.kind === "agg"), "merged");
  for (let i = 1; i < items.length; i++) ok(items[i].x > items[i - 1].x, "in time order");
});

test("layoutTimeline packs overlapping bars into tracks", () => {
  const events = [0, 1, 2, 3, 4, 5].map((i) => ev({ at: i, reason: "Probe", series: { count: 2, lastObservedTime: at(i + 30) } }));
  const lay = m.layoutTimeline(events, pod, { from: T0, to: T0 + 60 * 60000, width: 600, maxTracks: 4 });
  const items = lay.lanes[0].items;
  eq(items.map((i) => i.track), [0, 1, 2, 3, 3, 3]);
  eq(lay.lanes[0].tracks, 4);
});

test("overview counts namespaces and ranks objects by Warning occurrences in the last hour", () => {
  const now = T0 + 120 * 60000;
  const events = [
    ev({ ns: "a", at: 100, type: "Warning", reason: "BackOff", regarding: { kind: "Pod", namespace: "a", name: "p1" }, series: { count: 10, lastObservedTime: at(110) } }),
    ev({ ns: "a", at: 101, type: "Warning", reason: "Failed", regarding: { kind: "Pod", namespace: "a", name: "p2" } }),
    ev({ ns: "b", at: 10, type: "Warning", reason: "Old", regarding: { kind: "Pod", namespace: "b", name: "p3" } }),
    ev({ ns: "b", at: 100, reason: "Started", regarding: { kind: "Pod", namespace: "b", name: "p3" } }),
  ];
  const o = m.overview(events, now);
  eq(o.namespaces, [{ name: "a", events: 2, warnings: 11 }, { name: "b", events: 2, warnings: 0 }]);
  eq(o.objects.map((x) => [x.name, x.warnings, x.reason]), [["p1", 10, "BackOff"], ["p2", 1, "Failed"]]);
  eq(m.overview(events, now, { warningsOnly: true }).namespaces.map((x) => x.name), ["a"]);
  eq(m.overview(events, now, { namespace: "b" }).objects, []);
});

test("the page's state round-trips through its URL, without a token", () => {
  const s = { object: "default/Pod/web-1", zoom: "6h", warnings: true, namespace: "", event: "uid-1", view: "", nodes: false };
  const url = m.stateToURL(s);
  eq(url, "?object=default%2FPod%2Fweb-1&zoom=6h&warnings=1&event=uid-1");
  eq(m.stateFromURL(url), s);
  const f = { ...s, view: "family", nodes: true };
  eq(m.stateToURL(f), "?object=default%2FPod%2Fweb-1&zoom=6h&warnings=1&event=uid-1&view=family&nodes=1");
  eq(m.stateFromURL(m.stateToURL(f)), f);
  eq(m.stateFromURL("?object=x/y&view=bogus").view, "");
  eq(m.stateFromURL("?zoom=bogus").zoom, m.DEFAULT_ZOOM);
  eq(m.stateToURL({ object: "", zoom: "1h", namespace: "kube-system" }), "?ns=kube-system");
});

test("timeTicks label round times inside the window", () => {
  const ticks = m.timeTicks(T0, T0 + 60 * 60000, 600);
  ok(ticks.length >= 2 && ticks.length <= 7, `tick count ${ticks.length}`);
  eq(ticks[0].label, "10:00");
  ok(ticks.every((t) => t.x >= 0 && t.x <= 600), "inside");
});

test("timeTicks label seconds in windows under a minute or so", () => {
  const ticks = m.timeTicks(T0, T0 + 30000, 600);
  ok(ticks.length >= 2 && ticks.length <= 7, `tick count ${ticks.length}`);
  eq(ticks[0].label, "10:00:00");
  eq(ticks[1].label, "10:00:05");
});

test("viewFor opens the family of workloads and the object's own events otherwise", () => {
  eq(m.viewFor("", "Deployment"), "family");
  eq(m.viewFor("", "CronJob"), "family");
  eq(m.viewFor("", "Pod"), "object");
  eq(m.viewFor("object", "Deployment"), "object");
  eq(m.viewFor("family", "Pod"), "family");
  eq(m.viewFor("bogus", "Pod"), "object");
});

test("familySelector names the object, escaped, and asks for Nodes when told", () => {
  eq(m.familySelector({ namespace: "shop", kind: "Deployment", name: "web" }, false), "family.kind=Deployment,family.name=web,family.namespace=shop");
  eq(m.familySelector({ namespace: "", kind: "Deployment", name: "a=b,c" }, true), "family.kind=Deployment,family.name=a\\=b\\,c,family.withNodes=true");
});

// lineage is eventsd's LineageList items for Deployment web: two
// ReplicaSets, their Pods (one deleted), and a Node.
function lineage() {
  const li = (uid, kind, name, owners, extra = {}) => ({
    metadata: { name: uid, namespace: kind === "Node" ? "" : "shop" },
    object: { kind, namespace: kind === "Node" ? "" : "shop", name, uid },
    owners: owners.map((o) => ({ uid: o })),
    firstSeen: at(extra.first || 0), lastSeen: at(extra.last || 0), deleted: extra.deleted, node: extra.node,
  });
  return [
    li("d", "Deployment", "web", []),
    li("rs1", "ReplicaSet", "web-1", ["d"]),
    li("p1", "Pod", "web-1-a", ["rs1"], { first: 1, last: 20, deleted: true, node: "node-1" }),
    li("rs2", "ReplicaSet", "web-2", ["d"], { first: 30 }),
    li("p2", "Pod", "web-2-a", ["rs2", "unknown-owner"], { first: 31, last: 50 }),
    li("n1", "Node", "node-1", []),
  ];
}

test("familyTree indents each object under its first listed owner and sets Nodes apart", () => {
  const tree = m.familyTree(lineage());
  eq(tree.map((o) => `${o.depth}:${o.kind}/${o.ref.name}${o.deleted ? "!" : ""}:${o.group}`),
    ["0:Deployment/web:family", "1:ReplicaSet/web-1:family", "2:Pod/web-1-a!:family", "1:ReplicaSet/web-2:family", "2:Pod/web-2-a:family", "0:Node/node-1:node"]);
  // An object whose owners are not listed is at the top.
  eq(m.familyTree([{ object: { kind: "Pod", name: "x", uid: "x" }, owners: [{ uid: "gone" }] }])[0].depth, 0);
  eq(m.familyTree(undefined), []);
});

test("layoutFamily puts each event on its object's lane, by uid or name, and the rest after", () => {
  const rsRef = { kind: "ReplicaSet", namespace: "shop", name: "web-2", uid: "rs2" };
  const evs = [
    ev({ at: 5, reason: "Killing", regarding: { kind: "Pod", namespace: "shop", name: "web-1-a", uid: "p1" } }),
    ev({ at: 32, reason: "Started", regarding: { kind: "Pod", namespace: "shop", name: "web-2-a" } }), // no uid: by name
    ev({ at: 30, reason: "SuccessfulCreate", regarding: rsRef, related: { kind: "Pod", namespace: "shop", name: "web-2-a", uid: "p2" } }),
    ev({ at: 33, reason: "NodeNotReady", regarding: { kind: "Node", name: "node-9" }, related: { kind: "Pod", namespace: "shop", name: "web-2-a", uid: "p2" } }),
    ev({ at: 34, reason: "Stray", regarding: { kind: "Service", namespace: "shop", name: "web" } }),
    ev({ at: 120, reason: "Later" }), // outside the window
  ];
  const lay = m.layoutFamily(lineage(), evs, { from: T0, to: T0 + 60 * 60000, width: 600 });
  eq(lay.lanes.map((l) => `${l.ref.name}:${l.rows.map((r) => r.reason + (r.role === "related" ? "(related)" : "")).join(",")}`),
    ["web:", "web-1:", "web-1-a:Killing", "web-2:SuccessfulCreate", "web-2-a:Started,NodeNotReady(related)", "node-1:", "web:Stray"]);
  eq(lay.lanes[6].group, "other");
  eq([lay.shown, lay.hidden], [5, 1]);
  // Lifespans: the deleted Pod's ends when it was deleted, the live one's
  // at the window's end.
  const p1 = lay.lanes[2], p2 = lay.lanes[4];
  eq([p1.life.x1, p1.life.x2, p1.life.ended], [10, 200, true]);
  eq([Math.round(p2.life.x1), p2.life.x2, p2.life.ended], [310, 600, false]);
  eq(lay.lanes[6].life, null);
  // A window after the deleted Pod's end draws no life for it.
  const later = m.layoutFamily(lineage(), [], { from: T0 + 40 * 60000, to: T0 + 60 * 60000, width: 600 });
  eq(later.lanes[2].life, null);
  // Warnings only hides the Normal events.
  eq(m.layoutFamily(lineage(), evs, { from: T0, to: T0 + 60 * 60000, width: 600, warningsOnly: true }).shown, 0);
});

test("familyWindow's all covers the objects' lifespans too", () => {
  const tree = m.familyTree(lineage());
  const w = m.familyWindow("all", T0 + 60 * 60000, [], tree);
  ok(w.from < T0 && w.to >= T0 + 60 * 60000, `window ${new Date(w.from).toISOString()} to ${new Date(w.to).toISOString()}`);
  eq(m.familyWindow("1h", T0, [], tree), { from: T0 - 60 * 60000, to: T0 });
});

test("zoomAround keeps the time under the pointer in place, within bounds", () => {
  const win = { from: T0, to: T0 + 60 * 60000 };
  const z = m.zoomAround(win, T0 + 15 * 60000, 0.5);
  eq(z, { from: T0 + 7.5 * 60000, to: T0 + 37.5 * 60000 });
  // The pointer's fraction of the window is kept.
  eq(m.timeAt(z, 600, 150), T0 + 15 * 60000);
  eq(m.zoomAround(win, T0, 1e-9).to - m.zoomAround(win, T0, 1e-9).from, m.MIN_SPAN);
  eq(m.zoomAround(win, T0, 1e9).to - m.zoomAround(win, T0, 1e9).from, m.MAX_SPAN);
  let threw = false;
  try { m.zoomAround(win, T0, 0); } catch (e) { threw = /zoom factor/.test(e.message); }
  ok(threw, "a zero factor is refused");
  ok(m.wheelFactor(100) > 1 && m.wheelFactor(-100) < 1, "down zooms out, up zooms in");
  eq(m.wheelFactor(100) * m.wheelFactor(-100), 1);
});

test("rangeOfDrag selects the dragged times, in either direction, and not on a click", () => {
  const win = { from: T0, to: T0 + 60 * 60000 };
  eq(m.rangeOfDrag(win, 600, 300, 100), { from: T0 + 10 * 60000, to: T0 + 30 * 60000 });
  eq(m.rangeOfDrag(win, 600, -50, 60), { from: T0, to: T0 + 6 * 60000 });
  eq(m.rangeOfDrag(win, 600, 100, 102), null);
  // Under MIN_SPAN, widened around its middle.
  const tiny = m.rangeOfDrag({ from: T0, to: T0 + 60000 }, 600, 0, 10);
  eq(tiny.to - tiny.from, m.MIN_SPAN);
});

test("lineageWarnings reads the texts of Warning headers", () => {
  eq(m.lineageWarnings('299 - "Deployment shop/x is not in eventsd\'s ownership lineage", 299 - "a \\"quoted\\" one, with a comma"'),
    ["Deployment shop/x is not in eventsd's ownership lineage", 'a "quoted" one, with a comma']);
  eq(m.lineageWarnings(null), []);
});

test("a page's cluster: read from its URL, kept in its links, the prefix of its API paths, read from an event", () => {
  eq(m.clusterFromURL("?object=pod%2Fweb&cluster=east"), "east");
  eq(m.clusterFromURL("?cluster=*"), m.FLEET);
  eq(m.clusterFromURL("?object=pod%2Fweb"), "");
  eq(m.clusterPrefix(""), "");
  eq(m.clusterPrefix("east"), "/clusters/east");
  eq(m.clusterPrefix(m.FLEET), "/clusters/*");
  eq(m.withCluster("?object=pod%2Fweb", "east"), "?object=pod%2Fweb&cluster=east");
  eq(m.withCluster("?cluster=east&ns=shop", "west"), "?ns=shop&cluster=west");
  eq(m.withCluster("?cluster=east", ""), "");
  eq(m.withCluster("", m.FLEET), "?cluster=*");
  eq(m.clusterFromURL(m.withCluster("?ns=shop", "west")), "west");
  eq(m.clusterOfEvent(ev({ annotations: { [m.CLUSTER_ANNOTATION]: "east" } })), "east");
  eq(m.clusterOfEvent(ev({})), "");
});

test("overview keeps same-named objects of two clusters apart", () => {
  const now = T0 + 30 * 60000;
  const inCluster = (c, count) => ev({ type: "Warning", reason: "BackOff", at: 20, dc: count, annotations: { [m.CLUSTER_ANNOTATION]: c } });
  const o = m.overview([inCluster("east", 2), inCluster("west", 5), inCluster("east", 1)], now);
  eq(o.objects.map((x) => `${x.cluster} ${x.kind}/${x.name} ${x.warnings}`), ["west Pod/web-1 5", "east Pod/web-1 3"]);
  eq(m.overview([ev({ type: "Warning", at: 20 })], now).objects[0].cluster, "");
});

await run();
