"""DocumentRAG: answers from the chunks nearest the question."""
