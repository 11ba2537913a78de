"""The gateway's hot-path framing: splicing records into envelopes and coalescing
records that piled up while a client was behind."""
import json

from trustgraph.gateway.core.framing import Envelope, coalesce


def frame(final: bool = False, **record) -> tuple[bytes, bool]:
    return json.dumps(record, separators=(",", ":")).encode(), final


def decoded(frames):
    return [(json.loads(data), final) for data, final in frames]


def test_a_batch_of_one_is_returned_untouched():
    batch = [frame(response="tok0 ")]
    assert coalesce(batch, "response") is batch


def test_consecutive_deltas_merge_and_the_final_stays_separate():
    batch = [frame(end_of_stream=False, response="a"), frame(end_of_stream=False, response="b"),
             frame(end_of_stream=False, response="c"),
             frame(True, end_of_stream=True, response="", in_token=11, out_token=3)]
    merged = coalesce(batch, "response")
    assert decoded(merged) == [({"end_of_stream": False, "response": "abc"}, False),
                               decoded(batch[-1:])[0]]
    assert merged[-1][0] is batch[-1][0]  # the final record's bytes are passed through


def test_token_counts_are_summed_and_other_fields_come_from_the_last():
    batch = [frame(response="a", in_token=1, out_token=2, model="m1"),
             frame(response="b", in_token=3, out_token=4, model="m2")]
    assert decoded(coalesce(batch, "response")) == [
        ({"response": "ab", "in_token": 4, "out_token": 6, "model": "m2"}, False)]


def test_records_with_different_keys_are_not_merged():
    batch = [frame(response="a"), frame(response="b", model="m"), frame(response="c", model="m")]
    merged = coalesce(batch, "response")
    assert merged[0] == batch[0]
    assert decoded(merged[1:]) == [({"response": "bc", "model": "m"}, False)]


def test_never_merges_across_a_final_record():
    batch = [frame(response="a"), frame(True, response="b"), frame(response="c")]
    assert coalesce(batch, "response") == batch


def test_records_without_the_delta_field_pass_through():
    batch = [frame(message_type="metadata", sources=[1]),
             frame(message_type="metadata", sources=[2]), frame(chunk="x")]
    assert coalesce(batch, "chunk") == batch


def test_a_lone_mergeable_record_keeps_its_original_bytes():
    batch = [frame(response="a"), frame(True, response="")]
    merged = coalesce(batch, "response")
    assert merged[0][0] is batch[0][0]


def test_non_ascii_text_survives_merging():
    batch = [frame(response="héllo "), frame(response="世界 "), frame(response="🙂")]
    merged = coalesce(batch, "response")
    assert json.loads(merged[0][0])["response"] == "héllo 世界 🙂"


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
