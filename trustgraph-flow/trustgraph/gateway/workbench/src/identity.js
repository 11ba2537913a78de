// Who is signed in: the gateway decides it from the key (GET /api/v1/whoami), never
// the page. A request names no user, so it acts for the key's; only an admin may
// choose someone to act for. The collection box offers that user's collections
// (the librarian's list-collections); a new name is still a new collection.
import { $, h } from "./dom.js";

export class Identity {
  constructor({ gateway, readSettings }) {
    this.gateway = gateway;
    this.readSettings = readSettings;
    this.who = null; // {user, role, key_id, via} once signed in
  }

  // The settings as requests use them: `user` only when an admin acts for someone,
  // `owner` whose data it is (for what the page says).
  scope() {
    const settings = this.readSettings();
    const actsFor = this.who && this.who.role === "admin" && settings.user
      ? settings.user : undefined;
    return { ...settings, user: actsFor, owner: actsFor || (this.who ? this.who.user : "") };
  }

  async refresh(token) {
    try {
      const response = await fetch("/api/v1/whoami", {
        headers: token ? { Authorization: `Bearer ${token}` } : {},
      });
      this.who = response.ok ? await response.json() : null;
    } catch {
      this.who = null;
    }
    this.show();
    await this.collections();
  }

  clear() {
    this.who = null;
    this.show();
  }

  show() {
    const who = this.who;
    $("#signed-in").hidden = !who;
    $("#act-for").hidden = !who || who.role !== "admin";
    $("#sign-out").hidden = !who || who.via === "open";
    if (!who) return;
    $("#who").textContent = who.via === "open"
      ? `${who.user} (admin: this gateway is open to this machine)`
      : `${who.user} (${who.role})`;
  }

  async collections() {
    const list = $("#collections");
    if (!this.who) return list.replaceChildren();
    const { user } = this.scope();
    try {
      const answer = await this.gateway.call("librarian", {
        operation: "list-collections", user }, null);
      list.replaceChildren(...(answer.collections || []).map((c) =>
        h("option", { value: c.collection }, `${c.documents} documents`)));
    } catch {
      list.replaceChildren(); // a reader's or a stack without a librarian: type one
    }
  }
}
