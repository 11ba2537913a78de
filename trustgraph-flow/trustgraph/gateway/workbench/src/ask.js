// The Ask view: the mode switch (with the modes this stack does not run switched
// off and saying why), the question box, and the conversation: one AnswerView per
// turn, kept across reloads of the tab. An agent conversation keeps one session_id
// across turns until "New conversation".
//
// A new turn enters the page with the first frame of its answer (the sources,
// normally some tens of ms after Enter), or after FIRST_DRAW_WAIT if that takes
// longer: drawing it at once costs the browser a whole frame (style, layout, paint
// and, without a GPU, compositing the viewport the new turn shifts) just while the
// stack retrieves for this very question, and a page is often on the same machine
// as the stack. The box empties at once, and the request goes out at once.
import { AnswerView } from "./answer.js";
import { $ } from "./dom.js";
import { agentSession, forgetTurns, keep, keptTurns } from "./history.js";
import { ABSENT, MODES, absence } from "./modes.js";
import { answerReader } from "./reader.js";
import { readTrace } from "./trace-view.js";

const FIRST_DRAW_WAIT = 100; // ms: below what a person notices as a delay

export class AskPanel {
  constructor(root, { gateway, settings, onGraph }) {
    this.root = root;
    this.gateway = gateway;
    this.settings = settings;
    this.onGraph = onGraph;
    this.form = $("#ask-form", root);
    this.question = $("#question", root);
    this.history = $("#history", root);
    this.modeNote = $("#mode-note", root);
    this.session = agentSession();
    this.current = null;
    this.handlers = { onGraph, onFinish: (view) => keep(view.kept()),
      readTrace: (traceId) => readTrace(traceId, this.gateway.token) };
    for (const kept of keptTurns()) {
      this.history.append(AnswerView.replay(kept, this.handlers).element);
    }

    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.ask();
    });
    // Enter asks, Shift+Enter starts a new line; Escape stops the answer streaming.
    this.question.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.ask();
      }
    });
    root.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.current) this.current.stop();
    });
    $("#new-conversation", root).addEventListener("click", () => {
      this.session = agentSession(true);
      forgetTurns();
      this.history.replaceChildren();
      this.question.focus();
    });
  }

  mode() {
    return this.form.elements.mode.value;
  }

  // modes: {document: {on, why}, ...} from probeModes.
  setModes(modes) {
    this.lastModes = modes;
    const off = [];
    for (const input of this.form.elements.mode) {
      const state = modes[input.value] || { on: true };
      input.disabled = !state.on;
      input.closest("label").title = state.on ? "" : state.why;
      if (!state.on) off.push(`${MODES[input.value].label}: ${state.why}`);
    }
    if (this.form.elements.mode.value === "" || modes[this.mode()]?.on === false) {
      const first = [...this.form.elements.mode].find((input) => !input.disabled);
      if (first) first.checked = true;
    }
    this.modeNote.textContent = off.length ? `Off on this stack — ${off.join("; ")}` : "";
    this.modeNote.hidden = off.length === 0;
  }

  ask() {
    const question = this.question.value.trim();
    if (!question || this.current) return;
    const mode = this.mode();
    const spec = MODES[mode];
    performance.mark("tg:ask");
    const view = new AnswerView(mode, question, {
      ...this.handlers, onStop: () => this.current && this.current.stop() });
    const draw = this.drawLater(view);
    const settings = this.settings();
    const read = answerReader();
    const handle = this.gateway.request(spec.service, spec.request(question, settings, this.session), {
      flow: settings.flow || "default",
      traced: true, // its answer opens its trace: kept whatever the gateway samples
      onFrame: (response, complete, traceId) => {
        draw();
        if (traceId) view.traced(traceId); // before the done event keeps the turn
        for (const event of read(response, complete)) view.show(event);
      },
    });
    view.id = handle.id;
    view.element.dataset.id = handle.id;
    this.current = {
      stop: () => {
        handle.cancel();
        view.stopped();
      },
    };
    this.setBusy(true);
    this.question.value = "";
    handle.done.catch((error) => {
      draw();
      if (error.type === "cancelled") return;
      if (ABSENT.has(error.type)) {
        this.setModes({ ...this.lastModes, [mode]: { on: false, why: absence(spec.service, error) } });
      }
      view.error(`${error.type}: ${error.message}`);
    }).finally(() => {
      this.current = null;
      this.setBusy(false);
    });
  }

  // Puts the turn in the conversation (once): call it when its first frame comes;
  // it happens by itself after FIRST_DRAW_WAIT.
  drawLater(view) {
    let timer = null;
    const draw = () => {
      if (timer === null) return;
      clearTimeout(timer);
      timer = null;
      this.history.append(view.element);
      view.element.scrollIntoView({ block: "nearest" });
    };
    timer = setTimeout(draw, FIRST_DRAW_WAIT);
    return draw;
  }

  setBusy(busy) {
    this.root.classList.toggle("busy", busy);
    $("#ask-button", this.root).disabled = busy;
    if (!busy && !this.root.hidden) this.question.focus();
  }
}
