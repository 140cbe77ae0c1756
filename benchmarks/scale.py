"""Scale: ingest and serve a synthetic corpus of N chunks recombined from the Kafka docs (issue 12).

    .venv/bin/python benchmarks/scale.py --chunks 10000 --half ingest [--stand-in-model]
    .venv/bin/python benchmarks/scale.py --chunks 1000000 --half serve [--source-index DIR]

The corpus: the Kafka docs' chunks, recombined and perturbed, deterministic by `--seed`: each
synthetic section takes a source chunk, rotates its sentences, renumbers its numbers and gets a
heading of its own; twenty sections make a Markdown document.

`--half ingest` writes that corpus as files and runs `kafka-rag ingest --master local[*]` on it in a
new process: chunks/s of the embedding stage (in total and per core), the peak RSS (VmHWM, sampled
until it exits) of the driver, of the Spark JVM and of the largest Python worker, the driver's peak
anonymous memory (sampled 4 times a second; its RSS also counts pages of the files it reads and
writes, which the kernel can drop), the index size on disk. `--stand-in-model` embeds with the
packaged MiniLM cut to its first transformer layer (same tokenizer and dimension, ~6x less compute,
on the torch backend): the path every build takes, at a cost that lets 10^5 chunks run in minutes on
2 cores.

`--half serve` skips embedding: it writes an index version straight from the corpus with vectors
from a cheap deterministic stand-in (each source chunk's and unit's real vector from a built Kafka
docs index, plus Gaussian noise, renormalised: cosine ~0.9 to the source, so the set keeps the
corpus' clusters; each source chunk's token codes as they are, in that index's token basis), through
the same `VersionWriter` an ingest uses. Then, in a fresh process, an `Assistant` answers the golden
questions of both files twice: ask p50/p95 over both passes and of each (the first reads the index
from disk unless the page cache holds it; the second finds the pages the first touched in the cache,
as a server that has run for a while does), and the process' RSS (what is anonymous memory, what is
mapped files shared with other processes). And in this process the
recall@10 of the approximate chunk and unit indexes against exact search, for the golden
questions embedded with the real model. The probe also times the alternative to storing unit
vectors: embedding the evidence units of each question's top passages at query time.

Figures are wall-clock on a shared machine: check `uptime` first.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag.settings import DEFAULT_MODEL

REPO = Path(__file__).resolve().parents[1]
KAFKA_DOCS = REPO.parent / "shared" / "corpora" / "kafka-docs"
WORK = Path(tempfile.gettempdir()) / "kafka-rag-scale"
GOLDEN = (REPO / "evals" / "golden.jsonl", REPO / "evals" / "golden_kafka_docs.jsonl")
SECTIONS_PER_DOCUMENT = 20
QUERY_TIME_PASSAGES = 10  # the candidates whose units the answer step scores
NOISE = 0.025  # per dimension, for 384 dimensions: cosine ~0.9 between a stand-in vector and its source
_NUMBER = re.compile(r"\b\d+\b")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@dataclass(frozen=True)
class Section:
    source: int  # the source chunk's row
    heading: str
    text: str


def source_chunks(index_dir: Path | None) -> list[tuple[tuple[str, ...], str]]:
    """(section path, text) of every Kafka docs chunk: from a built index, else chunked here (no embedding)."""
    if index_dir is not None:
        from rag.index_store import StoredVersion, current_version

        version = StoredVersion.open(index_dir / "versions" / str(current_version(index_dir)))
        return [
            (tuple(path), text)
            for path, text in zip(version.column("section_path"), version.column("text"), strict=True)
        ]
    from rag.chunking import chunk_document
    from rag.documents import SUPPORTED_SUFFIXES, iter_source_files, load_document
    from rag.errors import LoaderError
    from rag.settings import Settings

    chunks: list[tuple[tuple[str, ...], str]] = []
    for path, relative in iter_source_files(KAFKA_DOCS):
        if path.suffix.lower() not in SUPPORTED_SUFFIXES:
            continue
        try:
            document = load_document(path.read_bytes(), relative)
        except LoaderError:
            continue
        for chunk in chunk_document(document, Settings.chunk_size, Settings.chunk_overlap):
            chunks.append((chunk.section_path, chunk.text))
    return chunks


def synthetic_sections(sources: list[tuple[tuple[str, ...], str]], count: int, seed: int) -> Iterator[Section]:
    """`count` perturbed recombinations of the source chunks, deterministic by `seed`."""
    rng = np.random.default_rng(seed)
    for number in range(count):
        source = int(rng.integers(len(sources)))
        path, text = sources[source]
        sentences = _SENTENCE_END.split(text)
        turn = int(rng.integers(len(sentences)))
        rotated = " ".join(sentences[turn:] + sentences[:turn])
        renumbered = _NUMBER.sub(lambda _: str(int(rng.integers(1, 10_000))), rotated)
        yield Section(source, f"{path[-1] if path else 'Section'} (variant {number})", renumbered)


# ------------------------------------------------------------------------------------------- ingest half


def write_corpus(sections: Iterator[Section], folder: Path) -> int:
    """Markdown documents of `SECTIONS_PER_DOCUMENT` sections each; returns the number of files."""
    folder.mkdir(parents=True, exist_ok=True)
    files = 0
    batch: list[Section] = []

    def flush() -> None:
        nonlocal files
        body = "".join(f"## {s.heading}\n\n{s.text}\n\n" for s in batch)
        (folder / f"doc-{files:06d}.md").write_text(f"# Synthetic Kafka notes {files}\n\n{body}", encoding="utf-8")
        files += 1
        batch.clear()

    for section in sections:
        batch.append(section)
        if len(batch) == SECTIONS_PER_DOCUMENT:
            flush()
    if batch:
        flush()
    return files


def stand_in_model(folder: Path) -> Path:
    """The packaged MiniLM cut to its first transformer layer, saved as a local sentence-transformers model."""
    if (folder / "modules.json").is_file():
        return folder
    from sentence_transformers import SentenceTransformer

    from rag.embedding import resolve_model

    model = SentenceTransformer(resolve_model(DEFAULT_MODEL), device="cpu")
    encoder = model[0].auto_model
    encoder.encoder.layer = encoder.encoder.layer[:1]
    encoder.config.num_hidden_layers = 1
    model.save(str(folder))
    return folder


def peak_rss_mb(pid: int) -> float:
    """The process' peak resident set (VmHWM), in MB; 0 once it has exited."""
    return status_mb(pid, "VmHWM")


def status_mb(pid: int, field: str) -> float:
    """A memory field of /proc/PID/status (VmHWM, RssAnon, ...), in MB; 0 once the process has exited."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    match = re.search(rf"{field}:\s+(\d+) kB", status)
    return int(match.group(1)) / 1024 if match else 0.0


def descendants(root: int) -> list[tuple[int, str]]:
    """(pid, command line) of every process under `root`: the Spark JVM and its Python workers."""
    parents: dict[int, int] = {}
    commands: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    found: list[tuple[int, str]] = []
    for pid in parents:
        ancestor = parents.get(pid)
        while ancestor and ancestor != root:
            ancestor = parents.get(ancestor)
        if ancestor == root:
            found.append((pid, commands.get(pid, "")))
    return found


def ingest_half(args: argparse.Namespace) -> dict[str, Any]:
    work = args.work / f"ingest-{args.chunks}"
    shutil.rmtree(work, ignore_errors=True)
    corpus, index_dir = work / "corpus", work / "index"
    sources = source_chunks(None)
    files = write_corpus(synthetic_sections(sources, args.chunks, args.seed), corpus)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_RAG_")}
    env.setdefault("HF_HUB_OFFLINE", "1")
    if args.stand_in_model:
        env["KAFKA_RAG_MODEL"] = str(stand_in_model(args.work / "stand-in-model"))
        env["KAFKA_RAG_EMBED_BACKEND"] = "torch"  # the saved cut model's pooling config is sentence-transformers' own
    command = [str(Path(sys.executable).parent / "kafka-rag"), "ingest", str(corpus), "--index", str(index_dir)]
    command += ["--master", args.master, "--json"]
    report, figures = measured_ingest(command, env)
    stage = report["stage_seconds"]["chunk_and_embed"]
    cores = os.cpu_count() or 1
    result = {
        "half": "ingest",
        "chunks": report["chunks"],
        "files": files,
        "model": "stand-in (MiniLM, first layer)" if args.stand_in_model else DEFAULT_MODEL,
        **figures,
        "embed_stage_s": stage,
        "chunks_per_s": round(report["chunks"] / stage, 1),
        "chunks_per_s_per_core": round(report["chunks"] / stage / cores, 1),
        "index_mb": round(folder_mb(index_dir), 1),
        "stage_seconds": report["stage_seconds"],
    }
    if args.reingest:
        change_corpus(corpus)
        report, figures = measured_ingest(command, env)
        result["reingest"] = {
            "embedded": report["embedded"],
            "reused": report["reused"],
            **figures,
            "stage_seconds": report["stage_seconds"],
        }
    return result


def change_corpus(corpus: Path) -> None:
    """What a team's day does to a corpus: one document edited (a section added), one new document."""
    first = sorted(corpus.glob("*.md"))[0]
    added = "## Runbook note\n\nRestart the consumer after raising max.poll.interval.ms, then watch records-lag-max.\n"
    first.write_text(first.read_text(encoding="utf-8") + "\n" + added, encoding="utf-8")
    (corpus / "doc-new.md").write_text("# New runbook\n\n" + added, encoding="utf-8")


def measured_ingest(command: list[str], env: dict[str, str]) -> tuple[dict[str, Any], dict[str, float]]:
    """Run one `kafka-rag ingest --json` and sample its processes' memory: (its report, the figures)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = anonymous_peak = jvm_peak = worker_peak = 0.0

    def sample() -> None:
        nonlocal peak, anonymous_peak, jvm_peak, worker_peak
        ticks = 0
        while process.poll() is None:
            peak = max(peak, peak_rss_mb(process.pid))
            anonymous_peak = max(anonymous_peak, status_mb(process.pid, "RssAnon"))
            if ticks % 4 == 0:  # the process tree once a second
                for pid, command in descendants(process.pid):
                    if "pyspark.daemon" in command or "pyspark.worker" in command:
                        worker_peak = max(worker_peak, peak_rss_mb(pid))
                    elif "java" in command.split(" ", 1)[0]:
                        jvm_peak = max(jvm_peak, peak_rss_mb(pid))
            ticks += 1
            time.sleep(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = process.communicate()
    sampler.join()
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"ingest failed ({process.returncode}): {stderr.strip()[-2000:]}")
    return json.loads(stdout), {
        "wall_s": round(wall, 1),
        "driver_peak_rss_mb": round(peak, 0),
        "driver_peak_anonymous_mb": round(anonymous_peak, 0),  # sampled: RSS less mapped files (page cache)
        "jvm_peak_rss_mb": round(jvm_peak, 0),
        "python_worker_peak_rss_mb": round(worker_peak, 0),
    }


def folder_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


# ------------------------------------------------------------------------------------------- serve half


def serve_half(args: argparse.Namespace) -> dict[str, Any]:
    from rag.index_store import StoredVersion, VersionWriter, current_version, read_manifest
    from rag.ingest import IngestConfig
    from rag.settings import Settings
    from rag.units import unit_texts

    index_dir = args.work / f"serve-{args.chunks}" / "index"
    if args.reuse and (index_dir / "CURRENT").is_file():
        return serve_figures(index_dir, build_s=None)
    source_dir = args.source_index or build_source_index(args.work / "kafka-docs-index")
    source = StoredVersion.open(source_dir / "versions" / str(current_version(source_dir)))
    source_manifest = read_manifest(source_dir)
    assert source_manifest is not None
    sections = source_chunks(source_dir)
    identifiers = source.column("identifiers")
    source_vectors = [
        {"vector": row["vector"], "unit_vectors": row["unit_vectors"], "token_codes": row["token_codes"]}
        for row in source.rows()
    ]
    shutil.rmtree(index_dir.parent, ignore_errors=True)
    rng = np.random.default_rng(args.seed + 1)
    started = time.perf_counter()
    # Each section keeps its source chunk's token codes, in the source's basis (the feature's cost, not its value).
    with VersionWriter(index_dir, flat_max=args.flat_max, token_basis=source.token_basis()) as writer:
        for number, section in enumerate(synthetic_sections(sections, args.chunks, args.seed)):
            vectors = source_vectors[section.source]
            document = number // SECTIONS_PER_DOCUMENT
            start = (number % SECTIONS_PER_DOCUMENT) * 1000
            path = [f"Synthetic Kafka notes {document}", section.heading]
            # One stand-in vector per evidence unit of the new text, drawn from the source's units in turn.
            units = len(unit_texts(section.text, path))
            source_units = vectors["unit_vectors"] if len(vectors["unit_vectors"]) else vectors["vector"][None, :]
            unit_vectors = source_units[np.arange(units) % len(source_units)]
            writer.add(
                {
                    "chunk_id": f"s{number:08d}",
                    "doc_id": f"doc-{document:06d}",
                    "source_path": f"doc-{document:06d}.md",
                    "title": f"Synthetic Kafka notes {document}",
                    "section_path": path,
                    "text": section.text,
                    "identifiers": identifiers[section.source],
                    "start": start,
                    "end": start + len(section.text),
                    "url": "",
                    "continues_code": False,
                    "vector": _perturbed(vectors["vector"][None, :], rng)[0],
                    "unit_vectors": _perturbed(unit_vectors, rng),
                    "token_codes": vectors["token_codes"],
                }
            )
        manifest = {
            "model": source_manifest["model"],
            "chunker": IngestConfig.from_settings(Settings()).chunker(),  # units built by this code
            "counts": {"documents": args.chunks // SECTIONS_PER_DOCUMENT, "chunks": writer.rows},
            "files": [],
            "skipped": [],
            "engine": "benchmarks/scale.py stand-in vectors",
        }
        writer.publish(manifest)
    return serve_figures(index_dir, build_s=time.perf_counter() - started)


def serve_figures(index_dir: Path, build_s: float | None) -> dict[str, Any]:
    from rag.index_store import read_manifest

    manifest = read_manifest(index_dir)
    assert manifest is not None
    figures: dict[str, Any] = {
        "half": "serve",
        "chunks": manifest["vectors"]["chunks"],
        "units": manifest["vectors"]["units"],
        "build_s": round(build_s, 1) if build_s is not None else "reused",
        "index_mb": round(folder_mb(index_dir), 1),
        "faiss": manifest["faiss"]["type"],
        "units_faiss": manifest["units_faiss"]["type"],
    }
    figures.update(recall_at_10(index_dir))
    figures.update(serving_probe(index_dir))
    return figures


def _perturbed(vectors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    noisy = vectors + rng.normal(scale=NOISE, size=vectors.shape).astype(np.float32)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


def build_source_index(index_dir: Path) -> Path:
    """A Kafka docs index with the real model (local engine), reused across runs."""
    from rag.index_store import current_version

    if current_version(index_dir) is None:
        command = [str(Path(sys.executable).parent / "kafka-rag"), "ingest", str(KAFKA_DOCS), "--index", str(index_dir)]
        subprocess.run([*command, "--no-spark", "--quiet"], cwd=REPO, check=True)
    return index_dir


def golden_questions() -> list[str]:
    from evals.golden import load_golden

    return [item.question for path in GOLDEN for item in load_golden(path)]


def recall_at_10(index_dir: Path) -> dict[str, Any]:
    """Approximate against exact top 10, for the chunk index and the unit index, with the real query vectors."""
    from rag.embedding import load_embedder
    from rag.index_store import load_index

    loaded = load_index(index_dir)
    embedder = load_embedder(loaded.manifest["model"]["name"])
    queries = embedder.encode(golden_questions())
    figures: dict[str, Any] = {}
    for name, search in (("chunks", loaded.dense), ("units", loaded.unit_search)):
        exact = exact_top(search.vectors, queries, 10)
        timings, hits = [], []
        for query, truth in zip(queries, exact, strict=True):
            started = time.perf_counter()
            found = search.search(query, 10)
            timings.append((time.perf_counter() - started) * 1000)
            hits.append(len(set(found.tolist()) & set(truth.tolist())) / 10)
        figures[f"recall@10_{name}"] = round(float(np.mean(hits)), 3)
        figures[f"search_ms_p50_{name}"] = round(statistics.median(timings), 2)
    return figures


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int, block: int = 262_144) -> np.ndarray:
    """Exact top-k rows per query by inner product, reading the (memory-mapped) vectors a block at a time."""
    best_scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_rows = np.zeros((len(queries), k), dtype=np.int64)
    for start in range(0, len(vectors), block):
        scores = queries @ np.asarray(vectors[start : start + block], dtype=np.float32).T
        rows = np.arange(start, start + scores.shape[1])
        merged_scores = np.concatenate([best_scores, scores], axis=1)
        merged_rows = np.concatenate([best_rows, np.broadcast_to(rows, scores.shape)], axis=1)
        top = np.argsort(-merged_scores, axis=1)[:, :k]
        best_scores = np.take_along_axis(merged_scores, top, axis=1)
        best_rows = np.take_along_axis(merged_rows, top, axis=1)
    return best_rows


def serving_probe(index_dir: Path) -> dict[str, Any]:
    """Ask p50/p95 and the RSS of a fresh serving process (`--probe`)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--probe", str(index_dir)]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"serving probe failed: {result.stderr.strip()[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def probe(index_dir: Path) -> None:
    """In a fresh process: load an Assistant, answer every golden question twice, print figures as JSON."""
    from rag import Assistant, Settings

    started = time.perf_counter()
    assistant = Assistant.from_settings(Settings.from_env(index_dir=index_dir, answerer="extractive"))
    load_s = time.perf_counter() - started
    loaded_rss = memory()
    questions = golden_questions()
    for question in questions[:5]:
        assistant.ask(question)
    passes: list[list[float]] = [[], []]  # the first pass reads the index from disk; the second from the page cache
    for timings in passes:
        for question in questions:
            started = time.perf_counter()
            assistant.ask(question)
            timings.append((time.perf_counter() - started) * 1000)
    served_rss = memory()
    # The alternative to storing unit vectors: embed the units of the top passages for each question.
    from rag.embedding import load_embedder
    from rag.units import unit_texts

    embedder = load_embedder(Settings.from_env(index_dir=index_dir).model)
    on_the_fly = []
    for question in questions[:20]:
        passages = assistant.search(question, k=QUERY_TIME_PASSAGES).passages
        texts = [t for passage in passages for t in unit_texts(passage.text, passage.section_path)]
        started = time.perf_counter()
        embedder.encode(texts)
        on_the_fly.append((time.perf_counter() - started) * 1000)
    figures = {
        "load_s": round(load_s, 1),
        **_percentiles("ask", [t for timings in passes for t in timings]),
        **_percentiles("ask_first_pass", passes[0]),
        **_percentiles("ask_second_pass", passes[1]),
        "rss_loaded_mb": loaded_rss["VmRSS"],
        "rss_served_mb": served_rss["VmRSS"],
        "rss_anonymous_mb": served_rss["RssAnon"],
        "rss_mapped_files_mb": served_rss["RssFile"],
        "rss_peak_mb": served_rss["VmHWM"],
        f"embed_units_of_top_{QUERY_TIME_PASSAGES}_at_query_time_p50_ms": round(statistics.median(on_the_fly), 1),
    }
    print(json.dumps(figures))


def _percentiles(name: str, timings: list[float]) -> dict[str, float]:
    ordered = sorted(timings)
    return {
        f"{name}_p50_ms": round(ordered[len(ordered) // 2], 1),
        f"{name}_p95_ms": round(ordered[int(len(ordered) * 0.95)], 1),
    }


def memory() -> dict[str, float]:
    status = Path("/proc/self/status").read_text()
    return {
        key: round(int(value) / 1024, 0)
        for key, value in re.findall(r"^(VmRSS|RssAnon|RssFile|VmHWM):\s+(\d+) kB", status, re.M)
    }


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--probe":
        probe(Path(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, required=True)
    parser.add_argument("--half", choices=("ingest", "serve"), required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--stand-in-model", action="store_true")
    parser.add_argument("--reingest", action="store_true", help="then edit one file, add one, and ingest again")
    parser.add_argument("--source-index", type=Path, help="a built Kafka docs index (default: build one in --work)")
    parser.add_argument("--flat-max", type=int, default=50_000)
    parser.add_argument("--reuse", action="store_true", help="measure the serve index a previous run left")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    figures = ingest_half(args) if args.half == "ingest" else serve_half(args)
    print(json.dumps(figures, indent=2))
    with (args.work / "results.jsonl").open("a", encoding="utf-8") as log:
        log.write(json.dumps({"at": time.strftime("%Y-%m-%dT%H:%M:%S"), **figures}) + "\n")


if __name__ == "__main__":
    main()
