"""The model's int8-stored weights multiplied as int8, not expanded to float32.

The shipped model stores each weight matrix as int8 with one scale per output
column, expanded to float32 when onnxruntime loads it (``Cast`` then ``Mul``). A
short query then reads every layer's ~42 MB of float32 weights, more than this
machine's 32 MB L3 cache holds, so embedding the question (the step every RAG
answer waits for before its first token) costs what those reads cost.

``with_int8_matmuls`` gives each such matrix to onnxruntime's ``MatMulNBits`` (8
bits, the same int8 numbers and column scales, so the weights are exactly the
model's) with ``accuracy_level`` 4: the activations are quantized to int8 in blocks
of ``BLOCK`` along each row, and the product is computed in integers. Measured on 2
cores (load ~3, 60 alternated runs): a query in 4.4 ms against 5.9 ms (p50), a run
of four chunks with 15-22 % less CPU, and vectors at cosine >= 0.9997 to the float
arithmetic's on real texts (the float32 path against torch is 0.999), so vectors
stored before this change still match. (Dynamic int8 quantization of the MatMuls,
tried before (docs/workbench.md), gave cosine 0.96-0.98; ``accuracy_level`` 0
keeps float activations but ran 5-7x slower here.)
"""
import numpy as np
import onnx
from onnx import helper, numpy_helper

# Activation values quantized together (both of the model's K, 384 and 1536, divide
# by it); 128 was no faster and further from the float vectors (cosine 0.9992).
BLOCK = 32
ACCURACY_LEVEL = 4  # int8 activations, integer products


def with_int8_matmuls(model: onnx.ModelProto, accuracy_level: int = ACCURACY_LEVEL) -> int:
    """Rewrite ``model`` in place; the number of MatMuls rewritten. A MatMul whose
    weights are not ``Cast(int8) * column scales`` is left as it is.
    ``accuracy_level`` 0 keeps the activations float32 (slow here; the tests use it
    to check that the weights are carried over exactly)."""
    graph = model.graph
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    producer = {output: node for node in graph.node for output in node.output}
    nodes, rewritten = [], 0
    packed: dict[str, list[onnx.TensorProto]] = {}  # by the weights' name
    for node in graph.node:
        weights = _int8_weights(node, producer, initializers) if node.op_type == "MatMul" \
            else None
        if weights is None:
            nodes.append(node)
            continue
        quantized, scales = weights
        k, n = quantized.shape
        name = node.input[1]
        if name not in packed:  # weights read by two MatMuls are packed once
            # MatMulNBits wants the weights as [N, K / BLOCK, BLOCK] unsigned, zero point
            # 128, and a scale per block: each column's own, repeated.
            unsigned = (quantized.T.astype(np.int16) + 128).astype(np.uint8)
            block_scales = np.repeat(scales.reshape(n, 1), k // BLOCK, axis=1).reshape(-1)
            packed[name] = [numpy_helper.from_array(unsigned.reshape(n, k // BLOCK, BLOCK),
                                                    f"{name}_int8"),
                            numpy_helper.from_array(block_scales, f"{name}_int8_scale")]
            graph.initializer.extend(packed[name])
        nodes.append(helper.make_node(
            "MatMulNBits", [node.input[0], f"{name}_int8", f"{name}_int8_scale"],
            list(node.output), name=node.name, domain="com.microsoft",
            K=k, N=n, bits=8, block_size=BLOCK, accuracy_level=accuracy_level))
        rewritten += 1
    del graph.node[:]
    graph.node.extend(nodes)
    _drop_unused(graph)
    if rewritten and not any(op.domain == "com.microsoft" for op in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return rewritten


def _drop_unused(graph: onnx.GraphProto) -> None:
    """The nodes and initializers nothing reads any more (the Cast/Mul pairs that
    expanded the weights to float32), so the float copies are never built."""
    outputs = {output.name for output in graph.output}
    while True:
        read = outputs | {name for node in graph.node for name in node.input}
        unused = [node for node in graph.node if not read.intersection(node.output)]
        if not unused:
            break
        for node in unused:
            graph.node.remove(node)
    kept = [tensor for tensor in graph.initializer if tensor.name in read]
    del graph.initializer[:]
    graph.initializer.extend(kept)


def _int8_weights(node: onnx.NodeProto, producer: dict, initializers: dict
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """(int8 [K, N], float32 scales [N]) when ``node``'s weights are int8 numbers
    times one scale per column, with K a multiple of ``BLOCK``."""
    scaled = producer.get(node.input[1])
    if scaled is None or scaled.op_type != "Mul" or scaled.input[1] not in initializers:
        return None
    cast = producer.get(scaled.input[0])
    if cast is None or cast.op_type != "Cast" or cast.input[0] not in initializers:
        return None
    quantized = numpy_helper.to_array(initializers[cast.input[0]])
    scales = numpy_helper.to_array(initializers[scaled.input[1]])
    if quantized.dtype != np.int8 or quantized.ndim != 2 or quantized.shape[0] % BLOCK \
            or scales.shape != (1, quantized.shape[1]):
        return None
    return quantized, scales.astype(np.float32).reshape(-1)
