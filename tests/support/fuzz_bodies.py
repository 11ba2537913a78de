"""What the gateway fuzz tests send (tests/integration/test_gateway_fuzz.py): text and
JSON a hostile client can write, request bodies of every service row's model, the
OpenAI-compatible API's chat bodies, knowledge-core files and MCP messages, each
mostly of the right shape and often not."""
import json
import types
import typing
from typing import Any

from hypothesis import strategies as st

from trustgraph.gateway.core.services import SERVICES
from trustgraph.schema import Record
from trustgraph.schema.core_archive import MANIFEST, PARTS, CoreWriter, manifest, member_name

FLOW = "\x00flow"  # stands for the rig's flow (not known when strategies are built)

# Text a hostile client can send: any code point, and (a third of the strings) lone
# surrogates too, which JSON carries as \uXXXX escapes.
CLEAN_TEXT = st.text(st.characters(codec="utf-8"), max_size=24)
TEXT = st.one_of(CLEAN_TEXT, CLEAN_TEXT, st.text(
    st.characters(exclude_categories=()) | st.sampled_from(["\udfff", "\ud800"]), max_size=24))
SCALARS = (st.none() | st.booleans() | st.integers() | st.floats() | TEXT
           | st.integers(min_value=2**63 - 2, max_value=2**70))
# Strings that have broken gateways: lone surrogates (valid JSON, not UTF-8), NUL,
# the empty string, text that looks like markup or a path.
HOSTILE = st.sampled_from(["\udfff", "a\ud800b", "\x00", "", "<script>", "../../etc/passwd",
                           "{{ 7*7 }}", "%s%n", "\u202e"])
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(TEXT, inner, max_size=4), max_leaves=10)


def typed(annotation: Any) -> st.SearchStrategy:
    """Values of the field's type (so a request often gets past validation and
    reaches the service), text included in all its hostile forms."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(typed(arg) for arg in args))
    if origin is list:
        return st.lists(typed(args[0]) if args else JSON, max_size=4)
    if origin is dict:
        return st.dictionaries(TEXT, typed(args[1]) if args else JSON, max_size=3)
    known = {str: st.one_of(CLEAN_TEXT, TEXT, HOSTILE), bool: st.booleans(),
             int: st.integers(0, 20) | st.integers(), float: st.floats(), type(None): st.none()}
    return known.get(annotation, JSON)


def objects_for(model: type) -> st.SearchStrategy:
    """A request object for ``model``: its required fields and some optional ones
    (either spelling) with values of their types, then perhaps one field given
    anything at all, and a key it does not have."""
    required, optional = {}, {}
    for name, field in model.model_fields.items():
        spelling = st.sampled_from(sorted({name, name.replace("_", "-")}))
        pair = st.tuples(spelling, typed(field.annotation))
        (required if field.is_required() else optional)[name] = pair
    keyed = st.fixed_dictionaries(required, optional=optional).map(
        lambda pairs: dict(pairs.values()))
    junk = st.dictionaries(TEXT | st.sampled_from(sorted(model.model_fields)),
                           HOSTILE | JSON, max_size=1)
    return st.tuples(keyed, junk | st.just({})).map(lambda parts: {**parts[0], **parts[1]})


NESTING = st.integers(900, 1100)


def deeply_nested(depth: st.SearchStrategy = NESTING) -> st.SearchStrategy:
    return depth.map(lambda n: "[" * n + "]" * n)


def as_body(value: Any) -> bytes:
    return value if isinstance(value, bytes) else json.dumps(value).encode()


def bodies(objects: st.SearchStrategy) -> st.SearchStrategy:
    """An HTTP body: mostly a request object, sometimes any JSON, bytes, or a
    nesting deeper than a parser recurses."""
    odd = st.one_of(JSON.map(as_body), st.binary(max_size=40),
                    deeply_nested().map(str.encode))
    return st.one_of(objects.map(as_body), objects.map(as_body), objects.map(as_body), odd)


ROWS = sorted(SERVICES.values(), key=lambda row: row.name)
SERVICE_BODIES = st.sampled_from(ROWS).flatmap(
    lambda row: bodies(objects_for(row.request_model)).map(lambda body: (row.name, body)))


def on_our_flow(model: type) -> st.SearchStrategy:
    """Bodies of ``model``'s shape, asking the rig's flow unless they name another."""
    return bodies(objects_for(model).map(
        lambda body: {**body, "flow": FLOW} if body.get("flow") is None else body))


class LazyRagShape(Record):
    """The lazy-rag routes' body (PROTOCOL §2), the shape their fuzzed bodies take."""
    query: str
    user: str = ""
    collection: str = ""
    max_entities: int = 50
    max_hops: int = 2
    use_communities: bool = True
    streaming: bool = False
    flow: str = ""


# The OpenAI-compatible API's body: its models (and some it does not have), messages
# of every role, its options of their types and hostile values.
ROLE = st.sampled_from(["system", "developer", "user", "assistant", "tool", "banana"])
MESSAGE = st.fixed_dictionaries({"role": ROLE}, optional={"content": st.one_of(
    TEXT, st.none(), st.lists(st.fixed_dictionaries({"type": st.sampled_from(
        ["text", "image_url"])}, optional={"text": TEXT}), max_size=2))})


def mostly(valid: st.SearchStrategy) -> st.SearchStrategy:
    """A valid value three times in four, anything the rest (one bad option fails the
    whole request, and many options are drawn)."""
    return st.one_of(valid, valid, valid, JSON | HOSTILE)


CHAT = bodies(st.fixed_dictionaries({
    "model": mostly(st.sampled_from(["llm", "document-rag", "graph-rag", "lazy-rag", "agent",
                                     "document-rag:c", "llm:c", "gpt-4"])),
    # Mostly a conversation that ends with the user's text, so that many are answered.
    "messages": st.one_of(st.lists(MESSAGE, max_size=3), *[st.tuples(
        st.lists(MESSAGE, max_size=2), TEXT).map(
        lambda parts: [*parts[0], {"role": "user", "content": parts[1] + "?"}])] * 3)},
    optional={
        "stream": mostly(st.booleans()),
        "stream_options": mostly(st.fixed_dictionaries({"include_usage": st.booleans()})),
        "max_tokens": mostly(st.integers(1, 50)), "temperature": mostly(st.floats(0, 2)),
        "stop": mostly(st.lists(CLEAN_TEXT, max_size=4)), "n": mostly(st.just(1)),
        "collection": mostly(CLEAN_TEXT), "citations": mostly(st.booleans()),
        "session_id": mostly(CLEAN_TEXT), "flow": mostly(st.just(FLOW))}))



# A knowledge core: a real manifest (its fields sometimes anything) and page members
# of any part whose lines are rows, JSON or text, vectors of any bytes; or any bytes.
CORE_MANIFEST = st.builds(lambda model, dimension, counts, junk: {
    **manifest("fuzz", "c", model, dimension, counts), **junk},
    st.none() | CLEAN_TEXT, st.integers(-1, 4), st.fixed_dictionaries(
        {part: st.integers(0, 3) for part in PARTS}), st.dictionaries(
        st.sampled_from(["format", "version", "counts", "embedding_model"]), JSON,
        max_size=1))
CORE_MEMBER = st.tuples(
    st.sampled_from(PARTS), st.integers(1, 3), st.booleans(),
    st.lists(JSON.map(json.dumps) | TEXT, max_size=3).map(
        lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass"))
    | st.binary(max_size=64))


def core_file(described: dict, members: list, cut: int | None) -> bytes:
    writer = CoreWriter()
    data = writer.member(MANIFEST, json.dumps(described).encode()) + b"".join(
        writer.member(member_name(part, page, vectors), body)
        for part, page, vectors, body in members) + writer.end()
    return data if cut is None else data[:cut]


CORES = st.one_of(
    st.builds(core_file, CORE_MANIFEST, st.lists(CORE_MEMBER, max_size=4),
              st.none() | st.integers(0, 400)),
    st.binary(max_size=200))



# A JSON-RPC message of MCP's methods with any params, or any JSON at all.
MCP_MESSAGE = st.one_of(st.fixed_dictionaries({
    "jsonrpc": st.just("2.0") | TEXT, "method": st.sampled_from([
        "initialize", "tools/list", "tools/call", "server/discover", "ping",
        "notifications/initialized", "resources/list"]) | TEXT},
    optional={"id": st.integers() | TEXT, "params": JSON | st.fixed_dictionaries({
        "name": st.sampled_from(["ask", "search", "load_text", "nope"]) | TEXT,
        "arguments": JSON})}), JSON)
MCP_HEADERS = st.fixed_dictionaries({}, optional={
    "MCP-Protocol-Version": st.sampled_from(["2025-06-18", "2025-11-25", "2026-07-28"]) | TEXT,
    "Mcp-Session-Id": st.just("nope") | CLEAN_TEXT, "Origin": CLEAN_TEXT})
