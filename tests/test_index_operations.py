"""Operating an index with real processes: one writer at a time, kill -9 and Ctrl-C mid-build, damaged
index parts, retention, `kafka-rag index list/rollback`, and counts that add up.

Builds use the local engine on a few seed files (seconds each); the Spark Ctrl-C case is marked `spark`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rag.embedding import load_embedder, model_identity
from rag.index_lock import LOCK_FILE, WAIT_POLL_S, is_locked
from rag.index_store import current_version, load_index, read_manifest
from rag.ingest import run_ingest
from tests.conftest import KAFKA_RAG, SEEDS, default_ingest_config, run_kafka_rag, user_env

pytestmark = pytest.mark.slow

SMALL = ("000_0424dccc37dbf1fb.txt", "001_9576d76dca88229e.txt", "004_477c5e4c40f4a68e.txt")
LONG = "002_5d9f9cd9ceb365b0.txt"
QUESTION = "what does error code 121 mean"
BIG_COPIES = 6  # reworded copies of LONG in the big corpus: about 15 s of embedding here


def _start(*args: str) -> subprocess.Popen:
    """`kafka-rag ARGS` in its own process group, as a terminal would run it."""
    return subprocess.Popen(
        [str(KAFKA_RAG), *args],
        env=user_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for(condition, timeout: float = 90, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)


@pytest.fixture(scope="module")
def small_built(tmp_path_factory):
    """A corpus of three seed files and its index (local engine, real model)."""
    root = tmp_path_factory.mktemp("ops")
    corpus = root / "corpus"
    corpus.mkdir()
    for name in SMALL:
        shutil.copy(SEEDS / name, corpus / name)
    run_ingest([corpus], root / "index", default_ingest_config())
    return corpus, root / "index"


@pytest.fixture()
def small(small_built, tmp_path):
    """A private copy of the small corpus and its index."""
    corpus, index_dir = small_built
    shutil.copytree(corpus, tmp_path / "corpus")
    shutil.copytree(index_dir, tmp_path / "index")
    return tmp_path / "corpus", tmp_path / "index"


@pytest.fixture()
def big_corpus(tmp_path):
    """The small corpus with one file changed, a long one added and `BIG_COPIES` reworded copies of it: over the
    small index, a build that embeds for ten seconds and more, long enough to interrupt.

    The copies are reworded in every sentence because a text the index already holds is not embedded again;
    with the ONNX backend one long file alone embeds in about a second, too soon for a Ctrl-C after 3 s.
    """
    return _grown_corpus(tmp_path / "big", BIG_COPIES)


@pytest.fixture()
def grown_corpus(tmp_path):
    """The small corpus with one file changed and the long one added: a build of a few seconds, told apart from
    the small corpus's by its four documents."""
    return _grown_corpus(tmp_path / "grown", 0)


def _grown_corpus(corpus: Path, copies: int) -> Path:
    corpus.mkdir()
    for name in (*SMALL, LONG):
        shutil.copy(SEEDS / name, corpus / name)
    with (corpus / SMALL[0]).open("a", encoding="utf-8") as handle:
        handle.write("\nA new paragraph about rebalance storms after a broker restart.\n")
    long_text = (SEEDS / LONG).read_text(encoding="utf-8")
    for copy in range(1, copies + 1):
        reworded = re.sub(r"(?m)^(?=\S)|(?<=\. )", f"Copy {copy}: ", long_text)
        (corpus / f"copy_{copy}_{LONG}").write_text(reworded, encoding="utf-8")
    return corpus


# ------------------------------------------------------------------------------------------ one writer


@contextmanager
def _holding_the_lock(process: subprocess.Popen, index_dir: Path) -> Iterator[None]:
    """Stop `process` (SIGSTOP, its whole group) once it holds the writer lock of `index_dir`, and let it go on at
    the end of the block: however fast its build, the block meets it holding the lock."""
    try:
        _wait_for(lambda: is_locked(index_dir), what="the first ingest to take the lock")
        os.killpg(process.pid, signal.SIGSTOP)
        assert is_locked(index_dir), "the first ingest held the lock when it was stopped"
        yield
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGCONT)


def _has_open(pid: int, path: Path) -> bool:
    """True once process `pid` has `path` open (Linux: /proc/PID/fd)."""
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(Path(os.readlink(fd)) == path for fd in fds.iterdir())
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_a_second_ingest_exits_3_naming_the_running_one_and_the_first_publishes(small, grown_corpus):
    corpus, index_dir = small
    first = _start("ingest", str(grown_corpus), "--index", str(index_dir), "--no-spark", "--quiet")
    try:
        with _holding_the_lock(first, index_dir):
            second = run_kafka_rag("ingest", str(corpus), "--index", str(index_dir), "--no-spark")
        assert second.returncode == 3, second.stderr
        assert second.stdout == ""
        lines = second.stderr.splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"kafka-rag: another ingest (pid {first.pid}, started 20")
        assert lines[0].endswith(f"is building {index_dir}/; wait for it or use another --index")
        assert first.wait(240) == 0, first.stderr
    finally:
        _stop(first)
    assert read_manifest(index_dir)["counts"]["documents"] == 4  # the running build's sources won


def test_wait_blocks_until_the_running_ingest_is_done_then_builds(small, grown_corpus, tmp_path):
    corpus, index_dir = small
    changed = tmp_path / "changed"
    shutil.copytree(corpus, changed)
    (changed / SMALL[2]).unlink()
    first = _start("ingest", str(grown_corpus), "--index", str(index_dir), "--no-spark", "--json")
    second = None
    try:
        with _holding_the_lock(first, index_dir):
            second = _start("ingest", str(changed), "--index", str(index_dir), "--no-spark", "--wait", "--json")
            _wait_for(lambda: _has_open(second.pid, index_dir / LOCK_FILE), what="the second ingest to open the lock")
            time.sleep(3 * WAIT_POLL_S)  # it tries the lock and finds it taken
            assert second.poll() is None, second.communicate()
        out, err = first.communicate(timeout=240)
        second_out, second_err = second.communicate(timeout=300)
    finally:
        _stop(first)
        if second is not None:
            _stop(second)
    assert first.returncode == 0, err
    assert second.returncode == 0, second_err
    first_version, second_version = json.loads(out)["version"], json.loads(second_out)["version"]
    assert first_version < second_version  # the waiting build started after the first had published
    assert current_version(index_dir) == second_version
    assert read_manifest(index_dir)["counts"]["documents"] == 2


def test_kill_9_of_the_writer_frees_the_lock_and_the_next_ingest_cleans_up(small, big_corpus):
    corpus, index_dir = small
    serving = current_version(index_dir)
    first = _start("ingest", str(big_corpus), "--index", str(index_dir), "--no-spark", "--quiet")
    _wait_for(lambda: is_locked(index_dir), what="the ingest to take the lock")
    time.sleep(1)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(30)
    assert not is_locked(index_dir)  # the kernel released it with the process
    assert current_version(index_dir) == serving
    assert load_index(index_dir).version == serving  # the previous version keeps serving
    (index_dir / "versions" / ".staging-20260101T000000000000Z").mkdir()  # what a kill during publish leaves
    result = run_kafka_rag("ingest", str(corpus), "--index", str(index_dir), "--no-spark")
    assert result.returncode == 0, result.stderr
    assert "removed .staging-20260101T000000000000Z, left by a build that died" in result.stderr
    assert not list((index_dir / "versions").glob(".staging-*"))


@pytest.mark.parametrize("quiet", [True, False], ids=["quiet", "progress"])
def test_ctrl_c_during_ingest_is_one_line_exit_130_lock_released_old_version_serving(small, big_corpus, quiet):
    corpus, index_dir = small
    serving = current_version(index_dir)
    flags = ["--quiet"] if quiet else []
    process = _start("ingest", str(big_corpus), "--index", str(index_dir), "--no-spark", *flags)
    _wait_for(lambda: is_locked(index_dir), what="the ingest to take the lock")
    time.sleep(3)  # inside the build (loading the model or embedding)
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
    try:
        out, err = process.communicate(timeout=60)
    finally:
        _stop(process)
    assert process.returncode == 130, err
    assert out == ""
    assert "Traceback" not in err
    if quiet:
        assert err == "kafka-rag: interrupted\n"
    else:
        assert err.splitlines()[-1] == "kafka-rag: interrupted"
    assert not is_locked(index_dir)
    assert current_version(index_dir) == serving and load_index(index_dir).version == serving
    assert not list((index_dir / "versions").glob(".staging-*"))


@pytest.mark.spark
def test_ctrl_c_during_a_spark_ingest_is_exit_130_without_a_python_traceback(small, big_corpus):
    corpus, index_dir = small
    serving = current_version(index_dir)
    process = _start("ingest", str(big_corpus), "--index", str(index_dir))
    try:
        lines: list[str] = []
        assert process.stderr is not None
        for line in process.stderr:  # wait until Spark runs the job ("chunking: 1/4 tasks")
            lines.append(line)
            if " tasks" in line:
                break
        os.killpg(process.pid, signal.SIGINT)
        _, rest = process.communicate(timeout=120)
    finally:
        _stop(process)
    err = "".join(lines) + rest
    assert process.returncode == 130, err
    assert "Traceback (most recent call last)" not in err
    assert err.splitlines()[-1] == "kafka-rag: interrupted"
    assert not is_locked(index_dir)
    assert current_version(index_dir) == serving


# ------------------------------------------------------------------------------------------ damaged index parts


def _version_dir(index_dir: Path) -> Path:
    return index_dir / "versions" / current_version(index_dir)


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def _damage(index_dir: Path, case: str) -> tuple[str, str]:
    """Damage one part of the serving version; returns (the file the message must name, what it must say)."""
    version = _version_dir(index_dir)
    manifest = version / "manifest.json"
    if case == "manifest-garbage":
        manifest.write_bytes(b"\x00garbage{")
        return str(manifest), "is not valid JSON"
    if case == "manifest-empty-object":
        manifest.write_text("{}")
        return str(manifest), "has no valid 'schema_version' field"
    if case == "manifest-missing-model":
        data = json.loads(manifest.read_text())
        del data["model"]["fingerprint"]
        manifest.write_text(json.dumps(data))
        return str(manifest), "has no valid 'model.fingerprint' field"
    if case == "manifest-missing":
        manifest.unlink()
        return str(manifest), "is missing"
    if case == "schema-version":
        data = json.loads(manifest.read_text())
        data["schema_version"] = 99
        manifest.write_text(json.dumps(data))
        return str(manifest), "is index schema version 99, this code reads version 2"
    if case == "current-dangling":
        (index_dir / "CURRENT").write_text("20000101T000000000000Z\n")
        return str(index_dir / "CURRENT"), "names version 20000101T000000000000Z, but"
    if case == "chunks-missing":
        (version / "chunks.arrow").unlink()
        return str(version / "chunks.arrow"), "is missing"
    if case == "chunks-truncated":
        _truncate(version / "chunks.arrow")
        return str(version / "chunks.arrow"), "is unreadable"
    if case == "vectors-truncated":
        _truncate(version / "vectors.f32")
        return str(version / "vectors.f32"), "is unreadable"
    if case == "units-missing":
        (version / "units.f16").unlink()
        return str(version / "units.f16"), "is missing"
    if case == "bm25-missing":
        shutil.rmtree(version / "bm25")
        return str(version / "bm25"), "is missing"
    if case == "bm25-truncated":
        _truncate(version / "bm25" / "vocab.index.json")
        return str(version / "bm25"), "is unreadable"
    if case == "faiss-truncated":
        _truncate(version / "faiss.index")
        return str(version / "faiss.index"), "is unreadable"
    if case == "tokens-truncated":
        _truncate(version / "tokens.i8")
        return str(version / "tokens.i8"), "is unreadable"
    if case == "token-basis-truncated":
        _truncate(version / "token_basis.npz")
        return str(version / "token_basis.npz"), "is unreadable"
    raise AssertionError(case)


DAMAGE = (
    "manifest-garbage",
    "manifest-empty-object",
    "manifest-missing-model",
    "manifest-missing",
    "schema-version",
    "current-dangling",
    "chunks-missing",
    "chunks-truncated",
    "vectors-truncated",
    "units-missing",
    "bm25-missing",
    "bm25-truncated",
    "faiss-truncated",
    "tokens-truncated",
    "token-basis-truncated",
)


# `--json` reports errors through the same path whatever the part: asked again with it for one case of each kind
# (manifest, table, vectors), not for all (each `kafka-rag` start costs 1.5-2 s of imports)
ALSO_AS_JSON = ("manifest-garbage", "chunks-truncated", "faiss-truncated")


@pytest.mark.parametrize("case", DAMAGE)
def test_a_damaged_index_part_is_one_line_naming_the_file_exit_2(small, case):
    _, index_dir = small
    file, says = _damage(index_dir, case)
    asked = [("ask", QUESTION)] + [("ask", "--json", QUESTION)] * (case in ALSO_AS_JSON)
    for args in asked:
        result = run_kafka_rag(*args, "--index", str(index_dir))
        assert result.returncode == 2, result.stderr
        assert result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith(f"kafka-rag: {file}"), lines[0]
        assert says in lines[0]
        assert "'kafka-rag ingest'" in lines[0]
        assert "KAFKA_RAG_MODEL" not in lines[0]


@pytest.fixture(scope="module")
def identity():
    return model_identity(load_embedder(default_ingest_config().model))


@pytest.mark.parametrize("case", DAMAGE)
def test_a_re_ingest_repairs_each_damaged_part(small, identity, case):
    corpus, index_dir = small
    _damage(index_dir, case)
    report = run_ingest([corpus], index_dir, default_ingest_config())
    assert not report.unchanged
    loaded = load_index(index_dir, identity)
    assert loaded.version == report.version
    assert sorted(set(loaded.chunks.column("source_path").to_pylist())) == list(SMALL)


# ------------------------------------------------------------------------------------------ counts


def test_counts_of_a_corpus_with_a_duplicated_page_add_up(small, tmp_path):
    corpus, _ = small
    shutil.copy(corpus / SMALL[1], corpus / "copy-of-001.txt")  # the same page under a second name
    index_dir = tmp_path / "dup-index"
    report = run_ingest([corpus], index_dir, default_ingest_config())
    counts = read_manifest(index_dir)["counts"]
    per_file = {f["source_path"]: f["chunks"] for f in read_manifest(index_dir)["files"]}
    assert per_file["copy-of-001.txt"] == per_file[SMALL[1]] > 0
    assert counts["chunks"] == sum(per_file.values())
    assert counts["duplicates"] == per_file["copy-of-001.txt"]
    assert counts["embedded"] == counts["chunks"] - counts["duplicates"]
    assert counts["reused"] == 0
    assert counts["embedded"] + counts["reused"] + counts["duplicates"] == counts["chunks"]
    assert (report.chunks, report.embedded, report.reused, report.duplicates) == (
        counts["chunks"],
        counts["embedded"],
        counts["reused"],
        counts["duplicates"],
    )
    table_rows = load_index(index_dir).chunks.num_rows
    assert table_rows == counts["chunks"]

    (corpus / SMALL[0]).write_text((corpus / SMALL[0]).read_text() + "\nOne more line about fetch sessions.\n")
    again = run_ingest([corpus], index_dir, default_ingest_config())
    assert again.embedded + again.reused + again.duplicates == again.chunks
    assert again.reused > 0 and 0 < again.embedded <= per_file[SMALL[0]] + 1
    assert again.duplicates == 0  # both copies' vectors now come from the previous version
    assert again.reused >= 2 * per_file[SMALL[1]]


# ------------------------------------------------------------------------------------------ retention and rollback


def test_retention_list_and_rollback_through_the_cli(small, tmp_path):
    corpus, index_dir = small
    first = current_version(index_dir)
    built = [first]
    for n in range(3):
        (corpus / f"extra-{n}.txt").write_text(f"Extra page {n}\n\nThe broker widget number {n} stalls on restart.\n")
        result = run_kafka_rag("ingest", str(corpus), "--index", str(index_dir), "--no-spark", "--json")
        assert result.returncode == 0, result.stderr
        built.append(json.loads(result.stdout)["version"])
    names = sorted(p.name for p in (index_dir / "versions").iterdir())
    assert names == built[-3:]  # the default keeps three; the oldest was removed after the last publish

    listing = run_kafka_rag("index", "list", "--index", str(index_dir))
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert lines[0] == f"Versions in {index_dir}/ (* serving, h held by a running server):"
    assert [line[3:].split()[0] for line in lines[1:]] == built[-3:]
    assert lines[-1].startswith("* ") and built[-1] in lines[-1]
    assert "documents" in lines[-1] and "chunks" in lines[-1] and "MiB" in lines[-1]
    data = json.loads(run_kafka_rag("index", "list", "--json", "--index", str(index_dir)).stdout)
    assert [v["version"] for v in data] == built[-3:] and [v["serving"] for v in data] == [False, False, True]
    assert data[-1]["documents"] == 6 and data[0]["documents"] == 4

    back = run_kafka_rag("index", "rollback", "--index", str(index_dir))
    assert back.returncode == 0, back.stderr
    assert back.stdout.startswith(f"{index_dir}/ now serves version {built[-2]}")
    assert current_version(index_dir) == built[-2]
    assert run_kafka_rag("index", "rollback", built[-1], "--index", str(index_dir)).returncode == 0
    assert current_version(index_dir) == built[-1]
    missing = run_kafka_rag("index", "rollback", "19990101", "--index", str(index_dir))
    assert (missing.returncode, missing.stderr) == (
        2,
        f"kafka-rag: No version 19990101 in {index_dir}/: see 'kafka-rag index list'\n",
    )


def test_keep_versions_setting_and_the_serving_version_survive_retention(small):
    corpus, index_dir = small
    env_keep = {"KAFKA_RAG_KEEP_VERSIONS": "1"}
    (corpus / "extra.txt").write_text("Extra page\n\nThe widget stalls when the queue is full.\n")
    result = subprocess.run(
        [str(KAFKA_RAG), "ingest", str(corpus), "--index", str(index_dir), "--no-spark", "--json"],
        env={**user_env(), **env_keep},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    version = json.loads(result.stdout)["version"]
    assert sorted(p.name for p in (index_dir / "versions").iterdir()) == [version]
