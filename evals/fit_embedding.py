"""Fit the embedding adapter (`rag/embedding_adapter.npz`) on the tuning parts of the golden files.

    python -m evals.fit_embedding --set evals/golden.jsonl seeds <seeds index> \\
        --set evals/golden_kafka_docs.jsonl ../shared/corpora/kafka-docs <docs index> [--check]

Training pairs: each answerable tuning-part question (its retrieval query, as the assistant parses it) with
a chunk that holds its evidence, repeated `HUMAN_REPEAT` times, and a share of the synthetic queries ingest
made from each corpus's structure with their chunk. The base model (all-MiniLM-L6-v2) stays frozen; a
rank-8 correction of every linear layer of its encoder (`rag.adapter_training`) is trained with in-batch
negatives (the other passages of a batch; a passage that is also a positive of the row is masked out).
Test-part ids are never read: `select_part(..., "tune")`.

`--check` first measures what the recipe does for questions it did not see: the human tuning questions are
split in two halves by a hash of the id; for each half, an adapter trained on the other half (and the
synthetic queries) ranks the whole corpus by cosine for the held-out half, against the base model's order.
The report (`evals/reports/fit_embedding.md`) gives both. The recipe was chosen by a first such check on the
Kafka docs' tuning questions, against full fine-tuning (`evals/reports/quality_history.md`, 2026-11-27).
"""

from __future__ import annotations

import argparse
import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evals.golden import add_set_argument, load_golden, select_part
from evals.metrics import contains_evidence
from rag import (
    ADAPTER_BATCH,
    ADAPTER_FILE,
    ADAPTER_LEARNING_RATE,
    ADAPTER_RANK,
    ADAPTER_TRAIN_TOKENS,
    AdapterFit,
    Assistant,
    Settings,
    chunk_model_texts,
    cosine_ranks,
    train_adapter,
)

HUMAN_REPEAT = 3  # human questions are few and worded as users word them; the synthetic ones copy the corpus
SYNTHETIC_SHARE = 0.5
SEED = 0
REPORT = Path(__file__).parent / "reports" / "fit_embedding.md"


@dataclass(frozen=True)
class Pair:
    query: str
    passage: str  # the text the model sees of the chunk
    positives: frozenset[str]  # every passage that answers the query (masked as negatives)
    item_id: str


@dataclass(frozen=True)
class Corpus:
    name: str
    passages: tuple[str, ...]
    human: tuple[Pair, ...]
    synthetic: tuple[Pair, ...]


def collect(sets: Sequence[tuple[Path, Path, Path]]) -> list[Corpus]:
    """Human tuning pairs and synthetic pairs of each set (golden file, corpus, index built with any model:
    only its chunks, synthetic queries and the parsed questions are read)."""
    corpora = []
    for golden, corpus, index in sets:
        assistant = Assistant.built_with(Settings.from_env(index_dir=index))
        chunks = chunk_model_texts(index)
        model_text = {chunk_id: seen for chunk_id, seen, _ in chunks}
        human = []
        for item in select_part(load_golden(golden, corpus), "tune"):
            if not item.answerable:
                continue
            answering = frozenset(seen for _, seen, text in chunks if contains_evidence(text, item.evidence))
            if answering:
                query = assistant.inspect(item.question, item.history, k=1).query
                human.append(Pair(query, min(answering), answering, item.id))
        synthetic = [
            Pair(s.query, model_text[s.chunk_id], frozenset({model_text[s.chunk_id]}), s.chunk_id)
            for s in assistant.synthetic_queries()
            if s.chunk_id in model_text
        ]
        corpora.append(Corpus(golden.name, tuple(model_text.values()), tuple(human), tuple(synthetic)))
    return corpora


def training_pairs(human: Sequence[Pair], synthetic: Sequence[Pair], seed: int = SEED) -> list[Pair]:
    rng = random.Random(seed)
    chosen = rng.sample(list(synthetic), int(len(synthetic) * SYNTHETIC_SHARE))
    pairs = [
        Pair(p.query, rng.choice(sorted(p.positives)), p.positives, p.item_id) for p in human
    ] * HUMAN_REPEAT + chosen
    rng.shuffle(pairs)
    return pairs


def half(item_id: str) -> int:
    return int(hashlib.sha256(item_id.encode()).hexdigest(), 16) % 2


def add_half_indexes_argument(parser: argparse.ArgumentParser) -> None:
    """`--half-indexes`, for the fits downstream of the adapter (ranker, abstention): the shipped adapter was
    fitted on the tuning questions of its day, so their cosines are in-sample, higher than a new question gets,
    and a fit on them learns to over-trust the dense score."""
    parser.add_argument(
        "--half-indexes",
        nargs="+",
        type=Path,
        default=[],
        metavar="INDEX",
        help="two indexes per --set, in order: built with the adapters fitted without half 0 and half 1 of the "
        "tuning questions (`python -m evals.half_indexes` builds them); each question's features come from the "
        "one that did not see it",
    )


def half_index_pairs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[tuple[Path, Path]]:
    """The `--half-indexes` pairs, one per `--set` (none without the flag)."""
    if args.half_indexes and len(args.half_indexes) != 2 * len(args.set):
        parser.error("--half-indexes takes two indexes per --set")
    return list(zip(args.half_indexes[::2], args.half_indexes[1::2], strict=True))


def half_adapters(corpora: Sequence[Corpus], work: Path) -> list[Path]:
    """The recipe's two adapters, each fitted without one half of the human questions (`half`), and with all the
    synthetic ones: adapter `n` never saw the questions of half `n`. Written to `work`."""
    synthetic = [p for c in corpora for p in c.synthetic]
    adapters = []
    for held in (0, 1):
        trained = [p for c in corpora for p in c.human if half(p.item_id) != held]
        adapter = work / f"check-half-{held}.npz"
        np.savez(adapter, **train_adapter(training_pairs(trained, synthetic), SEED).arrays)
        adapters.append(adapter)
    return adapters


def check(corpora: Sequence[Corpus], work: Path) -> list[dict]:
    """Held-out figures of the recipe: train on one half of the human questions, rank for the other."""
    rows = []
    for held, adapter in enumerate(half_adapters(corpora, work)):
        for corpus in corpora:
            pairs = [p for p in corpus.human if half(p.item_id) == held]
            for label, used in (("base", None), ("adapted", adapter)) if pairs else ():
                ranks = cosine_ranks(corpus.passages, pairs, used, work)
                rows.append({"half": held, "set": corpus.name, "model": label, **_rank_figures(ranks)})
    return rows


def _rank_figures(ranks: np.ndarray) -> dict:
    return {
        "questions": len(ranks),
        "hit@1": float(np.mean(ranks == 1)),
        "hit@5": float(np.mean(ranks <= 5)),
        "hit@10": float(np.mean(ranks <= 10)),
        "hit@40": float(np.mean(ranks <= 40)),
        "mrr@10": float(np.mean(np.where(ranks <= 10, 1.0 / ranks, 0.0))),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_set_argument(parser)
    parser.add_argument("--out", type=Path, default=ADAPTER_FILE, help="adapter file to write")
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument("--check", action="store_true", help="first measure the recipe on held-out halves")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kafka-rag-fit-embedding"), help="scratch folder")
    args = parser.parse_args(argv)
    corpora = collect([tuple(s) for s in args.set])
    args.work.mkdir(parents=True, exist_ok=True)
    checked = check(corpora, args.work) if args.check else []
    human = [p for c in corpora for p in c.human]
    synthetic = [p for c in corpora for p in c.synthetic]
    fit = train_adapter(training_pairs(human, synthetic), SEED)
    np.savez_compressed(args.out, **fit.arrays)
    _report(args.report, corpora, fit, checked)
    print(
        f"embedding adapter: {len(human)} human and {len(synthetic)} synthetic pairs, {fit.steps} steps in "
        f"{fit.seconds:.0f} s; wrote {args.out}, {args.report}"
    )
    return 0


def _report(path: Path, corpora: Sequence[Corpus], fit: AdapterFit, checked: Sequence[dict]) -> None:
    lines = [
        "# Embedding adapter fit (tuning parts only)",
        "",
        f"Recipe: rank {ADAPTER_RANK} on every linear layer of the encoder, learning rate {ADAPTER_LEARNING_RATE}, "
        f"one pass, batch {ADAPTER_BATCH}, passages cut to {ADAPTER_TRAIN_TOKENS} tokens, human pairs "
        f"x{HUMAN_REPEAT}, {SYNTHETIC_SHARE:.0%} of the synthetic queries.",
        "",
        "| set | human tuning questions with evidence | synthetic queries |",
        "|---|---|---|",
        *(f"| {c.name} | {len(c.human)} | {len(c.synthetic)} |" for c in corpora),
        "",
        f"Final fit: {fit.steps} steps in {fit.seconds:.0f} s, mean loss of the last ten {fit.last_loss:.3f}.",
        "",
    ]
    if checked:
        lines += [
            "## Held-out check (`--check`)",
            "",
            "Cosine ranks over the whole corpus for the human tuning questions of one half, by an adapter trained "
            "without them (the other half and the synthetic queries), against the base model.",
            "",
            "| half | set | model | questions | hit@1 | hit@5 | hit@10 | hit@40 | mrr@10 |",
            "|---|---|---|---|---|---|---|---|---|",
            *(
                f"| {r['half']} | {r['set']} | {r['model']} | {r['questions']} | {r['hit@1']:.3f} | {r['hit@5']:.3f} "
                f"| {r['hit@10']:.3f} | {r['hit@40']:.3f} | {r['mrr@10']:.3f} |"
                for r in checked
            ),
            "",
        ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
