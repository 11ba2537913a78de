"""Driving the workbench page (``/``) in a browser, for its tests and its bench: a
page object over Selenium, and an LLM server that can also answer fixed text.

    with chromium() as driver:
        page = WorkbenchPage(driver, stack.gateway_url)
        page.open(token="...")
        turn = page.ask("document", "Who walked on the Moon? [tokens=20]")
"""
import re

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.support.agent_llm import final
from tests.support.browser import wait_until
from tests.support.openai_server import OpenAiServer
from tests.support.scripted_llm import Script

CANNED_DIRECTIVE = re.compile(r"\[canned=([a-z]+)\]")
CANNED = {
    # Model text that tries to run code in the page: the sanitiser must hold.
    "xss": 'Safe **bold** text. <script>window.__xss = "script"</script>'
           '<img src="x" onerror="window.__xss = \'img\'"> '
           '<a href="javascript:window.__xss=\'link\'">link</a> end.',
    # A ReAct step that ends the dialog (the agent's step schema).
    "react": final("The Apollo document names them.",
                   "Neil **Armstrong** and Buzz Aldrin walked on the Moon."),
}


class CannedLlm(OpenAiServer):
    """The scripted OpenAI-format server; a prompt with ``[canned=NAME]`` is answered
    ``CANNED[NAME]``, streamed in pieces of a few characters."""

    async def handle(self, request, body=None):
        body = body if body is not None else await request.json()
        match = CANNED_DIRECTIVE.search(self.prompt_text(body))
        if match is None:
            return await super().handle(request, body)
        self.stats.requests += 1
        text = CANNED[match.group(1)]
        response = await self.open_stream(request, body)
        for i in range(0, len(text), 6):
            await self.write_token(response, text[i:i + 6])
        await self.write_end(response, body, Script(tokens=len(text) // 6 + 1))
        return response


# Installed before a question is asked: records, for the newest turn, when its
# first source and its first answer text entered the DOM (MutationObserver
# callbacks run right after the mutation, before the next websocket message).
OBSERVE = """
window.__turn = {};
const history = document.getElementById('history');
const seen = window.__turn;
const observer = new MutationObserver(() => {
  const turn = history.lastElementChild;
  if (!turn) return;
  const now = performance.now();
  if (seen.sources === undefined && turn.querySelector('.sources li')) seen.sources = now;
  if (seen.token === undefined && turn.querySelector('.answer').textContent.trim()) {
    seen.token = now;
    seen.sourcesAtFirstToken = turn.querySelectorAll('.sources li').length;
  }
});
observer.observe(history, {subtree: true, childList: true, characterData: true});
"""

# What the newest turn shows (innerText: the text as rendered).
TURN = """
const turn = document.querySelector('#history').lastElementChild;
const answer = turn.querySelector('.answer');
return {
  state: turn.dataset.state,
  text: turn.innerText,
  answer: answer.innerText.trim(),
  answer_html: answer.innerHTML,
  sources: [...turn.querySelectorAll('.sources li')].map(li => li.innerText.trim()),
  error: turn.querySelector('.error').textContent,
  meta: turn.querySelector('.meta').innerText,
  seen: window.__turn,
  marks: (() => { %s })(),
};
"""

# The page's own User Timing marks for the newest request, relative to its tg:ask.
MARKS = """
const marks = performance.getEntriesByType('mark').filter(m => m.name.startsWith('tg:'));
const ask = marks.filter(m => m.name === 'tg:ask').pop();
const out = {};
for (const m of marks) if (m.startTime >= ask.startTime) {
  const name = m.name.slice(3);
  if (out[name] === undefined) out[name] = m.startTime - ask.startTime;
}
return out;
"""
TURN = TURN % MARKS


class WorkbenchPage:
    def __init__(self, driver, url: str) -> None:
        self.driver = driver
        self.url = url

    # --- finding things ----------------------------------------------------------

    def find(self, css: str):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def all(self, css: str) -> list:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def text(self, css: str) -> str:
        return self.find(css).text

    def js(self, script: str, *args):
        return self.driver.execute_script(script, *args)

    def wait(self, check, what: str, timeout: float = 30.0):
        return wait_until(self.driver, lambda _: check(), timeout, what)

    # --- connecting ----------------------------------------------------------------

    def status(self) -> str:
        return self.text("#connection")

    def open(self, token: str = "", tab: str = "ask") -> None:
        self.driver.get(f"{self.url}#{tab}")
        self.wait(lambda: self.status() not in ("", "connecting…"), "the socket to answer")
        if token and self.find("#token-form").is_displayed():
            self.enter_token(token)
        self.wait(lambda: self.status() == "connected", "connected")

    def enter_token(self, token: str) -> None:
        field = self.find("#token")
        field.clear()
        field.send_keys(token, Keys.ENTER)

    def signed_in(self) -> str:
        """Who the page says is signed in, once it knows."""
        self.wait(lambda: self.find("#signed-in").is_displayed(), "who is signed in")
        return self.text("#who")

    def set_scope(self, user: str | None, collection: str) -> None:
        """``user``: whom an admin acts for (None: the key's own user)."""
        self.signed_in()
        fields = (("user", user), ("collection", collection)) if user \
            else (("collection", collection),)
        for name, value in fields:
            field = self.find(f"#settings [name={name}]")
            field.clear()
            field.send_keys(value, Keys.TAB)  # the change event saves it

    def tab(self, name: str) -> None:
        self.find(f"#tab-{name}").click()

    # --- asking ----------------------------------------------------------------------

    def ask(self, mode: str, question: str, wait: bool = True) -> dict:
        self.tab("ask")
        self.find(f"#ask-form input[name=mode][value={mode}]").click()
        self.js(OBSERVE)
        turns = len(self.all("#history .turn"))
        box = self.find("#question")
        box.send_keys(question, Keys.ENTER)
        # The turn enters the page with its first frame (or after 0.1 s): until then
        # the newest turn is the one before.
        self.wait(lambda: len(self.all("#history .turn")) > turns, "the new turn")
        if wait:
            return self.finished()
        return {}

    def turn(self):
        return self.all("#history .turn")[-1]

    def finished(self, timeout: float = 30.0) -> dict:
        """The newest turn once it has stopped streaming, read in one script (a
        WebDriver call per source would take seconds with 150 graph sources)."""
        self.wait(lambda: self.turn().get_attribute("data-state") != "streaming",
                  "the answer to finish", timeout)
        return self.js(TURN)

    # --- loading -----------------------------------------------------------------------

    def upload(self, paths: list[str]) -> None:
        self.tab("load")
        self.find("#file-picker").send_keys("\n".join(paths))

    def uploads(self) -> dict[str, tuple[str, str, int]]:
        """Each file row: (state, its text, its bar's value)."""
        return {row.get_attribute("data-file"): (
            row.get_attribute("data-state"),
            row.find_element(By.CSS_SELECTOR, ".file-state").text,
            int(row.find_element(By.CSS_SELECTOR, "progress").get_attribute("value")))
            for row in self.all("#uploads .upload")}
