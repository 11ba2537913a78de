"""The parts of the OpenAI-compatible API and the MCP server that need no stack: a
chat's messages as a question and a conversation, model names, the SSE events'
exact bytes, citations, the MCP tools by role. The APIs themselves are tested with
the real clients: tests/integration/test_openai_api.py, test_mcp_server.py."""
import json
from types import SimpleNamespace

import pytest

from trustgraph.gateway.apis.mcp_tools import TOOLS, offered
from trustgraph.gateway.apis.openai_answers import Events, citations
from trustgraph.gateway.apis.openai_chat import ChatMessage, conversation, model_of, transcript
from trustgraph.gateway.core import GatewayError


def messages(*pairs: tuple[str, object]) -> list[ChatMessage]:
    return [ChatMessage(role=role, content=content) for role, content in pairs]


def test_the_last_user_message_is_the_question_and_earlier_turns_the_history():
    talk = conversation(messages(
        ("system", "Be brief."), ("user", "Who founded Acme?"), ("assistant", "Ann."),
        ("developer", "Cite."), ("user", "When?"),
        ("user", [{"type": "text", "text": "And where?"}])))
    assert talk.system == "Be brief.\n\nCite."
    assert talk.turns == [{"question": "Who founded Acme?", "answer": "Ann."}]
    assert talk.question == "When?\n\nAnd where?"
    assert transcript(talk).endswith("Reply to the user's latest message:\nWhen?\n\nAnd where?")
    assert transcript(conversation(messages(("user", "Hi")))) == "Hi"


@pytest.mark.parametrize("bad, field", [
    (messages(("user", "q"), ("assistant", "a")), "messages:"),
    (messages(("system", "s")), "messages:"),
    (messages(("user", [{"type": "image_url"}])), "messages[0].content:"),
    (messages(("user", "q"), ("tool", "42"), ("user", "q")), "messages[1].role:"),
])
def test_a_conversation_that_is_not_a_question_is_a_400_naming_the_field(bad, field):
    with pytest.raises(GatewayError) as refused:
        conversation(bad)
    assert refused.value.status == 400 and refused.value.message.startswith(field)


def test_model_names_and_collections():
    assert model_of("graph-rag:papers", None)[0].service == "graph-rag"
    assert model_of("graph-rag:papers", None)[1] == "papers"
    assert model_of("agent", "notes")[1] == "notes"
    assert model_of("llm", None)[0].service == "text-completion"
    with pytest.raises(GatewayError) as unknown:
        model_of("gpt-4o", None)
    assert (unknown.value.status, unknown.value.type) == (404, "model_not_found")
    for name, collection in (("llm:x", None), ("llm", "x"), ("graph-rag:a", "b")):
        with pytest.raises(GatewayError) as refused:
            model_of(name, collection)
        assert refused.value.status == 400


@pytest.mark.parametrize("include_usage", [True, False])
def test_a_content_event_is_the_same_bytes_as_the_whole_chunk_encoded(include_usage):
    events = Events("chatcmpl-1", "document-rag", include_usage)
    fast = events.text(b"content", 'said "hi" \u00e9\n')
    whole = events.chunk({"content": 'said "hi" \u00e9\n'})
    assert fast == whole
    assert fast.startswith(b"data: ") and fast.endswith(b"\n\n")
    chunk = json.loads(fast[6:])
    assert ("usage" in chunk) == include_usage


def test_citations_number_the_documents_once_each():
    sources = [{"document_id": "a", "title": "A"}, {"document_id": "a", "title": "A"},
               {"document_id": "b"}, {"text": "no document"}]
    assert citations(sources) == "\n\nSources:\n[1] A (a)\n[2] b"
    assert citations([{"text": "x"}]) == ""


def test_a_reader_is_offered_no_load_text():
    # The tools by role, as the gateway's role table (core/access.py) reaches them.
    names = [tool.name for tool in TOOLS]
    offered_to = {role: [tool.name for tool in offered(SimpleNamespace(role=role))]
                  for role in ("reader", "user", "admin", None)}
    assert offered_to["reader"] == [name for name in names if name != "load_text"]
    assert offered_to["user"] == offered_to["admin"] == names
    assert offered_to[None] == []  # a public route's caller may use no service
