// Cytoscape drawing of triples: one node per subject/object term (IRIs round,
// literals boxed), one edge per triple; tapping an IRI node asks for its
// neighbours. Edge labels show for the edges of the node under the pointer or last
// tapped (all of them at once make an extracted graph unreadable). Loaded on
// demand (it is most of the page's bytes).
import cytoscape from "cytoscape";
import { termKey, termText } from "./dom.js";

export class GraphView {
  constructor(container, onExpand) {
    const style = getComputedStyle(document.documentElement);
    const color = (name) => style.getPropertyValue(name).trim();
    this.terms = new Map();
    this.cy = cytoscape({
      container,
      wheelSensitivity: 0.3,
      style: [
        { selector: "node", style: {
          label: "data(label)", "font-size": 10, color: color("--fg"),
          "background-color": color("--accent"), "text-valign": "bottom",
          "text-margin-y": 3, width: 14, height: 14, "min-zoomed-font-size": 6,
          "text-wrap": "ellipsis", "text-max-width": 140 } },
        { selector: "node.literal", style: {
          shape: "round-rectangle", "background-color": color("--muted") } },
        { selector: "edge", style: {
          width: 1.2, "line-color": color("--line"), "target-arrow-shape": "triangle",
          "target-arrow-color": color("--line"), "curve-style": "bezier", "arrow-scale": 0.7 } },
        { selector: "edge.near", style: {
          label: "data(label)", "font-size": 9, color: color("--fg"), width: 2,
          "line-color": color("--accent"), "target-arrow-color": color("--accent"),
          "text-rotation": "autorotate", "text-background-color": color("--bg"),
          "text-background-opacity": 0.8 } },
      ],
    });
    this.cy.on("mouseover", "node", (event) => this.near(event.target));
    this.cy.on("tap", "node", (event) => {
      this.near(event.target);
      onExpand(this.terms.get(event.target.id()));
    });
  }

  draw(triples, labels = {}, merge = false) {
    if (!merge) {
      this.cy.elements().remove();
      this.terms.clear();
    }
    const elements = [];
    const node = (term) => {
      const id = termKey(term);
      if (!this.terms.has(id) && !this.cy.getElementById(id).length) {
        this.terms.set(id, term);
        elements.push({ group: "nodes", classes: term.t === "i" ? "" : "literal",
          data: { id, label: termText(term, labels) } });
      }
      return id;
    };
    for (const t of triples) {
      const s = node(t.s), o = node(t.o);
      const id = `${s}|${termKey(t.p)}|${o}`;
      if (!this.cy.getElementById(id).length && !elements.some((e) => e.data.id === id)) {
        elements.push({ group: "edges", data: { id, source: s, target: o,
          label: termText(t.p, labels) } });
      }
    }
    this.cy.add(elements);
    this.cy.layout({ name: "cose", animate: false, fit: true, padding: 24,
      nodeRepulsion: () => 60000, idealEdgeLength: () => 90, nodeOverlap: 20,
      randomize: !merge }).run();
  }

  // Labels the edges of one node (a cy node, or a term).
  near(node) {
    if (!node.connectedEdges) node = this.cy.getElementById(termKey(node));
    this.cy.edges().removeClass("near");
    node.connectedEdges().addClass("near");
  }

  nodes() {
    return this.cy.nodes().map((n) => ({ term: this.terms.get(n.id()), label: n.data("label") }));
  }
}
