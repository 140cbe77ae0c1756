"""The plain LangChain setup the project must beat, scored on the same golden file in the same run.

Peer: `RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)` over the corpus files the
ingest would read (HTML as LangChain's `BSHTMLLoader` reads it: BeautifulSoup's `get_text()`, other files
raw), the project's embedding model, a flat FAISS inner-product index, top-5 by similarity, no follow-up
rewriting and no abstention; its "answer" is the top-1 passage (ALCE's top-1 baseline). The project's
dense, bm25 and hybrid rows come from the eval runner's own functions on `--index`. Two tables: the test
part of the tune/test split (the figures to quote) and all questions.

    python benchmarks/peer_baseline.py [--golden evals/golden.jsonl] [--corpus seeds] [--index index]
    python benchmarks/peer_baseline.py --golden evals/golden_kafka_docs.jsonl \
        --corpus ../shared/corpora/kafka-docs --index /tmp/kd-index
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import faiss
import numpy as np
from bs4 import BeautifulSoup
from langchain_text_splitters import RecursiveCharacterTextSplitter

from evals.golden import GoldenItem, select_part
from evals.metrics import RANK_DEPTH, QuestionScore, summarise
from evals.report import fmt
from evals.runner import DEFAULT_GOLDEN, Trial, evaluate, load_items, score
from rag import RETRIEVAL_MODES, Answer, Assistant, Citation, KafkaRagError, Passage, SearchResult, Settings
from rag.documents import SUPPORTED_SUFFIXES, iter_source_files
from rag.embedding import load_embedder

COLUMNS = (
    "hit@1",
    "hit@5",
    "mrr@10",
    "ndcg@10",
    "key_fact_recall",
    "abstention_recall",
    "over_abstention",
    "avg_context_chars",
    "p50_ms",
)
PEER_TOP_K = 5


class PeerRetriever:
    """Recursive 1000/200 splits of the corpus files in a flat inner-product FAISS index."""

    def __init__(self, corpus: Path, model: str) -> None:
        splitter = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)
        self.passages: list[Passage] = []
        for file, source in iter_source_files(corpus):
            if file.suffix.lower() not in SUPPORTED_SUFFIXES:
                continue  # LICENSE, NOTICE: the project's ingest skips them too
            for n, text in enumerate(splitter.split_text(read_text(file))):
                self.passages.append(Passage(f"{source}#{n}", source, file.stem, (), source, text, 0.0))
        self.embedder = load_embedder(model)
        vectors = self.embedder.encode([p.text for p in self.passages])
        self.index = faiss.IndexFlatIP(vectors.shape[1])
        self.index.add(vectors)

    def search(self, question: str, k: int) -> SearchResult:
        query = self.embedder.encode([question])
        scores, ids = self.index.search(np.ascontiguousarray(query, dtype=np.float32), k)
        found = [(self.passages[i], float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]
        return SearchResult(question, tuple(Passage(**{**p.to_dict(), "score": s}) for p, s in found))

    def trial(self, item: GoldenItem) -> Trial:
        """The peer sees only the question (no history) and answers with its top passage."""
        start = time.perf_counter()
        result = self.search(item.question, RANK_DEPTH)
        top = result.passages[0]
        answer = Answer(item.question, top.text, (Citation(1, top),), abstained=False, query=item.question)
        latency = (time.perf_counter() - start) * 1000
        return Trial(item, "peer", result, result if item.history else None, answer, latency)


def read_text(file: Path) -> str:
    """The file as a plain LangChain setup reads it: HTML through BeautifulSoup (BSHTMLLoader), others raw."""
    text = file.read_text(encoding="utf-8", errors="replace")
    if file.suffix.lower() in (".html", ".htm"):
        return BeautifulSoup(text, "html.parser").get_text()
    return text


def table(rows: dict[str, dict[str, float | int | None]]) -> str:
    """Markdown, ready for the README."""
    lines = ["| setup | " + " | ".join(COLUMNS) + " |", "| --- " * (len(COLUMNS) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(fmt(m[c], c) for c in COLUMNS) + " |" for name, m in rows.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", nargs="+", type=Path, default=[DEFAULT_GOLDEN], metavar="FILE")
    parser.add_argument("--corpus", type=Path, default=Path("seeds"), help="root the golden sources are under")
    parser.add_argument("--index", type=Path, default=Path("index"))
    parser.add_argument("--k", type=int, default=PEER_TOP_K, help="passages given to the project's answerer")
    args = parser.parse_args(argv)
    try:
        items = load_items(args.golden, args.corpus)
        settings = Settings.from_env(index_dir=args.index)
        assistant = Assistant.from_settings(settings)
        peer = PeerRetriever(args.corpus, settings.model)
        rows: dict[str, list[QuestionScore]] = {"peer": [score(peer.trial(item), PEER_TOP_K) for item in items]}
        for mode in RETRIEVAL_MODES:
            rows[mode] = [score(t, args.k) for t in evaluate(assistant, items, mode, args.k)]
    except KafkaRagError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    test_ids = {item.id for item in select_part(items, "test")}
    golden = ", ".join(str(p) for p in args.golden)
    print(
        f"{len(items)} questions from {golden}; peer: {len(peer.passages)} chunks of <=1000 chars, "
        f"top-{PEER_TOP_K}; project: {args.index}, top-{args.k}, answerer {settings.answerer}\n"
    )
    print(f"test part ({len(test_ids)} questions):\n")
    print(table({name: summarise([s for s in scores if s.id in test_ids]) for name, scores in rows.items()}))
    print(f"\nall ({len(items)} questions):\n")
    print(table({name: summarise(scores) for name, scores in rows.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
