// The flow picker: the flows that run (the flow service's list-flows, which any key
// may ask), each with its description. A flow chosen before and stopped since stays
// shown, marked, so the page says why its questions fail rather than silently
// asking another flow. Listed again when the connection opens and when the picker
// is focused or opened (a flow started meanwhile appears; the picker may have had
// the focus since before it started, tabbed into from the collection).
import { h } from "./dom.js";

export class FlowPicker {
  constructor(select, { gateway }) {
    this.select = select;
    this.gateway = gateway;
    select.addEventListener("focus", () => this.refresh());
    select.addEventListener("mousedown", () => this.refresh());
  }

  // Focus and mousedown come together on a click: one listing answers both.
  refresh() {
    this.listing ??= this.list().finally(() => { this.listing = null; });
    return this.listing;
  }

  async list() {
    let ids;
    try {
      const answer = await this.gateway.call("flow", { operation: "list-flows" }, null);
      ids = answer["flow-ids"] || [];
    } catch {
      return; // a gateway without the flow service: the choice stays as it is
    }
    const described = await Promise.all(ids.map((id) => this.describe(id)));
    // Read now, not before asking: a choice made while the listing was on its way
    // (the click that chooses an option also opens the picker) is the one to keep.
    const chosen = this.select.value;
    const options = ids.map((id, i) => h("option", { value: id }, described[i]));
    if (chosen && !ids.includes(chosen)) {
      options.push(h("option", { value: chosen }, `${chosen} (not running)`));
    }
    this.select.replaceChildren(...options);
    this.select.value = chosen || ids[0] || "";
  }

  async describe(id) {
    try {
      const answer = await this.gateway.call("flow", { operation: "get-flow", "flow-id": id }, null);
      const description = JSON.parse(answer.flow).description;
      return description ? `${id} — ${description}` : id;
    } catch {
      return id;
    }
  }
}
