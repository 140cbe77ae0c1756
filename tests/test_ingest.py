"""The ingest pipeline end to end with the local engine: the real model, real FAISS, real files.

One full build of a seeds copy is shared by the module; each test that changes the corpus or the
index works on its own copies (`seeds_copy` plus a copy of that index), so they stay independent
and only the changed chunks are embedded. The Spark engine is held to the same results in
test_spark_job.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from rag.chunking import dense_text
from rag.embedding import load_embedder, model_identity
from rag.errors import NoDocumentsError, SourceNotFoundError
from rag.index_store import (
    TOKENS_VERSION,
    StoredVersion,
    current_version,
    load_index,
    read_chunk_table,
    read_manifest,
    serving_path,
)
from rag.ingest import (
    LOCAL_ENGINE,
    basis_texts,
    chunk_files,
    chunk_texts,
    chunk_vector,
    embed_rows,
    fit_token_basis,
    local_engine,
    planned_texts,
    run_ingest,
    scan_sources,
    unread_units,
)
from rag.lexical import LEXICAL_VERSION
from rag.progress import Count
from rag.settings import DEFAULT_MODEL, Settings
from rag.tokens import CODE_LIMIT, TokenBasis, late_interaction, token_codes
from rag.units import UNITS_VERSION, unit_texts
from tests.conftest import SEEDS, default_ingest_config, run_kafka_rag

pytestmark = pytest.mark.slow

CHANGED = "000_0424dccc37dbf1fb.txt"
REMOVED = "002_5d9f9cd9ceb365b0.txt"
OLD_SENTENCE = "Ensure each record is acknowledged exactly once per fetch session."
NEW_SENTENCE = "Ensure each record is acknowledged once, and only once, within its fetch session."
BAD_FILES = {
    "empty.txt": (b"", "empty file"),
    "blank.md": (b"  \n\n", "empty file"),
    "binary.txt": (b"\x00\x01\x02\x03kafka\x00" * 20, "binary file"),
    "latin1.txt": ("Le r\u00e9plica est en retard sur la partition.".encode("latin-1"), "undecodable"),
    "broken.json": (b'{"signature": "TimeoutException", "root_cause": ', "malformed JSON"),
    "record.txt": (b'{"signature": "TimeoutException" "root_cause": "x"}', "malformed JSON"),
    "slides.docx": (b"PK\x03\x04 not really a document", "unsupported file type '.docx'"),
}


# A basis of the model's dimension for tests whose token codes do not matter (`fit_token_basis` needs the model).
ANY_BASIS = TokenBasis.fit(np.random.default_rng(0).standard_normal((300, 384)).astype(np.float32))


def _must_not_run(files, config, known_ids, shards, progress):
    raise AssertionError(f"the engine was asked to process {[f.source_path for f in files]}")


def _local_engine_running(run):
    """The local build engine with `run` in place of its job (its token-basis fit kept)."""
    return dataclasses.replace(LOCAL_ENGINE, run=run)


def _table(index_dir: Path):
    return read_chunk_table(index_dir)


def _by_id(index_dir: Path) -> dict[str, dict]:
    return {row["chunk_id"]: row for row in _table(index_dir).to_pylist()}


def _snapshot(index_dir: Path) -> dict[str, str]:
    """Every file under the index with a hash of its bytes: what 'untouched' means.

    The writer lock file is left out: every ingest records its pid and start time there.
    """
    return {
        p.relative_to(index_dir).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(index_dir.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def _chunk_ids_of(path: Path, source_path: str) -> list[str]:
    rows = chunk_files([(source_path, path.read_bytes())], default_ingest_config())
    return [r["chunk_id"] for r in rows if r["kind"] == "chunk"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A full local-engine build of a copy of the seeds: (corpus, index dir, report)."""
    root = tmp_path_factory.mktemp("ingest")
    corpus = root / "corpus"
    shutil.copytree(SEEDS, corpus)
    report = run_ingest([corpus], root / "index", default_ingest_config())
    return corpus, root / "index", report


@pytest.fixture()
def workspace(built, seeds_copy, tmp_path):
    """A writable seeds copy and a copy of the module's index built from identical files."""
    index_dir = tmp_path / "index"
    shutil.copytree(built[1], index_dir)
    return seeds_copy, index_dir


# ------------------------------------------------------------------------------------- full build


def test_full_ingest_publishes_a_complete_manifest(built):
    corpus, index_dir, report = built
    manifest = read_manifest(index_dir)
    seeds = sorted(p.name for p in corpus.iterdir())

    assert manifest["schema_version"] == 2
    assert manifest["version"] == report.version == current_version(index_dir)
    identity = model_identity(load_embedder(default_ingest_config().model))
    assert manifest["model"]["name"] == DEFAULT_MODEL
    assert manifest["model"]["dimension"] == identity.dimension == 384
    assert manifest["model"]["fingerprint"] == identity.fingerprint
    assert manifest["model"]["normalized"] is True
    assert manifest["chunker"] == default_ingest_config().chunker()
    assert manifest["chunker"]["units_version"] == UNITS_VERSION
    assert manifest["chunker"]["chunk_size"] == Settings.chunk_size
    assert manifest["chunker"]["chunk_overlap"] == Settings.chunk_overlap
    assert manifest["faiss"] == {"type": "Flat", "metric": "inner_product"}
    assert [f["source_path"] for f in manifest["files"]] == seeds
    for entry in manifest["files"]:
        data = (corpus / entry["source_path"]).read_bytes()
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        assert entry["size"] == len(data) and entry["chunks"] > 0 and entry["title"]
    assert {f["source_path"]: f["format"] for f in manifest["files"]}["004_477c5e4c40f4a68e.txt"] == "json"
    assert manifest["skipped"] == []
    assert datetime.fromisoformat(manifest["built_at"]).tzinfo is not None
    assert manifest["engine"] == "local" and manifest["spark_master"] == ""
    assert manifest["sources"] == [str(corpus.resolve())]

    counts = manifest["counts"]
    chunks = report.chunks
    assert counts == {"documents": 5, "chunks": chunks, "embedded": chunks, "reused": 0, "duplicates": 0, "skipped": 0}
    assert manifest["vectors"]["chunks"] == chunks and manifest["vectors"]["dimension"] == 384
    assert manifest["vectors"]["units"] > chunks  # most chunks hold several evidence units
    assert (report.unchanged, report.documents, report.embedded, report.reused) == (False, 5, chunks, 0)
    assert report.chunks == sum(f["chunks"] for f in manifest["files"]) > 100
    assert report.engine == "local" and report.skipped == ()
    assert {"token_basis", "chunk_and_embed", "merge", "encode", "publish"} <= set(report.stage_seconds)
    assert not list((index_dir / "versions" / report.version).glob("shards"))  # streamed in, then removed


def test_full_ingest_chunk_table_and_vectors(built):
    corpus, index_dir, report = built
    table = _table(index_dir)
    assert table.column_names == [
        "chunk_id",
        "doc_id",
        "source_path",
        "title",
        "section_path",
        "text",
        "identifiers",
        "start",
        "end",
        "url",
        "continues_code",
        "vector",
        "unit_vectors",
        "token_codes",  # int8, in the version's token basis
    ]
    rows = table.to_pylist()
    expected_ids = {cid for p in sorted(corpus.iterdir()) for cid in _chunk_ids_of(p, p.name)}
    assert {r["chunk_id"] for r in rows} == expected_ids
    assert len(rows) == len(expected_ids) == report.chunks

    loaded = load_index(index_dir, expected_model=model_identity(load_embedder(default_ingest_config().model)))
    assert loaded.dense.index.ntotal == len(rows)
    np.testing.assert_allclose(np.linalg.norm(loaded.vectors, axis=1), 1.0, atol=1e-5)
    for position, row in enumerate(rows):
        units = loaded.unit_vectors(position)
        assert row["section_path"][0] == row["title"] and len(row["section_path"]) >= 1
        assert units.shape == (len(unit_texts(row["text"], row["section_path"])), 384)
    # A stored vector is the model's vector for the chunk's text under its section path.
    embedder = load_embedder(default_ingest_config().model)
    sample = rows[:: max(1, len(rows) // 8)]
    fresh = embedder.encode([dense_text(r["section_path"], r["text"]) for r in sample])
    np.testing.assert_allclose(np.asarray([r["vector"] for r in sample]), fresh, atol=1e-5)
    # FAISS row i is chunk row i: each sampled chunk's fresh vector finds that chunk first.
    _, hits = loaded.dense.index.search(fresh, 1)
    assert [rows[int(h)]["chunk_id"] for h in hits[:, 0]] == [r["chunk_id"] for r in sample]
    # Each chunk's token vectors are its text's word pieces, stored as codes in the index's 128 directions.
    assert read_manifest(index_dir)["tokens"] == {
        "version": TOKENS_VERSION,
        "count": int(loaded.token_offsets[-1]),
        "dimensions": 128,
    }
    # A chunk longer than the model reads has its unread units' tokens after them (`unread_units`).
    fresh_tokens = []
    for row in sample:
        own = dense_text(row["section_path"], row["text"])
        _, (own_tokens, *unit_tokens) = embedder.encode_with_tokens(
            [own, *unit_texts(row["text"], row["section_path"])]
        )
        tail = unread_units(row, embedder.read_chars(own))
        fresh_tokens.append(np.concatenate([own_tokens, *(unit_tokens[i] for i in tail)]))
    positions = [rows.index(r) for r in sample]
    stored, offsets = loaded.token_vectors(positions)
    assert np.diff(offsets).tolist() == [len(t) for t in fresh_tokens]
    assert max(np.diff(offsets)) > 254  # the sample holds a chunk longer than the model reads
    coded = loaded.token_basis.codes(np.concatenate(fresh_tokens)).astype(np.float32)
    assert np.abs(stored - coded).max() <= 2  # texts batched otherwise: a last digit apart
    # Few coordinates reach their span: the basis's headroom leaves room for tokens its sample did not hold.
    assert np.mean(np.abs(stored) == CODE_LIMIT) < 0.001


def test_unit_mean_chunk_vectors_are_the_normalised_mean_of_the_units(built):
    """Under "unit-mean" a chunk's own text is not encoded: its vector is its units' mean, and its unit
    vectors are those the default makes."""
    corpus, index_dir, _ = built
    rows = [
        r for r in chunk_files([(p.name, p.read_bytes()) for p in sorted(corpus.iterdir())], default_ingest_config())
    ]
    sample = [r for r in rows if r["kind"] == "chunk"][::5]
    basis = load_index(index_dir).token_basis
    config = dataclasses.replace(default_ingest_config(), chunk_vectors="unit-mean", token_basis=basis)
    encoded: list[int] = []

    embedded = [r for r in embed_rows(sample, config, on_encoded=encoded.append) if r["kind"] == "chunk"]

    embedder = load_embedder(config.model)
    stored = _by_id(index_dir)
    assert sum(encoded) == planned_texts(sample, config) == sum(len(r["unit_vectors"]) for r in embedded)
    for row in embedded:
        units = embedder.encode(unit_texts(row["text"], row["section_path"]))
        np.testing.assert_allclose(row["vector"], chunk_vector(units), atol=1e-5)
        np.testing.assert_allclose(row["unit_vectors"], stored[row["chunk_id"]]["unit_vectors"], atol=5e-4)
        # Its token codes are its units' tokens, one unit after another.
        _, tokens = embedder.encode_with_tokens(unit_texts(row["text"], row["section_path"]))
        codes = np.frombuffer(row["token_codes"], np.int8).reshape(-1, 128).astype(np.int64)
        assert np.abs(codes - basis.codes(np.concatenate(tokens))).max() <= 2
    assert planned_texts(sample, default_ingest_config()) == planned_texts(sample, config) + len(sample)


def test_a_chunk_without_evidence_units_is_encoded_whole_under_unit_mean():
    """A chunk too short to quote from still gets a vector: its own text under its heading path."""
    rows = list(chunk_files([("note.md", b"# Partitions\n\nOk.\n")], default_ingest_config()))
    (chunk,) = [r for r in rows if r["kind"] == "chunk"]
    assert unit_texts(chunk["text"], chunk["section_path"]) == []
    config = dataclasses.replace(default_ingest_config(), chunk_vectors="unit-mean", token_basis=ANY_BASIS)

    (embedded,) = [r for r in embed_rows([chunk], config) if r["kind"] == "chunk"]

    expected = load_embedder(config.model).encode([dense_text(chunk["section_path"], chunk["text"])])
    np.testing.assert_allclose(embedded["vector"], expected[0], atol=1e-5)
    assert embedded["unit_vectors"] == []


_LONG_SECTION = (
    "# Log retention\n\n"
    + " ".join(
        f"Gauge kafka.log:type=LogSegment{n},name=RetainedBytes stays above 0 until it is deleted."
        for n in range(1, 13)
    )
    + " Rejected segments are moved into the quarantine directory for an operator to inspect.\n"
)


def test_a_long_chunks_tokens_reach_past_what_the_model_reads():
    """The model reads 256 word pieces of a chunk; the units it did not read whole add their tokens, so a
    question about the chunk's last sentence finds its words (late interaction) as it finds the first's."""
    rows = list(chunk_files([("retention.md", _LONG_SECTION.encode())], default_ingest_config()))
    (chunk,) = [r for r in rows if r["kind"] == "chunk"]
    embedder = load_embedder(default_ingest_config().model)
    own = dense_text(chunk["section_path"], chunk["text"])
    units = unit_texts(chunk["text"], chunk["section_path"])
    read = embedder.read_chars(own)
    assert read < len(own)

    tail = unread_units(chunk, read)

    assert tail and tail[-1] == len(units) - 1 and 0 not in tail
    assert all(units[i] not in own[:read] for i in tail)
    assert all(units[i] in own[:read] for i in range(len(units)) if i not in tail)
    assert unread_units({**chunk, "text": "Short.", "section_path": ("Log retention",)}, 1000) == []
    _, (own_tokens, *unit_tokens) = embedder.encode_with_tokens([own, *units])
    basis = TokenBasis.fit(np.concatenate([own_tokens, *unit_tokens]))
    config = dataclasses.replace(default_ingest_config(), token_basis=basis)

    (embedded,) = [r for r in embed_rows([chunk], config) if r["kind"] == "chunk"]

    codes = token_codes(embedded["token_codes"], basis.dimensions)
    assert len(codes) == len(own_tokens) + sum(len(unit_tokens[i]) for i in tail) > 254
    question = basis.question(embedder.encode_with_tokens(["where do rejected segments go? quarantine?"])[1][0])
    both = np.asarray([0, len(own_tokens), len(codes)])
    head_only, whole = late_interaction(question, np.concatenate([codes[: len(own_tokens)], codes]), both)
    assert whole > head_only + 0.05


def test_embed_rows_without_a_token_basis_says_what_it_needs():
    rows = list(
        chunk_files([("note.md", b"# Partitions\n\nA partition is an ordered log.\n")], default_ingest_config())
    )
    with pytest.raises(ValueError, match="needs config.token_basis .*fit_token_basis"):
        list(embed_rows(rows, default_ingest_config()))


def test_the_basis_sample_is_chunks_spread_over_files_in_sha256_order_of_their_paths(monkeypatch):
    """Not the listing's first files: those first in sha256 order of their paths, the same on every run;
    each gives its share of chunks, spread over it, and each chunk the texts whose tokens are stored."""
    files, _ = scan_sources([SEEDS])
    config = default_ingest_config()
    ordered = sorted(files, key=lambda f: hashlib.sha256(f.source_path.encode()).hexdigest())
    assert ordered[:2] != sorted(files, key=lambda f: f.source_path)[:2]  # the order is not the listing's
    chunks = {
        f.source_path: [
            r for r in chunk_files([(f.source_path, Path(f.path).read_bytes())], config) if r["kind"] == "chunk"
        ]
        for f in ordered[:2]
    }
    monkeypatch.setattr("rag.ingest.BASIS_FILES", 2)
    monkeypatch.setattr("rag.ingest.BASIS_CHUNKS", 6)

    texts = basis_texts(files, config)

    assert all(len(rows) > 3 for rows in chunks.values())
    # 3 of each file, the middles of three equal stretches of its chunks
    picked = [rows[(2 * n + 1) * len(rows) // 6] for rows in chunks.values() for n in range(3)]
    assert texts == [dense_text(r["section_path"], r["text"]) for r in picked]
    assert basis_texts(list(reversed(files)), config) == texts
    # Under "unit-mean" a chunk's stored tokens are its units' (its own text's when it has none).
    unit_mean = dataclasses.replace(config, chunk_vectors="unit-mean")
    units = [unit_texts(r["text"], r["section_path"], r["continues_code"]) for r in picked]
    assert all(units) and basis_texts(files, unit_mean) == [text for texts in units for text in texts]
    monkeypatch.setattr("rag.ingest.BASIS_CHUNKS", 10_000)  # more than the files hold: every chunk of both
    assert len(basis_texts(files, config)) == sum(len(rows) for rows in chunks.values())


def test_the_token_basis_is_fitted_the_same_every_run_and_is_the_builds(built):
    corpus, index_dir, _ = built
    files, _ = scan_sources([corpus])
    messages: list[str] = []
    first, second = (
        fit_token_basis(files, default_ingest_config(), messages.append),
        fit_token_basis(list(reversed(files)), default_ingest_config()),
    )
    assert first.dimensions == 128 and messages and "token basis" in str(messages[0])
    stored = load_index(index_dir).token_basis
    for name in ("mean", "components", "scales"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name))
        np.testing.assert_allclose(getattr(first, name), getattr(stored, name), atol=1e-5)


def test_a_build_codes_tokens_as_it_embeds_and_stages_no_unprojected_tokens(tmp_path):
    """The basis is fitted before the engine runs, so while it runs the build's staging folder holds only
    the coded token file; what the index stores is the rows' codes in that basis."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(SEEDS / CHANGED, corpus / CHANGED)
    staged: list[set[str]] = []

    def recording_engine(files, config, known_ids, shards, progress):
        assert config.token_basis is not None and config.token_basis.dimensions == 128
        others = local_engine(files, config, known_ids, shards, progress)
        staged.append({p.name for p in shards.parent.iterdir() if p.is_file()})
        return others

    report = run_ingest(
        [corpus],
        tmp_path / "index",
        default_ingest_config(),
        engine=_local_engine_running(recording_engine),
    )

    assert [sorted(name for name in names if "token" in name) for names in staged] == [["tokens.i8"]]
    assert report.stage_seconds["token_basis"] > 0
    loaded = load_index(tmp_path / "index")
    assert loaded.tokens.dtype == np.int8 and loaded.manifest["tokens"]["version"] == TOKENS_VERSION
    assert (loaded.path / "tokens.i8").stat().st_size == loaded.manifest["tokens"]["count"] * 128


def test_chunk_ids_and_vectors_are_identical_across_runs(built, seeds_index):
    """Two independent builds of the same files (this module's and the session's) agree exactly."""
    _, index_dir, _ = built
    assert read_manifest(seeds_index)["chunker"] == read_manifest(index_dir)["chunker"]
    assert read_manifest(seeds_index)["model"] == read_manifest(index_dir)["model"]
    first, second = _table(index_dir), _table(seeds_index)
    assert first.column("chunk_id").to_pylist() == second.column("chunk_id").to_pylist()
    assert np.array_equal(
        np.asarray(first.column("vector").to_pylist(), dtype=np.float32),
        np.asarray(second.column("vector").to_pylist(), dtype=np.float32),
    )
    assert first.column("unit_vectors").to_pylist() == second.column("unit_vectors").to_pylist()
    assert first.drop(["vector", "unit_vectors"]).equals(second.drop(["vector", "unit_vectors"]))


# ------------------------------------------------------------------------------------- re-ingest


def test_unchanged_rerun_does_nothing(workspace):
    corpus, index_dir = workspace
    before = _snapshot(index_dir)
    version = current_version(index_dir)
    report = run_ingest([corpus], index_dir, default_ingest_config(), engine=_local_engine_running(_must_not_run))
    assert report.unchanged is True
    assert report.version == version and current_version(index_dir) == version
    assert (report.embedded, report.reused, report.documents) == (0, report.chunks, 5)
    assert "chunk_and_embed" not in report.stage_seconds
    assert _snapshot(index_dir) == before  # no new version, nothing rewritten


def test_an_unchanged_index_of_another_lexical_version_is_written_again_with_its_vectors(workspace):
    corpus, index_dir = workspace
    path = serving_path(index_dir) / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["lexical_version"] = LEXICAL_VERSION - 1
    path.write_text(json.dumps(manifest), encoding="utf-8")
    report = run_ingest([corpus], index_dir, default_ingest_config(), engine=_local_engine_running(_must_not_run))
    assert report.unchanged is False and (report.embedded, report.reused) == (0, report.chunks)
    assert read_manifest(index_dir)["lexical_version"] == LEXICAL_VERSION


def test_one_changed_file_re_embeds_only_its_new_chunks(workspace):
    corpus, index_dir = workspace
    before = _by_id(index_dir)
    old_version = current_version(index_dir)
    path = corpus / CHANGED
    text = path.read_text(encoding="utf-8")
    assert OLD_SENTENCE in text
    path.write_text(text.replace(OLD_SENTENCE, NEW_SENTENCE), encoding="utf-8")
    new_ids = _chunk_ids_of(path, CHANGED)
    expected_embedded = len(set(new_ids) - set(before))
    assert 0 < expected_embedded < len(new_ids)  # the edit touches one section, not the whole file

    seen: list[list[str]] = []

    def recording_engine(files, config, known_ids, shards, progress):
        seen.append([f.source_path for f in files])
        return local_engine(files, config, known_ids, shards, progress)

    messages: list[str] = []
    report = run_ingest(
        [corpus],
        index_dir,
        default_ingest_config(),
        engine=_local_engine_running(recording_engine),
        progress=messages.append,
    )
    assert seen == [[CHANGED]]  # unchanged files are never read again
    assert any(str(m).startswith(f"embedding: {expected_embedded} new chunks, ") for m in messages)
    counts = [m for m in messages if isinstance(m, Count) and m.stage == "embedding"]
    assert counts[-1].done == counts[-1].total > expected_embedded  # texts: each chunk and its evidence units
    assert report.unchanged is False and report.version != old_version
    assert report.embedded == expected_embedded
    assert report.reused == report.chunks - expected_embedded
    assert read_manifest(index_dir)["counts"]["embedded"] == expected_embedded

    after = _by_id(index_dir)
    assert current_version(index_dir) == report.version
    assert {cid for cid, row in after.items() if row["source_path"] == CHANGED} == set(new_ids)
    assert any(NEW_SENTENCE in row["text"] for row in after.values())
    assert not any(OLD_SENTENCE in row["text"] for row in after.values())
    for cid, row in after.items():
        if cid in before:  # reused: same vectors as the previous version
            assert row["vector"] == before[cid]["vector"]
            assert row["unit_vectors"] == before[cid]["unit_vectors"]
    others = {cid for cid, row in before.items() if row["source_path"] != CHANGED}
    assert others <= set(after)
    entry = next(f for f in read_manifest(index_dir)["files"] if f["source_path"] == CHANGED)
    assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    # The new version serves, and its new chunk is found by what it now says.
    loaded = load_index(index_dir)
    assert loaded.version == report.version
    query = load_embedder(default_ingest_config().model).encode([NEW_SENTENCE])
    _, hits = loaded.dense.index.search(query, 1)
    assert NEW_SENTENCE in loaded.chunks.column("text")[int(hits[0][0])].as_py()


def test_a_re_ingest_keeps_the_token_basis_and_the_carried_chunks_token_codes(workspace):
    """Carried chunks' token codes are in the last version's basis: the new version keeps that basis and
    their bytes, and puts the new chunks' tokens into it."""
    corpus, index_dir = workspace
    old_folder = serving_path(index_dir)
    before = {row["chunk_id"]: row["token_codes"] for row in StoredVersion.open(old_folder).rows()}
    path = corpus / CHANGED
    path.write_text(path.read_text(encoding="utf-8").replace(OLD_SENTENCE, NEW_SENTENCE), encoding="utf-8")

    report = run_ingest([corpus], index_dir, default_ingest_config())

    new_folder = serving_path(index_dir)
    assert new_folder != old_folder and 0 < report.embedded < report.chunks
    assert (new_folder / "token_basis.npz").read_bytes() == (old_folder / "token_basis.npz").read_bytes()
    after = {row["chunk_id"]: row["token_codes"] for row in StoredVersion.open(new_folder).rows()}
    kept = set(before) & set(after)
    assert len(kept) == report.reused  # the unchanged files' chunks and the changed file's known ones
    assert {cid: after[cid] for cid in kept} == {cid: before[cid] for cid in kept}
    new_ids = set(after) - set(before)
    assert len(new_ids) == report.embedded and all(after[cid] for cid in new_ids)
    assert read_manifest(index_dir)["tokens"]["count"] * 128 == sum(len(codes) for codes in after.values())
    # The new chunks' codes are their tokens in the kept basis.
    loaded = load_index(index_dir)
    embedder = load_embedder(default_ingest_config().model)
    chunk_ids = loaded.chunks.column("chunk_id").to_pylist()
    for row in [chunk_ids.index(cid) for cid in sorted(new_ids)]:
        record = loaded.chunks.slice(row, 1).to_pylist()[0]
        _, (tokens,) = embedder.encode_with_tokens([dense_text(record["section_path"], record["text"])])
        stored, _ = loaded.token_vectors([row])
        assert np.abs(stored - loaded.token_basis.codes(tokens)).max() <= 2


def _engine_calls(
    corpus: Path, index_dir: Path, config, monkeypatch
) -> list[tuple[list[str], frozenset[str], str, str]]:
    """What `run_ingest` hands its engine: (files, known chunk ids, backend, chunk vectors); then stops it.
    The token basis such a build fits first is not what these tests are about: a stand-in saves the model."""
    monkeypatch.setattr("rag.ingest.fit_token_basis", lambda files, config, progress, fit: ANY_BASIS)
    seen = []

    class Seen(Exception):
        pass

    def recording_engine(files, config, known_ids, shards, progress):
        seen.append((sorted(f.source_path for f in files), known_ids, config.embed_backend, config.chunk_vectors))
        raise Seen

    with pytest.raises(Seen):
        run_ingest([corpus], index_dir, config, engine=_local_engine_running(recording_engine))
    return seen


def test_a_new_units_version_re_embeds_everything(workspace, monkeypatch):
    """Unit vectors of an index built with another unit splitter are never reused: they would not line up."""
    corpus, index_dir = workspace
    monkeypatch.setattr("rag.ingest.UNITS_VERSION", UNITS_VERSION + 1)
    calls = _engine_calls(corpus, index_dir, default_ingest_config(), monkeypatch)
    assert calls == [(sorted(p.name for p in corpus.iterdir()), frozenset(), "onnx", "text")]


@pytest.mark.parametrize("backend", ["torch", "onnx-int8"])
def test_another_backend_re_embeds_everything(workspace, backend, monkeypatch):
    """Vectors are reused only from the same backend, so the manifest's backend made every vector it lists."""
    corpus, index_dir = workspace
    assert read_manifest(index_dir)["model"]["backend"] == default_ingest_config().embed_backend == "onnx"
    config = dataclasses.replace(default_ingest_config(), embed_backend=backend)
    calls = _engine_calls(corpus, index_dir, config, monkeypatch)
    assert calls == [(sorted(p.name for p in corpus.iterdir()), frozenset(), backend, "text")]


def test_unit_mean_chunk_vectors_re_embed_everything(workspace, monkeypatch):
    """Chunk vectors made another way are never reused: the manifest's chunker says how each was made."""
    corpus, index_dir = workspace
    assert read_manifest(index_dir)["chunker"]["chunk_vectors"] == "text"
    config = dataclasses.replace(default_ingest_config(), chunk_vectors="unit-mean")
    calls = _engine_calls(corpus, index_dir, config, monkeypatch)
    assert calls == [(sorted(p.name for p in corpus.iterdir()), frozenset(), "onnx", "unit-mean")]


def test_removed_file_disappears_from_the_new_version(workspace):
    corpus, index_dir = workspace
    before = _by_id(index_dir)
    removed_ids = {cid for cid, row in before.items() if row["source_path"] == REMOVED}
    (corpus / REMOVED).unlink()

    report = run_ingest([corpus], index_dir, default_ingest_config(), engine=_local_engine_running(_must_not_run))
    assert report.unchanged is False and report.embedded == 0
    assert report.documents == 4 and report.chunks == len(before) - len(removed_ids)
    after = _by_id(index_dir)
    assert set(after) == set(before) - removed_ids
    assert REMOVED not in {f["source_path"] for f in read_manifest(index_dir)["files"]}
    loaded = load_index(index_dir)
    assert loaded.dense.index.ntotal == len(after)
    assert REMOVED not in set(loaded.chunks.column("source_path").to_pylist())


def test_an_included_fragment_is_chunked_under_its_place_and_again_when_the_page_moves_it(tmp_path):
    corpus = tmp_path / "docs"
    (corpus / "generated").mkdir(parents=True)
    page = corpus / "configuration.html"
    page.write_text(
        "<html><body><h3>3.1 Broker Configs</h3><p>Broker settings follow.</p>"
        '<!--#include virtual="generated/kafka_config.html" --></body></html>',
        encoding="utf-8",
    )
    (corpus / "generated" / "kafka_config.html").write_text(
        "<h4>log.retention.ms</h4><p>The number of milliseconds to keep a log file before deleting it.</p>",
        encoding="utf-8",
    )
    index_dir = tmp_path / "index"
    run_ingest([corpus], index_dir, default_ingest_config())
    fragment = "generated/kafka_config.html"

    def fragment_paths() -> list[tuple[str, ...]]:
        return [tuple(r["section_path"]) for r in _table(index_dir).to_pylist() if r["source_path"] == fragment]

    assert fragment_paths() == [("Configuration", "3.1 Broker Configs", "log.retention.ms")]
    entry = next(f for f in read_manifest(index_dir)["files"] if f["source_path"] == fragment)
    assert entry["place"] == ["Configuration", "3.1 Broker Configs"]

    page.write_text(page.read_text(encoding="utf-8").replace("3.1 Broker Configs", "3.1 Server Configs"), "utf-8")
    seen: list[list[str]] = []

    def recording_engine(files, config, known_ids, shards, progress):
        seen.append(sorted(f.source_path for f in files))
        return local_engine(files, config, known_ids, shards, progress)

    run_ingest([corpus], index_dir, default_ingest_config(), engine=_local_engine_running(recording_engine))
    assert seen == [["configuration.html", fragment]]  # the fragment's bytes are unchanged, its place is not
    assert fragment_paths() == [("Configuration", "3.1 Server Configs", "log.retention.ms")]


# ------------------------------------------------------------------------------------- bad input


def test_bad_inputs_are_skipped_with_reasons_and_the_rest_ingested(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    good = [CHANGED, "004_477c5e4c40f4a68e.txt"]
    for name in good:
        shutil.copy(SEEDS / name, corpus / name)
    for name, (data, _) in BAD_FILES.items():
        (corpus / name).write_bytes(data)

    report = run_ingest([corpus], tmp_path / "index", default_ingest_config())
    manifest = read_manifest(tmp_path / "index")
    assert [f["source_path"] for f in manifest["files"]] == good
    assert report.documents == 2 and report.chunks == report.embedded > 0
    skipped = {s["source_path"]: s["reason"] for s in manifest["skipped"]}
    assert set(skipped) == set(BAD_FILES)
    for name, (_, reason) in BAD_FILES.items():
        assert reason in skipped[name], (name, skipped[name])
    assert list(report.skipped) == manifest["skipped"]
    assert manifest["counts"]["skipped"] == len(BAD_FILES)
    assert set(load_index(tmp_path / "index").chunks.column("source_path").to_pylist()) == set(good)


@pytest.mark.parametrize("contents", ["only-bad-files", "empty-folder"])
def test_zero_ingestible_documents_leave_the_previous_index_untouched(workspace, tmp_path, contents):
    _, index_dir = workspace
    corpus = tmp_path / "nothing-useful"
    corpus.mkdir()
    if contents == "only-bad-files":
        for name, (data, _) in BAD_FILES.items():
            (corpus / name).write_bytes(data)
    before = _snapshot(index_dir)
    version = current_version(index_dir)
    with pytest.raises(NoDocumentsError, match="No ingestible documents.*previous index is untouched"):
        run_ingest([corpus], index_dir, default_ingest_config())
    assert current_version(index_dir) == version
    assert _snapshot(index_dir) == before
    assert load_index(index_dir).version == version


def test_zero_ingestible_documents_without_a_previous_index(tmp_path):
    corpus = tmp_path / "nothing-useful"
    corpus.mkdir()
    for name, (data, _) in BAD_FILES.items():
        (corpus / name).write_bytes(data)
    with pytest.raises(NoDocumentsError, match="No ingestible documents"):
        run_ingest([corpus], tmp_path / "index", default_ingest_config())
    assert current_version(tmp_path / "index") is None


def test_missing_source_path(tmp_path):
    with pytest.raises(SourceNotFoundError, match="does not exist"):
        run_ingest([SEEDS, tmp_path / "no-such-folder"], tmp_path / "index", default_ingest_config())
    assert not (tmp_path / "index").exists()


# ------------------------------------------------------------------------------------- crash during publish


@pytest.mark.parametrize("crash", [RuntimeError("disk full"), KeyboardInterrupt()], ids=["error", "ctrl-c"])
def test_crash_during_publish_leaves_the_old_version_serving(workspace, crash):
    corpus, index_dir = workspace
    before = _snapshot(index_dir)
    version = current_version(index_dir)
    (corpus / REMOVED).unlink()  # a real change, so a new version is built
    reached: list[Path] = []

    def crash_before_publish(path: Path) -> None:
        reached.append(path)
        raise crash

    with pytest.raises(type(crash)):
        run_ingest(
            [corpus],
            index_dir,
            default_ingest_config(),
            engine=_local_engine_running(_must_not_run),
            before_publish=crash_before_publish,
        )
    assert len(reached) == 1 and reached[0].parent == index_dir / "versions"  # called with the new folder
    assert current_version(index_dir) == version
    loaded = load_index(index_dir)
    assert loaded.version == version
    assert REMOVED in set(loaded.chunks.column("source_path").to_pylist())
    assert not reached[0].exists(), "the unpublished version folder was left behind"
    assert _snapshot(index_dir) == before


# ------------------------------------------------------------------------------------- CLI


def test_cli_json_prints_the_report(workspace):
    corpus, index_dir = workspace
    (corpus / REMOVED).unlink()
    result = run_kafka_rag("ingest", str(corpus), "--index", str(index_dir), "--no-spark", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {
        "index_dir",
        "version",
        "unchanged",
        "documents",
        "chunks",
        "embedded",
        "reused",
        "duplicates",
        "skipped",
        "engine",
        "master",
        "seconds",
        "stage_seconds",
    }
    assert report["version"] == current_version(index_dir)
    assert (report["unchanged"], report["documents"], report["embedded"]) == (False, 4, 0)
    assert report["engine"] == "local"
    assert report["chunks"] == report["reused"] == read_manifest(index_dir)["counts"]["chunks"]
    assert report["skipped"] == []
    assert "[ingest]" not in result.stderr  # --json is quiet: no progress lines


def test_shard_rows_give_each_chunk_its_own_vectors_as_float32_arrays(tmp_path):
    """The merge reads shards a small batch at a time; each row keeps exactly its own vectors across batch
    boundaries, rows without vectors (known chunks) stay None, and the job's other rows are skipped."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rag.ingest import shard_rows

    rng = np.random.default_rng(0)
    rows = []
    for number in range(7):
        known = number == 3
        units = rng.standard_normal((number % 3 + 1, 4)).astype(np.float32)
        rows.append(
            {
                "kind": "chunk",
                "chunk_id": f"c{number}",
                "vector": None if known else rng.standard_normal(4).astype(np.float32).tolist(),
                "unit_vectors": None if known else units.tolist(),
            }
        )
    rows.insert(5, {"kind": "doc", "chunk_id": None, "vector": None, "unit_vectors": None})
    schema = pa.schema(
        [
            ("kind", pa.string()),
            ("chunk_id", pa.string()),
            ("vector", pa.list_(pa.float32())),
            ("unit_vectors", pa.list_(pa.list_(pa.float32()))),
        ]
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp_path / "part.parquet", row_group_size=3)

    read = list(shard_rows(tmp_path / "part.parquet", batch_rows=2))

    expected = [row for row in rows if row["kind"] == "chunk"]
    assert [row["chunk_id"] for row in read] == [row["chunk_id"] for row in expected]
    for got, want in zip(read, expected, strict=True):
        if want["vector"] is None:
            assert got["vector"] is None and got["unit_vectors"] is None
            continue
        assert got["vector"].dtype == np.float32 and got["unit_vectors"].dtype == np.float32
        np.testing.assert_array_equal(got["vector"], np.asarray(want["vector"], np.float32))
        np.testing.assert_array_equal(got["unit_vectors"], np.asarray(want["unit_vectors"], np.float32))


class _RecordingEmbedder:
    """The real model, noting every text it is asked to encode."""

    def __init__(self, embedder) -> None:
        self._embedder = embedder
        self.dimension = embedder.dimension
        self.encoded: list[str] = []
        self.blas_threads: list[int] = []  # numpy's BLAS threads at each call

    def encode_with_tokens(self, texts: list[str], batch_size: int = 64):
        self.encoded.extend(texts)
        self.blas_threads.append(_blas_threads())
        return self._embedder.encode_with_tokens(texts, batch_size=batch_size)

    def __getattr__(self, name: str):
        return getattr(self._embedder, name)


def _blas_threads() -> int:
    return max(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")


def test_the_local_engine_embeds_on_one_blas_thread_and_gives_the_pool_back(tmp_path, monkeypatch):
    """The model's threads take every core in a local build: numpy's BLAS threads would spin against them
    between batches, so the engine keeps them to one while it embeds, and to what they were after."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(SEEDS / CHANGED, corpus / CHANGED)
    recorders = []

    def recording_engine(files, config, known_ids, shards, progress):
        recorders.append(_RecordingEmbedder(load_embedder(config.model, config.embed_backend)))
        monkeypatch.setattr("rag.ingest.load_embedder", lambda *args, **kwargs: recorders[0])
        return local_engine(files, config, known_ids, shards, progress)

    with threadpool_limits(limits=2, user_api="blas"):
        run_ingest(
            [corpus], tmp_path / "index", default_ingest_config(), engine=_local_engine_running(recording_engine)
        )
        after = _blas_threads()

    assert recorders and recorders[0].blas_threads and set(recorders[0].blas_threads) == {1}
    assert after == 2


def test_a_unit_text_two_overlapping_chunks_share_is_encoded_once(monkeypatch):
    """Overlapping chunks repeat the evidence units at their seams: each text goes through the model once,
    and every chunk that holds it gets its vector."""
    path = SEEDS / "002_5d9f9cd9ceb365b0.txt"
    config = dataclasses.replace(default_ingest_config(), token_basis=ANY_BASIS)
    chunks = [r for r in chunk_files([(path.name, path.read_bytes())], config) if r["kind"] == "chunk"]
    units = [unit for chunk in chunks for unit in unit_texts(chunk["text"], chunk["section_path"])]
    shared = {unit for unit in units if units.count(unit) > 1}
    assert shared, "the seed's chunks overlap on some unit"
    recorder = _RecordingEmbedder(load_embedder(config.model))
    monkeypatch.setattr("rag.ingest.load_embedder", lambda *args, **kwargs: recorder)
    counted: list[int] = []

    embedded = [r for r in embed_rows(chunks, config, on_encoded=counted.append) if r["kind"] == "chunk"]

    assert len(recorder.encoded) == len(set(recorder.encoded))
    assert shared <= set(recorder.encoded)
    texts = [chunk_texts(chunk, config.chunk_vectors) for chunk in chunks]
    assert sum(counted) == sum(len(own) + len(more) for own, more in texts)  # progress counts every text
    vectors: dict[str, list[float]] = {}
    for row in embedded:
        for unit, vector in zip(unit_texts(row["text"], row["section_path"]), row["unit_vectors"], strict=True):
            assert vectors.setdefault(unit, vector) == vector
    expected = load_embedder(config.model).encode(sorted(shared))
    np.testing.assert_allclose([vectors[unit] for unit in sorted(shared)], expected, atol=1e-5)
