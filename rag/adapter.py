"""The embedding model adapted to Kafka questions: low-rank corrections shipped with the code.

MiniLM knows English, not how on-call engineers word Kafka questions: "bump partitions" for the docs' "add
partitions", "will the broker just create it" for `auto.create.topics.enable`. `evals/fit_embedding.py` learns
a rank-r correction `B·A` for every linear layer of the encoder (LoRA, Hu et al. 2021) from the golden files'
tuning questions and the synthetic queries ingest makes, and writes it to `rag/embedding_adapter.npz`
(about 1.3 MB, not the 90 MB model). The adapted model is the base model's folder with `W + scale·B·A`
merged into its weights, written once into the model cache; both backends load that folder like any local
model, and the onnx backends export their graph from it.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import io
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from rag.settings import ADAPTED_MODEL

ADAPTER_FILE = Path(__file__).with_name("embedding_adapter.npz")
WEIGHTS_FILE = "model.safetensors"
_A, _B, _SCALE = ".lora_a", ".lora_b", "scale"


def merged_weights(weights: Mapping[str, np.ndarray], adapter: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`weights` with `scale·B·A` added to each weight matrix the adapter names."""
    scale = float(adapter[_SCALE])
    merged = dict(weights)
    for key in adapter:
        if not key.endswith(_A):
            continue
        name = key.removesuffix(_A)
        if name not in weights:
            raise ValueError(f"the adapter corrects {name!r}, which the base model does not have")
        delta = scale * (adapter[name + _B].astype(np.float32) @ adapter[key].astype(np.float32))
        merged[name] = (weights[name].astype(np.float32) + delta).astype(weights[name].dtype)
    return merged


def adapter_arrays(matrices: Mapping[str, tuple[np.ndarray, np.ndarray]], scale: float) -> dict[str, np.ndarray]:
    """What `evals/fit_embedding.py` saves: {weight name: (A, B)} as the flat arrays `merged_weights` reads."""
    arrays: dict[str, np.ndarray] = {_SCALE: np.asarray(scale, dtype=np.float32)}
    for name, (a, b) in matrices.items():
        arrays[name + _A] = np.asarray(a, dtype=np.float32)
        arrays[name + _B] = np.asarray(b, dtype=np.float32)
    return arrays


def shipped_adapter() -> bytes:
    """The adapter file's bytes, read as package data: on a Spark cluster the code reaches the executors as a
    zip, where `ADAPTER_FILE` is no file."""
    return importlib.resources.files("rag").joinpath(ADAPTER_FILE.name).read_bytes()


def adapted_model_dir(base_dir: Path, cache_dir: Path, adapter: Path | None = None) -> Path:
    """The folder of the base model with the adapter merged in, made in `cache_dir` on first use.

    Keyed by the adapter's bytes and the base weights' path, size and time (as `rag.onnx_runtime.graph_path`),
    so a refitted adapter gets a new folder (and with it a new ONNX export). Concurrent first uses each build a
    private copy; the first to rename it into place wins.
    """
    from safetensors.numpy import load_file, save_file

    base_weights = base_dir / WEIGHTS_FILE
    stat = base_weights.stat()
    base = f"{base_weights.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()
    data = adapter.read_bytes() if adapter else shipped_adapter()
    key = hashlib.sha256(data + base).hexdigest()[:16]
    target = cache_dir.expanduser() / "models" / f"{ADAPTED_MODEL.rsplit('/', 1)[-1]}-{key}"
    if (target / WEIGHTS_FILE).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        shutil.copytree(base_dir, building, dirs_exist_ok=True, ignore=shutil.ignore_patterns(WEIGHTS_FILE))
        with np.load(io.BytesIO(data)) as arrays:
            save_file(merged_weights(load_file(str(base_weights)), dict(arrays)), str(building / WEIGHTS_FILE))
        os.chmod(building, 0o755)  # mkdtemp's 0700 would hide the model from other users of a shared cache
        try:
            building.rename(target)
        except OSError:  # another process put its copy in place first: use that one
            if not (target / WEIGHTS_FILE).is_file():
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return target


def chunk_model_texts(index_dir: Path) -> list[tuple[str, str, str]]:
    """(chunk id, text as the model sees it, chunk text) for every chunk of the index's serving version:
    the passages `evals/fit_embedding.py` trains on."""
    from rag.chunking import dense_text
    from rag.index_store import StoredVersion, serving_path

    return [
        (row["chunk_id"], dense_text(row["section_path"], row["text"]), row["text"])
        for row in StoredVersion.open(serving_path(index_dir)).rows()
    ]
