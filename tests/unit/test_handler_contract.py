"""What a handler may give the runner (``trustgraph.base.service``), as ``Items``
reads it: a returned record, or yielded records and ``Delta``s, and sub-streams
only when marked ``Relay(stream)``, read in their place as ``yield from`` would
(errors thrown back where the ``Relay`` was yielded, closing innermost first).
Anything else is a ``TypeError``, not silently read."""
import pytest

from trustgraph.base import Delta, Items, Relay, ServiceError
from trustgraph.base.service import HandledError
from trustgraph.base.steps import step
from trustgraph.schema import Error, RagResponse


def rag(chunk: str, final: bool = False) -> RagResponse:
    return RagResponse(message_type="chunk", chunk=chunk, end_of_stream=final)


async def read(result) -> list:
    return [item async for item in Items(result)]


async def test_a_returned_record_is_the_one_item():
    async def handle():
        return rag("", final=True)
    assert await read(handle()) == [rag("", final=True)]


async def test_relayed_streams_are_read_in_their_place_however_deep():
    async def inner():
        yield rag("b")
        yield Relay(deeper())

    async def deeper():
        yield Delta("c")

    async def handler():
        yield rag("a")
        yield Relay(inner())
        yield rag("", final=True)

    async def returning():
        return Relay(handler())

    for result in (handler(), returning()):
        items = await read(result)
        assert [item.chunk if isinstance(item, RagResponse) else item.text
                for item in items] == ["a", "b", "c", ""]


@pytest.mark.parametrize("given", ["stream", "text", "none"])
async def test_anything_unmarked_is_a_type_error_not_read(given):
    async def stream():
        yield rag("never read")

    unmarked = {"stream": stream(), "text": "text", "none": None}[given]

    async def handler():
        yield rag("a")
        yield unmarked

    items = Items(handler())
    assert (await anext(items)).chunk == "a"
    with pytest.raises(TypeError, match="Relay"):
        await anext(items)
    await items.aclose()
    if given == "stream":
        await unmarked.aclose()


async def test_returning_an_unmarked_stream_is_a_type_error():
    async def stream():
        yield rag("never read")

    async def handle():
        return stream()

    with pytest.raises(TypeError, match="returned an async iterator"):
        await read(handle())


async def test_an_error_in_a_relayed_stream_is_raised_where_it_was_yielded():
    async def failing():
        yield rag("a")
        raise ServiceError(Error(type="prompt-error", message="down"))

    async def handler():
        try:
            yield Relay(failing())
        except ServiceError as error:
            yield rag(f"handled {error.error.type}", final=True)

    assert [item.chunk for item in await read(handler())] == ["a", "handled prompt-error"]


async def test_a_step_around_a_relay_names_its_failure():
    # As retrieval/answer.py answers: ``with step(...): yield Relay(answer)``.
    async def answer():
        yield Delta("a")
        raise ServiceError(Error(type="llm-error", message="cut"))
        yield

    async def handler():
        with step("graph-rag-error", "answering (kg-prompt)"):
            yield Relay(answer())

    items = Items(handler())
    assert (await anext(items)).text == "a"
    with pytest.raises(HandledError) as failure:
        await anext(items)
    assert (failure.value.type, failure.value.message) == (
        "graph-rag-error", "answering (kg-prompt) failed: llm-error: cut")


async def test_an_error_nobody_handles_comes_out():
    async def failing():
        raise ValueError("bad")
        yield

    async def handler():
        yield Relay(failing())

    with pytest.raises(ValueError, match="bad"):
        await read(handler())


def closing(closed: list, name: str, *items):
    async def stream():
        try:
            for item in items:
                yield item
        finally:
            closed.append(name)
    return stream()


async def test_closing_closes_every_open_generator_innermost_first():
    closed: list[str] = []
    items = Items(closing(closed, "outer", Relay(closing(closed, "inner", rag("a"), rag("b")))))
    assert (await anext(items)).chunk == "a"
    await items.aclose()
    assert closed == ["inner", "outer"]


async def test_a_relayed_reader_hands_over_its_generators():
    # The agent's dialog reads its pattern's first frame through an ``Items`` of its
    # own, then relays it: the runner's ``Items`` then reads the pattern's generators
    # itself (no reader in between per item), errors and closing unchanged.
    closed: list[str] = []

    async def dialog(frames: Items):
        first = await anext(frames)
        yield first
        try:
            yield Relay(frames)
        except ServiceError:
            closed.append("dialog saw the error")
            raise

    async def failing():
        yield rag("b")
        raise ServiceError(Error(type="llm-error", message="cut"))

    pattern = closing(closed, "pattern", rag("a"), Relay(failing()))
    inner = Items(pattern)
    outer = Items(dialog(inner))
    assert [(await anext(outer)).chunk for _ in range(2)] == ["a", "b"]
    assert inner._open == [] and len(outer._open) == 3  # dialog, pattern, failing
    with pytest.raises(ServiceError):
        await anext(outer)
    assert closed == ["pattern", "dialog saw the error"]
    await outer.aclose()
