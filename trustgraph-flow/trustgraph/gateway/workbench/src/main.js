// The page's wiring: the connection (and its token), the tabs, and the three panels.
// Each panel talks to the gateway only through the public websocket API.
import { AskPanel } from "./ask.js";
import { $ } from "./dom.js";
import { Gateway, socketUrl } from "./gateway.js";
import { GraphPanel } from "./graph-panel.js";
import { LibraryPanel } from "./library.js";
import { showLlmNotice } from "./llm.js";
import { LoadPanel } from "./load.js";
import { probeModes } from "./modes.js";
import { bindSettings } from "./settings.js";

const TOKEN_KEY = "tg-workbench-token"; // sessionStorage: forgotten with the tab

const settings = bindSettings($("#settings"));
const gateway = new Gateway(socketUrl(location), sessionStorage.getItem(TOKEN_KEY));

const graph = new GraphPanel($("#graph-view"), { gateway, settings });
const ask = new AskPanel($("#ask-view"), { gateway, settings, onGraph: (triples) => {
  showTab("graph");
  graph.showTriples(triples);
} });
const library = new LibraryPanel($("#load-view"), { gateway, settings });
new LoadPanel($("#load-view"), { gateway, settings, onLoaded: () => library.refresh() });

// --- tabs (arrow keys move between them, as a tablist should) -------------------

const tabs = [...document.querySelectorAll("[role=tab]")];
function showTab(name) {
  for (const tab of tabs) {
    const selected = tab.dataset.tab === name;
    tab.setAttribute("aria-selected", String(selected));
    tab.tabIndex = selected ? 0 : -1;
    $(`#${tab.getAttribute("aria-controls")}`).hidden = !selected;
  }
  if (name === "load") library.refresh();
  history.replaceState(null, "", `#${name}`);
}
for (const [i, tab] of tabs.entries()) {
  tab.addEventListener("click", () => showTab(tab.dataset.tab));
  tab.addEventListener("keydown", (event) => {
    const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (!step) return;
    const next = tabs[(i + step + tabs.length) % tabs.length];
    showTab(next.dataset.tab);
    next.focus();
  });
}
showTab(tabs.some((t) => `#${t.dataset.tab}` === location.hash) ? location.hash.slice(1) : "ask");

showLlmNotice($("#llm-notice"), gateway.token);

// --- the connection and the token ---------------------------------------------------

const banner = $("#connection");
const tokenForm = $("#token-form");
let probed = false;
gateway.addEventListener("state", ({ detail: { state, detail } }) => {
  document.body.dataset.connection = state;
  tokenForm.hidden = state !== "refused";
  if (state === "open") {
    banner.textContent = "connected";
    if (!probed) {
      probed = true;
      performance.mark("tg:connected");
      probeModes(gateway, gateway.token).then((modes) => ask.setModes(modes));
      showLlmNotice($("#llm-notice"), gateway.token); // again: a token may be needed
    }
  } else if (state === "refused") {
    banner.textContent = gateway.token
      ? "The gateway refused this token (auth failure). Enter the right one."
      : "This gateway needs an access token.";
    $("#token").focus();
  } else if (state === "closed") {
    banner.textContent = `connection to the gateway lost; ${detail}`;
  } else {
    banner.textContent = "connecting…";
  }
});
tokenForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const token = $("#token").value;
  sessionStorage.setItem(TOKEN_KEY, token);
  probed = false;
  gateway.setToken(token);
});

// Settings that change the scope refresh what shows the scope.
$("#settings").addEventListener("change", (event) => {
  if (["user", "collection"].includes(event.target.name) && !$("#load-view").hidden) {
    library.refresh();
  }
});
