// Model text becomes HTML only here: Markdown by `marked`, then sanitised by
// DOMPurify before it touches the page. Model output is untrusted input (a document
// in the corpus can steer it), so nothing else in the page may put model text in
// innerHTML.
import { marked } from "marked";
import DOMPurify from "dompurify";

marked.setOptions({ gfm: true, breaks: false });

// Links open outside the page and cannot reach back into it.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

export function renderMarkdown(element, text) {
  element.innerHTML = DOMPurify.sanitize(marked.parse(text), {
    FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select"],
  });
}
