"""An answer's retrieval explanation as text (``tg-show-explain-trace``) and a list
of them as a table (``tg-list-explain-traces``). Pure functions of the JSON the
gateway serves (``GET /api/v1/explain``)."""
from typing import Any

from .common import columns

# How each service's explanation is called, as TrustGraph's commands name the kinds.
KINDS = {"graph-rag": "GraphRAG", "document-rag": "DocRAG", "lazy-rag": "LazyRAG"}


def explanation_list(explanations: list[dict[str, Any]], width: int = 60) -> str:
    return columns([(e["trace_id"], KINDS.get(e["service"], e["service"]),
                   _short(e.get("question") or "", width), e["time"],
                   f"{e.get('user') or ''}/{e.get('collection') or ''}")
                  for e in explanations],
                 ("trace id", "type", "question", "time (UTC)", "user/collection"))


def explanation(found: dict[str, Any], max_text: int = 500,
                provenance: bool = False) -> str:
    """Question, rewrite, seeds, candidates (kept first) with their scores, the
    prompt and the model: why the answer cited what it cited."""
    lines = [f"Question:   {found['question']}",
             f"            {KINDS.get(found['service'], found['service'])} on "
             f"{found.get('user')}/{found.get('collection')}, {found['time']}"]
    if found.get("optimized_query"):
        lines.append(f"Rewritten:  {found['optimized_query']}")
    for sub in found.get("subqueries") or []:
        lines.append(f"Sub-question: {sub}")
    if found.get("seeds"):
        lines.append(f"Seeds ({len(found['seeds'])}):")
        lines += [f"  {seed['score']:8.4f}  {seed.get('label') or ''}  {seed['entity']}"
                  for seed in found["seeds"]]
    if found.get("chunk_seeds"):
        lines.append(f"Chunks that seeded the subgraph ({len(found['chunk_seeds'])}):")
        lines += [_candidate(c, max_text, provenance) for c in found["chunk_seeds"]]
    candidates = sorted(found.get("candidates") or [], key=lambda c: not c["kept"])
    lines.append(f"Candidates: {found.get('considered', len(candidates))} considered, "
                 f"{found.get('kept', 0)} kept")
    lines += [_candidate(c, max_text, provenance) for c in candidates]
    for key, value in (found.get("extra") or {}).items():
        lines.append(f"{key.replace('_', ' ').capitalize()}: {value}")
    lines.append(f"Prompt:     {found.get('template')}, {found.get('prompt_chars')} characters")
    lines.append(f"Model:      {found.get('model') or '(unknown)'} (in {found.get('in_token')}"
                 f", out {found.get('out_token')} tokens)")
    lines.append(f"Trace:      tg-show-trace {found['trace_id']}")
    return "\n".join(lines)


def _candidate(candidate: dict[str, Any], max_text: int, provenance: bool) -> str:
    scores = " ".join(f"{name}={_number(value)}" for name, value in
                      sorted((candidate.get("scores") or {}).items()))
    line = f"  {'kept' if candidate['kept'] else '----'}  {_short(candidate['text'], max_text)}"
    if scores:
        line += f"\n        {scores}"
    if provenance:
        line += f"\n        from document {candidate.get('document_id') or '?'}, " \
                f"chunk {candidate.get('id') or '?'}"
    return line


def _number(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"
