"""Records through the answer-stream API's real parts, with no gateway: the one reader
(``asking.read``, ``trustgraph.answers.Reader``), its NDJSON renderer (``lines.Lines``)
and its collected answer (``lines.collected_answer``)."""
import json
from typing import Any

from trustgraph.answers import Reader
from trustgraph.gateway.apis.asking import read
from trustgraph.gateway.apis.collected import Collected
from trustgraph.gateway.apis.lines import Lines, collected_answer
from trustgraph.schema import Response

Frame = tuple[bytes | dict[str, Any], bool]  # a record (encoded, or as JSON) and its final flag


class AnswerLines:
    """One answer of a service answering with ``model``: its lines as they were
    written (``lines``, kept when the service's error raises ``ServiceError``) and,
    once all have come, the collected answer (``collected``)."""

    def __init__(self, model: type[Response]) -> None:
        self.model = model
        self.lines: list[dict[str, Any]] = []
        self.whole = Collected()

    async def read(self, *batches: list[Frame]) -> list[dict[str, Any]]:
        """The lines of records arriving in ``batches`` (as the gateway gets them)."""
        async def frames():
            for batch in batches:
                yield [(data if isinstance(data, bytes) else json.dumps(data).encode(), final)
                       for data, final in batch]

        lines = Lines("rid", self.model)
        async for events in read(frames(), Reader(self.model)):
            self.whole.add(events)
            self.lines += [json.loads(line) for line in lines.render(events).split(b"\n")
                           if line]
        return self.lines

    def collected(self) -> dict[str, Any]:
        return collected_answer(self.whole, self.model, "rid")


async def lines_of(model: type[Response], *frames: Frame
                   ) -> tuple[AnswerLines, list[dict[str, Any]]]:
    """The answer and its lines, each record arriving alone."""
    answer = AnswerLines(model)
    return answer, await answer.read(*([frame] for frame in frames))
