// What the page's views share in the DOM: element builders, the token
// dialog, and how an error is told.

import { ApiError } from "./api.js";
import { FLEET } from "./model.js";

export const SVG = "http://www.w3.org/2000/svg";

export const $ = (sel) => document.querySelector(sel);

// el builds an HTML element with attributes (data-*, aria-*, role, href
// and tabindex as attributes, the rest as properties) and children.
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-") || k.startsWith("aria-") || k === "role" || k === "href" || k === "tabindex") e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) if (c != null) e.append(c);
  return e;
}

// svg builds an SVG element with attributes.
export function svg(tag, attrs = {}) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

// iso formats ms as RFC 3339, "" for NaN.
export const iso = (ms) => (isNaN(ms) ? "" : new Date(ms).toISOString().replace(".000Z", "Z"));

// askToken shows the token dialog and resolves to what the user enters.
export function askToken(message) {
  const dialog = $("#token-dialog");
  $("#token-message").textContent = message;
  $("#token-input").value = "";
  return new Promise((resolve, reject) => {
    const done = () => {
      dialog.removeEventListener("close", done);
      const v = $("#token-input").value.trim();
      if (dialog.returnValue === "ok" && v) resolve(v);
      else reject(new Error("no token given"));
    };
    dialog.addEventListener("close", done);
    dialog.returnValue = "";
    dialog.showModal();
    $("#token-input").focus();
  });
}

// errorText tells an error: an API refusal with its code.
export function errorText(err) {
  if (err instanceof ApiError) return `${err.code}: ${err.message}`;
  return String(err && err.message ? err.message : err);
}

// RETRY_MAX is the longest wait before a watch reconnects.
const RETRY_MAX = 30000;
// QUICK_END: a watch the server ends this soon without a change is
// retried with the error backoff, not at once.
const QUICK_END = 1000;

// follow keeps a list current until signal aborts: o.watch(onEvent)
// streams the changes after what the caller holds, each handed to
// o.onEvent. After an error it watches again after 1 s, doubling to 30 s
// while it keeps failing; a 410 (the server no longer has that revision)
// calls o.relist first. A watch the server ends (its timeout) is resumed
// at once, unless it ended at once without a change (a server shutting
// down). o.setLive is told "watching", "relisting" or "reconnecting in
// N s (why)".
export async function follow(o) {
  let wait = 1000;
  while (!o.signal.aborted) {
    const started = Date.now();
    let changes = 0;
    try {
      o.setLive("watching");
      await o.watch((e) => {
        wait = 1000;
        changes++;
        o.onEvent(e);
      });
      if (changes === 0 && Date.now() - started < QUICK_END) throw new Error("the server ended the watch at once");
    } catch (err) {
      if (o.signal.aborted) return;
      if (err instanceof ApiError && err.code === 410) {
        o.setLive("relisting");
        try {
          await o.relist();
          continue;
        } catch (err2) {
          err = err2;
        }
      }
      o.setLive(`reconnecting in ${Math.round(wait / 1000)} s (${errorText(err)})`);
      await new Promise((r) => setTimeout(r, wait));
      wait = Math.min(wait * 2, RETRY_MAX);
    }
  }
}

// setupClusterPicker fills the header's cluster picker with the clusters
// of the fleet the server serves (the server's root, each cluster, every
// cluster at once), current selected, and goes to hrefFor(cluster) when
// another is picked: the page then reads that cluster's API. It stays
// hidden when the server serves no fleet, or its clusters cannot be read.
export async function setupClusterPicker(api, current, hrefFor) {
  const box = $("#cluster-picker");
  let items = [];
  try {
    items = await api.clusters();
  } catch (err) {
    items = [];
  }
  // How many clusters the server serves, once known (for tests).
  box.dataset.clusters = String(items.length);
  if (items.length === 0) {
    box.hidden = true;
    return;
  }
  const sel = $("#cluster");
  sel.replaceChildren(
    el("option", { value: "" }, "Server root"),
    ...items.map((c) => el("option", { value: c.name }, c.name + (c.root ? " (root)" : ""))),
    el("option", { value: FLEET }, "All clusters"));
  sel.value = current;
  box.hidden = false;
  sel.addEventListener("change", () => location.assign(hrefFor(sel.value)));
}
