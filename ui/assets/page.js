// What the page's views share in the DOM: element builders, the token
// dialog, and how an error is told.

import { ApiError } from "./api.js";

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
