// The gateway's websocket (docs/protocol.md §1) as the page uses it: one socket
// carrying every request, an auth frame first, frames routed to their request by id,
// and automatic reconnection. Nothing here knows any service's payload.

const RECONNECT_DELAYS = [250, 500, 1000, 2000, 4000]; // ms, then the last one for ever

export class GatewayError extends Error {
  constructor(type, message) {
    super(message);
    this.type = type;
  }
}

export class Gateway extends EventTarget {
  constructor(url, token) {
    super();
    this.url = url;
    this.token = token || "";
    this.state = "connecting"; // connecting | open | refused | closed
    this.pending = new Map(); // id -> {onFrame, resolve, reject}
    this.waiting = []; // sends queued until the socket is open and authenticated
    this.attempt = 0;
    this.counter = 0;
    this.connect();
  }

  // --- the socket ---------------------------------------------------------------

  connect() {
    clearTimeout(this.retryTimer);
    this.setState("connecting");
    const ws = (this.ws = new WebSocket(this.url));
    // The auth frame goes first on every socket: with no token configured the gateway
    // answers auth-ok whatever we send, so the page needs no separate "is auth on?"
    // question, and a wrong token is refused before any request is sent.
    ws.onopen = () => ws.send(JSON.stringify({ type: "auth", token: this.token }));
    ws.onmessage = (event) => this.onMessage(JSON.parse(event.data));
    ws.onclose = () => this.onClose(ws);
  }

  setToken(token) {
    this.token = token || "";
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify({ type: "auth", token: this.token }));
    } else {
      this.connect();
    }
  }

  setState(state, detail = "") {
    this.state = state;
    this.dispatchEvent(new CustomEvent("state", { detail: { state, detail } }));
  }

  onMessage(frame) {
    if (frame.type === "auth-ok") {
      this.attempt = 0;
      this.setState("open");
      for (const send of this.waiting.splice(0)) send();
      return;
    }
    if (frame.type === "auth-failed") {
      this.setState("refused", frame.error || "auth failure");
      this.waiting.length = 0;
      for (const [id, request] of this.pending) this.fail(id, request, "auth-failed",
        "the gateway refused the token");
      return;
    }
    const request = this.pending.get(frame.id);
    if (!request) return; // cancelled: the gateway may still have had a frame in flight
    if (frame.error) return this.fail(frame.id, request, frame.error.type, frame.error.message);
    const error = frame.response && frame.response.error;
    if (error) return this.fail(frame.id, request, error.type, error.message);
    request.onFrame(frame.response, frame.complete, frame.trace_id);
    if (frame.complete) {
      this.pending.delete(frame.id);
      request.resolve(frame.response);
    }
  }

  onClose(ws) {
    if (ws !== this.ws) return; // an old socket, already replaced
    this.waiting.length = 0;
    for (const [id, request] of this.pending) this.fail(id, request, "connection",
      "the connection to the gateway was lost");
    const delay = RECONNECT_DELAYS[Math.min(this.attempt++, RECONNECT_DELAYS.length - 1)];
    this.setState("closed", `reconnecting in ${(delay / 1000).toFixed(1)} s`);
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }

  fail(id, request, type, message) {
    this.pending.delete(id);
    request.reject(new GatewayError(type, message));
  }

  send(frame) {
    const go = () => this.ws.send(JSON.stringify(frame));
    if (this.state === "open") go();
    else this.waiting.push(go);
  }

  // --- requests -----------------------------------------------------------------

  // Starts one request. `onFrame(response, complete, traceId)` sees every response
  // object in order (the last with the request's trace id, when it is traced); the
  // returned `done` settles with the last one, or rejects with a GatewayError (a
  // gateway error, a service's error, a lost connection). `traced`: the gateway is
  // asked to keep its trace, whatever share of traces it keeps of its own accord.
  request(service, request, { flow = "default", onFrame = () => {}, traced = false } = {}) {
    const id = `wb-${Date.now().toString(36)}-${++this.counter}`;
    const done = new Promise((resolve, reject) => {
      if (this.state === "refused") {
        return reject(new GatewayError("auth-failed", "the gateway refused the token"));
      }
      this.pending.set(id, { onFrame, resolve, reject });
      const frame = { id, service, request };
      if (flow) frame.flow = flow;
      if (traced) frame.traceparent = traceparent();
      this.send(frame);
    });
    const cancel = () => {
      const entry = this.pending.get(id);
      if (!entry) return;
      this.send({ type: "cancel", id });
      this.fail(id, entry, "cancelled", "stopped");
    };
    return { id, done, cancel };
  }

  // One request whose whole answer is its final response (loads, listings, queries).
  call(service, request, flow = "default") {
    return this.request(service, request, { flow }).done;
  }
}

// A new W3C traceparent with the sampled flag: a trace of this page's own.
function traceparent() {
  const hex = (bytes) => Array.from(crypto.getRandomValues(new Uint8Array(bytes)),
    (byte) => byte.toString(16).padStart(2, "0")).join("");
  return `00-${hex(16)}-${hex(8)}-01`;
}

// ws://host/api/v1/socket for the page's own origin.
export function socketUrl(location) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/api/v1/socket`;
}
