"""Code the test modules share (a test module imports from here, never from another
test module; fixtures shared by several modules live in the nearest conftest.py).

* Waiting: ``waiting`` (``eventually``, ``signalled``, ``answered``/``serving``; prove
  absence by an event that must come after, never by a sleep), ``topic`` (what
  arrives on a stage topic), ``handled`` (stage handler completions).
* Processors started in the test process: ``inprocess`` (text-completion + gateway),
  ``ingest_stack`` (librarian, stores, stand-in embeddings, gateway),
  ``rag_processors`` (everything document-rag and graph-rag need), ``librarian``
  (a client of the librarian's services).
* ``stack``: tg-start run as a subprocess, for end-to-end tests.
* Stand-ins: the provider servers (``*_server``, on ``scripted_llm``), ``arcadedb`` (a
  Bolt server for the Neo4j backend), ``scripted_rag``
  (scripted RAG services behind a real gateway), ``rag_clients`` (scripted services a
  RAG handler calls, for unit tests).
* Data: ``ingest`` (a corpus and what the pipeline must store for it), ``pdf``.
"""
