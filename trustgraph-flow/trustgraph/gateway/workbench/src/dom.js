// A tiny element builder: every text goes in as a text node, never as HTML.

export function h(tag, props = {}, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) element.addEventListener(key.slice(2), value);
    else if (key === "class") element.className = value;
    else if (key in element && typeof value !== "string") element[key] = value;
    else element.setAttribute(key, value === true ? "" : value);
  }
  element.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return element;
}

// replaceChildren without the surprise: a null child is left out, not shown as "null".
export function fill(element, ...children) {
  element.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return element;
}

export const $ = (selector, root = document) => root.querySelector(selector);

// The last part of an IRI, readable: "http://x/e/neil-armstrong" and
// "urn:tg:entity:neil-armstrong" -> "neil armstrong".
export function shortName(iri) {
  const tail = String(iri).replace(/[#/:]+$/, "").split(/[#/:]/).pop() || String(iri);
  try {
    return decodeURIComponent(tail).replace(/[-_]+/g, " ");
  } catch {
    return tail;
  }
}

// A Term ({"t":"i","i":iri} | {"t":"l","v":value}) or a plain value, as text.
export function termText(term, labels = {}) {
  if (term === null || term === undefined) return "";
  if (typeof term !== "object") return String(term);
  if (term.t === "i" || term.i !== undefined) return labels[term.i] || shortName(term.i);
  return String(term.v ?? "");
}

export function termKey(term) {
  if (term && typeof term === "object") return term.t === "i" || term.i !== undefined
    ? `i:${term.i}` : `l:${term.v}`;
  return `l:${term}`;
}

export function seconds(ms) {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}
