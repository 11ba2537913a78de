// Loading documents: files dropped or picked go to the flow's load services
// (text-load for .txt/.md, document-load for .pdf; the librarian's upload in parts
// for a file too large for one message, then add-processing), and their progress
// is read from the load-status service until every chunk is stored.
//
// A file's bar: 10 % once the librarian holds it, then the share of its chunks
// whose vectors are stored (the document is searchable at 100 %).
import { $, h } from "./dom.js";

const KINDS = { txt: "text", md: "text", markdown: "text", pdf: "pdf" };
const ONE_MESSAGE = 3 * 1024 * 1024; // bytes; a broker message stays under 5 MiB
const PART = 2 * 1024 * 1024; // the librarian's upload part size
const POLL_MS = 500;

export class LoadPanel {
  constructor(root, { gateway, settings, onLoaded }) {
    this.gateway = gateway;
    this.settings = settings;
    this.onLoaded = onLoaded;
    this.list = $("#uploads", root);
    this.batchBar = $("#batch-progress", root);
    this.batchText = $("#batch-text", root);
    this.files = [];
    this.timer = null;

    const zone = $("#drop-zone", root);
    const picker = $("#file-picker", root);
    picker.addEventListener("change", () => {
      this.add([...picker.files]);
      picker.value = "";
    });
    zone.addEventListener("dragover", (event) => {
      event.preventDefault();
      zone.classList.add("over");
    });
    zone.addEventListener("dragleave", () => zone.classList.remove("over"));
    zone.addEventListener("drop", (event) => {
      event.preventDefault();
      zone.classList.remove("over");
      this.add([...event.dataTransfer.files]);
    });
  }

  add(files) {
    if (!files.length) return;
    const { user, collection, flow } = this.settings();
    // A new batch starts once the previous one has finished.
    if (this.files.every((f) => f.finished)) {
      this.files = [];
      this.list.replaceChildren();
    }
    for (const file of files) {
      const entry = new FileEntry(file, { user, collection, flow: flow || "default" });
      this.files.push(entry);
      this.list.append(entry.element);
      this.send(entry);
    }
    this.update();
  }

  async send(entry) {
    const kind = KINDS[entry.file.name.split(".").pop().toLowerCase()];
    if (!kind) return entry.fail("not a .txt, .md or .pdf file");
    try {
      if (entry.file.size > ONE_MESSAGE) await this.sendInParts(entry);
      else if (kind === "text") await this.gateway.call("text-load", {
        ...entry.scope(), text: await entry.file.text() }, entry.flow);
      else await this.gateway.call("document-load", {
        ...entry.scope(), data: base64(await entry.file.arrayBuffer()),
        kind: "application/pdf" }, entry.flow);
      entry.set({ state: "accepted" });
      this.poll();
    } catch (error) {
      entry.fail(`${error.type}: ${error.message}`);
    }
    this.update();
  }

  // A large file: the librarian's begin-upload / upload-part / complete-upload,
  // then add-processing sends it down the flow like a load.
  async sendInParts(entry) {
    const { file } = entry;
    const librarian = (request) => this.gateway.call("librarian", {
      user: entry.user, collection: entry.collection, ...request }, null);
    const begun = await librarian({ operation: "begin-upload", document_id: entry.id,
      title: entry.title, size: file.size,
      kind: file.name.toLowerCase().endsWith(".pdf") ? "application/pdf" : "text/plain" });
    for (let part = 0, offset = 0; offset < file.size; part++, offset += PART) {
      const bytes = await file.slice(offset, offset + PART).arrayBuffer();
      await librarian({ operation: "upload-part", upload_id: begun.upload_id, part,
        content: base64(bytes) });
      entry.set({ state: "uploading", uploaded: Math.min(1, (offset + PART) / file.size) });
    }
    await librarian({ operation: "complete-upload", upload_id: begun.upload_id });
    await librarian({ operation: "add-processing", document_id: entry.id, flow: entry.flow });
  }

  poll() {
    if (this.timer) return;
    this.timer = setTimeout(async () => {
      this.timer = null;
      const waiting = this.files.filter((f) => f.accepted && !f.finished);
      await Promise.all(groupByScope(waiting).map((group) => this.status(group)));
      this.update();
      if (this.files.some((f) => !f.finished)) this.poll();
      else this.onLoaded();
    }, POLL_MS);
  }

  async status(group) {
    const [first] = group;
    try {
      const answer = await this.gateway.call("load-status", {
        user: first.user, collection: first.collection,
        documents: group.map((f) => f.id) }, first.flow);
      for (const doc of answer.documents || []) {
        group.find((f) => f.id === doc.id)?.set(doc);
      }
    } catch (error) {
      for (const f of group) f.note(`load-status: ${error.message}; retrying`);
    }
  }

  update() {
    const files = this.files;
    const done = files.filter((f) => f.state === "done").length;
    const failed = files.filter((f) => f.state === "failed").length;
    const chunks = files.reduce((n, f) => n + (f.chunks || 0), 0);
    const stored = files.reduce((n, f) => n + (f.stored || 0), 0);
    const percent = files.length
      ? files.reduce((n, f) => n + f.percent(), 0) / files.length : 0;
    this.batchBar.value = Math.round(percent);
    this.batchBar.hidden = files.length === 0;
    this.batchText.textContent = files.length ? `${done} of ${files.length} files done` +
      (failed ? `, ${failed} failed` : "") + ` · ${stored} of ${chunks} chunks stored` : "";
  }
}

class FileEntry {
  constructor(file, { user, collection, flow }) {
    this.file = file;
    this.id = file.name;
    this.title = file.name.replace(/\.[^.]+$/, "");
    Object.assign(this, { user, collection, flow });
    this.state = "sending";
    this.bar = h("progress", { max: 100, value: 0, "aria-label": `progress of ${file.name}` });
    this.text = h("span", { class: "file-state" }, "sending…");
    this.element = h("li", { class: "upload", "data-file": file.name, "data-state": "sending" },
      h("span", { class: "file-name" }, file.name), this.bar, this.text);
  }

  scope() {
    return { id: this.id, user: this.user, collection: this.collection, title: this.title };
  }

  get accepted() {
    return this.state !== "sending" && this.state !== "uploading";
  }

  get finished() {
    return this.state === "done" || this.state === "failed";
  }

  percent() {
    if (this.state === "done") return 100;
    if (this.state === "uploading") return 10 * (this.uploaded || 0);
    if (!this.accepted || this.state === "failed") return this.state === "failed" ? 100 : 0;
    return 10 + (this.chunks ? 90 * this.stored / this.chunks : 0);
  }

  // `status` is a load-status document ({state, chunks, stored, error}) or ours.
  set(status) {
    if (status.state === "unknown" && this.accepted) return; // not decoded yet
    Object.assign(this, status);
    this.bar.value = Math.round(this.percent());
    this.element.dataset.state = this.state;
    this.text.textContent = describe(this);
  }

  fail(reason) {
    this.set({ state: "failed", error: reason });
  }

  note(message) {
    this.text.textContent = message;
  }
}

function describe(f) {
  switch (f.state) {
    case "uploading": return `uploading ${Math.round(100 * (f.uploaded || 0))} %`;
    case "accepted": return "accepted, waiting for the decoder";
    case "decoding": return "decoding";
    case "embedding": return `${f.stored} of ${f.chunks ?? "?"} chunks stored`;
    case "done": return `done: ${f.chunks} chunk${f.chunks === 1 ? "" : "s"} stored`;
    case "failed": return `failed: ${f.error || "unknown reason"}`;
    default: return f.state;
  }
}

function groupByScope(files) {
  const groups = new Map();
  for (const f of files) {
    const key = JSON.stringify([f.user, f.collection, f.flow]);
    groups.set(key, [...(groups.get(key) || []), f]);
  }
  return [...groups.values()];
}

function base64(buffer) {
  const bytes = new Uint8Array(buffer);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}
