// A question's trace beside its answer (docs/observability.md): its spans as a
// waterfall, one row each in tree order, a bar where and how long each ran; and,
// for a RAG answer, why it cited what it cited: the seeds and the candidates with
// their scores, those kept first. Read with GET /api/v1/traces/{id} and
// /api/v1/explain/{id} when the user opens it, never while the answer streams.
import { fill, h, seconds } from "./dom.js";

// Each process writes its spans within ~0.5 s of their end (later on a busy
// machine): a trace opened right after its answer may still be missing some, so it
// is read again until whole: a root, every parent kept, and every call answered by
// the called service's span (a process that has not written yet leaves its
// caller's call span childless, while the spans kept still form a tree).
const TRIES = 15;
const WAIT = 400; // ms
const NOTES = [["tg.time_to_sources_ms", "sources"], ["tg.time_to_first_token_ms", "first token"],
  ["tg.slot_wait_ms", "waited for a slot"]];

async function read(path, token) {
  const response = await fetch(path, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
  if (response.status === 404) return null;
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

function whole(trace) {
  const ids = new Set(trace.spans.map((span) => span.span_id));
  const parents = new Set(trace.spans.map((span) => span.parent_id));
  return trace.spans.some((span) => span.parent_id === null) &&
    trace.spans.every((span) => span.parent_id === null || ids.has(span.parent_id)) &&
    trace.spans.every((span) => span.kind !== "CLIENT" || parents.has(span.span_id));
}

// {trace, explained}: the trace once whole (or as far as it got), its explanation.
export async function readTrace(traceId, token) {
  let trace = null;
  for (let attempt = 0; attempt < TRIES; attempt++) {
    trace = await read(`/api/v1/traces/${encodeURIComponent(traceId)}`, token);
    if (trace && whole(trace)) break;
    await new Promise((resolve) => setTimeout(resolve, WAIT));
  }
  const explained = trace && trace.explained
    ? await read(`/api/v1/explain/${encodeURIComponent(traceId)}`, token) : null;
  return { trace, explained };
}

// The spans depth first, children in start order: [[span, depth], ...].
function ordered(spans) {
  const ids = new Set(spans.map((span) => span.span_id));
  const children = new Map();
  for (const span of spans) {
    const parent = ids.has(span.parent_id) ? span.parent_id : null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(span);
  }
  const rows = [];
  const walk = (parent, depth) => {
    for (const span of children.get(parent) || []) {
      rows.push([span, depth]);
      walk(span.span_id, depth + 1);
    }
  };
  walk(null, 0);
  return rows;
}

export function waterfall(trace) {
  const total = Math.max(1, ...trace.spans.map((s) => s.start_ms + s.duration_ms));
  const rows = ordered(trace.spans).map(([span, depth]) => {
    const notes = NOTES.filter(([key]) => key in span.attributes)
      .map(([key, label]) => `${label} ${seconds(span.attributes[key])}`);
    if (span.status === "ERROR") notes.push(`error: ${span.status_message || ""}`);
    if (span.attributes["tg.cancelled"]) notes.push("cancelled");
    const left = (span.start_ms / total) * 100;
    const width = Math.max(0.5, (span.duration_ms / total) * 100);
    return h("li", { class: "span", "data-kind": span.kind, "data-status": span.status },
      h("span", { class: "span-name", style: `padding-left: ${depth * 0.8}rem` },
        span.kind === "CLIENT" ? `${span.name} (call)` : span.name,
        h("span", { class: "span-service" }, ` ${span.service}`)),
      h("span", { class: "span-lane" }, h("span", { class: "span-bar",
        style: `left: ${left.toFixed(2)}%; width: ${Math.min(width, 100 - left).toFixed(2)}%`,
        title: `${span.name}: starts ${seconds(span.start_ms)}, takes ${seconds(span.duration_ms)}` })),
      h("span", { class: "span-time" }, seconds(span.duration_ms)),
      notes.length ? h("span", { class: "span-notes" }, notes.join(" · ")) : null);
  });
  return h("section", { class: "waterfall" },
    h("h4", {}, `Trace ${trace.trace_id} · ${seconds(total)} · ${trace.spans.length} spans`),
    h("ol", { class: "spans" }, rows));
}

function scores(candidate) {
  return Object.entries(candidate.scores || {})
    .map(([name, value]) => `${name} ${typeof value === "number" ? +value.toPrecision(3) : value}`)
    .join(" · ");
}

export function explanation(found) {
  const candidates = [...(found.candidates || [])].sort((a, b) => b.kept - a.kept);
  return h("section", { class: "explanation" },
    h("h4", {}, `Why these sources: ${found.kept} kept of ${found.considered} considered`),
    found.optimized_query ? h("p", {}, `Searched for: ${found.searches.join(" | ")}`) : null,
    (found.seeds || []).length ? h("p", { class: "seeds" }, "Seeds: ",
      found.seeds.map((seed) => `${seed.label || seed.entity} (${seed.score.toFixed(3)})`)
        .join(", ")) : null,
    h("ol", { class: "candidates" }, candidates.map((c) =>
      h("li", { class: "candidate", "data-kept": String(c.kept) },
        h("span", { class: "kept" }, c.kept ? "kept" : "dropped"), ` ${c.text} `,
        h("span", { class: "span-notes" }, scores(c))))),
    h("p", { class: "note" }, `Prompt ${found.template}, ${found.prompt_chars} characters; ` +
      `model ${found.model || "?"}`));
}

// The trace panel of one answer, filled when first opened.
export function tracePanel(traceId, load) {
  const panel = h("section", { class: "trace", "data-trace": traceId }, h("p", { class: "note" },
    "reading the trace…"));
  load(traceId).then(({ trace, explained }) => {
    if (!trace) return fill(panel, h("p", { class: "note" },
      "This trace is not kept (tracing off, sampled out, or dropped for space)."));
    fill(panel, waterfall(trace), explained ? explanation(explained) : null);
    panel.dataset.state = "shown";
  }).catch((error) => fill(panel, h("p", { class: "error" }, String(error.message || error))));
  return panel;
}
