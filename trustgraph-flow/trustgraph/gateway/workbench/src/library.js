// The library: the documents the librarian holds in the chosen collection of the
// signed-in user (or of whom an admin acts for), each with a Remove button (two
// presses: the first asks to confirm).
import { $, h } from "./dom.js";

export class LibraryPanel {
  constructor(root, { gateway, settings }) {
    this.gateway = gateway;
    this.settings = settings;
    this.body = $("#library-rows", root);
    this.note = $("#library-note", root);
    $("#library-refresh", root).addEventListener("click", () => this.refresh());
  }

  async refresh() {
    const { user, owner, collection } = this.settings();
    this.note.textContent = "loading…";
    try {
      const answer = await this.gateway.call("librarian", {
        operation: "list-documents", user, collection }, null);
      const documents = answer.documents || [];
      this.body.replaceChildren(...documents.map((doc) => this.row(doc, user, collection)));
      this.note.textContent = documents.length
        ? `${documents.length} documents in ${owner} / ${collection}`
        : `no documents in ${owner} / ${collection} yet`;
    } catch (error) {
      this.note.textContent = `could not list the library: ${error.message}`;
    }
  }

  row(doc, user, collection) {
    const remove = h("button", { type: "button", class: "remove" }, "Remove");
    remove.addEventListener("click", async () => {
      if (!remove.dataset.armed) {
        remove.dataset.armed = "1";
        remove.textContent = "Confirm remove";
        setTimeout(() => { delete remove.dataset.armed; remove.textContent = "Remove"; }, 4000);
        return;
      }
      remove.disabled = true;
      try {
        await this.gateway.call("librarian", { operation: "remove-document",
          document_id: doc.id, user, collection }, null);
        await this.refresh();
      } catch (error) {
        remove.disabled = false;
        this.note.textContent = `could not remove ${doc.id}: ${error.message}`;
      }
    });
    const when = doc.time ? new Date(doc.time * 1000).toLocaleString() : "";
    return h("tr", { "data-id": doc.id },
      h("td", {}, doc.title || doc.id), h("td", {}, doc.id), h("td", {}, doc.kind),
      h("td", { class: "num" }, size(doc.size)), h("td", {}, when), h("td", {}, remove));
  }
}

function size(bytes) {
  if (!bytes) return "";
  return bytes < 1024 ? `${bytes} B` : bytes < 1 << 20 ? `${(bytes / 1024).toFixed(1)} KiB`
    : `${(bytes / (1 << 20)).toFixed(1)} MiB`;
}
