"""Fit the embedding adapter (`rag/embedding_adapter.npz`) on the tuning parts of the golden files.

    python -m evals.fit_embedding --set evals/golden.jsonl seeds <seeds index> \\
        --set evals/golden_kafka_docs.jsonl ../shared/corpora/kafka-docs <docs index> [--check]

Training pairs: each answerable tuning-part question (its retrieval query, as the assistant parses it) with
a chunk that holds its evidence, repeated `HUMAN_REPEAT` times, and a share of the synthetic queries ingest
made from each corpus's structure with their chunk. The base model (all-MiniLM-L6-v2) stays frozen; a
rank-`RANK` correction of every linear layer of its encoder (`rag.adapter`) is trained with in-batch
negatives (the other passages of a batch; a passage that is also a positive of the row is masked out).
Test-part ids are never read: `select_part(..., "tune")`.

`--check` first measures what the recipe does for questions it did not see: the human tuning questions are
split in two halves by a hash of the id; for each half, an adapter trained on the other half (and the
synthetic queries) ranks the whole corpus by cosine for the held-out half, against the base model's order.
The report (`evals/reports/fit_embedding.md`) gives both. The constants below come from such checks.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evals.golden import add_set_argument, load_golden, select_part
from evals.metrics import contains_evidence
from rag import Assistant, Settings
from rag.adapter import ADAPTER_FILE, adapter_arrays, chunk_model_texts
from rag.embedding import resolve_model
from rag.settings import BASE_MODEL

RANK = 8
LEARNING_RATE = 1e-3
HUMAN_REPEAT = 3  # human questions are few and worded as users word them; the synthetic ones copy the corpus
SYNTHETIC_SHARE = 0.5
BATCH = 32
TRAIN_TOKENS = 128  # passages are cut to this many tokens while training (4x cheaper than 256); not when encoding
SCALE = 20.0  # cosine temperature of the in-batch softmax
SEED = 0
REPORT = Path(__file__).parent / "reports" / "fit_embedding.md"


@dataclass(frozen=True)
class Pair:
    query: str
    passage: str  # the text the model sees of the chunk
    positives: frozenset[str]  # every passage that answers the query (masked as negatives)
    group: str  # golden file name, or "synthetic"
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
                human.append(Pair(query, min(answering), answering, golden.name, item.id))
        synthetic = [
            Pair(s.query, model_text[s.chunk_id], frozenset({model_text[s.chunk_id]}), "synthetic", s.chunk_id)
            for s in assistant.synthetic_queries()
            if s.chunk_id in model_text
        ]
        corpora.append(Corpus(golden.name, tuple(model_text.values()), tuple(human), tuple(synthetic)))
    return corpora


def training_pairs(human: Sequence[Pair], synthetic: Sequence[Pair], seed: int = SEED) -> list[Pair]:
    rng = random.Random(seed)
    chosen = rng.sample(list(synthetic), int(len(synthetic) * SYNTHETIC_SHARE))
    pairs = [
        Pair(p.query, rng.choice(sorted(p.positives)), p.positives, p.group, p.item_id) for p in human
    ] * HUMAN_REPEAT + chosen
    rng.shuffle(pairs)
    return pairs


def train(pairs: Sequence[Pair], seed: int = SEED) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], float, dict]:
    """One pass over `pairs`: the adapter matrices {weight name: (A, B)}, their scale, and training figures."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(seed)
    model = SentenceTransformer(resolve_model(BASE_MODEL), device="cpu")
    model.max_seq_length = TRAIN_TOKENS
    for parameter in model.parameters():
        parameter.requires_grad = False
    adapted = _add_low_rank(model[0].auto_model.encoder, torch)
    optimiser = torch.optim.AdamW([p for layer in adapted.values() for p in (layer.a, layer.b)], lr=LEARNING_RATE)
    model.train()
    started, losses = time.perf_counter(), []
    for start in range(0, len(pairs) - BATCH + 1, BATCH):
        batch = pairs[start : start + BATCH]
        queries = _embed(model, [p.query for p in batch])
        passages = _embed(model, [p.passage for p in batch])
        scores = SCALE * queries @ passages.T
        also_answers = torch.tensor(
            [[j != i and batch[j].passage in batch[i].positives for j in range(len(batch))] for i in range(len(batch))]
        )
        loss = torch.nn.functional.cross_entropy(scores.masked_fill(also_answers, -1e4), torch.arange(len(batch)))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    matrices = {
        f"encoder.{name}.weight": (layer.a.detach().numpy(), layer.b.detach().numpy())
        for name, layer in adapted.items()
    }
    figures = {
        "steps": len(losses),
        "seconds": time.perf_counter() - started,
        "last_loss": float(np.mean(losses[-10:])),
    }
    return matrices, next(iter(adapted.values())).scale, figures


def _embed(model, texts: list[str]):
    import torch

    features = model.preprocess(texts)
    return torch.nn.functional.normalize(model(features)["sentence_embedding"], dim=-1)


def _add_low_rank(encoder, torch) -> dict:
    """Wrap every linear layer of `encoder` with a trainable rank-`RANK` correction (B starts at zero, so
    training starts from the base model exactly)."""

    class LowRank(torch.nn.Module):
        def __init__(self, base: torch.nn.Linear) -> None:
            super().__init__()
            self.base = base
            self.a = torch.nn.Parameter(torch.randn(RANK, base.in_features) / base.in_features**0.5)
            self.b = torch.nn.Parameter(torch.zeros(base.out_features, RANK))
            self.scale = 2.0

        def forward(self, x):
            return self.base(x) + (x @ self.a.T @ self.b.T) * self.scale

    adapted = {}
    for parent_name, parent in list(encoder.named_modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Linear):
                layer = LowRank(child)
                setattr(parent, child_name, layer)
                adapted[f"{parent_name}.{child_name}" if parent_name else child_name] = layer
    return adapted


def held_out_ranks(passages: Sequence[str], pairs: Sequence[Pair], model_dir: str) -> np.ndarray:
    """For each pair, the cosine rank among all `passages` of its best answering passage (1 = first)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_dir, device="cpu")
    encoded = model.encode(list(passages), batch_size=32, normalize_embeddings=True)
    questions = model.encode([p.query for p in pairs], batch_size=32, normalize_embeddings=True)
    position = {text: i for i, text in enumerate(passages)}
    ranks = []
    for scores, pair in zip(questions @ encoded.T, pairs, strict=True):
        best = max(scores[position[p]] for p in pair.positives)
        ranks.append(int((scores > best).sum()) + 1)
    return np.asarray(ranks)


def half(item_id: str) -> int:
    return int(hashlib.sha256(item_id.encode()).hexdigest(), 16) % 2


def check(corpora: Sequence[Corpus], cache_dir: Path) -> list[dict]:
    """Held-out figures of the recipe: train on one half of the human questions, rank for the other."""
    from rag.adapter import adapted_model_dir

    rows = []
    synthetic = [p for c in corpora for p in c.synthetic]
    for held in (0, 1):
        trained = [p for c in corpora for p in c.human if half(p.item_id) != held]
        matrices, scale, _ = train(training_pairs(trained, synthetic))
        adapter = cache_dir / f"check-half-{held}.npz"
        np.savez(adapter, **adapter_arrays(matrices, scale))
        adapted = adapted_model_dir(Path(resolve_model(BASE_MODEL)), cache_dir, adapter)
        for corpus in corpora:
            pairs = [p for p in corpus.human if half(p.item_id) == held]
            if pairs:
                for label, model_dir in (("base", resolve_model(BASE_MODEL)), ("adapted", str(adapted))):
                    rows.append(
                        {
                            "half": held,
                            "set": corpus.name,
                            "model": label,
                            **_rank_figures(held_out_ranks(corpus.passages, pairs, model_dir)),
                        }
                    )
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
    matrices, scale, figures = train(training_pairs(human, synthetic))
    np.savez_compressed(args.out, **adapter_arrays(matrices, scale))
    _report(args.report, corpora, figures, checked)
    print(
        f"embedding adapter: {len(human)} human and {len(synthetic)} synthetic pairs, {figures['steps']} steps in "
        f"{figures['seconds']:.0f} s; wrote {args.out}, {args.report}"
    )
    return 0


def _report(path: Path, corpora: Sequence[Corpus], figures: dict, checked: Sequence[dict]) -> None:
    lines = [
        "# Embedding adapter fit (tuning parts only)",
        "",
        f"Recipe: rank {RANK} on every linear layer of the encoder, learning rate {LEARNING_RATE}, one pass, batch "
        f"{BATCH}, passages cut to {TRAIN_TOKENS} tokens, human pairs x{HUMAN_REPEAT}, {SYNTHETIC_SHARE:.0%} of "
        "the synthetic queries.",
        "",
        "| set | human tuning questions with evidence | synthetic queries |",
        "|---|---|---|",
        *(f"| {c.name} | {len(c.human)} | {len(c.synthetic)} |" for c in corpora),
        "",
        f"Final fit: {figures['steps']} steps in {figures['seconds']:.0f} s, mean loss of the last ten "
        f"{figures['last_loss']:.3f}.",
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
