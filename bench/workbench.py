"""``make bench`` (workbench part): how fast the page paints, and what it adds to the
first answer token, from the browser's own performance marks.

The default stack (``tg-start``, gateway with a token) with one small document
loaded, a scripted OpenAI-format LLM in its own process (first token after 200 ms,
then one every 10 ms), and Debian's headless Chromium.

* first paint: ``first-paint`` / ``first-contentful-paint`` of the page and its
  ``tg:connected`` mark (socket open and token accepted): once from an empty
  profile (cold), then the median of reloads (assets cached, as for a returning user);
* ask → first token: ``tg:ask`` (the question submitted, as Enter does) to
  ``tg:first-token`` (the first token drawn in the page), document-rag, in rounds
  with the LLM server asked straight, and the page's exact request sent by a raw
  websocket client and by a bare socket in the same browser, so the report can say
  what the whole stack adds beyond the LLM's own TTFT and what the page adds. The
  LLM's own TTFT is what a client asking the server straight sees (the headline
  figure); the same figure against the server's scripted delay alone (what the
  server itself counts, without the HTTP exchange) is printed beside it;
* where the page's time goes: its own code (submit → send, chunk received → token
  in the DOM) against the time its socket waits, and a gateway round trip with no
  bus from the page and from a raw client.
"""
import argparse
import asyncio
import json
import time
from dataclasses import dataclass, field

import aiohttp

from bench import clients
from bench.stats import median, percentile
from bench.streaming import llm_server
from tests.support.browser import chromium, missing
from tests.support.stack import Stack
from tests.support.workbench import WorkbenchPage
from trustgraph.api import TrustGraph

TOKEN = "bench-token"
USER, COLLECTION = "bench", "workbench"
QUESTION = "Who walked on the Moon?"
LLM_FIRST = 0.2  # s: the scripted LLM's delay before its first token
# The request exactly as the page sends it with its default settings.
REQUEST = {"query": QUESTION, "user": USER, "collection": COLLECTION, "streaming": True,
           "doc-limit": 20, "optimize-query": False, "subqueries": False}
DOCUMENT = ("The Apollo lunar module Eagle landed in the Sea of Tranquility. Neil Armstrong "
            "and Buzz Aldrin walked on the Moon while Michael Collins orbited in the "
            "command module Columbia.")
# Installed before the page's own scripts: when the page sends a request and when
# the socket hands it the sources and the first answer chunk, so the page's time
# can be split into its own code (before the send, after the receipt) and the
# browser's network path (send to receipt) beyond what a raw client sees.
SOCKET_LOG = """
const Native = window.WebSocket;
window.__ws = [];
window.WebSocket = class extends Native {
  constructor(...args) {
    super(...args);
    this.addEventListener('message', (event) => {
      const data = String(event.data);
      if (data.includes('"message_type":"metadata"')) __ws.push(['metadata', performance.now()]);
      else if (/"chunk":"[^"]/.test(data)) __ws.push(['chunk', performance.now()]);
    });
  }
  send(data) {
    if (String(data).includes('"service":"document-rag"')) __ws.push(['send', performance.now()]);
    return super.send(data);
  }
};
"""
# For the newest request: times relative to its tg:ask mark.
SPLIT = """
const ask = performance.getEntriesByName('tg:ask').pop().startTime;
const out = {};
for (const [name, t] of __ws) if (t >= ask && out[name] === undefined) out[name] = t - ask;
return out;
"""
# A gateway round trip with no bus behind it (an unknown service is refused at
# once), from a socket in the page and from a raw client: what the browser's own
# socket path costs, whatever page runs in it.
PAGE_ROUND_TRIPS = """
const [url, rounds, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
const ws = new WebSocket(url);
const times = [];
let started;
const next = () => {
  started = performance.now();
  ws.send(JSON.stringify({id: 'rt', service: 'no-such-service', request: {}}));
};
ws.onmessage = () => {
  times.push(performance.now() - started);
  if (times.length === rounds) { ws.close(); done(times); } else next();
};
ws.onopen = next;
"""
# Asks as Enter does, without WebDriver's key events (chromedriver keeps working in
# the page for a while after a key command, which a user's browser does not).
SUBMIT = """
document.querySelector(`#ask-form input[name=mode][value=${arguments[1]}]`).checked = true;
document.getElementById('question').value = arguments[0];
document.getElementById('ask-form').requestSubmit();
"""
# The same question from a bare socket in the browser, with no page work around
# it: (sources, first token) after the send, in ms.
BARE_ASK = """
const [url, request, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
const go = (ws) => {
  let started = performance.now(), metadata;
  ws.onmessage = (event) => {
    const response = JSON.parse(event.data).response || {};
    if (metadata === undefined && response.message_type === 'metadata') {
      metadata = performance.now() - started;
    }
    if (response.chunk) { ws.onmessage = null; done([metadata, performance.now() - started]); }
  };
  ws.send(JSON.stringify({id: 'bare' + Math.random(), service: 'document-rag', request}));
};
if (window.__bare && window.__bare.readyState === 1) go(window.__bare);
else { const ws = window.__bare = new WebSocket(url); ws.onopen = () => go(ws); }
"""
PAINT = """
const paint = Object.fromEntries(performance.getEntriesByType('paint')
  .map(e => [e.name, e.startTime]));
const connected = performance.getEntriesByName('tg:connected')[0];
return {fp: paint['first-paint'], fcp: paint['first-contentful-paint'],
        connected: connected ? connected.startTime : null};
"""


def load_corpus(stack: Stack) -> None:
    with TrustGraph(stack.gateway_url, TOKEN) as client:
        client.load_text(DOCUMENT, "apollo.txt", user=USER, collection=COLLECTION)
        deadline = time.monotonic() + 120
        while client.load_status(["apollo.txt"], user=USER, collection=COLLECTION
                                 )[0]["state"] != "done":
            assert time.monotonic() < deadline, "the document was not stored in 120 s"
            time.sleep(0.2)


def ask_in_page(page: WorkbenchPage, mode: str) -> dict:
    """The page's turn for ``QUESTION`` asked in ``mode``, once finished."""
    # WebDriver polls run scripts on the page's main thread; none runs while the
    # answer streams, so the marks are the page's alone.
    page.tab("ask")
    page.js(SUBMIT, QUESTION, mode)
    time.sleep(1.0)
    return page.finished()


def other_modes(page: WorkbenchPage, llm: str, loop: asyncio.AbstractEventLoop,
                rounds: int) -> dict[str, list[float] | str]:
    """Per mode the page runs besides document: the page's ask -> first token beyond
    the LLM's TTFT asked straight just before, or why the mode gave no figure. The
    agent is left out: the scripted LLM's tokens are no ReAct step for it to act on."""
    found: dict[str, list[float] | str] = {}
    for mode in ("graph", "lazy"):
        beyond = []
        for _ in range(rounds):
            direct = loop.run_until_complete(direct_ttft(llm))
            time.sleep(0.3)
            turn = ask_in_page(page, mode)
            if turn["state"] != "done" or "first-token" not in turn["marks"]:
                beyond = f"no figure: the turn ended {turn['state']}: {turn.get('error')}"
                break
            beyond.append(turn["marks"]["first-token"] / 1000 - direct)
            time.sleep(0.3)
        found[mode] = beyond
    return found


def paint_times(page: WorkbenchPage) -> dict:
    page.wait(lambda: None not in page.js(PAINT).values(), "the paint and the socket", 30)
    return page.js(PAINT)


async def socket_ttft(gateway: str) -> tuple[float, float]:
    """(sources, first answer token) after the send, for a raw websocket client."""
    url = f"{gateway.replace('http', 'ws', 1)}api/v1/socket?token={TOKEN}"
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        started = time.perf_counter()
        await ws.send_str(json.dumps({"id": "b", "service": "document-rag",
                                      "request": REQUEST}))
        metadata = first = None
        while True:
            frame = json.loads((await ws.receive()).data)
            response = frame.get("response") or {}
            if metadata is None and response.get("message_type") == "metadata":
                metadata = time.perf_counter() - started
            if first is None and response.get("chunk"):
                first = time.perf_counter() - started
            if frame.get("complete"):
                return metadata, first


async def socket_round_trips(gateway: str, rounds: int) -> list[float]:
    url = f"{gateway.replace('http', 'ws', 1)}api/v1/socket?token={TOKEN}"
    times = []
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        for _ in range(rounds):
            started = time.perf_counter()
            await ws.send_str('{"id":"rt","service":"no-such-service","request":{}}')
            await ws.receive()
            times.append(time.perf_counter() - started)
    return times


async def direct_ttft(llm: str) -> float:
    async with aiohttp.ClientSession() as session:
        return (await clients.direct(session, llm, "openai"))[0]


def report(name: str, values: list[float]) -> str:
    return (f"{name:<46} p50 {median(values) * 1000:7.1f} ms   "
            f"p90 {percentile(values, 90) * 1000:7.1f} ms")


@dataclass
class Asks:
    """The rounds' times (seconds) of each way of asking document-rag."""

    direct: list[float] = field(default_factory=list)  # the LLM asked straight
    socket_sources: list[float] = field(default_factory=list)  # a raw websocket client
    socket: list[float] = field(default_factory=list)
    bare_sources: list[float] = field(default_factory=list)  # a bare socket in the browser
    bare: list[float] = field(default_factory=list)
    sources: list[float] = field(default_factory=list)  # the page
    in_page: list[float] = field(default_factory=list)
    splits: list[dict] = field(default_factory=list)  # the page's marks (ms)


def ask_rounds(page: WorkbenchPage, llm: str, loop: asyncio.AbstractEventLoop,
               gateway: str, socket_url: str, rounds: int) -> Asks:
    asks = Asks()

    def raw_client() -> None:
        metadata, first = loop.run_until_complete(socket_ttft(gateway))
        asks.socket_sources.append(metadata)
        asks.socket.append(first)

    def in_the_page() -> None:
        turn = ask_in_page(page, "document")
        assert turn["state"] == "done", turn
        asks.in_page.append(turn["marks"]["first-token"] / 1000)
        asks.sources.append(turn["marks"]["sources"] / 1000)
        asks.splits.append({**page.js(SPLIT), **turn["marks"]})

    def bare_socket() -> None:
        metadata, first = page.driver.execute_async_script(BARE_ASK, socket_url, REQUEST)
        asks.bare_sources.append(metadata / 1000)
        asks.bare.append(first / 1000)

    for round in range(rounds):
        asks.direct.append(loop.run_until_complete(direct_ttft(llm)))
        # Each starts on a settled stack, in alternating order, so neither
        # pays for what the other left running.
        for measure in (raw_client, bare_socket, in_the_page)[::1 if round % 2 else -1]:
            time.sleep(0.3)
            measure()
    return asks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--reloads", type=int, default=10)
    parser.add_argument("--mode-rounds", type=int, default=10,
                        help="rounds of each other mode (graph, lazy)")
    args = parser.parse_args()
    if missing():
        raise SystemExit(f"bench.workbench: {missing()}")

    loop = asyncio.new_event_loop()
    with llm_server(tokens=20, first=LLM_FIRST, delay=0.01) as llm, \
            Stack(env={"OPENAI_BASE_URL": f"{llm}/v1", "OPENAI_API_KEY": "bench"},
                  token=TOKEN, startup_timeout=180) as stack:
        load_corpus(stack)
        with chromium() as driver:
            driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument",
                                   {"source": SOCKET_LOG})
            page = WorkbenchPage(driver, stack.gateway_url)
            page.open(TOKEN)
            cold = paint_times(page)
            warm = []
            for _ in range(args.reloads):
                page.driver.refresh()
                warm.append(paint_times(page))
            page.set_scope(USER, COLLECTION)
            socket_url = f"{stack.gateway_url.replace('http', 'ws', 1)}api/v1/socket?token={TOKEN}"
            page_trips = [t / 1000 for t in driver.execute_async_script(
                PAGE_ROUND_TRIPS, socket_url, 50)]
            raw_trips = loop.run_until_complete(socket_round_trips(stack.gateway_url, 50))
            asks = ask_rounds(page, llm, loop, stack.gateway_url, socket_url, args.rounds)
            # --mode-rounds 0: document-rag only.
            modes = other_modes(page, llm, loop, args.mode_rounds) if args.mode_rounds else {}
    loop.close()

    print(f"bench.workbench: page paint (Chromium {driver.capabilities.get('browserVersion')}"
          f", headless, loopback)")
    print(f"  cold (empty profile): first paint {cold['fp']:.1f} ms, first contentful paint "
          f"{cold['fcp']:.1f} ms, connected {cold['connected']:.1f} ms")
    for key, label in (("fp", "first paint"), ("fcp", "first contentful paint"),
                       ("connected", "connected (socket open, token accepted)")):
        print("  " + report(f"warm {label}", [w[key] / 1000 for w in warm]))
    print_asks(asks, args.rounds)
    if modes:
        print(f"bench.workbench: the page's ask -> first token in the other modes, beyond "
              f"the LLM's TTFT, {args.mode_rounds} rounds")
    for mode, beyond in modes.items():
        print("  " + (report(f"{mode}", beyond) if isinstance(beyond, list)
                      else f"{mode:<46} {beyond}"))
    print_round_trips(raw_trips, page_trips, asks.splits)


def print_asks(asks: Asks, rounds: int) -> None:
    print(f"bench.workbench: ask -> first token, document-rag, {rounds} rounds "
          f"(LLM: first token after {LLM_FIRST * 1000:g} ms)")
    print("  " + report("LLM straight (its own TTFT)", asks.direct))
    print("  " + report("raw websocket client: sources", asks.socket_sources))
    print("  " + report("raw websocket client: first token", asks.socket))
    print("  " + report("bare socket in the browser: sources", asks.bare_sources))
    print("  " + report("bare socket in the browser: first token", asks.bare))
    print("  " + report("page: tg:ask -> tg:sources", asks.sources))
    print("  " + report("page: tg:ask -> tg:first-token", asks.in_page))
    beyond_llm = [p - d for p, d in zip(asks.in_page, asks.direct, strict=True)]
    beyond_socket = [p - s for p, s in zip(asks.in_page, asks.socket, strict=True)]
    print("  " + report("page beyond the LLM's TTFT (target <= 30 ms)", beyond_llm))
    print("  " + report("  of which the page beyond a raw client", beyond_socket))
    print("  " + report("  of which the page beyond a bare browser socket",
                        [p - b for p, b in zip(asks.in_page, asks.bare, strict=True)]))
    print("  " + report(f"page beyond the server's {LLM_FIRST * 1000:g} ms delay alone",
                        [p - LLM_FIRST for p in asks.in_page]))


def print_round_trips(raw_trips: list[float], page_trips: list[float],
                      splits: list[dict]) -> None:
    print("bench.workbench: gateway round trip with no bus (unknown service refused), 50 each")
    print("  " + report("raw websocket client", raw_trips))
    print("  " + report("a socket in the page (Chromium's socket path)", page_trips))
    print("  where the page's time goes (median over rounds):")
    for label, values in (
            ("its code, Enter -> request sent", [s["send"] for s in splits]),
            ("browser socket, sent -> first chunk received",
             [s["chunk"] - s["send"] for s in splits]),
            ("its code, chunk received -> token in the DOM",
             [s["first-token"] - s["chunk"] for s in splits])):
        print("  " + report(f"  {label}", [v / 1000 for v in values]))


if __name__ == "__main__":
    main()
