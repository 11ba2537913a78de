"""The int8 MatMul rewrite on a small graph built here: weights stored as int8 times
column scales become MatMulNBits with the same numbers (exact with float
activations), weights read twice are packed once, anything else is left alone."""
import numpy as np
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

from trustgraph.embeddings.minilm.int8_matmul import BLOCK, with_int8_matmuls

K, N = 2 * BLOCK, 24


def graph_of(int8_weights: np.ndarray, scales: np.ndarray, float_weights: np.ndarray):
    """y = x @ W + x @ W (W = int8 * scales, read by two MatMuls), z = x @ F (float)."""
    initializers = [numpy_helper.from_array(int8_weights, "w_q"),
                    numpy_helper.from_array(scales, "w_scale"),
                    numpy_helper.from_array(float_weights, "f")]
    nodes = [helper.make_node("Cast", ["w_q"], ["w_f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["w_f", "w_scale"], ["w"]),
             helper.make_node("MatMul", ["x", "w"], ["a"]),
             helper.make_node("MatMul", ["x", "w"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["y"]),
             helper.make_node("MatMul", ["x", "f"], ["z"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                   ["rows", int8_weights.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", N]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["rows", N])], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_int8_weights_become_matmulnbits_with_the_same_numbers():
    rng = np.random.default_rng(7)
    int8_weights = rng.integers(-127, 128, (K, N), dtype=np.int8)
    scales = rng.uniform(0.001, 0.02, (1, N)).astype(np.float32)
    float_weights = rng.standard_normal((K, N)).astype(np.float32)
    x = rng.standard_normal((5, K)).astype(np.float32)
    model = graph_of(int8_weights, scales, float_weights)

    assert with_int8_matmuls(model, accuracy_level=0) == 2
    ops = [node.op_type for node in model.graph.node]
    assert ops.count("MatMulNBits") == 2 and ops.count("MatMul") == 1  # the float one
    assert "Cast" not in ops  # the float32 copy of W is no longer built
    assert sorted(t.name for t in model.graph.initializer) == ["f", "w_int8", "w_int8_scale"]

    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    y, z = session.run(None, {"x": x})
    w = int8_weights.astype(np.float32) * scales
    np.testing.assert_allclose(y, 2 * (x @ w), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(z, x @ float_weights, rtol=1e-4, atol=1e-4)


def test_weights_of_another_shape_are_left_alone():
    rng = np.random.default_rng(8)
    # K not a multiple of BLOCK: not something MatMulNBits takes in blocks of BLOCK.
    int8_weights = rng.integers(-127, 128, (BLOCK + 1, N), dtype=np.int8)
    model = graph_of(int8_weights, np.ones((1, N), np.float32),
                     np.ones((BLOCK + 1, N), np.float32))
    assert with_int8_matmuls(model) == 0
    assert [n.op_type for n in model.graph.node].count("MatMul") == 3
