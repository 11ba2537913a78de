"""``python -m bench.structured``: how often the bundled demo model's answers have the
shape the platform needs from them (issue 33): the agent's ReAct steps, ``ask``'s
classification, LLM extraction's JSON, query decomposition's JSON.

The default stack runs under ``tg-start`` with no LLM configured (``Stack`` scrubs the
host's ``TG_*``, ``OPENAI_*``, ... variables; the run stops unless config says the
``local`` provider answers): the bundled SmolLM2-135M on llama.cpp, as shipped, but
for a longer ``TG_REQUEST_TIMEOUT`` (a request queued for the model on a busy machine
is silent for minutes). Twenty one-chunk documents of invented facts
(structured_corpus.py) are loaded until searchable, their graph (noun-phrase
extraction, no LLM) stored and embedded. Then, over the client library's websocket,
``--concurrency`` at a time:

* react: each question to the agent (``pattern: react``, the tools of config type
  ``tool``). Ended with an answer, or an error ("no final answer within
  max_iterations", "could not be followed"). Each step that is not the final answer
  is an attempted action: the agent sends an ``action`` frame for one naming a known
  tool with JSON-object arguments and tells the model what was wrong with any other
  as the step's ``observation`` (the third such step ends the dialog instead). Valid:
  a configured tool, exactly its declared arguments, each of its declared JSON type
  (strings not blank); a dialog counts when all its actions are. "Expected fact": the
  answer contains the question's substring, case-insensitively;
* ask: parsed when a thought frame carries a ``route`` (a classification that did not
  parse ends the dialog with an error naming ``agent-classify``);
* extraction: ``extract-definitions`` and ``extract-relationships`` asked of the
  prompt service with each chunk's text, as the LLM extractor asks them. A chunk
  counts when both answers parsed (the service checks the templates' schemas) and
  every item is one the extractor stores (extract/llm.py's models; names that make
  IRIs), at least one in all. "Every name found": each entity and subject named is
  in the chunk (an echo of the template's example is not);
* rewrite: document-rag with ``optimize-query`` and ``subqueries`` on a question
  asking two things; parsed when the metadata frame has ``optimized_query`` and a
  non-empty ``subqueries`` (the request is cancelled there). The rewrite is a text
  template that falls back to the question: what can fail is ``query-decompose``.

One table (``--json``: counts and every item's outcome), then the failures by part.
"""
import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from bench.structured_corpus import ASK, FACTS, Fact
from tests.support.stack import Stack
from tests.support.waiting import eventually
from trustgraph.api import AsyncTrustGraph
from trustgraph.api.errors import TrustGraphError
from trustgraph.extract.llm import DEFINITIONS, RELATIONSHIPS, Definition, Relationship
from trustgraph.extract.vocabulary import IN_DOCUMENT, document_iri, entity_iri, relation_iri
from trustgraph.schema.config import LLM_CONFIG_KEY, LLM_CONFIG_TYPE
from trustgraph.schema.tool import TOOL_CONFIG_TYPE, ToolDefinition

SCOPE = {"user": "bench", "collection": "structured"}
ENV = {"TG_REQUEST_TIMEOUT": "900"}  # seconds of silence a request may wait
ITEM_TIMEOUT = 1800.0  # seconds for one dialog or request, queueing included
LOAD_TIMEOUT = 900.0
PARTS = ("react", "ask", "extraction", "rewrite")
UNFOLLOWED = "could not be followed"  # react.py: the malformed step that ends a dialog
JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": (int, float),
                              "boolean": bool, "object": dict, "array": list}
T = TypeVar("T")


@dataclass
class Part:
    name: str
    seconds: float
    rows: list[tuple[str, int, int, str]]  # (measure, count, of, target)
    failures: list[str] = field(default_factory=list)
    items: list[dict] = field(default_factory=list)


async def frames(client: AsyncTrustGraph, service: str, request: dict,
                 until: Callable[[dict], bool] = lambda response: False
                 ) -> tuple[list[dict], str | None]:
    """The responses to one request, up to its end or the first ``until`` accepts,
    and the error that ended it (or None)."""
    got: list[dict] = []
    try:
        async with asyncio.timeout(ITEM_TIMEOUT), \
                aclosing(client.request(service, request)) as responses:
            async for response in responses:
                got.append(response)
                if until(response):
                    break  # closing the request cancels the rest
    except TrustGraphError as error:
        return got, f"{error.type}: {error.message}"
    except TimeoutError:
        return got, f"no end within {ITEM_TIMEOUT:g} s"
    return got, None


async def each(items: list[T], measure: Callable[[T], Awaitable[dict]], concurrency: int,
               part: str) -> list[dict]:
    """``measure(item)`` for every item, ``concurrency`` at a time, in order."""
    slots = asyncio.Semaphore(concurrency)
    done = 0

    async def one(item: T) -> dict:
        nonlocal done
        async with slots:
            outcome = await measure(item)
        done += 1
        print(f"{part} {done}/{len(items)}: {json.dumps(outcome)[:300]}", file=sys.stderr,
              flush=True)
        return outcome
    return list(await asyncio.gather(*(one(item) for item in items)))


def kind(response: dict) -> str | None:
    return response.get("chunk_type") or response.get("message_type")


def text_of(responses: list[dict], chunk_type: str) -> str:
    return "".join(r.get("content") or "" for r in responses if kind(r) == chunk_type)


# -- react -----------------------------------------------------------------------

def arguments_problem(tool: ToolDefinition, arguments: dict[str, Any]) -> str | None:
    """What is wrong with ``arguments`` for ``tool``'s declared ones, or None."""
    declared = {argument.name: argument.type for argument in tool.arguments}
    if missing := sorted(declared.keys() - arguments.keys()):
        return f"{tool.name}: missing {missing} in {arguments!r:.150}"
    if extra := sorted(arguments.keys() - declared.keys()):
        return f"{tool.name}: undeclared {extra} in {arguments!r:.150}"
    for name, type_name in declared.items():
        value, expected = arguments[name], JSON_TYPES.get(type_name, object)
        if not isinstance(value, expected) or (isinstance(value, bool)
                                               and type_name != "boolean"):
            return f"{tool.name}: {name} is not a {type_name}: {value!r:.100}"
        if isinstance(value, str) and not value.strip():
            return f"{tool.name}: {name} is blank"
    return None


def action_problem(tools: dict[str, ToolDefinition], chosen: dict | None, said: str
                   ) -> str | None:
    """An attempted action's problem: ``chosen`` its action frame, or None when the
    agent could not run the step and ``said`` why (an observation, or the last error)."""
    if chosen is None:
        return said.split(". Reply with")[0].split("; last: ")[-1] or "no action frame"
    tool = tools.get(chosen.get("tool") or "")
    if tool is None:
        return f"no configured tool {chosen.get('tool')!r}"
    return arguments_problem(tool, chosen.get("arguments") or {})


async def react_dialog(client: AsyncTrustGraph, tools: dict[str, ToolDefinition],
                       fact: Fact) -> dict:
    responses, error = await frames(client, "agent", {
        "question": fact.question, "pattern": "react", "streaming": True, **SCOPE})
    problems: list[str | None] = []  # per attempted action: None when valid
    chosen = None
    for response in responses:
        if kind(response) == "action":
            chosen = response
        elif kind(response) == "observation":
            problems.append(action_problem(tools, chosen, response.get("content") or ""))
            chosen = None
    if chosen is not None or UNFOLLOWED in (error or ""):  # the dialog ended mid-step
        problems.append(action_problem(tools, chosen, error or ""))
    answer = text_of(responses, "answer")
    return {"question": fact.question, "answered": error is None and bool(answer.strip()),
            "end": error or "answer", "actions": len(problems),
            "invalid": [p for p in problems if p is not None],
            "tools": [r.get("tool") for r in responses if kind(r) == "action"],
            "has_fact": fact.expected.lower() in answer.lower(), "answer": answer[:300],
            "thought": text_of(responses, "thought")[:300]}


async def react_part(client: AsyncTrustGraph, facts: list[Fact], concurrency: int) -> Part:
    values = await client.config_values(TOOL_CONFIG_TYPE)
    tools = {tool.name: tool for tool in map(ToolDefinition.model_validate, values.values())}
    if not tools:
        raise RuntimeError("config holds no tools")
    started = time.perf_counter()
    items = await each(facts, lambda fact: react_dialog(client, tools, fact), concurrency,
                       "react")
    n = len(items)
    actions = sum(item["actions"] for item in items)
    invalid = sum(len(item["invalid"]) for item in items)
    return Part("react", time.perf_counter() - started, [
        ("dialogs ending with an answer", sum(i["answered"] for i in items), n, f"{n}/{n}"),
        ("dialogs whose every action is valid", sum(not i["invalid"] for i in items), n,
         f"{n}/{n}"),
        ("  of them with at least one action",
         sum(not i["invalid"] and i["actions"] > 0 for i in items), n, ""),
        ("actions valid / attempted", actions - invalid, actions, ""),
        ("answers containing the expected fact", sum(i["has_fact"] for i in items), n,
         "(none)")],
        [f"{i['question']} -> {'; '.join(dict.fromkeys(i['invalid'])) or 'actions valid'}"
         f" | ended: {i['end'][:200]}" for i in items if i["invalid"] or not i["answered"]],
        items)


# -- ask -------------------------------------------------------------------------

async def ask_dialog(client: AsyncTrustGraph, case: tuple[str, str]) -> dict:
    question, expected = case
    responses, error = await frames(client, "agent", {
        "question": question, "pattern": "ask", "streaming": True, **SCOPE})
    route = next((r["route"] for r in responses
                  if kind(r) == "thought" and r.get("route")), None)
    return {"question": question, "expected_route": expected, "route": route,
            "end": error or "answer", "answer": text_of(responses, "answer")[:300]}


async def ask_part(client: AsyncTrustGraph, cases: list[tuple[str, str]],
                   concurrency: int) -> Part:
    started = time.perf_counter()
    items = await each(cases, lambda case: ask_dialog(client, case), concurrency, "ask")
    n = len(items)
    return Part("ask", time.perf_counter() - started, [
        ("classification parsed", sum(i["route"] is not None for i in items), n, f"{n}/{n}"),
        ("  route as expected", sum(i["route"] == i["expected_route"] for i in items), n,
         "(none)"),
        ("dialogs ending with an answer", sum(i["end"] == "answer" for i in items), n, "")],
        [f"{i['question']} -> {i['end'][:240]}" for i in items if i["route"] is None],
        items)


# -- extraction ----------------------------------------------------------------

async def prompt_answer(client: AsyncTrustGraph, template: str, text: str
                        ) -> tuple[Any, str | None]:
    """A JSON template's parsed answer, or what went wrong."""
    responses, error = await frames(client, "prompt", {"id": template,
                                                       "variables": {"text": text}})
    if error is not None:
        return None, f"{template}: {error}"
    return json.loads(responses[-1]["object"]), None


def stored_items(answer: Any, model: type[BaseModel], template: str
                 ) -> tuple[list[Any], list[str]]:
    """The items of an answer the extractor would store, and what is wrong with the
    others (extract/llm.py's models; a name must make an IRI)."""
    if not isinstance(answer, list):
        return [], [f"{template}: not a list: {answer!r:.150}"]
    items, problems = [], []
    for n, value in enumerate(answer):
        try:
            item = model.model_validate(value)
        except ValidationError as error:
            problems.append(f"{template} item {n}: {error.errors()[0]['msg']}: {value!r:.120}")
            continue
        names = [item.entity] if isinstance(item, Definition) else [item.subject]
        if isinstance(item, Relationship) and relation_iri(item.predicate) is None:
            problems.append(f"{template} item {n}: predicate makes no IRI: {value!r:.120}")
        elif any(entity_iri(name) is None for name in names):
            problems.append(f"{template} item {n}: name makes no IRI: {value!r:.120}")
        else:
            items.append(item)
    return items, problems


async def extraction_chunk(client: AsyncTrustGraph, fact: Fact) -> dict:
    (definitions, error_d), (relationships, error_r) = await asyncio.gather(
        prompt_answer(client, DEFINITIONS, fact.text),
        prompt_answer(client, RELATIONSHIPS, fact.text))
    found_d, problems_d = stored_items(definitions, Definition, DEFINITIONS) \
        if error_d is None else ([], [error_d])
    found_r, problems_r = stored_items(relationships, Relationship, RELATIONSHIPS) \
        if error_r is None else ([], [error_r])
    problems = problems_d + problems_r
    if not problems and not found_d + found_r:
        problems.append("both answers are empty")
    names = [d.entity for d in found_d] + [r.subject for r in found_r] + [
        r.object for r in found_r if r.object_entity]
    return {"chunk": f"{fact.id}/c0", "valid": not problems, "problems": problems,
            "definitions_parsed": error_d is None, "relationships_parsed": error_r is None,
            "items": len(found_d) + len(found_r),
            "grounded": bool(names) and all(n.lower() in fact.text.lower() for n in names),
            "names": names[:12]}


async def extraction_part(client: AsyncTrustGraph, facts: list[Fact], concurrency: int
                          ) -> Part:
    started = time.perf_counter()
    # Each chunk asks two prompts at once, as the extractor does.
    items = await each(facts, lambda fact: extraction_chunk(client, fact),
                       max(1, concurrency // 2), "extraction")
    n = len(items)
    return Part("extraction", time.perf_counter() - started, [
        ("chunks with schema-valid triples", sum(i["valid"] for i in items), n,
         f">= {n - max(1, n // 20)}/{n}"),
        ("  every name found in the chunk", sum(i["valid"] and i["grounded"] for i in items),
         n, "(none)"),
        ("extract-definitions parsed", sum(i["definitions_parsed"] for i in items), n, ""),
        ("extract-relationships parsed", sum(i["relationships_parsed"] for i in items), n,
         "")],
        [f"{i['chunk']}: {' | '.join(p[:200] for p in i['problems'][:2])}"
         for i in items if not i["valid"]], items)


# -- query rewriting and decomposition -----------------------------------------

async def rewrite_request(client: AsyncTrustGraph, fact: Fact) -> dict:
    responses, error = await frames(client, "document-rag", {
        "query": fact.compound, "streaming": True, "optimize-query": True,
        "subqueries": True, **SCOPE}, until=lambda r: r.get("message_type") == "metadata")
    metadata = responses[-1] if responses and error is None else {}
    rewritten, subqueries = metadata.get("optimized_query"), metadata.get("subqueries")
    return {"question": fact.compound, "parsed": bool(rewritten) and bool(subqueries),
            "optimized_query": rewritten, "subqueries": subqueries, "error": error}


async def rewrite_part(client: AsyncTrustGraph, facts: list[Fact], concurrency: int
                       ) -> Part:
    started = time.perf_counter()
    # Each request asks two prompts at once (query-rewrite and query-decompose).
    items = await each(facts, lambda fact: rewrite_request(client, fact),
                       max(1, concurrency // 2), "rewrite")
    n = len(items)
    return Part("rewrite", time.perf_counter() - started, [
        ("optimized_query and subqueries parsed", sum(i["parsed"] for i in items), n,
         f"{n}/{n}"),
        ("  rewrite differs from the question",
         sum(bool(i["optimized_query"]) and i["optimized_query"] != i["question"]
             for i in items), n, "")],
        [f"{i['question']} -> {(i['error'] or repr(i['subqueries']))[:260]}"
         for i in items if not i["parsed"]], items)


# -- the run -------------------------------------------------------------------

async def loaded(client: AsyncTrustGraph) -> bool:
    """Every document searchable, its chunk's graph stored, entity vectors there."""
    statuses = await client.load_status([fact.id for fact in FACTS], **SCOPE)
    if failed := [s for s in statuses if s["state"] == "failed" or (s.get("chunks") or 1) > 1]:
        raise RuntimeError(f"documents failed to load or are not one chunk each: {failed}")
    if not all(s["state"] == "done" for s in statuses):
        return False
    documents = {t["o"]["i"] for t in await client.triples(p=IN_DOCUMENT, **SCOPE)}
    if not {document_iri(fact.id) for fact in FACTS} <= documents:
        return False
    [probe] = await client.embeddings(["anything"])
    return bool(await client.graph_embeddings(probe, limit=1, **SCOPE))


async def measure(stack: Stack, count: int, concurrency: int, parts: list[str]
                  ) -> tuple[dict, list[Part]]:
    async with AsyncTrustGraph(stack.gateway_url) as client:
        llm = (await client.config_values(LLM_CONFIG_TYPE)).get(LLM_CONFIG_KEY) or {}
        if llm.get("provider") != "local":
            raise RuntimeError(f"text-completion is not the local demo model: {llm}")
        started = time.perf_counter()
        await asyncio.gather(*(client.load_text(fact.text, fact.id, title=fact.title,
                                                **SCOPE) for fact in FACTS))
        await eventually(lambda: loaded(client), "the corpus and its graph",
                         timeout=LOAD_TIMEOUT, every=0.5)
        print(f"corpus loaded in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        facts, asks = FACTS[:count], ASK[:count]
        runs = {"react": lambda: react_part(client, facts, concurrency),
                "ask": lambda: ask_part(client, asks, concurrency),
                "extraction": lambda: extraction_part(client, facts, concurrency),
                "rewrite": lambda: rewrite_part(client, facts, concurrency)}
        return llm, [await runs[name]() for name in parts]


def report(llm: dict, parts: list[Part]) -> str:
    lines = [f"LLM: {llm.get('provider')} {llm.get('model')} (demo: {llm.get('demo')}); "
             "counts matter, times are of a shared machine", "",
             "| part | measure | count | target | part's time s |", "|---|---|---|---|---|"]
    for part in parts:
        for n, (measure, count, of, target) in enumerate(part.rows):
            time_taken = f"{part.seconds:.0f}" if n == 0 else ""
            lines.append(f"| {part.name if n == 0 else ''} | {measure} | {count}/{of} | "
                         f"{target} | {time_taken} |")
    for part in parts:
        if part.failures:
            lines += ["", f"{part.name} failures:", *(f"  {f}" for f in part.failures)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=20,
                        help="questions (and chunks) per part, at most 20")
    parser.add_argument("--concurrency", type=int, default=2,
                        help="dialogs at once (the local model serves 2 sequences)")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--json", action="store_true", help="print JSON, not the table")
    args = parser.parse_args()
    with Stack(env=ENV, startup_timeout=300.0) as stack:
        llm, found = asyncio.run(measure(stack, min(args.questions, len(FACTS)),
                                         args.concurrency, args.parts))
    if args.json:
        print(json.dumps({"llm": llm, "parts": [asdict(part) for part in found]},
                         indent=1, ensure_ascii=False))
    else:
        print(report(llm, found))


if __name__ == "__main__":
    main()
