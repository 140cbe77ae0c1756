"""Training the embedding adapter (`rag.adapter`): the torch side of `evals/fit_embedding.py`.

A rank-`RANK` correction `B·A` of every linear layer of the base model's encoder (LoRA) is trained with
in-batch negatives: each question against the other passages of its batch, a passage that also answers the
question masked out. The base weights stay frozen and B starts at zero, so training starts from the base model.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rag.adapter import adapted_model_dir, adapter_arrays
from rag.embedding import resolve_model
from rag.settings import BASE_MODEL, DEFAULT_MODEL_CACHE_DIR

RANK = 8
LEARNING_RATE = 1e-3
BATCH = 32
TRAIN_TOKENS = 128  # passages are cut to this many tokens while training (4x cheaper than 256); not when encoding
TEMPERATURE = 20.0  # cosine scale of the in-batch softmax
LOW_RANK_SCALE = 2.0  # alpha / rank, as LoRA's alpha = 2 x rank


class TrainingPair(Protocol):
    query: str
    passage: str  # the text the model sees of a chunk that answers the query
    positives: frozenset[str]  # every passage that answers it (never a negative for it)


@dataclass(frozen=True)
class AdapterFit:
    arrays: dict[str, np.ndarray]  # what `np.savez` writes and `rag.adapter` merges
    steps: int
    seconds: float
    last_loss: float  # mean of the last ten batches


def train_adapter(pairs: Sequence[TrainingPair], seed: int = 0) -> AdapterFit:
    """One pass over `pairs`, in their order, `BATCH` at a time (a last partial batch is dropped)."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(seed)
    model = SentenceTransformer(resolve_model(BASE_MODEL), device="cpu")
    model.max_seq_length = TRAIN_TOKENS
    for parameter in model.parameters():
        parameter.requires_grad = False
    transformer: Any = model[0].auto_model  # the Hugging Face BertModel inside the first module
    adapted = _add_low_rank(transformer.encoder, torch)
    optimiser = torch.optim.AdamW([p for layer in adapted.values() for p in (layer.a, layer.b)], lr=LEARNING_RATE)
    model.train()
    started, losses = time.perf_counter(), []
    for start in range(0, len(pairs) - BATCH + 1, BATCH):
        batch = pairs[start : start + BATCH]
        queries = _embed(model, [p.query for p in batch], torch)
        passages = _embed(model, [p.passage for p in batch], torch)
        also_answers = torch.tensor(
            [[j != i and batch[j].passage in batch[i].positives for j in range(len(batch))] for i in range(len(batch))]
        )
        scores = (TEMPERATURE * queries @ passages.T).masked_fill(also_answers, -1e4)
        loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(batch)))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    matrices = {
        f"encoder.{name}.weight": (layer.a.detach().numpy(), layer.b.detach().numpy())
        for name, layer in adapted.items()
    }
    return AdapterFit(
        adapter_arrays(matrices, LOW_RANK_SCALE),
        len(losses),
        time.perf_counter() - started,
        float(np.mean(losses[-10:])) if losses else float("nan"),
    )


def cosine_ranks(
    passages: Sequence[str],
    pairs: Sequence[TrainingPair],
    adapter: Path | None = None,
    cache_dir: Path = DEFAULT_MODEL_CACHE_DIR,
) -> np.ndarray:
    """For each pair, the rank by cosine among all `passages` of its best answering passage (1 = first), with
    the base model, or with `adapter` merged into it."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_with_adapter(adapter, cache_dir)), device="cpu")
    encoded = model.encode(list(passages), batch_size=32, normalize_embeddings=True)
    questions = model.encode([p.query for p in pairs], batch_size=32, normalize_embeddings=True)
    position = {text: i for i, text in enumerate(passages)}
    ranks = []
    for scores, pair in zip(questions @ encoded.T, pairs, strict=True):
        best = max(scores[position[p]] for p in pair.positives)
        ranks.append(int((scores > best).sum()) + 1)
    return np.asarray(ranks)


def model_with_adapter(adapter: Path | None, cache_dir: Path = DEFAULT_MODEL_CACHE_DIR) -> Path:
    """The base model's folder, or with `adapter` (an adapter file, not the shipped one) merged into a copy of it
    in `cache_dir`: a local model that `--model` / `KAFKA_RAG_MODEL` builds an index with."""
    base = Path(resolve_model(BASE_MODEL))
    return adapted_model_dir(base, cache_dir, adapter) if adapter else base


def _embed(model, texts: list[str], torch):
    return torch.nn.functional.normalize(model(model.preprocess(texts))["sentence_embedding"], dim=-1)


def _add_low_rank(encoder, torch) -> dict:
    """Wrap every linear layer of `encoder` with a trainable rank-`RANK` correction."""

    class LowRank(torch.nn.Module):
        def __init__(self, base: torch.nn.Linear) -> None:
            super().__init__()
            self.base = base
            self.a = torch.nn.Parameter(torch.randn(RANK, base.in_features) / base.in_features**0.5)
            self.b = torch.nn.Parameter(torch.zeros(base.out_features, RANK))

        def forward(self, x):
            return self.base(x) + (x @ self.a.T @ self.b.T) * LOW_RANK_SCALE

    adapted = {}
    for parent_name, parent in list(encoder.named_modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Linear):
                layer = LowRank(child)
                setattr(parent, child_name, layer)
                adapted[f"{parent_name}.{child_name}" if parent_name else child_name] = layer
    return adapted
