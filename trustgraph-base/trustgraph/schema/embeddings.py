"""Embeddings service records (PROTOCOL §2): ``{"texts": [str]}`` answers
``{"vectors": [[float]]}``, one vector per text, in order. A legacy request
``{"text": str}`` is one text and gets the same answer shape."""
from .record import Record, Response


class EmbeddingsRequest(Record):
    texts: list[str] = []
    text: str | None = None  # legacy single text, used when ``texts`` is empty

    def inputs(self) -> list[str]:
        """The texts to embed."""
        if self.texts or self.text is None:
            return self.texts
        return [self.text]


class EmbeddingsResponse(Response):
    vectors: list[list[float]] | None = None  # absent only on an error
    # The model that made them, as the vector store stamps a collection with it
    # (absent from older services).
    model: str | None = None
