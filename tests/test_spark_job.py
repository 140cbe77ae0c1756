"""The Spark job: same chunk ids and vectors as the local engine, locally and on a standalone cluster.

Each Spark start costs seconds and a model load per Python worker, so the module starts Spark
twice in all: one `local[2]` build of the seeds shared by the contract tests, and one ingest on a
standalone master + worker started on 127.0.0.1 from the pyspark install. The Java check and the
Kafka docs chunking need no Spark.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rag import embedding
from rag.chunking import dense_text
from rag.embedding import load_embedder
from rag.errors import ConfigurationError
from rag.index_store import CHUNK_SCHEMA, current_version, load_index, read_chunk_table, read_manifest
from rag.ingest import chunk_files, run_ingest
from rag.settings import Settings
from rag.spark_job import check_java, spark_engine
from rag.units import unit_texts
from tests.conftest import KAFKA_DOCS, SEEDS, default_ingest_config, free_port, run_kafka_rag, stop_process_group

PLAIN_COLUMNS = tuple(name for name in CHUNK_SCHEMA.names if name != "chunk_id")  # the ids: compared in order
CLUSTER_FILES = ["000_0424dccc37dbf1fb.txt", "001_9576d76dca88229e.txt", "004_477c5e4c40f4a68e.txt"]


def _rows(index_dir: Path) -> list[dict]:
    return read_chunk_table(index_dir).to_pylist()


def _assert_same_index(rows: list[dict], reference: list[dict]) -> None:
    """Chunk ids, order and every other column exactly; vectors within 1e-5, unit vectors within float16 rounding."""
    assert [r["chunk_id"] for r in rows] == [r["chunk_id"] for r in reference]
    for row, ref in zip(rows, reference, strict=True):
        for column in PLAIN_COLUMNS:
            assert row[column] == ref[column], (row["chunk_id"], column)
        np.testing.assert_allclose(row["vector"], ref["vector"], atol=1e-5)
        assert len(row["unit_vectors"]) == len(ref["unit_vectors"])
        if ref["unit_vectors"]:
            # float16 on disk: vectors a last-digit apart may round to neighbouring float16 values
            np.testing.assert_allclose(np.asarray(row["unit_vectors"]), np.asarray(ref["unit_vectors"]), atol=5e-4)


@pytest.fixture(scope="module")
def spark_seeds_index(tmp_path_factory) -> Path:
    """The seeds built by the Spark engine on `local[2]` (one Spark run for the module), beside them its
    progress messages and the models the driver's embedder cache held after it (from empty)."""
    index_dir = tmp_path_factory.mktemp("spark-seeds") / "index"
    messages: list[str] = []
    with pytest.MonkeyPatch.context() as patch, spark_engine("local[2]") as spark:
        patch.setattr(embedding, "_CACHE", {})  # the tests' own builds in this process loaded the model
        run_ingest(
            [SEEDS],
            index_dir,
            default_ingest_config(),
            engine=spark,
            progress=messages.append,
        )
        (index_dir.parent / "driver-models.json").write_text(json.dumps(list(embedding._CACHE)))
    (index_dir.parent / "progress.log").write_text("\n".join(map(str, messages)))
    return index_dir


@pytest.fixture(params=["local", "spark"])
def engine_index(request) -> tuple[str, Path]:
    fixture = "seeds_index" if request.param == "local" else "spark_seeds_index"
    return request.param, request.getfixturevalue(fixture)


# ------------------------------------------------------------------------------------- the contract


@pytest.mark.spark
@pytest.mark.slow
def test_each_engine_builds_the_chunks_and_vectors_of_the_pure_stages(engine_index):
    """Both engines give the chunks `chunk_files` gives, with the model's vectors for them."""
    engine, index_dir = engine_index
    reference = [
        r
        for p in sorted(SEEDS.iterdir())
        for r in chunk_files([(p.name, p.read_bytes())], default_ingest_config())
        if r["kind"] == "chunk"
    ]
    rows = _rows(index_dir)
    assert sorted(r["chunk_id"] for r in rows) == sorted(r["chunk_id"] for r in reference)
    by_id = {r["chunk_id"]: r for r in reference}
    for row in rows:
        ref = by_id[row["chunk_id"]]
        assert (row["source_path"], row["section_path"], row["text"], row["start"]) == (
            ref["source_path"],
            ref["section_path"],
            ref["text"],
            ref["start"],
        )

    embedder = load_embedder(default_ingest_config().model)
    sample = rows[:: max(1, len(rows) // 6)]
    vectors = embedder.encode([dense_text(r["section_path"], r["text"]) for r in sample])
    np.testing.assert_allclose(np.asarray([r["vector"] for r in sample]), vectors, atol=1e-5)
    for row in sample:
        units = unit_texts(row["text"], row["section_path"])
        np.testing.assert_allclose(  # unit vectors are stored as float16: ~3 significant digits
            np.asarray(row["unit_vectors"]).reshape(len(units), -1), embedder.encode(units), atol=5e-4
        )

    manifest = read_manifest(index_dir)
    assert manifest["engine"] == engine
    assert manifest["counts"]["documents"] == 5 and manifest["counts"]["chunks"] == len(rows)
    assert manifest["spark_master"] == ("local[2]" if engine == "spark" else "")
    assert load_index(index_dir).dense.index.ntotal == len(rows)


@pytest.mark.spark
@pytest.mark.slow
def test_spark_ingest_reports_its_tasks_and_texts_until_all_are_done(spark_seeds_index):
    messages = (spark_seeds_index.parent / "progress.log").read_text().splitlines()
    chunking = [tuple(map(int, m.split()[1].split("/"))) for m in messages if m.startswith("chunking: ")]
    embedding = [
        tuple(map(int, re.fullmatch(r"embedding: (\d+)(?:/(\d+))? texts \((\d+)/(\d+) tasks\)", m).groups("0")))
        for m in messages
        if m.startswith("embedding: ") and m.endswith(" tasks)")
    ]
    assert chunking and embedding, messages
    assert chunking[-1][0] == chunking[-1][1] > 0
    texts, total, tasks, all_tasks = embedding[-1]
    assert tasks == all_tasks == 2 * 4  # the embedding stage in 4 tasks per core
    expected = sum(1 + len(unit_texts(r["text"], r["section_path"])) for r in _rows(spark_seeds_index))
    assert texts == total == expected  # every chunk and every evidence unit, counted on the executors
    assert [e[0] for e in embedding] == sorted(e[0] for e in embedding)
    assert messages[-1].startswith("publish: version ")


# What Spark and the JVM print on their own at start-up and while running: log4j's banner and log lines
# (`26/11/23 06:16:50 WARN NativeCodeLoader: ...`), the JVM's incubator-module warning, the level hint.
JVM_CHATTER = re.compile(
    r"log4j|NativeCodeLoader|incubator modules|Setting default log level|setLogLevel|"
    r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (?:WARN|INFO|ERROR)",
    re.MULTILINE,
)


@pytest.mark.spark
@pytest.mark.slow
def test_spark_local_index_equals_the_local_engine_index(spark_seeds_index, seeds_index):
    _assert_same_index(_rows(spark_seeds_index), _rows(seeds_index))
    spark, local = read_manifest(spark_seeds_index), read_manifest(seeds_index)
    assert spark["model"] == local["model"] and spark["chunker"] == local["chunker"]
    assert spark["files"] == local["files"] and spark["faiss"] == local["faiss"]


@pytest.mark.spark
@pytest.mark.slow
def test_spark_local_index_holds_the_local_engine_indexs_token_codes(spark_seeds_index, seeds_index):
    """Each chunk's token codes cross the Spark shards as bytes, made on the executors in the basis one
    task fitted before the job: the same basis as the local build's (the same sample of the same files),
    and the same word pieces, a code or two apart where the batches made a last digit differ."""
    spark, local = load_index(spark_seeds_index), load_index(seeds_index)
    assert spark.manifest["tokens"] == local.manifest["tokens"]  # version, count and 128 dimensions
    assert spark.manifest["tokens"]["count"] > spark.manifest["vectors"]["chunks"] * 20
    np.testing.assert_array_equal(spark.token_basis.mean, local.token_basis.mean)  # the same tokens
    # The executor's BLAS has threads_per_task threads, the local fit's every core: the covariance's eigenvectors
    # then differ in the last bits of float64, which float32 shows only in near-null directions (~1e-15).
    for name in ("components", "scales"):
        np.testing.assert_allclose(getattr(spark.token_basis, name), getattr(local.token_basis, name), atol=1e-6)
    np.testing.assert_array_equal(spark.token_offsets, local.token_offsets)
    rows = list(range(0, len(local.chunks), 7)) + [len(local.chunks) - 1]
    spark_codes, offsets = spark.token_vectors(rows)
    local_codes, _ = local.token_vectors(rows)
    assert len(local_codes) == offsets[-1] > len(rows) * 20
    assert np.abs(spark_codes - local_codes).max() <= 2


@pytest.mark.spark
@pytest.mark.slow
def test_spark_ingest_fits_the_token_basis_on_an_executor_and_the_driver_never_loads_the_model(spark_seeds_index):
    """The driver once loaded the model only to fit the basis and held it for the whole build: a driver
    peak of 1,109 MB instead of 435 at 10^4 chunks (benchmarks/scale.py, stand-in model)."""
    assert json.loads((spark_seeds_index.parent / "driver-models.json").read_text()) == []
    messages = (spark_seeds_index.parent / "progress.log").read_text().splitlines()
    assert any(m.startswith("token basis: fitting on the tokens of ") for m in messages)
    assert load_index(spark_seeds_index).token_basis.dimensions == 128


# ------------------------------------------------------------------------------------- standalone cluster


def _alive_workers(web_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=2) as response:
            state = json.load(response)
    except (OSError, ValueError):
        return 0
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory) -> Iterator[str]:
    """A Spark standalone master and one worker (2 cores) on 127.0.0.1; yields the master URL."""
    import pyspark

    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    root = tmp_path_factory.mktemp("standalone")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    java = shutil.which("java")
    if "JAVA_HOME" not in env and java:
        env["JAVA_HOME"] = str(Path(java).resolve().parents[1])
    port, web_port, worker_web_port = free_port(), free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    processes: list[subprocess.Popen] = []
    logs = {name: root / f"{name}.log" for name in ("master", "worker")}

    def start(name: str, *args: str) -> None:
        with logs[name].open("wb") as log:
            processes.append(
                subprocess.Popen(
                    [str(spark_class), *args], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
            )

    try:
        start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(web_port),
        )
        start(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            url,
            "--host",
            "127.0.0.1",
            "--cores",
            "2",
            "--memory",
            "2g",
            "--webui-port",
            str(worker_web_port),
            "--work-dir",
            str(root / "work"),
        )
        deadline = time.monotonic() + 120
        while _alive_workers(web_port) < 1:
            for name, process in zip(logs, processes, strict=False):
                if process.poll() is not None:
                    log = logs[name].read_text()[-3000:]
                    pytest.fail(f"Spark {name} exited with {process.returncode}:\n{log}")
            if time.monotonic() > deadline:
                pytest.fail(
                    "the Spark worker did not register with the master within 120 s:\n"
                    + logs["worker"].read_text()[-3000:]
                )
            time.sleep(1)
        yield url
    finally:
        for process in reversed(processes):
            stop_process_group(process)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(600)  # the cluster fixture may take 120 s before the 400 s ingest
def test_ingest_on_a_standalone_cluster_equals_the_local_index(standalone_cluster, seeds_index, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in CLUSTER_FILES:
        shutil.copy(SEEDS / name, corpus / name)
    index_dir = tmp_path / "index"

    # From outside the repository, as a user would: the workers must find the project's Python and code.
    # With --verbose, Spark's and the JVM's own log lines reach the user (hidden by default: `make run`'s test).
    result = run_kafka_rag(
        "ingest", "corpus", "--index", "index", "--master", standalone_cluster, "--json", "--verbose",
        cwd=tmp_path, timeout=400,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert (report["engine"], report["master"], report["documents"]) == ("spark", standalone_cluster, 3)
    assert JVM_CHATTER.search(result.stderr), result.stderr[-3000:]
    manifest = read_manifest(index_dir)
    assert manifest["spark_master"] == standalone_cluster and manifest["engine"] == "spark"

    reference = [r for r in _rows(seeds_index) if r["source_path"] in CLUSTER_FILES]
    assert report["chunks"] == report["embedded"] == len(reference) > 0
    _assert_same_index(_rows(index_dir), reference)
    assert manifest["model"] == read_manifest(seeds_index)["model"]


# ------------------------------------------------------------------------------------- Java check


def _fake_java(folder: Path, version_line: str) -> Path:
    """A `java` that prints what `java -version` prints (on stderr), for the version parsing."""
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\necho 'OpenJDK Runtime Environment' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return folder


def test_check_java_passes_here():
    assert int(check_java()) >= 17


def test_missing_java_says_java_17_is_needed(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-such-jdk"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigurationError, match="Java 17 or newer"):
        check_java()
    monkeypatch.delenv("JAVA_HOME")
    with pytest.raises(ConfigurationError, match=r"Java was not found.*Java 17 or newer.*JAVA_HOME"):
        check_java()


@pytest.mark.parametrize(
    ("version_line", "found"),
    [
        ('openjdk version "1.8.0_392"', "8"),
        ('openjdk version "11.0.21" 2023-10-17', "11"),
    ],
)
def test_old_java_is_refused_naming_its_version(monkeypatch, tmp_path, version_line, found):
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path / "jdk", version_line)))
    with pytest.raises(ConfigurationError, match=rf"Java 17 or newer, found {found} at"):
        check_java()


def test_newer_java_is_accepted(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path / "jdk", 'openjdk version "21.0.5" 2024-10-15')))
    assert check_java() == "21"


def test_spark_engine_refuses_to_start_without_java(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-such-jdk"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigurationError, match="Java 17 or newer"), spark_engine("local[1]") as spark:
        run_ingest(
            [SEEDS / CLUSTER_FILES[0]],
            tmp_path / "index",
            default_ingest_config(),
            engine=spark,
        )
    assert current_version(tmp_path / "index") is None


# ------------------------------------------------------------------------------------- Kafka docs HTML


@pytest.mark.slow
def test_kafka_docs_html_gives_sectioned_chunks():
    if not KAFKA_DOCS.is_dir():
        pytest.skip(f"Kafka docs corpus not found at {KAFKA_DOCS}")
    pages = sorted(p for p in KAFKA_DOCS.rglob("*.html"))
    assert len(pages) > 20
    files = ((p.relative_to(KAFKA_DOCS).as_posix(), p.read_bytes()) for p in pages)
    rows = list(chunk_files(files, default_ingest_config()))
    assert [r for r in rows if r["kind"] == "skip"] == []
    documents = [r for r in rows if r["kind"] == "doc"]
    chunks = [r for r in rows if r["kind"] == "chunk"]
    assert len(documents) == len(pages) and all(d["format"] == "html" and d["chunks"] > 0 for d in documents)
    assert len(chunks) > 1000
    assert all(c["text"].strip() and c["section_path"] and c["section_path"][0] == c["title"] for c in chunks)
    sectioned = sum(len(c["section_path"]) >= 2 for c in chunks)
    assert sectioned / len(chunks) > 0.9
    assert len({c["chunk_id"] for c in chunks}) > 0.99 * len(chunks)
    by_page = {}
    for chunk in chunks:
        by_page.setdefault(chunk["source_path"], []).append(chunk)
    headings = {h for c in by_page["configuration.html"] for h in c["section_path"][1:]}
    assert any("Broker Configs" in h for h in headings), sorted(headings)[:20]
    config_keys = {i for c in by_page["configuration.html"] for i in c["identifiers"]}
    assert {"log.retention.hours", "unclean.leader.election.enable", "broker.id"} <= config_keys
    # Chunks stay near the chunk size (a long code block may run over).
    assert sum(len(c["text"]) <= 2 * Settings().chunk_size for c in chunks) / len(chunks) > 0.95
