"""`evals.half_indexes`: each half index is built with the adapter fitted without its half's questions."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import evals.half_indexes as half_indexes
from rag import model_with_adapter
from rag.adapter import ADAPTED_MODEL, ADAPTER_FILE
from rag.embedding import resolve_model
from rag.index_store import read_manifest
from tests.conftest import SEEDS


def _scaled_adapter(path: Path, factor: float) -> Path:
    """The shipped adapter with its scale multiplied: an adapter of the real model's shapes, fitted on nothing."""
    with np.load(ADAPTER_FILE) as shipped:
        arrays = dict(shipped)
    arrays["scale"] = arrays["scale"] * factor
    np.savez(path, **arrays)
    return path


@pytest.mark.slow
def test_each_half_index_is_built_with_its_own_halfs_adapter_in_the_order_the_fits_take(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KAFKA_RAG_EMBED_BACKEND", "torch")  # no ONNX export of two throwaway models
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(sorted(SEEDS.iterdir())[0], corpus)
    adapters = [_scaled_adapter(tmp_path / "half0.npz", 0.5), _scaled_adapter(tmp_path / "half1.npz", 2.0)]
    fitted_on = []
    monkeypatch.setattr(half_indexes, "collect", lambda sets: sets)
    monkeypatch.setattr(half_indexes, "half_adapters", lambda corpora, work: fitted_on.append(corpora) or adapters)
    work, out = tmp_path / "work", tmp_path / "out"

    half_indexes.main(["--set", "golden.jsonl", str(corpus), str(tmp_path / "served"), "--out", str(out),
                       "--work", str(work)])  # fmt: skip

    expected = [out / "served-half0", out / "served-half1"]
    assert capsys.readouterr().out.splitlines()[-1] == "--half-indexes " + " ".join(map(str, expected))
    assert fitted_on == [[(Path("golden.jsonl"), corpus, tmp_path / "served")]]
    models = [read_manifest(index)["model"] for index in expected]
    assert [m["name"] for m in models] == [str(model_with_adapter(a, work)) for a in adapters]
    assert models[0]["fingerprint"] != models[1]["fingerprint"]
    shipped = resolve_model(ADAPTED_MODEL)
    assert all(m["name"] != shipped for m in models)  # neither half merged with the shipped adapter
