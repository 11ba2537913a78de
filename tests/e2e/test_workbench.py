"""The workbench page (``/``) in Debian's headless Chromium, against the default
stack (``tg-start``, gateway with a token) and the local OpenAI-format LLM server;
one stack and one browser for the module.

Everything goes through the page, as a user would: the token is typed in (a wrong
one first), three files are uploaded and their bars watched to 100 %, then
questions are asked in each mode the stack runs. For each answer: the sources are
in the page before the first answer token (a MutationObserver installed before
asking records both), and the rendered answer is the text the LLM streamed; the
agent and LazyRAG are asked for real, and on the session's ingestion stack, which
runs neither, the page switches both off and says why. Stop makes the LLM server
see its client go; model text carrying ``<script>`` and
``<img onerror>`` runs nothing. Set WORKBENCH_SCREENSHOTS=docs/images to save the
README's screenshots.
"""
import os
import time
from pathlib import Path

import pytest
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from tests.support.browser import chromium, missing
from tests.support.openai_server import expected_text
from tests.support.pdf import minimal_pdf
from tests.support.stack import Stack, openai_server_thread
from tests.support.workbench import CannedLlm, WorkbenchPage
from trustgraph.api import TrustGraph

pytestmark = [pytest.mark.skipif(missing() is not None, reason=str(missing())),
              pytest.mark.timeout(120)]

TOKEN = "workbench-secret"
USER, COLLECTION = "web", "space"
FILES = {
    "apollo.txt": b"The Apollo lunar module Eagle landed in the Sea of Tranquility. Neil "
                  b"Armstrong and Buzz Aldrin walked on the Moon while Michael Collins "
                  b"orbited in the command module Columbia.\n",
    "mars.md": b"# Mars\n\nThe rovers Spirit and Opportunity explored the red dust of Mars. "
               b"Curiosity drilled into the rocks of **Gale Crater** looking for water.\n",
    "zanzibar.pdf": minimal_pdf([[
        "Zanzibar was the centre of the East African spice trade.",
        "Merchants from Oman shipped cloves and nutmeg from Stone Town harbour."]]),
}
BROKEN = {"broken.pdf": b"%PDF-1.4\nthis is not really a PDF\n%%EOF\n"}
SHOTS = os.environ.get("WORKBENCH_SCREENSHOTS")


@pytest.fixture(scope="module")
def llm():
    with openai_server_thread(server_class=CannedLlm) as server:
        yield server


@pytest.fixture(scope="module")
def stack(llm):
    with Stack(env={"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test",
                    "TG_REQUEST_TIMEOUT": "20"}, token=TOKEN, startup_timeout=120) as stack:
        yield stack


@pytest.fixture(scope="module")
def client(stack):
    with TrustGraph(stack.gateway_url, TOKEN) as client:
        yield client


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:
        yield driver


@pytest.fixture
def page(browser, stack) -> WorkbenchPage:
    """The page, connected with the right token, scoped to USER / COLLECTION."""
    page = WorkbenchPage(browser, stack.gateway_url)
    if page.js("return document.body?.dataset.connection") != "open":
        page.open(TOKEN)
    page.set_scope(USER, COLLECTION)
    return page


def screenshot(page: WorkbenchPage, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.driver.save_screenshot(str(Path(SHOTS) / f"workbench-{name}.png"))


# --- connecting --------------------------------------------------------------------------

def test_a_wrong_token_is_refused_clearly_and_the_right_one_connects(browser, stack):
    page = WorkbenchPage(browser, stack.gateway_url)
    page.driver.get(stack.gateway_url)
    page.wait(lambda: page.status() == "This gateway needs an API key: sign in.",
              "the page to ask for a key")
    page.enter_token("not-the-token")
    page.wait(lambda: "refused this key (auth failure)" in page.status(), "the refusal")
    assert page.find("#token-form").is_displayed()
    page.enter_token(TOKEN)
    page.wait(lambda: page.status() == "connected", "connected")
    assert not page.find("#token-form").is_displayed()
    assert page.signed_in() == "trustgraph (admin)"  # TG_GATEWAY_TOKEN's holder
    assert page.find("#act-for").is_displayed()  # an admin may act for others


def test_a_users_key_signs_in_as_that_user_and_shows_only_its_collections(browser, stack,
                                                                          client):
    """No user box: the key decides. Alice's collections are offered, not Bob's."""
    for user in ("wb-alice", "wb-bob"):
        client.add_user(user)
        client.add_document(f"{user} notes".encode(), f"{user}-doc", title="notes",
                            user=user, collection=f"{user}-papers")
    secret = client.create_key("wb-alice", "user")["secret"]
    page = WorkbenchPage(browser, stack.gateway_url)
    page.driver.get(stack.gateway_url)
    page.js("sessionStorage.clear()")
    page.driver.refresh()  # a new page: no key held
    page.wait(lambda: page.find("#token-form").is_displayed(), "the page to ask for a key")
    page.enter_token(secret)
    page.wait(lambda: page.status() == "connected", "connected")
    assert page.signed_in() == "wb-alice (user)"
    assert not page.find("#act-for").is_displayed()
    assert "token" not in page.driver.current_url and secret not in page.driver.current_url
    page.wait(lambda: page.all("#collections option"), "the user's collections")
    offered = [o.get_attribute("value") for o in page.all("#collections option")]
    assert offered == ["wb-alice-papers"]
    page.set_scope(None, "wb-alice-papers")
    page.tab("load")
    page.wait(lambda: page.all("#library-rows tr"), "the library list")
    assert [row.get_attribute("data-id") for row in page.all("#library-rows tr")] == [
        "wb-alice-doc"]
    page.find("#sign-out").click()
    page.wait(lambda: page.find("#token-form").is_displayed(), "signed out")
    assert page.js("return sessionStorage.getItem('tg-workbench-token')") is None
    page.js("sessionStorage.clear()")


# --- loading --------------------------------------------------------------------------

def test_three_files_uploaded_reach_100_percent(page, tmp_path, client):
    paths = []
    for name, data in {**FILES, **BROKEN}.items():
        (tmp_path / name).write_bytes(data)
        paths.append(str(tmp_path / name))
    page.upload(paths)

    def settled():
        rows = page.uploads()
        return len(rows) == 4 and all(state in ("done", "failed") for state, _, _ in
                                      rows.values())
    page.wait(settled, "every upload to finish", timeout=60)
    rows = page.uploads()
    for name in FILES:
        state, text, value = rows[name]
        assert (state, value) == ("done", 100), rows[name]
        assert text.startswith("done: ") and "stored" in text
    state, text, _ = rows["broken.pdf"]
    assert state == "failed" and text.startswith("failed: ") and len(text) > 10  # the reason
    assert "3 of 4 files done, 1 failed" in page.text("#batch-text")
    assert page.find("#batch-progress").get_attribute("value") == "100"
    page.wait(lambda: len(page.all("#library-rows tr")) == 4, "the library list")
    assert {row.get_attribute("data-id") for row in page.all("#library-rows tr")} == {
        *FILES, *BROKEN}
    screenshot(page, "documents")
    # Removing the broken one from the library, from the page.
    remove = page.find('#library-rows tr[data-id="broken.pdf"] .remove')
    remove.click()
    remove.click()  # the second press confirms
    page.wait(lambda: len(page.all("#library-rows tr")) == 3, "the removal")


# --- asking -----------------------------------------------------------------------------

def check_streamed(turn: dict, tokens: int) -> None:
    assert turn["state"] == "done", turn
    assert turn["answer"] == expected_text(tokens).strip()
    seen = turn["seen"]
    assert seen["sources"] <= seen["token"] and seen["sourcesAtFirstToken"] > 0, seen
    marks = turn["marks"]
    assert marks["sources"] <= marks["first-token"] <= marks["done"], marks
    assert "first token" in turn["meta"] and f"/ {tokens} out" in turn["meta"]
    assert "null" not in turn["text"] and "undefined" not in turn["text"]


def test_no_demo_model_notice_when_a_real_llm_is_configured(page):
    # This stack's LLM is configured (OPENAI_BASE_URL): the notice the bundled demo
    # model gets (tests/unit/test_llm_choice.py, test_gateway_rest.py) stays hidden.
    told = page.wait(lambda: page.js("return document.querySelector('#llm-notice')"
                                     ".dataset.provider"), "the page to learn the LLM")
    assert told == "openai"
    assert page.js("return document.querySelector('#llm-notice').hidden") is True


def test_document_mode_shows_sources_before_the_first_token(page):
    turn = page.ask("document", "Who walked on the Moon? [tokens=40 delay=0.005]")
    check_streamed(turn, 40)
    assert any("apollo" in source for source in turn["sources"])


def test_modes_the_stack_does_not_run_are_switched_off(browser, ingestion_stack):
    """On the session's ingestion stack (tests/e2e/conftest.py: an open gateway and the
    pipeline, neither lazy-rag nor agent): LazyRAG is off from the start, as its status
    says no processor serves it; the agent is a service the gateway knows, so it is
    offered until a question finds no agent processor, which switches it off."""
    page = WorkbenchPage(browser, ingestion_stack.gateway_url)
    try:
        page.open()
        lazy = page.find("#ask-form input[name=mode][value=lazy]")
        page.wait(lambda: not lazy.is_enabled(), "lazy to be switched off", timeout=30)
        note = page.text("#mode-note")
        assert "Lazy: no lazy-rag-status processor took the request" in note
        assert "or run the service: tg-run lazy-rag" in note
        turn = page.ask("agent", "Who walked on the Moon?")
        assert turn["state"] == "error" and "no-service" in turn["error"], turn
        assert not page.find("#ask-form input[name=mode][value=agent]").is_enabled()
        assert "no agent processor is running" in page.text("#mode-note")
    finally:
        browser.get("about:blank")  # the module's other tests open this stack's page


def test_lazy_and_agent_modes(page):
    """The default stack runs both: asked for real."""
    turn = page.ask("lazy", "Who walked on the Moon? [tokens=15]")
    assert turn["state"] == "done" and turn["answer"], turn
    assert page.turn().find_elements("css selector", ".lazy meter")
    turn = page.ask("agent", "Who walked on the Moon? [canned=react]")
    assert turn["state"] == "done", turn
    assert turn["answer"] == "Neil Armstrong and Buzz Aldrin walked on the Moon."
    steps = page.js("""return [...document.querySelector('#history').lastElementChild
        .querySelectorAll('.steps details')].map(d => d.innerText.trim())""")
    assert steps == ["Thought"], steps  # collapsed: only its summary shows
    assert "null" not in turn["text"]


def test_the_flow_picker_lists_the_running_flows_and_asks_the_one_chosen(page, client,
                                                                        llm):
    client.start_flow("wb-picked", "default", "the picked flow", {"llm-model": "picked"})
    picker = Select(page.find("#settings [name=flow]"))

    def listed() -> list[str]:  # read at once: the picker's options are replaced as listed
        return page.js("return [...document.querySelector('#settings [name=flow]').options]"
                       ".map((option) => option.text)")
    try:
        page.find("#settings [name=flow]").click()  # opening it lists the flows again
        page.wait(lambda: "wb-picked — the picked flow" in listed(), "the new flow listed")
        picker.select_by_value("wb-picked")
        turn = page.ask("document", "Who walked on the Moon? [tokens=5]")
        assert turn["state"] == "done" and llm.asked()["model"] == "picked"
        client.stop_flow("wb-picked")
        page.find("#settings [name=flow]").click()
        page.wait(lambda: "wb-picked (not running)" in listed(), "the stopped flow marked")
        picker.select_by_value("default")  # the click choosing it lists the flows again
        turn = page.ask("document", "Who walked on the Moon? [tokens=5]")
        assert turn["state"] == "done" and llm.asked()["model"] != "picked", turn
    finally:
        picker.select_by_value("default")


def test_stop_ends_the_llm_stream(page, llm):
    before = len(llm.stats.closed_early)
    page.ask("document", "Who walked on the Moon? [tokens=3000 delay=0.01]", wait=False)
    page.wait(lambda: page.turn().find_element("css selector", ".answer").text,
              "the first tokens")
    # Clicked by script: the answer streaming above it keeps moving the button, and a
    # WebDriver click lands wherever the button was when it looked (a new paragraph).
    page.js("arguments[0].click()", page.turn().find_element("css selector", ".stop"))
    assert page.finished()["state"] == "stopped"
    page.wait(lambda: len(llm.stats.closed_early) > before, "the LLM server to see the "
              "disconnect", timeout=10)
    time.sleep(0.2)  # nothing more is drawn after Stop
    assert page.turn().get_attribute("data-state") == "stopped"


def test_model_html_is_sanitised(page):
    turn = page.ask("document", "Say something nasty [canned=xss]")
    assert turn["state"] == "done", turn
    assert page.js("return window.__xss") is None
    html = turn["answer_html"].lower()
    assert "<strong>bold</strong>" in html
    assert "<script" not in html and "onerror" not in html and "javascript:" not in html
    assert turn["answer"].startswith("Safe bold text.") and turn["answer"].endswith("end.")


# --- the graph (asked last: extraction runs behind the chunk vectors) -------------

def test_graph_mode_cites_triples_and_draws_the_subgraph(page, client):
    # Extraction runs beside chunk embedding: wait until the graph is stored too.
    page.wait(lambda: client.triples(user=USER, collection=COLLECTION, limit=5),
              "the extracted triples", timeout=60)
    turn = page.ask("graph", "Who orbited in the command module Columbia? [tokens=25]")
    check_streamed(turn, 25)
    assert all(" – " in source for source in turn["sources"])  # subject – predicate – object
    page.js("arguments[0].scrollIntoView({block: 'start'})", page.turn())
    screenshot(page, "ask")
    page.turn().find_element("css selector", ".show-graph").click()
    page.wait(lambda: page.all("#graph-nodes button"), "the answer's subgraph")
    assert page.find("#graph-view").is_displayed()


def test_an_answer_opens_its_trace_as_a_waterfall_and_why_it_cited(page):
    # The stack traces by default (its data dir's store): the final frame's trace id
    # gives the turn a Trace button; the spans come from GET /api/v1/traces/{id}.
    turn = page.ask("graph", "Who walked on the Moon? [tokens=5]")
    assert turn["state"] == "done", turn
    page.js("arguments[0].click()", page.turn().find_element("css selector", ".show-trace"))
    page.wait(lambda: page.turn().find_elements("css selector", ".trace[data-state=shown]"),
              "the trace")
    rows = page.js("""return [...arguments[0].querySelectorAll('.trace .span')].map(row => ({
        name: row.querySelector('.span-name').innerText, kind: row.dataset.kind,
        left: parseFloat(row.querySelector('.span-bar').style.left),
        width: parseFloat(row.querySelector('.span-bar').style.width)}))""", page.turn())
    names = [row["name"].split()[0] for row in rows]
    # The request's own span starts the waterfall and spans most of it: a service's
    # span may end a little after the gateway has sent its last frame (on a busy
    # machine, several per cent of a short trace), so not all of it.
    assert rows[0]["name"].startswith("websocket graph-rag") and rows[0]["left"] < 1
    assert rows[0]["width"] > 80
    assert {"graph-rag", "prompt", "text-completion", "embeddings", "subgraph"} <= set(names)
    assert all(0 <= row["left"] < 100 and row["width"] > 0 for row in rows)
    assert any(row["kind"] == "CLIENT" for row in rows)  # the calls across the broker
    llm = next(row for row in rows if row["name"].startswith("text-completion"))
    assert llm["left"] > rows[0]["left"]  # the model answers after retrieval
    kept = page.js("""return [...arguments[0].querySelectorAll('.trace .candidate')]
        .map(c => c.dataset.kept)""", page.turn())
    assert kept and kept[0] == "true"  # the candidates, kept first
    assert "Why these sources" in page.turn().find_element("css selector",
                                                           ".explanation h4").text
    page.js("arguments[0].scrollIntoView({block: 'start'})",
            page.turn().find_element("css selector", ".trace"))
    screenshot(page, "trace")


def test_graph_search_and_expand(page):
    page.tab("graph")
    box = page.find("#graph-entity")
    box.clear()
    box.send_keys("Neil Armstrong\n")
    page.wait(lambda: page.text("#graph-note").startswith("around "), "the entity's graph")
    before = len(page.all("#graph-nodes button"))
    assert before > 0
    page.all("#graph-nodes button")[0].click()  # expand, by keyboard-reachable button
    page.wait(lambda: "triples added" in page.text("#graph-note"), "the expansion")
    screenshot(page, "graph")


def test_phone_width_dark_theme_and_keyboard(page):
    driver = page.driver
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
        "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    try:
        for tab in ("ask", "load", "graph"):
            page.tab(tab)
            overflow = page.js("return document.documentElement.scrollWidth - innerWidth")
            assert overflow <= 0, f"{tab} view is {overflow} px wider than a phone"
        background = page.js("return getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(21, 24, 29)"  # the dark theme's --bg
        # The keyboard alone: arrow keys move between tabs, Enter asks.
        page.find("#tab-graph").send_keys(Keys.ARROW_RIGHT)
        assert page.js("return document.activeElement.id") == "tab-ask"
        turn = page.ask("document", "Who walked on the Moon? [tokens=12]")
        assert turn["state"] == "done"
        screenshot(page, "phone-dark")
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def test_the_conversation_survives_a_reload(page):
    before = [turn.find_element("css selector", ".answer").text
              for turn in page.all("#history .turn")]
    assert len(before) >= 3
    page.driver.refresh()
    page.wait(lambda: page.status() == "connected", "connected again")
    after = [turn.find_element("css selector", ".answer").text
             for turn in page.all("#history .turn")]
    assert after == before
    assert page.js("return window.__xss") is None  # the replayed answer is sanitised too


# Keeps the page's sockets reachable, so a test can drop one as a network would.
KEEP_SOCKETS = """
window.__sockets = [];
window.WebSocket = class extends window.WebSocket {
  constructor(...args) { super(...args); window.__sockets.push(this); }
};
"""


def test_the_page_reconnects_when_its_socket_drops(page):
    # (Killing the gateway under tg-start does the same, but its restart takes ~15 s.)
    page.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument",
                                {"source": KEEP_SOCKETS})
    page.driver.refresh()
    page.wait(lambda: page.status() == "connected", "connected")
    page.js("window.__sockets.at(-1).close()")
    page.wait(lambda: "connection to the gateway lost" in page.status(), "the lost connection")
    page.wait(lambda: page.status() == "connected", "the page to reconnect", timeout=10)
    assert page.js("return window.__sockets.length") == 2
    turn = page.ask("document", "Who walked on the Moon? [tokens=5]")
    assert turn["state"] == "done" and turn["answer"] == expected_text(5).strip()
