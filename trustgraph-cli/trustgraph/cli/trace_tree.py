"""A trace as text: its spans as a tree with timings, each beside a bar showing
where in the trace it ran (``tg-show-trace``), and a list of traces as a table
(``tg-list-traces``). Pure functions of the JSON the gateway serves."""
from typing import Any

from .common import columns

BAR = 24  # characters of the timeline bar
# What a span's line says beside its name, when its attributes have it.
NOTES = (("tg.time_to_sources_ms", "sources {:.1f} ms"),
         ("tg.time_to_first_token_ms", "first token {:.1f} ms"),
         ("tg.slot_wait_ms", "waited {:.1f} ms for a slot"),
         ("gen_ai.response.model", "model {}"),
         ("gen_ai.usage.input_tokens", "in {}"),
         ("gen_ai.usage.output_tokens", "out {}"),
         ("tg.prompt.template", "template {}"),
         ("tg.stage", "stage {}"),
         ("tg.document", "document {}"))


def trace_list(traces: list[dict[str, Any]]) -> str:
    return columns([(t["trace_id"], t["start"], f"{t['duration_ms']:.1f}", str(t["spans"]),
                   str(t["errors"]), t.get("user") or "", t.get("root") or "")
                  for t in traces],
                 ("trace id", "start (UTC)", "ms", "spans", "errors", "user", "root"))


def tree(trace: dict[str, Any]) -> str:
    """The trace's spans as a tree, children under their parent in start order."""
    spans = trace["spans"]
    known = {span["span_id"] for span in spans}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for span in spans:  # a parent not kept (sampled out, dropped) counts as none
        parent = span["parent_id"] if span["parent_id"] in known else None
        children.setdefault(parent, []).append(span)
    total = max((s["start_ms"] + s["duration_ms"] for s in spans), default=0.0) or 1.0
    lines = [f"trace {trace['trace_id']}  {trace['start']}  {total:.1f} ms  "
             f"{len(spans)} spans"]
    _walk(children, None, "", total, lines)
    return "\n".join(lines)


def _walk(children: dict[str | None, list[dict[str, Any]]], parent: str | None,
          indent: str, total: float, lines: list[str]) -> None:
    below = children.get(parent, [])
    for n, span in enumerate(below):
        last = n == len(below) - 1
        branch = "" if parent is None else ("└─ " if last else "├─ ")
        lines.append(_line(span, indent + branch, total))
        deeper = indent + ("" if parent is None else ("   " if last else "│  "))
        _walk(children, span["span_id"], deeper, total, lines)


def _line(span: dict[str, Any], prefix: str, total: float) -> str:
    start, took = span["start_ms"], span["duration_ms"]
    first = min(BAR - 1, int(start / total * BAR))
    width = max(1, round(took / total * BAR))
    bar = " " * first + "█" * min(width, BAR - first)
    kind = " (call)" if span["kind"] == "CLIENT" else ""
    notes = [text.format(span["attributes"][key]) for key, text in NOTES
             if key in span["attributes"]]
    if span["status"] == "ERROR":
        notes.append(f"ERROR {span.get('status_message') or ''}".strip())
    if span["attributes"].get("tg.cancelled"):
        notes.append("cancelled")
    return (f"{start:9.1f} {took:9.1f} ms |{bar:<{BAR}}| {prefix}{span['name']}{kind} "
            f"[{span['service']}]" + (f"  {', '.join(notes)}" if notes else ""))
