"""Knowledge extraction: chunks in, triples and entities out (docs/extraction.md)."""
