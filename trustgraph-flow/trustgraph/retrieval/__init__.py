"""Retrieval-augmented answers (DESIGN §5, docs/retrieval.md): ``document-rag`` answers
from chunk vectors, ``graph-rag`` from the knowledge graph. What they share (query
optimisation, vector search, the streamed frame sequence) is written once here."""
