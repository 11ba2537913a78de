"""The embeddings service: texts in, one vector per text out (docs/embeddings.md)."""
