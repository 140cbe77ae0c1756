"""The Spark job: the ingest stages of `rag.ingest` mapped over partitions, locally or on a cluster.

Spark only moves rows. Stage 1 maps file partitions through `chunk_files`; the chunk rows are then
spread evenly over the cores and stage 2 maps them through `embed_rows`, which loads the model
once per Python worker (a module-level cache in `rag.embedding`, never a pickled closure) and codes
each chunk's tokens in the basis fitted just before the job (`rag.ingest.fit_token_basis`), which
reaches the tasks in their `IngestConfig`. That fit's tokens are encoded in one task of the same session,
so the driver never loads the model and the worker that did keeps it for the job. The
executors write the embedded rows, sorted within each partition, as Parquet shards into the build's
staging folder; the driver collects only the few document, skip and model rows, and `run_ingest`
streams the shards into the index. No vector passes through the driver's memory all at once, so the
driver does not bound the corpus. On a cluster the index folder must be on storage every node can
write (a shared file system). Threads per task are pinned (OMP/torch), so tasks x threads never
exceed the cores.

Spark's own chatter stays out of the command's output unless asked for (`verbose`): the log level is
set in the session's configuration (`spark.log.level`), the console progress bar is off, and the JVM's
standard output and error (its start-up warnings, log4j's banner, the Python workers' stderr) go to a
pipe whose last lines are kept for the error message when Spark fails to start.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import uuid
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from rag.errors import ConfigurationError, IngestError
from rag.ingest import (
    ROWS_PER_ENCODE,
    BuildEngine,
    IngestConfig,
    SourceFile,
    chunk_files,
    embed_rows,
    fit_basis,
    planned_texts,
)
from rag.progress import Count, Progress, no_progress
from rag.settings import Settings
from rag.tokens import TokenBasis

EMBED_TASKS_PER_CORE = 4
SHARD_ROW_GROUP_BYTES = 8 << 20  # Parquet row groups of the shards the executors write
# The driver JVM's start-up is most of a small build's wait; the optimising JIT pays off only in long JVM
# work, and the encoding runs in Python (benchmarks/ingest.py, runs taken in turns: ~4 s less on the seeds).
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
JVM_TAIL_LINES = 40  # of the JVM's hidden output, kept for the error message when Spark does not start

ROW_SCHEMA = (
    "kind string, chunk_id string, doc_id string, source_path string, title string, section_path array<string>, "
    "text string, identifiers array<string>, start long, end long, url string, continues_code boolean, "
    "vector array<float>, unit_vectors array<array<float>>, token_codes binary, format string, chunks long, "
    "reason string, name string, dimension long, fingerprint string, encode_seconds double"
)
ROW_FIELDS = tuple(column.split()[0] for column in ROW_SCHEMA.split(", "))
OTHER_FIELDS = [f for f in ROW_FIELDS if f not in ("vector", "unit_vectors", "token_codes", "text")]


def check_java() -> str:
    """Spark 4 needs Java 17+; say so plainly instead of letting the JVM launch fail obscurely."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise ConfigurationError(
            "Java was not found: Spark needs Java 17 or newer. Install it "
            "(e.g. 'apt-get install openjdk-17-jre-headless') or set JAVA_HOME"
        )
    output = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', output)
    major = int(match.group(1)) if match else 0
    if major == 1 and match and match.group(2):
        major = int(match.group(2))
    if major < 17:
        raise ConfigurationError(
            f"Spark needs Java 17 or newer, found {major or 'unknown'} at {java}: install Java 17+ or set JAVA_HOME"
        )
    return str(major)


def spark_session(master: str, threads_per_task: int, arrow_batch_size: int, *, verbose: bool = False) -> Any:
    """A Spark session for the ingest; quiet unless `verbose` (then Spark logs warnings and the JVM prints freely)."""
    check_java()
    from pyspark.sql import SparkSession

    threads = str(threads_per_task)
    # PySpark starts executors' Python as $PYSPARK_PYTHON or a bare "python3" from PATH, which is not
    # this environment; nodes of a cluster need this same interpreter path unless the user sets it.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):  # stay on loopback (and skip the JVM's warning about the hostname)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName("kafka-rag-ingest")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "WARN" if verbose else "ERROR")
        # One job of two stages, as planned: nothing here to adapt, and task counts stay true for progress.
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.driver.extraJavaOptions", DRIVER_JAVA_OPTIONS)
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(arrow_batch_size))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.executorEnv.OMP_NUM_THREADS", threads)
        .config("spark.executorEnv.MKL_NUM_THREADS", threads)
        .config("spark.executorEnv.TOKENIZERS_PARALLELISM", "false")
        .config("spark.executorEnv.HF_HUB_OFFLINE", os.environ.get("HF_HUB_OFFLINE", "1"))
        .config("spark.executorEnv.PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
        .config(
            "spark.driver.host",
            "127.0.0.1" if master.startswith("local") else os.environ.get("SPARK_DRIVER_HOST", "127.0.0.1"),
        )
        .config("spark.driver.bindAddress", "127.0.0.1" if master.startswith("local") else "0.0.0.0")
    )
    if verbose:
        session = builder.getOrCreate()
    else:
        with jvm_output_hidden() as tail:
            try:
                session = builder.getOrCreate()
            except Exception as exc:
                shown = "\n".join(tail) or "(no output)"
                raise IngestError(
                    f"Spark did not start at {master} ({type(exc).__name__}). Its last output:\n{shown}\n"
                    "Run again with --verbose to see all of Spark's output"
                ) from exc
    if not master.startswith("local"):
        _ship_package(session.sparkContext)
    return session


@contextmanager
def jvm_output_hidden() -> Iterator[deque[str]]:
    """While the block starts the JVM, point file descriptors 1 and 2 at a pipe; the JVM keeps them for life.

    The JVM writes to the descriptors it inherits, not to Python's `sys.stderr`, so only redirecting the
    descriptors themselves hides its output. A daemon thread drains the pipe (a full pipe would block the
    JVM) and keeps the last lines for an error message. Outside the block this process writes as before.
    """
    reader, writer = os.pipe()
    tail: deque[str] = deque(maxlen=JVM_TAIL_LINES)

    def drain() -> None:
        with os.fdopen(reader, encoding="utf-8", errors="replace") as pipe:
            for line in pipe:
                tail.append(line.rstrip("\n"))

    threading.Thread(target=drain, name="spark-jvm-output", daemon=True).start()
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    os.dup2(writer, 1)
    os.dup2(writer, 2)
    os.close(writer)
    try:
        yield tail
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def _ship_package(context: Any) -> None:
    """Send this `rag` package to the executors as a zip, so a cluster runs the driver's code, not an old copy."""
    from pyspark import SparkFiles

    package = Path(__file__).resolve().parent
    folder = Path(SparkFiles.getRootDirectory())  # Spark's own scratch folder, removed when the session stops
    archive = shutil.make_archive(str(folder / "kafka_rag_code"), "zip", root_dir=package.parent, base_dir=package.name)
    context.addPyFile(archive)


@contextmanager
def spark_engine(
    master: str, arrow_batch_size: int = Settings.arrow_batch_size, *, verbose: bool = False
) -> Iterator[BuildEngine]:
    """Spark at `master` for the ingests run in the block (Spark's output shown if `verbose`).

    The token basis's fit and the job share one session, so the Python worker that loads the model for
    the fit keeps it for the embedding tasks. The session starts at its first use (a build with nothing
    to do never starts Spark) and stops when the block ends.
    """
    spark: Any = None

    def session(config: IngestConfig) -> Any:
        nonlocal spark
        if spark is None:
            spark = spark_session(master, config.threads_per_task, arrow_batch_size, verbose=verbose)
        return spark

    def run(
        files: list[SourceFile],
        config: IngestConfig,
        known_ids: frozenset[str],
        shards: Path,
        progress: Progress = no_progress,
    ) -> list[dict[str, Any]]:
        active = session(config)
        texts = _Texts(active.sparkContext.accumulator(0), active.sparkContext.accumulator(0))
        with _reporting_tasks(active.sparkContext, progress, texts), _py4j_logs_hidden(not verbose):
            return _run_job(active, files, config, known_ids, shards, texts)

    def fit(texts: list[str], config: IngestConfig) -> TokenBasis:
        with _py4j_logs_hidden(not verbose):
            return _fit_basis_job(session(config).sparkContext, texts, config)

    try:
        yield BuildEngine("spark", run, fit, master)
    finally:
        if spark is not None:
            spark.stop()


def _fit_basis_job(context: Any, texts: list[str], config: IngestConfig) -> TokenBasis:
    """`fit_basis` in one task: an executor's Python worker loads the model, not the driver (there it held
    ~670 MB for the whole build at 10^4 chunks, benchmarks/scale.py), and only the fitted basis comes back
    (~0.2 MB; the tokens it is fitted on are ~100 MB for the Kafka docs)."""
    return context.parallelize([texts], 1).map(lambda sample: fit_basis(sample, config)).collect()[0]


@contextmanager
def _py4j_logs_hidden(hidden: bool) -> Iterator[None]:
    """py4j reports a lost JVM connection (as when Ctrl-C stops Spark) with a traceback on the root logger:
    chatter of Spark's, not the command's, so it is hidden with the rest unless asked for."""
    import py4j

    package = str(Path(py4j.__file__).parent)

    def outside_py4j(record: logging.LogRecord) -> bool:
        return not record.pathname.startswith(package)

    root = logging.getLogger()
    if hidden:
        root.addFilter(outside_py4j)
    try:
        yield
    finally:
        root.removeFilter(outside_py4j)


@dataclass(frozen=True)
class _Texts:
    """Accumulators: texts the chunking stage left to embed (chunks and their units), and texts embedded."""

    planned: Any
    encoded: Any


@contextmanager
def _reporting_tasks(context: Any, progress: Progress, texts: _Texts, every_s: float = 1.0) -> Iterator[None]:
    """While the block runs, count its finished Spark tasks (status tracker) and embedded texts (accumulators).

    The job's last stage embeds; the stages before it read, chunk and spread the rows ("chunking").
    Accumulator updates arrive when a task ends, so the texts count moves a task at a time, and the
    total is known once chunking is done.
    """
    group = f"kafka-rag-ingest-{uuid.uuid4().hex}"  # a session may run several jobs (a rebuild after a model change)
    context.setJobGroup(group, "kafka-rag ingest")
    stopped = threading.Event()

    from py4j.protocol import Py4JError

    def watch() -> None:
        reported: dict[str, Count] = {}
        finished = False
        while not finished:
            finished = stopped.wait(every_s)  # one last report after the block, so the final count shows
            try:
                tracker = context.statusTracker()
                stage_ids = sorted(
                    stage_id
                    for job_id in tracker.getJobIdsForGroup(group)
                    if (job := tracker.getJobInfo(job_id)) is not None
                    for stage_id in job.stageIds
                )
                stages = [(stage_id, tracker.getStageInfo(stage_id)) for stage_id in stage_ids]
                planned, embedded = texts.planned.value, texts.encoded.value
            except Py4JError:  # the JVM went away: the job itself fails and says why
                return
            if not stages:
                continue
            last = stage_ids[-1]
            chunking = [info for stage_id, info in stages if info and stage_id != last]
            embedding = [info for stage_id, info in stages if info and stage_id == last]
            chunked = sum(s.numCompletedTasks for s in chunking), sum(s.numTasks for s in chunking)
            tasks = sum(s.numCompletedTasks for s in embedding), sum(s.numTasks for s in embedding)
            counts = [
                Count("chunking", *chunked, "tasks"),
                Count(
                    "embedding",
                    embedded,
                    planned if chunked[1] and chunked[0] == chunked[1] else 0,
                    "texts",
                    detail=f"{tasks[0]}/{tasks[1]} tasks",
                ),
            ]
            for count in counts:
                if (count.total or count.done) and reported.get(count.stage) != count:
                    progress(count)
                    reported[count.stage] = count

    watcher = threading.Thread(target=watch, name="spark-progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stopped.set()
        watcher.join()


def _run_job(
    spark: Any,
    files: list[SourceFile],
    config: IngestConfig,
    known_ids: frozenset[str],
    shards: Path,
    texts: _Texts,
) -> list[dict[str, Any]]:
    import pandas as pd

    parallelism = max(spark.sparkContext.defaultParallelism, 1)
    # Biggest files first, dealt round-robin, so no partition gets all the large documents.
    ordered = sorted(files, key=lambda f: -f.size)
    rows = [(f.source_path, f.path, i % parallelism) for i, f in enumerate(ordered)]
    frame = spark.createDataFrame(rows, "source_path string, path string, slot int")
    frame = frame.repartition(min(parallelism, len(files)), "slot")
    known = spark.sparkContext.broadcast(known_ids)

    def chunk_partition(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        def files_in(batch: pd.DataFrame):
            for source_path, path in zip(batch["source_path"], batch["path"], strict=True):
                with open(path, "rb") as handle:
                    yield source_path, handle.read()

        for batch in batches:
            rows = list(chunk_files(files_in(batch), config))
            pending = [r for r in rows if r["kind"] == "chunk" and r["chunk_id"] not in known.value]
            texts.planned.add(planned_texts(pending, config))
            yield _frame(rows)

    def embed_partition(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        def rows_in() -> Iterator[dict[str, Any]]:
            for batch in batches:
                for record in batch.to_dict("records"):
                    yield _from_pandas(record)

        embedded = embed_rows(rows_in(), config, known.value, on_encoded=texts.encoded.add)
        # One frame per encode round, not per partition: a task holds one batch of vectors, whatever the corpus.
        while frame_rows := list(islice(embedded, ROWS_PER_ENCODE)):
            yield _frame(frame_rows)

    chunked = frame.mapInPandas(chunk_partition, ROW_SCHEMA)
    # Spread the chunks evenly over the cores before the expensive stage, in a few tasks per core so that
    # a slow task does not leave a core idle at the end (each worker loads the model once, not per task).
    balanced = chunked.repartition(parallelism * EMBED_TASKS_PER_CORE)
    embedded = balanced.mapInPandas(embed_partition, ROW_SCHEMA)
    # Executors write; the one job runs once. The driver then reads back only the rows without vectors.
    # Small row groups, so the driver's merge, which holds a batch of each shard, never buffers a big one.
    writer = embedded.sortWithinPartitions("source_path", "start", "chunk_id").write
    writer.option("parquet.block.size", SHARD_ROW_GROUP_BYTES).parquet(shards.resolve().as_uri())
    others = pq.read_table(shards, columns=OTHER_FIELDS, filters=[("kind", "!=", "chunk")])
    return [_clean_row(r) for r in others.to_pylist()]


def _frame(rows: Iterable[dict[str, Any]]) -> Any:
    import pandas as pd

    records = [{name: row.get(name) for name in ROW_FIELDS} for row in rows]
    return pd.DataFrame(records, columns=list(ROW_FIELDS), dtype=object)


_INTEGER_FIELDS = ("start", "end", "chunks", "dimension")


def _from_pandas(record: dict[str, Any]) -> dict[str, Any]:
    """Undo pandas' conversions (arrays → lists, nullable ints → floats, nulls → NaN)."""
    row: dict[str, Any] = {}
    for key, value in record.items():
        if hasattr(value, "tolist"):
            value = value.tolist()
        elif isinstance(value, float) and value != value:
            value = None
        if key in _INTEGER_FIELDS and value is not None:
            value = int(value)
        row[key] = value
    return row


def _clean_row(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if v is not None}
