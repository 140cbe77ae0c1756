"""`kafka-rag eval`: score an index and answerer against golden files, report, gate on a baseline.

Only the public service API is used: `ask_and_search` gives the answer (its metrics and latency, the
question's embedding included) and, from the same retrieval, the 10 passages of the ranking metrics. Follow-up
items are searched a second time with the raw question alone. Every metric is reported for all questions and
for each part of the tune/test split (`evals.golden.part_of`); the gate compares the all-questions figures.
Exit codes: 0 done, 1 a gated metric regressed against `--baseline`, 2 bad input.

The CI gate's baselines are eval runs committed as they are (run from the repository root):

    kafka-rag ingest seeds --index /tmp/seeds-index
    kafka-rag eval --index /tmp/seeds-index --out /tmp/seeds-run && cp /tmp/seeds-run/metrics.json evals/baseline.json

    kafka-rag ingest ../shared/corpora/kafka-docs --index /tmp/kd-index
    kafka-rag eval --corpus ../shared/corpora/kafka-docs --golden evals/golden_kafka_docs.jsonl \
        --index /tmp/kd-index --out /tmp/kd-run && cp /tmp/kd-run/metrics.json evals/baseline_kafka_docs.json
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import multiprocessing
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from evals.export import FORMATS, RunOutput, export
from evals.golden import PARTS, GoldenItem, load_golden
from evals.metrics import (
    GATE_TOLERANCE,
    GATED,
    RANK_DEPTH,
    QuestionScore,
    citation_ok,
    facts_found,
    flips,
    grade,
    regressions,
    summarise,
    summarise_parts,
)
from evals.report import MAIN_METRICS, build_tables, fmt, html_report, markdown_report, modes_of, part_columns
from rag import (
    ANSWERERS,
    RETRIEVAL_MODES,
    Answer,
    Assistant,
    EvalError,
    GoldenFileError,
    KafkaRagError,
    SearchResult,
    Settings,
)

DEFAULT_GOLDEN = Path("evals/golden.jsonl")
SPLIT_RULE = "part_of(id): first byte of sha256(id) even -> tune, odd -> test"
SETTINGS_RECORDED = (
    "retrieval_mode",
    "top_k",
    "candidates",
    "rrf_k",
    "dense_weight",
    "bm25_weight",
    "identifier_weight",
    "sentence_weight",
    "max_per_section",
    "answerer",
    "max_units_fact",
    "max_units_troubleshoot",
    "unit_relative_cutoff",
    "unit_min_novelty",
    "unit_overlap_weight",
    "unit_identifier_weight",
    "unit_rank_weight",
    "unit_neighbour_weight",
    "unit_new_passage_weight",
    "unit_echo_weight",
    "unit_echo_share",
    "unit_action_weight",
    "llm_provider",
    "llm_model",
)


@dataclass(frozen=True)
class Trial:
    """One golden item put through the service under one retrieval mode."""

    item: GoldenItem
    mode: str
    search: SearchResult  # the system's query (rewritten for follow-ups)
    raw_search: SearchResult | None  # follow-ups only: the raw question without history
    answer: Answer
    latency_ms: float


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `kafka-rag eval` options; `rag.cli` and `python -m evals.runner` share them."""
    parser.add_argument(
        "--golden",
        nargs="+",
        type=Path,
        default=[DEFAULT_GOLDEN],
        metavar="FILE",
        help=f"golden JSONL files (default {DEFAULT_GOLDEN})",
    )
    parser.add_argument("--index", type=Path, metavar="DIR", help="index to score (default: settings, index/)")
    parser.add_argument(
        "--corpus",
        type=Path,
        default=Path("seeds"),
        metavar="DIR",
        help="corpus root the golden sources are relative to (default seeds)",
    )
    parser.add_argument("--answerer", choices=ANSWERERS, help="default: settings (extractive)")
    parser.add_argument(
        "--retrieval",
        nargs="+",
        choices=RETRIEVAL_MODES,
        metavar="MODE",
        help="dense, bm25 and/or hybrid; several are scored side by side (default: settings)",
    )
    parser.add_argument("--k", type=_positive, default=5, help="passages given to the answerer (default 5)")
    parser.add_argument(
        "--own-history",
        action="store_true",
        help="ask each follow-up after the assistant's own answers to the earlier turns, not after the golden "
        "file's assistant turns: follow-ups as a user meets them, a wrong first answer included",
    )
    parser.add_argument(
        "--jobs",
        type=_positive,
        default=1,
        help="processes asking the questions, each with its own assistant (default 1); the same answers, and "
        "latencies measured under that concurrency",
    )
    parser.add_argument("--out", type=Path, metavar="DIR", help="output folder (default evals/runs/<timestamp>/)")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="FILE",
        help="metrics.json of an earlier run; exit 1 when a gated metric regresses",
    )
    parser.add_argument("--json", action="store_true", help="print metrics.json to stdout")
    parser.add_argument(
        "--export",
        nargs="+",
        choices=FORMATS,
        default=[],
        metavar="FORMAT",
        help="also write the golden set and this run as ragas and/or langsmith datasets",
    )


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def run(args: argparse.Namespace) -> int:
    """Score, write the reports, compare with the baseline; returns the exit code."""
    log = sys.stderr if args.json else sys.stdout
    started = datetime.now()
    try:
        items = load_items(args.golden, args.corpus)
        baseline = _read_baseline(args.baseline) if args.baseline else None
        settings = Settings.from_env(index_dir=args.index, answerer=args.answerer)
        assistant = Assistant.from_settings(settings)
        modes = list(dict.fromkeys(args.retrieval or [settings.retrieval_mode]))
        print(f"scoring {len(items)} questions with {', '.join(modes)} retrieval", file=sys.stderr)
        if args.jobs > 1:  # each worker warms its own assistant up
            trials = evaluate_in_processes(settings, items, modes, args.k, args.jobs, own_history=args.own_history)
        else:
            assistant.ask(items[0].question, items[0].history, top_k=args.k, retrieval=modes[0])  # warm-up
            trials = {mode: evaluate(assistant, items, mode, args.k, own_history=args.own_history) for mode in modes}
    except KafkaRagError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    scores = {mode: [score(t, args.k) for t in mode_trials] for mode, mode_trials in trials.items()}
    doc = metrics_document(scores, _config(args, settings, modes, started), assistant.status.to_dict(), settings)
    out_dir = args.out or Path("evals/runs") / started.strftime("%Y%m%d-%H%M%S")
    write_outputs(out_dir, doc, scores, trials, args.export)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        _print_summary(doc, modes, log)
    print(f"reports in {out_dir}/", file=log)
    return gate(baseline, doc, str(args.baseline), log) if baseline is not None else 0


def load_items(paths: Sequence[Path], corpus: Path) -> list[GoldenItem]:
    """All golden files, validated against the corpus; ids must be unique across files."""
    items: list[GoldenItem] = []
    seen: dict[str, Path] = {}
    for path in paths:
        for item in load_golden(path, corpus_root=corpus):
            if item.id in seen:
                raise GoldenFileError(
                    str(path),
                    _line_of(path, item.id),
                    "id",
                    f"id '{item.id}' is also used in {seen[item.id]}; ids must be unique",
                )
            seen[item.id] = path
            items.append(item)
    if not items:
        raise GoldenFileError(str(paths[0]), 0, "file", "no golden items; add at least one JSON line")
    return items


def _line_of(path: Path, item_id: str) -> int:
    lines = enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
    return next((n for n, line in lines if line.strip() and json.loads(line)["id"] == item_id), 0)


def evaluate(
    assistant: Assistant, items: Sequence[GoldenItem], mode: str, k: int, *, own_history: bool = False
) -> list[Trial]:
    """Search and answer every item under one retrieval mode; with `own_history`, each follow-up after the
    assistant's own answers to its earlier turns (`answered_history`)."""
    trials = []
    for item in items:
        if own_history and item.history:
            item = dataclasses.replace(item, history=answered_history(assistant, item.history, mode, k))
        raw = None
        if item.history:
            raw = assistant.search(item.question, item.history, k=RANK_DEPTH, retrieval=mode, rewrite=False)
        start = time.perf_counter()
        answer, search = assistant.ask_and_search(
            item.question, item.history, retrieval=mode, top_k=k, depth=RANK_DEPTH
        )
        latency = (time.perf_counter() - start) * 1000
        trials.append(Trial(item, mode, search, raw, answer, latency))
    return trials


def evaluate_in_processes(
    settings: Settings, items: Sequence[GoldenItem], modes: Sequence[str], k: int, jobs: int, *, own_history: bool
) -> dict[str, list[Trial]]:
    """`evaluate` for each mode, the items dealt round-robin to `jobs` processes that each load their own
    assistant: one process asks on one core, its Python holding the interpreter lock between the model's and
    FAISS's calls. Spawned, not forked: a fork of a process whose model and thread pools are loaded can hang."""
    slices = [list(range(start, len(items), jobs)) for start in range(jobs)]
    warm_up = (items[0].question, tuple(items[0].history), k, modes[0])
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_start_worker, initargs=(settings, warm_up)) as pool:
        futures = {
            (mode, number): pool.submit(_evaluate_in_worker, [items[i] for i in rows], mode, k, own_history)
            for mode in modes
            for number, rows in enumerate(slices)
        }
        trials: dict[str, list[Trial]] = {}
        for mode in modes:
            placed: dict[int, Trial] = {}
            for number, rows in enumerate(slices):
                placed.update(zip(rows, futures[mode, number].result(), strict=True))
            trials[mode] = [placed[i] for i in range(len(items))]
    return trials


_worker_assistant: Assistant | None = None  # the assistant of an `evaluate_in_processes` worker process


def _start_worker(settings: Settings, warm_up: tuple[str, tuple[Mapping[str, str], ...], int, str]) -> None:
    global _worker_assistant
    _worker_assistant = Assistant.from_settings(settings)
    question, history, k, mode = warm_up
    _worker_assistant.ask(question, history, top_k=k, retrieval=mode)


def _evaluate_in_worker(items: list[GoldenItem], mode: str, k: int, own_history: bool) -> list[Trial]:
    assert _worker_assistant is not None, "the worker's initializer loads its assistant"
    return evaluate(_worker_assistant, items, mode, k, own_history=own_history)


def answered_history(
    assistant: Assistant, history: Sequence[Mapping[str, str]], mode: str, k: int
) -> tuple[dict[str, str], ...]:
    """`history` with each assistant turn that follows a user turn replaced by the assistant's own answer to
    that turn, asked after the turns before it (themselves answered so). The golden file's assistant turns are
    ideal answers, which carry the right subject into a follow-up whether or not the assistant found it."""
    turns: list[dict[str, str]] = []
    for turn in history:
        if turn.get("role") == "assistant" and turns and turns[-1].get("role") == "user":
            answer = assistant.ask(turns[-1]["content"], tuple(turns[:-1]), retrieval=mode, top_k=k)
            turn = {**turn, "content": answer.text}
        turns.append(dict(turn))
    return tuple(turns)


def score(trial: Trial, k: int) -> QuestionScore:
    """Grade the ranked passages and the answer of one trial."""
    item = trial.item

    def grades(result: SearchResult | None) -> tuple[int, ...]:
        if result is None:
            return ()
        return tuple(grade(p.text, p.source_path, item.evidence, item.sources) for p in result.passages)

    answer = trial.answer
    return QuestionScore(
        id=item.id,
        tags=item.tags,
        sources=item.sources,
        answerable=item.answerable,
        followup=bool(item.history),
        grades=grades(trial.search),
        raw_grades=grades(trial.raw_search),
        facts_found=facts_found("" if answer.abstained else answer.text, item.facts),
        citations_ok=tuple(citation_ok(c.passage.text, c.quotes, item.evidence) for c in answer.citations),
        abstained=answer.abstained,
        latency_ms=trial.latency_ms,
        context_chars=sum(len(p.text) for p in trial.search.passages[:k]),
        answer_chars=len(answer.text),
        cited_sources=tuple(c.passage.source_path for c in answer.citations),
        cautioned=answer.cautioned,
    )


def question_row(trial: Trial, s: QuestionScore) -> dict[str, Any]:
    """One line of per_question.jsonl."""
    item, answer = trial.item, trial.answer
    found = [group[0] for group, ok in zip(item.facts, s.facts_found, strict=True) if ok]
    missed = [group[0] for group, ok in zip(item.facts, s.facts_found, strict=True) if not ok]
    return {
        "id": item.id,
        "part": item.part,
        "mode": trial.mode,
        "question": item.question,
        "history_turns": len(item.history),
        "tags": list(item.tags),
        "answerable": item.answerable,
        "sources": list(item.sources),
        "query": trial.search.query,
        "rank": s.rank,
        "doc_rank": s.doc_rank,
        "raw_rank": s.raw_rank,
        "answer": answer.text,
        "abstained": answer.abstained,
        "cautioned": answer.cautioned,
        "facts_found": found,
        "facts_missed": missed,
        "key_fact_recall": s.key_fact_recall,
        "citations": [
            {"marker": c.marker, "source_path": c.passage.source_path, "heading": c.passage.heading, "ok": ok}
            for c, ok in zip(answer.citations, s.citations_ok, strict=True)
        ],
        "citation_precision": s.citation_precision,
        "latency_ms": round(s.latency_ms, 1),
        "context_chars": s.context_chars,
        "pass": s.passed,
    }


def metrics_document(
    scores: Mapping[str, Sequence[QuestionScore]],
    config: Mapping[str, Any],
    index: Mapping[str, Any],
    settings: Settings,
) -> dict[str, Any]:
    """metrics.json: the first mode's metrics flat at the top, other modes under `by_mode`.

    A mode's flat metrics cover all questions; `parts` holds the same metrics for the tune and the test
    part. Each mode keeps `per_question` outcomes, so a committed metrics.json alone is a complete baseline.
    """
    modes = list(scores)

    def block(mode: str) -> dict[str, Any]:
        return {
            **summarise(scores[mode]),
            "parts": summarise_parts(scores[mode]),
            "per_question": {s.id: s.outcome() for s in scores[mode]},
        }

    doc: dict[str, Any] = {"mode": modes[0], **block(modes[0])}
    doc["by_mode"] = {mode: {"mode": mode, **block(mode)} for mode in modes[1:]}
    doc["config"] = dict(config)
    doc["index"] = dict(index)
    doc["model"] = {
        "embedding": index.get("model", settings.model),
        "answerer": settings.answerer,
        "llm": f"{settings.llm_provider}:{settings.llm_model}" if settings.answerer == "llm" else "",
    }
    return doc


def _config(args: argparse.Namespace, settings: Settings, modes: Sequence[str], started: datetime) -> dict[str, Any]:
    return {
        "started_at": started.isoformat(timespec="seconds"),
        "golden": [str(p) for p in args.golden],
        "golden_sha256": hashlib.sha256(b"".join(p.read_bytes() for p in args.golden)).hexdigest(),
        "corpus": str(args.corpus),
        "index_dir": str(settings.index_dir),
        "retrieval": list(modes),
        "k": args.k,
        "own_history": args.own_history,
        "split": SPLIT_RULE,
        "settings": {name: getattr(settings, name) for name in SETTINGS_RECORDED},
    }


def write_outputs(
    out_dir: Path,
    doc: Mapping[str, Any],
    scores: Mapping[str, Sequence[QuestionScore]],
    trials: Mapping[str, Sequence[Trial]],
    exports: Sequence[str],
) -> None:
    """metrics.json, per_question.jsonl (every mode), report.md, report.html and the requested exports."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "metrics.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    rows = {mode: [question_row(t, s) for t, s in zip(trials[mode], scores[mode], strict=True)] for mode in trials}
    lines = [json.dumps(row, ensure_ascii=False) for mode_rows in rows.values() for row in mode_rows]
    (out_dir / "per_question.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    tables = build_tables(doc, scores, rows[doc["mode"]])
    (out_dir / "report.md").write_text(markdown_report(doc, tables), encoding="utf-8")
    (out_dir / "report.html").write_text(html_report(doc, tables, scores), encoding="utf-8")
    k = doc["config"]["k"]
    for fmt_name in dict.fromkeys(exports):
        export(fmt_name, [run_output(t, k) for t in trials[doc["mode"]]], out_dir)


def run_output(trial: Trial, k: int) -> RunOutput:
    passages = trial.search.passages[:k]
    return RunOutput(
        item=trial.item,
        response=trial.answer.text,
        abstained=trial.answer.abstained,
        contexts=tuple(p.text for p in passages),
        context_sources=tuple(p.source_path for p in passages),
        citations=tuple(
            {
                "marker": c.marker,
                "source_path": c.passage.source_path,
                "text": c.passage.text,
                "quotes": list(c.quotes),
            }
            for c in trial.answer.citations
        ),
        query=trial.search.query,
        mode=trial.mode,
    )


def _read_baseline(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise EvalError(f"baseline {path}: cannot read it as JSON ({exc}); pass an eval run's metrics.json") from exc
    if not isinstance(doc, dict) or "mode" not in doc or "per_question" not in doc:
        raise EvalError(f"baseline {path}: not a metrics.json written by 'kafka-rag eval'")
    return doc


def gate(baseline: Mapping[str, Any], doc: Mapping[str, Any], name: str, log: Any) -> int:
    """Print gated metrics old -> new and flipped questions for every mode in both runs; 1 on a regression."""
    old_modes, new_modes = modes_of(baseline), modes_of(doc)
    common = [mode for mode in new_modes if mode in old_modes]
    if not common:
        print(
            f"error: baseline {name} scored {', '.join(old_modes)}, this run {', '.join(new_modes)}; "
            "rerun with a --retrieval mode the baseline has",
            file=sys.stderr,
        )
        return 2
    failed = False
    for mode in common:
        old, new = old_modes[mode], new_modes[mode]
        worse = {metric for metric, _, _ in regressions(old, new)}
        failed |= bool(worse)
        print(f"baseline {name} [{mode}] all questions (tolerance {GATE_TOLERANCE}):", file=log)
        for metric in GATED:
            verdict = "REGRESSED" if metric in worse else "ok"
            print(f"  {metric:<18} {fmt(old.get(metric)):>6} -> {fmt(new.get(metric)):<6} {verdict}", file=log)
        if baseline.get("config", {}).get("golden_sha256") != doc["config"]["golden_sha256"]:
            print("  note: the golden files differ from the baseline's; compare with care", file=log)
        if "parts" not in old:
            print("  note: the baseline predates the tune/test split; gated on all questions as before", file=log)
        if old.get("questions") != new.get("questions"):
            print(
                f"  note: baseline scored {old.get('questions')} questions, this run {new.get('questions')}",
                file=log,
            )
        broke, fixed = flips(old["per_question"], new["per_question"])
        print(f"  now failing ({len(broke)}): {', '.join(broke) or '-'}", file=log)
        print(f"  now passing ({len(fixed)}): {', '.join(fixed) or '-'}", file=log)
    print("gate: FAILED" if failed else "gate: passed", file=log)
    return 1 if failed else 0


def _print_summary(doc: Mapping[str, Any], modes: Sequence[str], log: Any) -> None:
    names = [name for name in MAIN_METRICS if name not in ("hit@3", "hit@10", "avg_context_chars")]
    columns = part_columns({mode: modes_of(doc)[mode] for mode in modes})
    parts = doc.get("parts", {})
    sizes = ", ".join(f"{parts[p]['questions']} {p}" for p in PARTS if p in parts)
    print(f"{doc['questions']} questions ({sizes}), answerer {doc['model']['answerer']}", file=log)
    print(f"{'metric':<20}" + "".join(f"{label:>13}" for label in columns), file=log)
    for name in names:
        print(f"{name:<20}" + "".join(f"{fmt(m.get(name), name):>13}" for m in columns.values()), file=log)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.runner", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
