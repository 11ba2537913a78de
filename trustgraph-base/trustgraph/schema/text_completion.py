from .record import Record, Response


class TextCompletionRequest(Record):
    system: str = ""
    prompt: str
    streaming: bool = False
    # A model of the configured provider to answer with instead of its own (LazyRAG's
    # LAZY_RAG_SUMMARY_MODEL); unset: the provider's configured model.
    model: str | None = None


class TextCompletionResponse(Response):
    delta_field = "response"

    response: str = ""
    in_token: int | None = None
    out_token: int | None = None
    model: str | None = None
