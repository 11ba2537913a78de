// The page's wiring: the connection (and its key), who is signed in, the tabs, and
// the three panels. Each panel talks to the gateway only through the public
// websocket API.
import { AskPanel } from "./ask.js";
import { $ } from "./dom.js";
import { FlowPicker } from "./flows.js";
import { Gateway, socketUrl } from "./gateway.js";
import { GraphPanel } from "./graph-panel.js";
import { Identity } from "./identity.js";
import { LibraryPanel } from "./library.js";
import { showLlmNotice } from "./llm.js";
import { LoadPanel } from "./load.js";
import { probeModes } from "./modes.js";
import { bindSettings } from "./settings.js";

// The key, kept for this tab only (sessionStorage), never in the URL.
const TOKEN_KEY = "tg-workbench-token";

const gateway = new Gateway(socketUrl(location), sessionStorage.getItem(TOKEN_KEY));
const identity = new Identity({ gateway, readSettings: bindSettings($("#settings")) });
const settings = () => identity.scope();

const graph = new GraphPanel($("#graph-view"), { gateway, settings });
const ask = new AskPanel($("#ask-view"), { gateway, settings, onGraph: (triples) => {
  showTab("graph");
  graph.showTriples(triples);
} });
const library = new LibraryPanel($("#load-view"), { gateway, settings });
const flows = new FlowPicker($("#settings [name=flow]"), { gateway });
new LoadPanel($("#load-view"), { gateway, settings, onLoaded: () => {
  library.refresh();
  identity.collections();
} });

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

// --- the connection, the key and who it signs in ------------------------------------

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
      showLlmNotice($("#llm-notice"), gateway.token); // again: a key may be needed
      flows.refresh();
      identity.refresh(gateway.token).then(() => {
        if (!$("#load-view").hidden) library.refresh();
      });
    }
  } else if (state === "refused") {
    identity.clear();
    banner.textContent = gateway.token
      ? `The gateway refused this key (${detail}). Enter the right one.`
      : "This gateway needs an API key: sign in.";
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
$("#sign-out").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  $("#token").value = "";
  probed = false;
  identity.clear();
  gateway.setToken("");
});

// Settings that change the scope refresh what shows the scope.
$("#settings").addEventListener("change", (event) => {
  if (event.target.name === "user") identity.collections();
  if (["user", "collection"].includes(event.target.name) && !$("#load-view").hidden) {
    library.refresh();
  }
});
