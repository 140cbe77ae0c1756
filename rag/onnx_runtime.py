"""The ONNX Runtime backend: the packaged sentence-transformers model, exported locally, served without torch.

    <cache_dir>/onnx/<model folder>-<key>/
      model.onnx        fp32 graph exported from the model's own weights (torch, once per machine)
      model-int8.onnx   the same graph with int8 weights, per output channel (onnxruntime's quantizer)
      .lock             held while a graph is written, so Spark workers starting together export once

The key is a hash of the source files' names, sizes and modification times and of `EXPORT_FORMAT`: a
changed model or a changed exporter gets a new folder. Graphs are written to a temporary file and
renamed into place, so a crash mid-export leaves no file that a later run would load.

Serving reads the model's own `tokenizer.json` (truncated to its `max_seq_length`, as
sentence-transformers does), runs the graph and mean-pools and L2-normalises in numpy: no torch, no
sentence-transformers. Only the export imports torch and transformers.

Measured (2 cores, 600 seeds chunk and unit texts, batch 16): the export with eager attention encoded
2.2x faster than sentence-transformers on torch, with cosine 1.0000 to its vectors; a graph exported with
PyTorch's SDPA attention was only 1.5x faster. For int8 see `quantize_graph` and the README.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rag.embedding import chars_read, normalised_rows
from rag.errors import EmbeddingError

EXPORT_FORMAT = "torchscript-opset17-eager-attention-v1"  # part of the cache key: change it to re-export
QUANTIZE_FORMAT = "int8-per-channel-ffn-up-attention-out-v2"  # likewise for the int8 recipe
OPSET = 17
_SOURCE_FILES = ("config.json", "tokenizer.json", "model.safetensors", "pytorch_model.bin", "sentence_bert_config.json")


def graph_path(model_dir: Path, cache_dir: Path, quantized: bool) -> Path:
    """Where the graph of `model_dir` is cached (whether or not it exists yet)."""
    stats = [
        (name, (model_dir / name).stat().st_size, (model_dir / name).stat().st_mtime_ns)
        for name in _SOURCE_FILES
        if (model_dir / name).is_file()
    ]
    key = hashlib.sha256(json.dumps([EXPORT_FORMAT, QUANTIZE_FORMAT, str(model_dir), stats]).encode()).hexdigest()[:16]
    folder = cache_dir.expanduser() / "onnx" / f"{model_dir.name}-{key}"
    return folder / ("model-int8.onnx" if quantized else "model.onnx")


def ensure_graph(model_dir: Path, cache_dir: Path, quantized: bool) -> Path:
    """The cached graph for `model_dir`, exported (and quantized) first if this machine has none yet."""
    target = graph_path(model_dir, cache_dir, quantized)
    if target.is_file():
        return target
    fp32 = graph_path(model_dir, cache_dir, quantized=False)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with _locked(target.parent / ".lock"):
            if not fp32.is_file():
                write_atomically(fp32, lambda path: export_graph(model_dir, path))
            if quantized and not target.is_file():
                write_atomically(target, lambda path: quantize_graph(fp32, path))
    except OSError as exc:
        raise EmbeddingError(
            f"Could not write the ONNX graph of {model_dir} to {target.parent} ({exc}): set KAFKA_RAG_MODEL_CACHE_DIR "
            "to a writable folder, or KAFKA_RAG_EMBED_BACKEND=torch"
        ) from exc
    return target


def write_atomically(target: Path, write: Callable[[Path], None]) -> None:
    """`write` fills a temporary file beside `target`, which then replaces it in one rename (or is removed)."""
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(handle)
    try:
        write(Path(temporary))
        os.chmod(temporary, 0o644)  # mkstemp's 0600 would hide the graph from other users of a shared cache
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def export_graph(model_dir: Path, target: Path) -> None:
    """Export the transformer of `model_dir` to ONNX (last hidden state; dynamic batch and sequence axes)."""
    import inspect

    import torch
    from transformers import AutoModel

    # Eager attention exports as plain MatMul/Softmax, which ONNX Runtime runs 1.5x faster than the SDPA graph.
    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()
    accepted = inspect.signature(model.forward).parameters
    names = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in accepted]

    class LastHiddenState(torch.nn.Module):
        """Calls the model with keyword arguments: under transformers 5 a positional call is refused."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.model(**dict(zip(names, inputs, strict=True))).last_hidden_state

    example = tuple(torch.ones((2, 8), dtype=torch.long) for _ in names)
    axes = {name: {0: "batch", 1: "sequence"} for name in [*names, "last_hidden_state"]}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            LastHiddenState(),
            example,
            str(target),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )


def quantize_graph(source: Path, target: Path) -> None:
    """Int8 weights, one scale per output channel, for each layer's feed-forward up-projection and attention
    output projection; the query, key and value projections and the feed-forward down-projections stay fp32.

    Cosine to the fp32 vectors, min / mean over 600 Kafka docs texts and the golden questions of both files
    (one thread, encode batch 4), and speed against the fp32 graph, on an AVX-512 VNNI machine:

    | int8 weights | texts | questions | speed |
    |---|---|---|---|
    | every MatMul but the down-projections (the recipe until 2026-11-24) | 0.9892 / 0.9965 | 0.9903 / 0.9965 | 1.48x |
    | every MatMul | 0.9834 / 0.9935 | 0.9848 / 0.9936 | 1.99x |
    | up-projections and attention outputs (this recipe) | 0.9934 / 0.9976 | 0.9926 / 0.9976 | 1.22x |
    | up-projections only | 0.9915 / 0.9977 | 0.9932 / 0.9977 | 1.15x |

    Only this recipe and the last keep every text at cosine >= 0.99, issue 12's bar for mixing backends.
    Per-tensor scales gave 0.90 / 0.91. Node names are those of BERT-style exports; for other architectures
    nothing is left out.
    """
    import logging

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(source), load_external_data=False)
    kept = [
        node.name
        for node in graph.graph.node
        if node.op_type == "MatMul"
        and ("/attention/self/" in node.name or ("/output/dense/" in node.name and "/attention/" not in node.name))
    ]
    logging.disable(logging.WARNING)  # the quantizer logs a "pre-process first" hint to the root logger
    try:
        quantize_dynamic(
            str(source),
            str(target),
            per_channel=True,
            weight_type=QuantType.QInt8,
            nodes_to_exclude=kept,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    finally:
        logging.disable(logging.NOTSET)


def max_seq_length(model_dir: Path) -> int:
    """Tokens kept per text: sentence-transformers' `max_seq_length`, else the model's position limit."""
    for name, key in (("sentence_bert_config.json", "max_seq_length"), ("config.json", "max_position_embeddings")):
        value = _read_json(model_dir / name).get(key)
        if value:
            return int(value)
    raise EmbeddingError(f"{model_dir} names no maximum sequence length: use KAFKA_RAG_EMBED_BACKEND=torch")


def check_mean_pooling(model_dir: Path) -> None:
    """This backend mean-pools, which is what sentence-transformers does for this model; refuse any other."""
    modules = _read_json(model_dir / "modules.json") or []
    for module in modules:
        if module.get("type", "").endswith("Pooling"):
            config = _read_json(model_dir / module.get("path", "") / "config.json")
            modes = sorted(k for k, v in config.items() if k.startswith("pooling_mode_") and v)
            if modes != ["pooling_mode_mean_tokens"]:
                raise EmbeddingError(
                    f"The model in {model_dir} pools with {', '.join(modes) or 'no mode'}; the onnx backends "
                    "implement mean pooling only: set KAFKA_RAG_EMBED_BACKEND=torch"
                )


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


class OnnxEmbedder:
    """A sentence-transformers model run by ONNX Runtime on the CPU; `encode` is safe from several threads."""

    def __init__(self, name: str, model_dir: Path, cache_dir: Path, quantized: bool, threads: int | None) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        if not (model_dir / "tokenizer.json").is_file():
            raise EmbeddingError(
                f"The model in {model_dir} has no tokenizer.json, which the onnx backends read: "
                "set KAFKA_RAG_EMBED_BACKEND=torch"
            )
        check_mean_pooling(model_dir)
        graph = ensure_graph(model_dir, cache_dir, quantized)
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=max_seq_length(model_dir))
        pad = _read_json(model_dir / "tokenizer_config.json").get("pad_token") or "[PAD]"
        self._tokenizer.enable_padding(pad_id=self._tokenizer.token_to_id(pad) or 0, pad_token=pad)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or os.cpu_count() or 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._lock = threading.Lock()  # the tokenizer's padding settings are shared state
        self.name = name
        self.backend = "onnx-int8" if quantized else "onnx"
        self.dimension = int(self._session.get_outputs()[0].shape[-1])

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        return self._encode(texts, batch_size, with_tokens=False)[0]

    def encode_with_tokens(self, texts: list[str], batch_size: int = 64) -> tuple[np.ndarray, list[np.ndarray]]:
        return self._encode(texts, batch_size, with_tokens=True)

    def knows_word(self, word: str) -> bool:
        with self._lock:
            return len(self._tokenizer.encode(word, add_special_tokens=False).ids) == 1

    def read_chars(self, text: str) -> int:
        stripped = text.strip()  # as `_encode` encodes it
        with self._lock:
            offsets = self._tokenizer.encode(stripped).offsets
        return chars_read(text, stripped, offsets)

    def _encode(self, texts: list[str], batch_size: int, with_tokens: bool) -> tuple[np.ndarray, list[np.ndarray]]:
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        tokens: list[np.ndarray] = [np.zeros((0, self.dimension), dtype=np.float32)] * len(texts)
        order = np.argsort([-len(t) for t in texts], kind="stable")  # similar lengths together: little padding
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            vectors[rows], batch_tokens = self._encode_batch([texts[i].strip() for i in rows], with_tokens)
            for row, row_tokens in zip(rows.tolist(), batch_tokens, strict=False):
                tokens[row] = row_tokens
        return vectors, tokens

    def _encode_batch(self, texts: list[str], with_tokens: bool) -> tuple[np.ndarray, list[np.ndarray]]:
        with self._lock:
            encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        hidden = self._session.run(None, {name: feeds[name] for name in self._inputs})[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        if not with_tokens:
            return pooled, []
        words = [
            normalised_rows(hidden[i][(np.asarray(e.attention_mask) == 1) & (np.asarray(e.special_tokens_mask) == 0)])
            for i, e in enumerate(encodings)
        ]
        return pooled, words
