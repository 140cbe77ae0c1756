"""The index store: versions behind an atomic CURRENT pointer, pruning, the model check, memory-mapped reads.

Built from small synthetic chunk tables (random unit vectors) with the real FAISS and bm25s, so
this file runs in seconds; the real model and real documents are in test_ingest.py.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest

from rag.embedding import ModelIdentity
from rag.errors import IndexMismatchError, IndexNotFoundError, IndexStoreError
from rag.index_store import (
    TOKENS_VERSION,
    StoredVersion,
    VersionWriter,
    current_version,
    load_index,
    read_manifest,
    rows_to_table,
    serving_path,
    write_version,
)
from rag.lexical import LEXICAL_VERSION
from rag.tokens import TokenBasis, token_codes
from rag.units import UNITS_VERSION

DIMENSION = 16
BUILT_WITH = ModelIdentity("sentence-transformers/all-MiniLM-L6-v2", DIMENSION, "aaaa1111bbbb2222")
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


def _tokens(row: int, seed: int, dimension: int = DIMENSION) -> np.ndarray:
    """Chunk row `row`'s token vectors: 0 to 3 random unit vectors (row 0 has none), as the model makes them."""
    rng = np.random.default_rng([seed, row])
    tokens = rng.normal(size=(row % 4, dimension)).astype(np.float32)
    return tokens / np.linalg.norm(tokens, axis=1, keepdims=True)


@functools.cache
def _basis(dimension: int = DIMENSION) -> TokenBasis:
    """The basis the tables' token codes are in, as ingest fits one before embedding: on a sample of tokens."""
    return TokenBasis.fit(np.concatenate([_tokens(row, 1000, dimension) for row in range(400)]))


def _table(count: int, seed: int = 0, dimension: int = DIMENSION):
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(count, dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = []
    for i, vector in enumerate(vectors):
        text = f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7 + 3) % len(WORDS)]} chunk number {i}."
        rows.append(
            {
                "chunk_id": f"c{seed}-{i:06d}",
                "doc_id": f"d{i % 3}",
                "source_path": f"doc{i % 3}.txt",
                "title": f"Doc {i % 3}",
                "section_path": [f"Doc {i % 3}", f"Section {i}"],
                "text": text,
                "identifiers": [],
                "start": 0,
                "end": len(text),
                "url": "",
                "continues_code": False,
                "vector": vector.tolist(),
                "unit_vectors": [vector.tolist()],
                "token_codes": _basis(dimension).codes(_tokens(i, seed, dimension)).tobytes(),
            }
        )
    return rows_to_table(rows), vectors


def _manifest(identity: ModelIdentity = BUILT_WITH) -> dict:
    model = {
        "name": identity.name,
        "dimension": identity.dimension,
        "fingerprint": identity.fingerprint,
        "normalized": True,
    }
    return {"model": model, "chunker": {"units_version": UNITS_VERSION}, "counts": {}, "files": [], "skipped": []}


def _write(index_dir: Path, count: int = 20, seed: int = 0, flat_max: int = 100_000, **kwargs) -> str:
    table, _ = _table(count, seed)
    return write_version(index_dir, table, _manifest(), flat_max=flat_max, token_basis=_basis(), **kwargs)


def _versions(index_dir: Path) -> list[str]:
    return sorted(p.name for p in (index_dir / "versions").iterdir())


def test_write_version_publishes_and_each_build_moves_the_pointer(tmp_path):
    index_dir = tmp_path / "index"
    first = _write(index_dir, seed=1)
    assert (index_dir / "CURRENT").read_text().strip() == first
    assert current_version(index_dir) == first
    assert load_index(index_dir).chunks.column("chunk_id")[0].as_py() == "c1-000000"

    second = _write(index_dir, seed=2)
    assert second > first  # version names sort in build order
    assert current_version(index_dir) == second
    loaded = load_index(index_dir)
    assert loaded.version == second
    assert loaded.chunks.column("chunk_id")[0].as_py() == "c2-000000"
    assert read_manifest(index_dir)["version"] == second
    assert _versions(index_dir) == [first, second]  # the previous version stays on disk
    assert not list(index_dir.glob(".CURRENT.*"))  # the temporary pointer was renamed into place


def test_the_manifest_lists_the_option_names_the_corpus_commands_take(tmp_path):
    index_dir = tmp_path / "index"
    table, _ = _table(6)
    texts = table.column("text").to_pylist()
    texts[2] = "Describe it:\n$ bin/kafka-consumer-groups.sh --bootstrap-server localhost:9092 --describe --group g"
    texts[4] = "Then run kafka-topics.sh --topic=orders -- and nothing else."
    table = table.set_column(table.schema.get_field_index("text"), "text", [texts])
    write_version(index_dir, table, _manifest(), flat_max=100_000, token_basis=_basis())
    assert read_manifest(index_dir)["command_flags"] == ["bootstrap-server", "describe", "group", "topic"]


def test_a_version_folder_holds_the_whole_build(tmp_path):
    index_dir = tmp_path / "index"
    version = _write(index_dir, count=12)
    folder = index_dir / "versions" / version
    assert {p.name for p in folder.iterdir()} == {
        "manifest.json",
        "chunks.arrow",
        "vectors.f32",
        "units.f16",
        "unit_offsets.i64",
        "tokens.i8",
        "token_offsets.i64",
        "token_basis.npz",
        "faiss.index",
        "units.faiss",
        "bm25",
        "synthetic_queries.parquet",
    }
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["schema_version"] == 2
    assert manifest["version"] == version
    assert manifest["faiss"] == {"type": "Flat", "metric": "inner_product"}
    loaded = load_index(index_dir)
    assert loaded.vectors.shape == (12, DIMENSION) and loaded.vectors.dtype == np.float32
    assert [loaded.unit_vectors(row).shape for row in range(12)] == [(1, DIMENSION)] * 12
    assert "vector" not in loaded.chunks.column_names
    assert loaded.dense.index.ntotal == 12


def test_pointer_naming_a_missing_version_says_so(tmp_path):
    index_dir = tmp_path / "index"
    _write(index_dir)
    (index_dir / "CURRENT").write_text("20000101T000000000000Z\n")
    assert current_version(index_dir) is None
    with pytest.raises(IndexStoreError, match=r"CURRENT names version 20000101T000000000000Z, but .* is missing") as e:
        load_index(index_dir)
    assert not isinstance(e.value, IndexNotFoundError)


def test_publishing_removes_no_version(tmp_path):
    """Retention is the caller's (`rag.versions.prune_versions`, under the writer lock), not the writer's."""
    index_dir = tmp_path / "index"
    built = [_write(index_dir, count=5, seed=i) for i in range(5)]
    assert _versions(index_dir) == built


def test_failed_publish_removes_nothing_that_serves(tmp_path):
    index_dir = tmp_path / "index"
    serving = _write(index_dir, seed=1)

    def crash(path: Path) -> None:
        assert path.is_dir() and (path / "manifest.json").is_file()  # called with the complete folder
        raise RuntimeError("simulated crash before the pointer moves")

    with pytest.raises(RuntimeError, match="simulated crash"):
        _write(index_dir, seed=2, before_publish=crash)
    assert current_version(index_dir) == serving
    assert load_index(index_dir).chunks.column("chunk_id")[0].as_py() == "c1-000000"
    assert _versions(index_dir) == [serving]  # neither the staging folder nor the unpublished version is left


def test_load_index_without_an_index_says_to_run_ingest(tmp_path):
    with pytest.raises(IndexNotFoundError, match=r"No index at .*: run 'kafka-rag ingest' first"):
        load_index(tmp_path / "nothing-here")


def test_same_dimension_model_swap_is_refused_naming_both_models(tmp_path):
    index_dir = tmp_path / "index"
    _write(index_dir)
    other = ModelIdentity("acme/other-minilm", DIMENSION, "cccc3333dddd4444")
    with pytest.raises(IndexMismatchError) as caught:
        load_index(index_dir, expected_model=other)
    message = str(caught.value)
    assert "sentence-transformers/all-MiniLM-L6-v2" in message and "acme/other-minilm" in message
    assert "aaaa1111bbbb2222" in message and "cccc3333dddd4444" in message
    assert "kafka-rag ingest" in message


def test_other_dimension_is_refused_and_the_same_model_loads(tmp_path):
    index_dir = tmp_path / "index"
    _write(index_dir)
    with pytest.raises(IndexMismatchError, match="dimension 16.*dimension 384"):
        load_index(index_dir, expected_model=ModelIdentity(BUILT_WITH.name, 384, BUILT_WITH.fingerprint))
    loaded = load_index(index_dir, expected_model=BUILT_WITH)
    assert loaded.manifest["model"]["fingerprint"] == "aaaa1111bbbb2222"


def test_an_approximate_index_above_the_threshold_is_recorded_and_finds_what_exact_search_finds(tmp_path):
    index_dir = tmp_path / "index"
    count = 2000
    _write(index_dir, count=count, seed=5, flat_max=1000)
    _, vectors = _table(count, seed=5)
    loaded = load_index(index_dir)
    assert loaded.manifest["faiss"]["type"].startswith("IVF") and loaded.dense.size == count
    assert loaded.manifest["units_faiss"]["type"].startswith("IVF") and loaded.unit_search.size == count
    found = [loaded.dense.search(v, 5) for v in vectors[:50]]
    assert [rows[0] for rows in found] == list(range(50))  # each vector finds itself first
    exact = np.argsort(-(vectors[:50] @ vectors.T), axis=1)[:, :5]
    recall = np.mean([len(set(a) & set(b)) / 5 for a, b in zip(found, exact, strict=True)])
    assert recall > 0.9


def test_vectors_are_served_from_memory_maps_not_copies(tmp_path):
    """What a serving process holds per chunk is a mapping of the version's files, shared with other processes."""
    index_dir = tmp_path / "index"
    count = 40
    _write(index_dir, count=count, seed=3)
    table, vectors = _table(count, seed=3)
    loaded = load_index(index_dir)
    assert isinstance(loaded.vectors, np.memmap) and isinstance(loaded.units, np.memmap)
    assert loaded.units.dtype == np.float16
    np.testing.assert_allclose(loaded.vectors, vectors, atol=1e-7)
    for row in (0, 17, count - 1):  # each chunk's unit vectors, float16 on disk, within float16 rounding
        np.testing.assert_allclose(loaded.unit_vectors(row), vectors[row : row + 1], atol=1e-3)
    assert loaded.chunks.column("chunk_id").to_pylist() == table.column("chunk_id").to_pylist()


def test_an_index_of_other_evidence_units_is_refused(tmp_path):
    """Unit vectors of another splitter would be quoted against the wrong units: re-ingest instead."""
    index_dir = tmp_path / "index"
    table, _ = _table(5, 0)
    manifest = _manifest()
    manifest["chunker"] = {"units_version": UNITS_VERSION - 1}
    write_version(index_dir, table, manifest, flat_max=100, token_basis=_basis())
    with pytest.raises(IndexMismatchError, match="evidence units version .* re-run 'kafka-rag ingest'"):
        load_index(index_dir, BUILT_WITH)


def test_an_index_whose_bm25_spells_words_otherwise_is_refused(tmp_path):
    """Postings written before `LEXICAL_VERSION` changed miss the words a question now spells differently
    ("cache" is "cach"): re-ingest, which reuses the vectors."""
    index_dir = tmp_path / "index"
    table, _ = _table(5, 0)
    write_version(index_dir, table, _manifest(), flat_max=100, token_basis=_basis())
    assert load_index(index_dir, BUILT_WITH).manifest["lexical_version"] == LEXICAL_VERSION
    path = serving_path(index_dir) / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    del manifest["lexical_version"]  # written before the version was recorded
    path.write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(IndexMismatchError, match="lexical version 1, this code uses .* re-run 'kafka-rag ingest'"):
        load_index(index_dir, BUILT_WITH)


def test_a_stored_version_gives_back_its_rows_and_a_lookup_of_the_asked_sources_only(tmp_path):
    """What a re-ingest carries over: every row with its vectors, and chunk ids of the changed files alone."""
    index_dir = tmp_path / "index"
    count = 2_500  # three stored batches, the last one short
    _write(index_dir, count=count, seed=4)
    table, vectors = _table(count, seed=4)
    version = StoredVersion.open(serving_path(index_dir))
    rows = list(version.rows())
    assert [r["chunk_id"] for r in rows] == table.column("chunk_id").to_pylist()
    np.testing.assert_allclose(np.stack([r["vector"] for r in rows]), vectors, atol=1e-7)
    for row in (0, 1023, 1024, count - 1):
        np.testing.assert_allclose(rows[row]["unit_vectors"], vectors[row : row + 1], atol=1e-3)
        np.testing.assert_allclose(version.row_vectors(row)["unit_vectors"], rows[row]["unit_vectors"])
    lookup = version.rows_of_sources({"doc1.txt"})
    assert lookup == {r["chunk_id"]: n for n, r in enumerate(rows) if r["source_path"] == "doc1.txt"}
    assert version.column("source_path") == [r["source_path"] for r in rows]


def test_reading_a_stored_version_maps_none_of_it(tmp_path):
    """A re-ingest passes over the whole serving version; pages of a map it touched would count in its RSS
    (42 MB of vector files here), plain reads leave them to the page cache."""
    index_dir = tmp_path / "index"
    count, dimension = 20_000, 384
    table, _ = _table(count, seed=5, dimension=dimension)
    manifest = _manifest(ModelIdentity(BUILT_WITH.name, dimension, BUILT_WITH.fingerprint))
    with VersionWriter(index_dir, flat_max=100_000, token_basis=_basis(dimension)) as writer:
        for row in table.to_pylist():
            writer.add(row)
        writer.publish(manifest)
    del table
    version = StoredVersion.open(serving_path(index_dir))
    before = _rss_file_mb()
    rows = version.rows()
    assert sum(len(row["unit_vectors"]) + len(row["token_codes"]) for row in rows) == count + 30_000 * 128
    assert _rss_file_mb() - before < 4  # through maps: 16 MB, and 3.8 MB of tokens


def test_a_truncated_stored_version_is_one_error_naming_the_file(tmp_path):
    index_dir = tmp_path / "index"
    _write(index_dir, count=30, seed=6)
    version_dir = serving_path(index_dir)
    for name in ("chunks.arrow", "units.f16"):
        data = (version_dir / name).read_bytes()
        (version_dir / name).write_bytes(data[: len(data) // 2])
        with pytest.raises(IndexStoreError, match=f"{name} is unreadable .* re-run 'kafka-rag ingest'"):
            StoredVersion.open(version_dir)
        (version_dir / name).write_bytes(data)


# ------------------------------------------------------------------------------------------ token vectors


def test_a_version_holds_its_rows_token_codes_byte_for_byte_one_byte_a_direction(tmp_path):
    """The rows bring their token codes, int8 in the build's basis (`rag.ingest.embed_rows`): the writer
    stores them as they are, each row's after the last, beside that basis; nothing is fitted at publish."""
    index_dir = tmp_path / "index"
    count, basis = 30, _basis()
    table, _ = _table(count, seed=7)
    write_version(index_dir, table, _manifest(), flat_max=100_000, token_basis=basis)
    folder = serving_path(index_dir)
    codes = [token_codes(data, basis.dimensions) for data in table.column("token_codes").to_pylist()]
    tokens = sum(len(row) for row in codes)
    assert [len(row) for row in codes[:5]] == [0, 1, 2, 3, 0]
    assert read_manifest(index_dir)["tokens"] == {"version": TOKENS_VERSION, "count": tokens, "dimensions": DIMENSION}
    assert (folder / "tokens.i8").read_bytes() == b"".join(table.column("token_codes").to_pylist())
    offsets = np.frombuffer((folder / "token_offsets.i64").read_bytes(), dtype=np.int64)
    np.testing.assert_array_equal(offsets, np.concatenate([[0], np.cumsum([len(row) for row in codes])]))
    saved = TokenBasis.load(folder / "token_basis.npz")
    for name in ("mean", "components", "scales"):
        np.testing.assert_array_equal(getattr(saved, name), getattr(basis, name))

    loaded = load_index(index_dir)
    assert loaded.tokens.dtype == np.int8 and loaded.tokens.shape == (tokens, DIMENSION)
    for rows in ([0, 1, 2, 3], [17, 3, 0, 29, 5, 5], [8], [4], []):
        found, found_offsets = loaded.token_vectors(rows)
        assert found.dtype == np.float32 and found.shape == (sum(len(codes[r]) for r in rows), DIMENSION)
        np.testing.assert_array_equal(found_offsets, np.concatenate([[0], np.cumsum([len(codes[r]) for r in rows])]))
        for position, row in enumerate(rows):
            np.testing.assert_array_equal(found[found_offsets[position] : found_offsets[position + 1]], codes[row])
    # What retrieval multiplies: the question's tokens scaled by the basis, times the codes, are cosines.
    question = _tokens(3, 7)
    found, _ = loaded.token_vectors([3])
    np.testing.assert_allclose(
        loaded.token_basis.question(question) @ found.T, basis.project(question) @ basis.project(question).T, atol=0.02
    )
    version = StoredVersion.open(folder)
    assert [row["token_codes"] for row in version.rows()] == table.column("token_codes").to_pylist()
    assert [version.row_vectors(n)["token_codes"] for n in range(count)] == table.column("token_codes").to_pylist()


def test_a_basis_keeps_at_most_128_directions_of_the_models_tokens(tmp_path):
    """At the model's dimension, 384, the stored tokens are 128 bytes wide: a twelfth of float32's."""
    index_dir = tmp_path / "index"
    table, _ = _table(200, seed=8, dimension=384)
    manifest = _manifest(ModelIdentity(BUILT_WITH.name, 384, BUILT_WITH.fingerprint))
    write_version(index_dir, table, manifest, flat_max=1000, token_basis=_basis(384))
    loaded = load_index(index_dir)
    assert loaded.manifest["tokens"]["dimensions"] == loaded.token_basis.dimensions == 128
    assert loaded.token_basis.components.shape == (384, 128) and loaded.tokens.shape[1] == 128
    found, offsets = loaded.token_vectors([199, 2])
    raw = np.concatenate([_tokens(row, 8, 384) for row in (199, 2)])
    np.testing.assert_array_equal(found, loaded.token_basis.codes(raw))
    assert offsets.tolist() == [0, 3, 5]


@pytest.mark.parametrize("tokens", [None, 1, TOKENS_VERSION + 1], ids=["none", "float16-tokens", "newer"])
def test_a_version_without_token_vectors_of_this_kind_is_refused(tmp_path, tokens):
    """An index built before late interaction (no "tokens" in its manifest), with float16 tokens (version 1),
    or with token vectors made another way, cannot serve its feature: re-ingest."""
    index_dir = tmp_path / "index"
    _write(index_dir, count=8)
    path = serving_path(index_dir) / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if tokens is None:
        del manifest["tokens"]
    else:
        manifest["tokens"]["version"] = tokens
    path.write_text(json.dumps(manifest), encoding="utf-8")
    for load in (lambda: load_index(index_dir, BUILT_WITH), lambda: StoredVersion.open(serving_path(index_dir))):
        with pytest.raises(IndexMismatchError, match=f"no token vectors of version {TOKENS_VERSION}") as caught:
            load()
        assert "re-run 'kafka-rag ingest'" in str(caught.value)
        assert serving_path(index_dir).name in str(caught.value)


def test_a_writer_refuses_token_codes_of_another_basis_width(tmp_path):
    """Codes made in a basis of other width would shift every later row's tokens: the build stops instead."""
    index_dir = tmp_path / "index"
    rows = _table(6, seed=9)[0].to_pylist()
    rows[3]["token_codes"] = bytes(DIMENSION * 2 + 5)
    with pytest.raises(IndexStoreError, match=f"not whole tokens of {DIMENSION} directions"):
        write_version(index_dir, rows, _manifest(), flat_max=1000, token_basis=_basis())
    assert current_version(index_dir) is None and not list((index_dir / "versions").iterdir())


@pytest.mark.parametrize("name", ["tokens.i8", "token_offsets.i64", "token_basis.npz"])
def test_a_damaged_token_file_is_one_error_naming_it(tmp_path, name):
    index_dir = tmp_path / "index"
    _write(index_dir, count=30, seed=10)
    file = serving_path(index_dir) / name
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 3])
    with pytest.raises(IndexStoreError, match=f"{name} is unreadable .* re-run 'kafka-rag ingest'"):
        load_index(index_dir, BUILT_WITH)
    file.unlink()
    with pytest.raises(IndexStoreError, match=f"{name} is missing"):
        load_index(index_dir, BUILT_WITH)


def _rss_file_mb() -> float:
    status = Path("/proc/self/status").read_text()
    return int(status.split("RssFile:")[1].split()[0]) / 1024
