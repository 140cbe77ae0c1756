"""The one service API every adapter uses: `Assistant.from_settings(...)`, `ask`, `stream`, `search`.

    question, history
      → log/long-input reduction to the error signal
      → follow-up rewrite (deterministic, or the LLM's when the LLM answerer is on)
      → hybrid retrieval (dense + BM25 + identifiers, fused, diverse)
      → abstain when the evidence is weak, else answer (extractive, or LLM with validated citations)
      → Answer (text with [n] markers, citations in marker order, query used, timings per stage)

The index and the model are loaded once in `from_settings`; every method only reads them, so one
Assistant serves concurrent callers (UI queue workers, Slack lazy listeners, eval threads).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from rag.answering import AbstentionPolicy, Draft, abstain, assess, extract_answer, should_abstain
from rag.embedding import load_embedder, model_identity
from rag.errors import GenerationError, IndexNotFoundError, QuestionError
from rag.index_store import current_version, load_index, summarize
from rag.passages import Answer, IndexStatus, SearchResult
from rag.query import reduce_to_signal, rewrite_followup
from rag.retrieval import FusionWeights, Ranking, Retriever, elapsed_ms
from rag.settings import ANSWERERS, Settings

History = Sequence[Mapping[str, str]]  # [{"role": "user"|"assistant", "content": "..."}]

log = logging.getLogger(__name__)

TRIMMED_NOTE = "Your input was long or looked like a log, so it was reduced to its error signal before searching."
LLM_FALLBACK_NOTE = "The language model was unavailable: {reason} Showing the extractive answer from the passages."


@dataclass(frozen=True)
class _Prepared:
    question: str
    query: str
    notes: tuple[str, ...]
    ranking: Ranking
    timings_ms: dict[str, float]


class Assistant:
    """Loads the published index and the embedding model once; thread-safe for concurrent callers."""

    def __init__(self, settings: Settings, retriever: Retriever) -> None:
        self.settings = settings
        self._retriever = retriever
        self._weights = FusionWeights(
            candidates=settings.candidates,
            rrf_k=settings.rrf_k,
            dense=settings.dense_weight,
            bm25=settings.bm25_weight,
            identifier=settings.identifier_weight,
            sentence=settings.sentence_weight,
            max_per_section=settings.max_per_section,
        )
        self._policy = AbstentionPolicy(
            settings.abstain_min_dense, settings.abstain_min_term_coverage, settings.abstain_min_dense_with_unknown_name
        )
        self._llm = None

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> Assistant:
        settings = settings or Settings.from_env()
        if current_version(settings.index_dir) is None:  # say so before spending seconds on the model
            raise IndexNotFoundError(f"No index at {settings.index_dir}/: run 'kafka-rag ingest' first")
        embedder = load_embedder(settings.model, settings.query_threads)
        index = load_index(settings.index_dir, model_identity(embedder))
        return cls(settings, Retriever(index, embedder))

    @property
    def status(self) -> IndexStatus:
        summary = summarize(self._retriever.index.manifest)
        return IndexStatus(
            version=summary["version"] or "",
            documents=summary["documents"],
            chunks=summary["chunks"],
            model=summary["model"] or "",
            built_at=summary["built_at"] or "",
            index_type=summary["index_type"] or "",
            skipped=summary["skipped"],
        )

    # ------------------------------------------------------------------------------------------ public API

    def ask(
        self,
        question: str,
        history: History = (),
        *,
        top_k: int | None = None,
        retrieval: str | None = None,
        answerer: str | None = None,
    ) -> Answer:
        answer: Answer | None = None
        for event in self.stream(question, history, top_k=top_k, retrieval=retrieval, answerer=answerer):
            if isinstance(event, Answer):
                answer = event
        assert answer is not None
        return answer

    def stream(
        self,
        question: str,
        history: History = (),
        *,
        top_k: int | None = None,
        retrieval: str | None = None,
        answerer: str | None = None,
    ) -> Iterator[str | Answer]:
        """Yield text deltas as they are produced, then exactly one final `Answer`."""
        started = time.perf_counter()
        answerer = answerer or self.settings.answerer
        if answerer not in ANSWERERS:
            raise QuestionError(f"Unknown answerer {answerer!r}: use one of {', '.join(ANSWERERS)}")
        prepared = self._prepare(
            question,
            history,
            top_k or self.settings.top_k,
            retrieval or self.settings.retrieval_mode,
            use_llm=answerer == "llm",
        )
        timings = dict(prepared.timings_ms)
        notes = list(prepared.notes)
        stage = time.perf_counter()
        evidence = assess(self._retriever, question, prepared.query, prepared.ranking)
        weak = should_abstain(evidence, self._policy)
        used = "extractive"
        if weak or not prepared.ranking.hits:
            draft = abstain(self._retriever, prepared.ranking)
            yield draft.text
        elif answerer == "llm":
            draft, used = yield from self._stream_llm(prepared, history, notes)
        else:
            draft = extract_answer(
                self._retriever, prepared.query, prepared.ranking, self.settings.max_answer_sentences, question
            )
            yield draft.text
        timings["answer"] = elapsed_ms(stage)
        timings["total"] = elapsed_ms(started)
        yield Answer(
            question=prepared.question,
            text=draft.text,
            citations=draft.citations,
            abstained=draft.abstained,
            query=prepared.query,
            related=draft.related,
            notes=tuple(notes),
            timings_ms=timings,
            answerer=used,
            index_version=self._retriever.index.version,
        )

    def search(
        self, question: str, history: History = (), *, k: int = 10, retrieval: str | None = None, rewrite: bool = True
    ) -> SearchResult:
        """Ranked passages only; `rewrite=False` searches the raw question, ignoring history."""
        prepared = self._prepare(
            question, history if rewrite else (), k, retrieval or self.settings.retrieval_mode, use_llm=False
        )
        passages = tuple(self._retriever.passage(hit) for hit in prepared.ranking.hits)
        return SearchResult(query=prepared.query, passages=passages, timings_ms=prepared.timings_ms)

    # ------------------------------------------------------------------------------------------ stages

    def _prepare(self, question: str, history: History, k: int, mode: str, use_llm: bool) -> _Prepared:
        if not isinstance(question, str) or not question.strip():
            raise QuestionError("The question is empty: type a question or paste an error message")
        timings: dict[str, float] = {}
        notes: list[str] = []
        started = time.perf_counter()
        reduced = reduce_to_signal(question, self.settings.max_question_chars)
        if reduced.trimmed:
            notes.append(TRIMMED_NOTE)
        query = reduced.text
        if history:
            query = self._rewrite(query, history, use_llm, notes)
        timings["rewrite"] = elapsed_ms(started)
        ranking = self._retriever.rank(query, k, mode, self._weights)
        timings.update(ranking.timings_ms)
        shown = question if len(question) <= 2000 else question[:2000] + " …"
        return _Prepared(shown, query, tuple(notes), ranking, timings)

    def _rewrite(self, query: str, history: History, use_llm: bool, notes: list[str]) -> str:
        if use_llm:
            try:
                return self._llm_answerer().rewrite_query(query, history)
            except GenerationError as exc:
                notes.append(
                    f"The language model could not rewrite the follow-up ({exc}); used the conversation's subject."
                )
        return rewrite_followup(query, history)

    def _stream_llm(self, prepared: _Prepared, history: History, notes: list[str]):
        passages = [self._retriever.passage(hit) for hit in prepared.ranking.hits]
        try:
            llm_draft = None
            for event in self._llm_answerer().stream(prepared.question, history, passages):
                if isinstance(event, str):
                    yield event
                else:
                    llm_draft = event
            if llm_draft is None or (not llm_draft.citations and not llm_draft.abstained):
                raise GenerationError("its answer cited none of the passages")
        except GenerationError as exc:
            log.warning("LLM answer failed, falling back to extractive: %s", exc)
            notes.append(LLM_FALLBACK_NOTE.format(reason=exc))
            draft = extract_answer(
                self._retriever, prepared.query, prepared.ranking, self.settings.max_answer_sentences, prepared.question
            )
            yield "\n\n" + draft.text
            return draft, "extractive"
        notes.extend(llm_draft.notes)
        if llm_draft.abstained:
            return abstain(self._retriever, prepared.ranking), "llm"
        return Draft(llm_draft.text, llm_draft.citations, abstained=False), "llm"

    def _llm_answerer(self):
        if self._llm is None:
            from rag.llm import LLMAnswerer, build_chat_model

            s = self.settings
            self._llm = LLMAnswerer(
                build_chat_model(s.llm_provider, s.llm_base_url, s.llm_model, s.llm_timeout_s, s.llm_temperature)
            )
        return self._llm
