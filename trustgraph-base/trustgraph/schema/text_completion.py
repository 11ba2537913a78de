from .record import Record, Response


class TextCompletionRequest(Record):
    system: str = ""
    prompt: str
    streaming: bool = False


class TextCompletionResponse(Response):
    response: str = ""
    in_token: int | None = None
    out_token: int | None = None
    model: str | None = None
