"""The gateway's hot-path framing: splicing records into envelopes (coalescing the
records that piled up while a client was behind is ``trustgraph.base.coalesce``:
tests/unit/test_relay.py)."""
import json

from trustgraph.gateway.core.websocket import Envelope


def test_envelope_splices_the_record_bytes():
    envelope = Envelope('req "1"')
    data = envelope.response(b'{"response":"x","end_of_stream":false}', False)
    assert json.loads(data) == {"id": 'req "1"', "response": {
        "response": "x", "end_of_stream": False}, "complete": False}
    assert json.loads(envelope.response(b"{}", True))["complete"] is True


def test_envelope_error_is_complete():
    data = Envelope(None).error({"type": "bad-request", "message": "frame is not valid JSON"})
    assert json.loads(data) == {"id": None, "complete": True, "error": {
        "type": "bad-request", "message": "frame is not valid JSON"}}
