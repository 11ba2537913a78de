// The Graph view: a collection's graph around an entity the user searches for, or
// the subgraph an answer used. Search is what GraphRAG does first, through the
// public services: embed the text (embeddings), find the nearest entities
// (graph-embeddings), expand from them (subgraph). Cytoscape is loaded the first
// time the view draws, so the page's first paint does not wait for it.
import { $, h, termText } from "./dom.js";

export class GraphPanel {
  constructor(root, { gateway, settings }) {
    this.gateway = gateway;
    this.settings = settings;
    this.canvas = $("#graph-canvas", root);
    this.note = $("#graph-note", root);
    this.nodeList = $("#graph-nodes", root);
    this.view = null;
    $("#graph-form", root).addEventListener("submit", (event) => {
      event.preventDefault();
      this.search($("#graph-entity", root).value.trim());
    });
  }

  async draw(triples, labels, merge = false) {
    if (!this.view) {
      const { GraphView } = await import("./graph.js");
      this.view = new GraphView(this.canvas, (term) => this.expand(term));
    }
    this.view.draw(triples, labels, merge);
    this.listNodes();
  }

  // Every IRI node as a button too: the canvas cannot be used with a keyboard.
  listNodes() {
    const nodes = this.view.nodes().filter((n) => n.term.t === "i");
    this.nodeList.replaceChildren(...nodes.map((n) => h("li", {}, h("button", {
      type: "button", onclick: () => this.expand(n.term),
      "aria-label": `expand ${n.label}` }, n.label))));
  }

  async showTriples(triples) {
    this.note.textContent = `the answer's subgraph: ${triples.length} triples`;
    await this.draw(triples, {});
  }

  async search(text) {
    if (!text) return;
    const { user, owner, collection, flow } = this.settings();
    this.note.textContent = `searching ${owner} / ${collection} for “${text}”…`;
    try {
      const { vectors } = await this.gateway.call("embeddings", { texts: [text] }, flow);
      const { entities } = await this.gateway.call("graph-embeddings", {
        vector: vectors[0], limit: 3, user, collection }, flow);
      if (!entities || !entities.length) {
        this.note.textContent = `no entities in ${owner} / ${collection} near “${text}”`;
        return;
      }
      const found = await this.subgraph(entities.map((e) => e.entity), 2);
      // graph-embeddings gives each entity's label too; the subgraph's labels win.
      const labels = Object.fromEntries(entities.filter((e) => e.label)
        .map((e) => [e.entity.i, e.label]));
      Object.assign(labels, found.labels);
      this.note.textContent = `around ${entities.map((e) => termText(e.entity, labels))
        .join(", ")}: ${found.triples.length} triples (click a node to expand it)`;
      await this.draw(found.triples, labels);
    } catch (error) {
      this.note.textContent = `graph search failed: ${error.type}: ${error.message}`;
    }
  }

  async expand(term) {
    if (!term || term.t !== "i") return;
    try {
      const found = await this.subgraph([term], 1);
      this.note.textContent = `${termText(term, found.labels)}: ${found.triples.length} ` +
        "triples added";
      await this.draw(found.triples, found.labels, true);
      this.view.near(term);
    } catch (error) {
      this.note.textContent = `expanding failed: ${error.type}: ${error.message}`;
    }
  }

  async subgraph(seeds, hops) {
    const { user, collection, flow, triple_limit, max_subgraph_size } = this.settings();
    const answer = await this.gateway.call("subgraph", {
      seeds, max_path_length: hops, user, collection,
      triple_limit: triple_limit || 30, max_subgraph_size: max_subgraph_size || 150,
    }, flow);
    return { triples: (answer.triples || []).map((e) => e.triple), labels: answer.labels || {} };
  }
}
