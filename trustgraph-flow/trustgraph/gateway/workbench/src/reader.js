// The one place the page reads an answer (docs/protocol.md §2): the response objects
// the websocket brings for a RAG service, LazyRAG or the agent become the few events
// an answer view renders, as the gateway's own answer reader (trustgraph.answers)
// does for its APIs. No other module of the page reads a response's fields.
//
//   {type: "opened", sources, optimizedQuery, subqueries}  the first frame (sources:
//                                                          null when it names none)
//   {type: "sources", sources}                            evidence found later
//   {type: "text", delta}                                 a piece of the answer
//   {type: "step", kind, delta, ends}                     a piece of an agent's step
//   {type: "done", usage, result}                         the last frame: usage is
//                                                          {in, out, model} or null,
//                                                          result what it says beyond
//                                                          an answer's frame (LazyRAG:
//                                                          confidence, missing_info, ...)
//   {type: "error", message}                              an agent's error frame
// (A frame carrying `error` never gets here: gateway.js fails the request with it.)

const STEP_KINDS = new Set(["thought", "action", "observation"]);
// What every answer's frames say; what a final frame says besides is its result.
const FRAME_FIELDS = new Set([
  "message_type", "chunk_type", "chunk", "content", "response", "progress", "sources",
  "optimized_query", "subqueries", "session_id", "end_of_stream", "end_of_session",
  "end_of_message", "end_of_dialog", "in_token", "out_token", "model", "tool",
  "arguments", "route", "error", "trace_id",
]);

// A reader for one answer: call it with each response object and the gateway's
// `complete` flag; it returns that frame's events, in order.
export function answerReader() {
  let opened = false;
  let sourced = false; // some evidence has been shown
  return (response, complete) => {
    const events = [];
    if (response.message_type === "progress") return events;
    const sources = Array.isArray(response.sources) ? response.sources : null;
    if (!opened) {
      opened = true;
      sourced = Boolean(sources && sources.length);
      events.push({ type: "opened", sources, optimizedQuery: response.optimized_query ?? null,
        subqueries: response.subqueries || [] });
    } else if (!sourced && sources && sources.length) {
      sourced = true;
      events.push({ type: "sources", sources });
    }
    const piece = pieceOf(response);
    if (piece) events.push(piece);
    if (complete) events.push(doneOf(response));
    return events;
  };
}

function pieceOf(response) {
  const kind = response.chunk_type;
  if (!kind) {
    // A streamed delta is `chunk`; a service that answered in one frame (no
    // message_type) has the whole answer in `response`.
    const delta = response.message_type ? response.chunk : response.response;
    return delta ? { type: "text", delta } : null;
  }
  const delta = response.content || "";
  const ends = Boolean(response.end_of_message);
  if (kind === "error") return { type: "error", message: delta || "agent error" };
  if (STEP_KINDS.has(kind)) {
    return delta || ends || kind === "action" ? { type: "step", kind, delta, ends } : null;
  }
  return delta ? { type: "text", delta } : null;
}

function doneOf(response) {
  const counted = response.in_token !== undefined || response.out_token !== undefined;
  const result = Object.fromEntries(Object.entries(response)
    .filter(([key]) => !FRAME_FIELDS.has(key)));
  return { type: "done", result,
    usage: counted ? { in: response.in_token || 0, out: response.out_token || 0,
      model: response.model || "" } : null };
}
