"""The embedding adapter: merged exactly into a copy of the base model, once per adapter, and the shipped one
loads as a model of its own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from rag.adapter import ADAPTED_MODEL, ADAPTER_FILE, adapted_model_dir, adapter_arrays, merged_weights
from rag.embedding import load_embedder, model_identity, resolve_model
from rag.settings import BASE_MODEL


def _base(folder: Path) -> Path:
    folder.mkdir()
    save_file(
        {"encoder.dense.weight": np.eye(3, dtype=np.float32), "pooler.bias": np.ones(3, np.float32)},
        str(folder / "model.safetensors"),
    )
    (folder / "config.json").write_text("{}")
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    return folder


def _adapter(path: Path, b: float) -> Path:
    a = np.array([[1.0, 2.0, 3.0]], np.float32)  # rank 1: A is 1 x in, B is out x 1
    np.savez(path, **adapter_arrays({"encoder.dense.weight": (a, np.full((3, 1), b, np.float32))}, scale=2.0))
    return path


def test_merging_adds_scale_times_b_times_a_to_the_named_weights_only():
    weights = {"w": np.eye(2, dtype=np.float32), "bias": np.zeros(2, np.float32)}
    adapter = adapter_arrays({"w": (np.array([[1.0, 0.0]]), np.array([[0.5], [1.0]]))}, scale=2.0)
    merged = merged_weights(weights, adapter)
    np.testing.assert_allclose(merged["w"], [[2.0, 0.0], [2.0, 1.0]])
    assert merged["bias"] is weights["bias"]
    untouched = merged_weights(weights, adapter_arrays({"w": (np.ones((1, 2)), np.zeros((2, 1)))}, scale=2.0))
    np.testing.assert_array_equal(untouched["w"], weights["w"])  # B = 0: the base model exactly


def test_an_adapter_for_another_model_is_refused():
    with pytest.raises(ValueError, match="'missing.weight'"):
        merged_weights({"w": np.eye(2)}, adapter_arrays({"missing.weight": (np.ones((1, 2)), np.ones((2, 1)))}, 1.0))


def test_the_adapted_folder_is_the_base_folder_with_merged_weights_made_once(tmp_path):
    base = _base(tmp_path / "base")
    adapter = _adapter(tmp_path / "adapter.npz", b=0.5)
    folder = adapted_model_dir(base, tmp_path / "cache", adapter)
    assert folder.parent == tmp_path / "cache" / "models"
    assert (folder / "config.json").read_text() == "{}" and (folder / "1_Pooling" / "config.json").is_file()
    weights = load_file(str(folder / "model.safetensors"))
    np.testing.assert_allclose(weights["encoder.dense.weight"], np.eye(3) + 2.0 * np.full((3, 1), 0.5) @ [[1, 2, 3]])
    np.testing.assert_array_equal(weights["pooler.bias"], np.ones(3))
    made = (folder / "model.safetensors").stat().st_mtime_ns
    assert adapted_model_dir(base, tmp_path / "cache", adapter) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == made  # reused, not rebuilt
    other = adapted_model_dir(base, tmp_path / "cache", _adapter(tmp_path / "other.npz", b=-1.0))
    assert other != folder  # a refitted adapter gets its own folder (and ONNX export)
    assert [p.name for p in (tmp_path / "cache" / "models").iterdir() if p.name.startswith(".")] == []


def test_the_shipped_adapter_corrects_every_linear_layer_of_the_encoder():
    base = load_file(str(Path(resolve_model(BASE_MODEL)) / "model.safetensors"))
    linear = {k for k, v in base.items() if k.startswith("encoder.") and k.endswith(".weight") and v.ndim == 2}
    with np.load(ADAPTER_FILE) as arrays:
        corrected = {k.removesuffix(".lora_a") for k in arrays.files if k.endswith(".lora_a")}
        assert corrected == linear and len(linear) == 36  # 6 layers x (query, key, value, output, up, down)
        for name in corrected:
            a, b = arrays[name + ".lora_a"], arrays[name + ".lora_b"]
            assert a.shape[1] == base[name].shape[1] and b.shape[0] == base[name].shape[0]
            assert np.abs(b).max() > 0  # trained: B starts at zero


@pytest.mark.slow
def test_the_adapted_model_loads_as_a_model_of_its_own():
    adapted = load_embedder(ADAPTED_MODEL, "torch")
    base = load_embedder(BASE_MODEL, "torch")
    texts = ["consumer group keeps rebalancing", "how do I add partitions to a topic?"]
    a, b = adapted.encode(texts), base.encode(texts)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, rtol=1e-5)
    cosines = (a * b).sum(axis=1)
    assert (cosines > 0.5).all() and (cosines < 0.9999).all()  # the same model, moved
    assert model_identity(adapted).fingerprint != model_identity(base).fingerprint
    assert model_identity(adapted).name == ADAPTED_MODEL
