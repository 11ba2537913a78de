"""GraphRAG: answers from the subgraph around the entities nearest the question."""
