"""Golden items plus one run's outputs as RAGAS and LangSmith datasets, for teams with an LLM judge.

Neither package is needed: the files hold the plain fields their loaders read. RAGAS keeps single-turn
and multi-turn samples in separate files because `EvaluationDataset` requires one sample type per file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.golden import GoldenItem

FORMATS = ("ragas", "langsmith")
NO_ANSWER_REFERENCE = "The documentation does not cover this; the assistant should say it does not know."


@dataclass(frozen=True)
class RunOutput:
    """What the system produced for one golden item."""

    item: GoldenItem
    response: str
    abstained: bool
    contexts: tuple[str, ...]  # texts of the top-k passages given to the answerer
    context_sources: tuple[str, ...]
    citations: tuple[dict[str, Any], ...]
    query: str
    mode: str


def reference(item: GoldenItem) -> str:
    """The golden set has evidence rather than a written answer; the evidence is the reference."""
    return " ".join(item.evidence) if item.answerable else NO_ANSWER_REFERENCE


def ragas_rows(outputs: Iterable[RunOutput]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(SingleTurnSample rows, MultiTurnSample rows); follow-ups become multi-turn conversations."""
    single, multi = [], []
    for out in outputs:
        item = out.item
        if item.history:
            messages = [
                {"content": t["content"], "type": "human" if t["role"] == "user" else "ai"} for t in item.history
            ]
            messages += [{"content": item.question, "type": "human"}, {"content": out.response, "type": "ai"}]
            multi.append({"user_input": messages, "reference": reference(item), "reference_topics": list(item.tags)})
        else:
            single.append(
                {
                    "user_input": item.question,
                    "retrieved_contexts": list(out.contexts),
                    "response": out.response,
                    "reference": reference(item),
                    "reference_contexts": list(item.evidence),
                }
            )
    return single, multi


def langsmith_rows(outputs: Iterable[RunOutput]) -> list[dict[str, Any]]:
    """LangSmith examples: golden inputs and reference outputs; this run's answer rides in the metadata."""
    rows = []
    for out in outputs:
        item = out.item
        rows.append(
            {
                "inputs": {"question": item.question, "history": list(item.history)},
                "outputs": {
                    "reference": reference(item),
                    "evidence": list(item.evidence),
                    "facts": [list(group) for group in item.facts],
                    "sources": list(item.sources),
                    "answerable": item.answerable,
                },
                "metadata": {
                    "golden_id": item.id,
                    "part": item.part,
                    "tags": list(item.tags),
                    "answerable": item.answerable,
                    "followup": bool(item.history),
                    "run": {
                        "retrieval": out.mode,
                        "query": out.query,
                        "response": out.response,
                        "abstained": out.abstained,
                        "retrieved_contexts": list(out.contexts),
                        "retrieved_sources": list(out.context_sources),
                        "citations": list(out.citations),
                    },
                },
            }
        )
    return rows


def export(fmt: str, outputs: Sequence[RunOutput], out_dir: Path) -> list[Path]:
    """Write the files for one format into `out_dir`; returns their paths."""
    if fmt == "ragas":
        single, multi = ragas_rows(outputs)
        files = {"ragas_single_turn.jsonl": single, "ragas_multi_turn.jsonl": multi}
    else:
        files = {"langsmith_examples.jsonl": langsmith_rows(outputs)}
    written = []
    for name, rows in files.items():
        path = out_dir / name
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        written.append(path)
    return written
