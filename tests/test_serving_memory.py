"""Serving memory is bounded by what queries touch: a 10^5-chunk index is mapped, not copied.

A synthetic index of 100,000 chunks (random unit vectors, two evidence units each, the real FAISS,
bm25s and Arrow files) is built once; a fresh process then loads it with the real model, answers
twenty retrievals and reports how much anonymous memory (not file pages shared with other
processes) loading and serving added. The bound is on memory, not time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rag.index_store import VersionWriter
from rag.tokens import TokenBasis
from rag.units import UNITS_VERSION
from tests.conftest import REPO

pytestmark = pytest.mark.slow

CHUNKS = 100_000
DIMENSION = 384
WORDS = [
    "broker",
    "consumer",
    "producer",
    "rebalance",
    "offset",
    "commit",
    "lag",
    "partition",
    "leader",
    "replica",
    "fetch",
    "timeout",
]

PROBE = """
import json, re, sys
from pathlib import Path

def anonymous_mb():
    return int(re.search(r"RssAnon:\\s+(\\d+)", Path("/proc/self/status").read_text()).group(1)) / 1024

from rag.embedding import load_embedder
from rag.index_store import load_index
from rag.query import parse_query
from rag.retrieval import FirstStage, Retriever
from rag.settings import Settings

embedder = load_embedder(Settings.model)
embedder.encode(["warm up the model before measuring"])
before = anonymous_mb()
index = load_index(Path(sys.argv[1]))
retriever = Retriever(index, embedder)
stage = FirstStage.from_settings(Settings())
for word in sys.argv[2:]:
    retriever.retrieve(parse_query(f"why does the {word} time out after a rebalance"), 40, "hybrid", stage)
print(json.dumps({"added_mb": anonymous_mb() - before, "chunks": len(index.chunks)}))
"""


@pytest.fixture(scope="module")
def large_index(tmp_path_factory) -> Path:
    index_dir = tmp_path_factory.mktemp("large") / "index"
    rng = np.random.default_rng(0)
    manifest = {
        "model": {"name": "synthetic", "dimension": DIMENSION, "fingerprint": "-", "normalized": True},
        "chunker": {"units_version": UNITS_VERSION},
        "counts": {},
        "files": [],
        "skipped": [],
    }
    no_tokens = TokenBasis.fit(np.zeros((0, DIMENSION), np.float32))  # the rows bring no token codes
    with VersionWriter(index_dir, flat_max=10_000, token_basis=no_tokens) as writer:
        for block in range(0, CHUNKS, 10_000):
            vectors = rng.normal(size=(10_000, 3, DIMENSION)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=2, keepdims=True)
            for offset, row_vectors in enumerate(vectors):
                number = block + offset
                text = " ".join(WORDS[(number * k) % len(WORDS)] for k in (1, 3, 7)) + f" note {number}."
                writer.add(
                    {
                        "chunk_id": f"c{number:07d}",
                        "doc_id": f"d{number // 50}",
                        "source_path": f"doc{number // 50:05d}.md",
                        "title": f"Doc {number // 50}",
                        "section_path": [f"Doc {number // 50}", WORDS[number % len(WORDS)]],
                        "text": text,
                        "identifiers": [f"{WORDS[number % len(WORDS)]}.timeout.ms"],
                        "start": (number % 50) * 100,
                        "end": (number % 50) * 100 + len(text),
                        "url": "",
                        "continues_code": False,
                        "vector": row_vectors[0],
                        "unit_vectors": row_vectors[1:],
                    }
                )
        writer.publish(manifest)
    return index_dir


@pytest.mark.timeout(1200)  # building 100k chunks' files and approximate indexes on 2 shared cores
def test_loading_and_serving_a_large_index_adds_little_anonymous_memory(large_index):
    version = next(p for p in (large_index / "versions").iterdir() if not p.name.startswith("."))
    vector_mb = sum((version / name).stat().st_size for name in ("vectors.f32", "units.f16")) / 2**20
    assert vector_mb > 250  # 100k chunk vectors (float32) and 200k unit vectors (float16)
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(large_index), *WORDS],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["chunks"] == CHUNKS
    # Copies of the vectors, the chunk table or the BM25 matrix would add hundreds of MB; the approximate
    # indexes' codes, the identifier lookup and per-chunk positions are what is expected (~40 MB).
    assert figures["added_mb"] < 100, figures
