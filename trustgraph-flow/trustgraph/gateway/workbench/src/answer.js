// One question and its answer as it streams in: sources (before the first token),
// agent steps, the answer as sanitised Markdown, LazyRAG's confidence and missing
// information, timings and token usage, and the error if there is one.
//
// The page marks its own progress with the User Timing API (`tg:ask`, `tg:sources`,
// `tg:first-token`, `tg:done`, each with the request id in `detail`), which the
// browser tests and bench/workbench.py read.
//
// The answer arrives as the events reader.js makes of its frames (`show`); every
// call they make is also logged (`this.log`), so a finished turn can be kept
// (history.js) and drawn again by replaying it through the same methods. The final
// frame's trace id gives the turn a Trace button: the waterfall and, for a RAG answer,
// why it cited what it cited (trace-view.js).
import { fill, h, seconds, termText } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { tracePanel } from "./trace-view.js";

const STEP_LABELS = { thought: "Thought", action: "Action", observation: "Observation" };
const SOURCES_SHOWN = 8; // the rest behind "Show all": a graph answer can cite 150 triples

export class AnswerView {
  constructor(mode, question, { onStop, onGraph, onFinish = () => {}, readTrace = null }) {
    this.mode = mode;
    this.readTrace = readTrace;
    this.question = question;
    this.log = [];
    this.onFinish = onFinish;
    this.text = "";
    this.hasSources = false;
    this.triples = [];
    this.started = performance.now();
    this.times = {};
    this.onGraph = onGraph;
    this.stopButton = h("button", { type: "button", class: "stop", onclick: onStop }, "Stop");
    this.element = h("article", { class: "turn", "data-mode": mode, "data-state": "streaming" },
      h("h3", { class: "question" }, h("span", { class: "badge" }, mode), " ", question),
      (this.metaLine = h("p", { class: "meta" }, "asking…")),
      (this.sourceBox = h("section", { class: "sources", hidden: true })),
      (this.rewrites = h("p", { class: "rewrites", hidden: true })),
      (this.stepBox = h("section", { class: "steps", hidden: true })),
      (this.answer = h("div", { class: "answer markdown", "aria-live": "polite" })),
      (this.lazyBox = h("section", { class: "lazy", hidden: true })),
      (this.errorBox = h("p", { class: "error", role: "alert", hidden: true })),
      (this.actions = h("div", { class: "actions" }, this.stopButton)));
  }

  mark(name) {
    if (this.times[name] !== undefined || this.replaying) return;
    this.times[name] = performance.now() - this.started;
    performance.mark(`tg:${name}`, { detail: this.id });
  }

  // A kept turn ({mode, question, log, times}) drawn again.
  static replay(kept, handlers) {
    const view = new AnswerView(kept.mode, kept.question, handlers);
    view.replaying = true;
    for (const [method, ...args] of kept.log) view[method](...args);
    view.times = kept.times || {};
    view.status();
    return view;
  }

  // What history.js keeps: the log with consecutive tokens joined, snippets cut short.
  kept() {
    const log = [];
    for (const entry of this.log) {
      const last = log[log.length - 1];
      if (entry[0] === "token" && last && last[0] === "token") last[1] += entry[1];
      else if (entry[0] === "sources") log.push(["sources", entry[1].map((source) =>
        ({ ...source, text: (source.text || "").slice(0, 1500) })), ...entry.slice(2)]);
      else log.push(entry);
    }
    return { mode: this.mode, question: this.question, log, times: this.times };
  }

  // --- what the stream calls ----------------------------------------------------

  // One of reader.js's events.
  show(event) {
    switch (event.type) {
      case "opened":
        if (event.sources !== null) {
          this.sources(event.sources, event.optimizedQuery, event.subqueries);
        }
        break;
      case "sources": if (!this.hasSources) this.sources(event.sources); break;
      case "text": this.token(event.delta); break;
      case "step": this.step(event.kind, event.delta, event.ends); break;
      case "done": this.final(event); break;
      case "error": this.error(event.message); break;
    }
  }

  sources(sources, optimizedQuery, subqueries = []) {
    this.log.push(["sources", sources, optimizedQuery, subqueries]);
    this.mark("sources");
    this.hasSources = sources.length > 0;
    for (const source of sources) {
      if (source.s !== undefined && source.o !== undefined) {
        this.triples.push({ s: source.s, p: source.p, o: source.o });
      }
    }
    // The rest are built when asked for: this frame comes just before the first
    // token, and a graph answer can cite 150 triples.
    const list = h("ol", {}, sources.slice(0, SOURCES_SHOWN).map((source) => this.source(source)));
    const more = sources.length > SOURCES_SHOWN ? h("button", { type: "button",
      class: "secondary more", onclick: () => {
        list.append(...sources.slice(SOURCES_SHOWN).map((source) => this.source(source)));
        more.remove();
      } }, `Show all ${sources.length} sources`) : null;
    fill(this.sourceBox,
      h("h4", {}, sources.length ? `Sources (${sources.length})`
        : "Sources: nothing in this collection matched"), list, more);
    this.sourceBox.hidden = false;
    if (optimizedQuery || subqueries.length) {
      fill(this.rewrites,
        optimizedQuery ? `Rewritten: ${optimizedQuery}` : "",
        subqueries.length ? ` · Sub-questions: ${subqueries.join(" | ")}` : "");
      this.rewrites.hidden = false;
    }
    if (this.triples.length) this.graphButton();
    this.status();
  }

  source(source) {
    const triple = source.s !== undefined && source.o !== undefined;
    const distance = typeof source.distance === "number" ? source.distance.toFixed(3) : null;
    const heading = triple
      ? h("span", { class: "triple" }, termText(source.s), " – ", termText(source.p), " – ",
        termText(source.o))
      : h("span", {}, source.title || source.document_id || source.id || "source");
    return h("li", { class: "source" }, h("details", {},
      h("summary", {}, heading,
        source.document_id ? h("span", { class: "doc" }, ` ${source.document_id}`) : null,
        distance !== null ? h("span", { class: "distance" }, ` d=${distance}`) : null),
      source.text ? h("blockquote", { class: "snippet" }, source.text) : null,
      source.id ? h("p", { class: "chunk-id" }, source.id) : null));
  }

  step(kind, content, endOfMessage) {
    this.log.push(["step", kind, content, endOfMessage]);
    let step = this.openStep;
    if (!step || step.kind !== kind) {
      const body = h("div", { class: "step-body" });
      const element = h("details", { class: `step step-${kind}` },
        h("summary", {}, STEP_LABELS[kind] || kind), body);
      step = this.openStep = { kind, body, element, text: "" };
      this.stepBox.append(element);
      this.stepBox.hidden = false;
    }
    step.text += content;
    step.body.textContent = step.text;
    if (endOfMessage) this.openStep = null;
  }

  token(delta) {
    if (!delta) return;
    this.log.push(["token", delta]);
    this.openStep = null;
    this.text += delta;
    if (this.times["first-token"] === undefined) {
      // The first token is drawn at once (it is what the user waits for); later ones
      // are drawn once per animation frame, however many arrived in between.
      renderMarkdown(this.answer, this.text);
      this.mark("first-token");
      this.status();
    } else if (!this.frame) {
      this.frame = requestAnimationFrame(() => {
        this.frame = null;
        renderMarkdown(this.answer, this.text);
      });
    }
  }

  // The request's trace id (its final frame's): a button opening its trace.
  traced(traceId) {
    this.log.push(["traced", traceId]);
    if (!this.readTrace || this.traceButton) return;
    this.traceButton = h("button", { type: "button", class: "secondary show-trace",
      "aria-expanded": "false", onclick: () => this.toggleTrace(traceId) }, "Trace");
    this.actions.append(this.traceButton);
  }

  toggleTrace(traceId) {
    if (!this.tracePanel) {
      this.tracePanel = tracePanel(traceId, this.readTrace);
      this.element.append(this.tracePanel);
    } else {
      this.tracePanel.hidden = !this.tracePanel.hidden;
    }
    this.traceButton.setAttribute("aria-expanded", String(!this.tracePanel.hidden));
  }

  // The answer's end (reader.js's done event): its usage, and the service's result.
  final(done) {
    this.log.push(["final", done]);
    cancelAnimationFrame(this.frame);
    this.frame = null;
    renderMarkdown(this.answer, this.text);
    this.mark("done");
    this.usage = done.usage || null;
    this.lazy(done.result || {});
    this.finish("done");
  }

  // LazyRAG's result: the confidence, what the graph does not cover, the subgraph.
  lazy(result) {
    if (typeof result.confidence !== "number" && !result.missing_info) return;
    const percent = Math.round((result.confidence || 0) * 100);
    const missing = result.missing_info || [];
    fill(this.lazyBox,
      h("p", {}, "Confidence ",
        h("meter", { min: 0, max: 100, value: percent, "aria-label": "confidence" }),
        ` ${percent} %`),
      missing.length ? h("div", {}, h("h4", {}, "Not covered by the graph"),
        h("ul", {}, missing.map((item) => h("li", {}, item)))) : null);
    this.lazyBox.hidden = false;
    for (const r of result.relationships || []) {
      const s = r.s ?? r.source, p = r.p ?? r.relation ?? r.predicate ?? r.type, o = r.o ?? r.target;
      if (s !== undefined && o !== undefined) this.triples.push({ s, p: p ?? "related", o });
    }
    if (this.triples.length) this.graphButton();
  }

  error(message, state = "error") {
    this.log.push(["error", message, state]);
    this.errorBox.textContent = message;
    this.errorBox.hidden = false;
    if (this.text) renderMarkdown(this.answer, this.text);
    this.finish(state);
  }

  stopped() {
    this.log.push(["stopped"]);
    if (this.text) renderMarkdown(this.answer, this.text);
    this.finish("stopped");
  }

  // --- state ----------------------------------------------------------------------

  finish(state) {
    if (this.element.dataset.state !== "streaming") return; // e.g. an error after Stop
    this.element.dataset.state = state;
    this.stopButton.remove();
    this.status();
    if (!this.replaying) this.onFinish(this);
  }

  graphButton() {
    if (this.graphShown) return;
    this.graphShown = h("button", { type: "button", class: "show-graph",
      onclick: () => this.onGraph(this.triples) }, "Show subgraph");
    this.actions.append(this.graphShown);
  }

  status() {
    const t = this.times;
    const parts = [];
    if (t.sources !== undefined) parts.push(`sources ${seconds(t.sources)}`);
    if (t["first-token"] !== undefined) parts.push(`first token ${seconds(t["first-token"])}`);
    if (t.done !== undefined) parts.push(`total ${seconds(t.done)}`);
    if (this.usage) parts.push(`tokens ${this.usage.in} in / ${this.usage.out} out` +
      (this.usage.model ? ` (${this.usage.model})` : ""));
    const state = this.element.dataset.state;
    if (state === "stopped") parts.push("stopped");
    this.metaLine.textContent = parts.join(" · ") || "waiting…";
  }
}
