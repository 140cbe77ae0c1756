"""The one service API every adapter uses: `Assistant.from_settings(...)`, `ask`, `stream`, `search`.

One way down, no stage calling back into an earlier one:

    question, history
      → parse once (rag.query): reduced text, follow-up rewrite, identifiers with where each sits
      → retrieve (rag.retrieval): candidates from dense + BM25 + identifiers, each with its features
      → rank (rag.ranking): the learned second stage orders them, diverse per section
      → abstain (a request to write or translate something, or rag.abstention) or answer (rag.answering:
        evidence units, extractive; or LLM, validated)
      → Answer (text with [n] markers, citations in marker order, query used, timings per stage)

The index, the model and the learned weights are loaded once in `from_settings`; every method only
reads them, so one Assistant serves concurrent callers (UI queue workers, Slack listeners, eval threads).
Servers call `follow_versions()`: a new published version is then loaded in the background and swapped
in whole (`rag.follow`); each request reads the loaded index once, so it finishes on the version it
started with, and its Answer names that version.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from threadpoolctl import threadpool_limits

from rag.abstention import (
    ABSTENTION_FEATURES,
    TOP_PASSAGES,
    abstention_features,
    answer_confidence,
    load_abstention,
    should_abstain,
)
from rag.answering import AnswerShape, Draft, abstain, extract_answer, section_passages
from rag.embedding import Embedder, load_embedder, model_identity
from rag.errors import GenerationError, QuestionError
from rag.follow import VersionFollower
from rag.index_store import (
    load_index,
    load_version,
    read_synthetic,
    read_version_manifest,
    serving_path,
    summarize,
)
from rag.passages import Answer, IndexStatus, Passage, SearchResult
from rag.query import Query, continues_with_own_subject, names_its_subject, parse_query, points_back_to_nothing
from rag.ranking import RANK_FEATURES, LinearModel, Ranked, load_ranker, rank
from rag.retrieval import FirstStage, Retriever, elapsed_ms
from rag.settings import ANSWERERS, MAX_QUESTION_CHARS, MAX_TOP_K, Settings
from rag.synthetic import SyntheticQuery

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from rag.llm import LLMAnswerer

History = Sequence[Mapping[str, str]]  # [{"role": "user"|"assistant", "content": "..."}]

log = logging.getLogger(__name__)

TRIMMED_NOTE = "Your input was long or looked like a log, so it was reduced to its error signal before searching."
TASK_NOTE = (
    "This asks for something to be written, generated, translated or summarised; the assistant answers "
    "questions from its knowledge base, so it lists the closest passages instead."
)
UNREFERENCED_NOTE = (
    'The question points back ("it", "this") but nothing came before it: say what it is about, or paste the '
    "error or command output, and ask again."
)
READ_AS_NOTE = (
    "Read `{wrong}` as `{right}`: the knowledge base names no `{wrong}`; check its spelling where you set it."
)
CAUTION_NOTE = (
    "Low confidence: the passages found match this question only in part, and answers that score like this one "
    "are wrong about as often as right. Check the cited passages before acting on it."
)
LLM_FALLBACK_NOTE = "The language model was unavailable: {reason} Showing the extractive answer from the passages."
# First-stage candidates asked of each retriever per passage ranked (each gives `Settings.candidates` at least).
RETRIEVAL_DEPTH_PER_PASSAGE = 4


@dataclass(frozen=True)
class _Prepared:
    query: Query
    notes: tuple[str, ...]
    ranked: Ranked
    timings_ms: dict[str, float]
    retriever: Retriever  # the version that served this question, for its asks searched alone
    depth: int  # of the first stage

    @property
    def version(self) -> str:
        return self.retriever.version


@dataclass(frozen=True)
class Inspection:
    """What the learned stages see for one question: fit scripts read this through the public API.

    `candidates` are the ranked passages with their ranking features (in `rank_features` order);
    `abstention` is the question's abstention feature vector (in `abstention_features` order).
    """

    query: str
    rank_features: tuple[str, ...]
    candidates: tuple[tuple[Passage, tuple[float, ...]], ...]
    abstention_features: tuple[str, ...]
    abstention: tuple[float, ...]


class Assistant:
    """Loads the published index, the embedding model and the learned weights once; thread-safe."""

    def __init__(
        self,
        settings: Settings,
        retriever: Retriever,
        ranker: LinearModel | None = None,
        abstention: LinearModel | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.settings = settings
        self._embedder = embedder  # kept to load new versions with (`follow_versions`)
        self._retriever = retriever
        self._ranker = ranker or load_ranker()
        self._abstention = abstention or load_abstention()
        self._first_stage = FirstStage.from_settings(settings)
        self._shape = AnswerShape.from_settings(settings)
        self._llm: LLMAnswerer | None = None
        self._follower: VersionFollower[Retriever] | None = None

    @classmethod
    def from_settings(
        cls, settings: Settings | None = None, abstention: LinearModel | None = None, ranker: LinearModel | None = None
    ) -> Assistant:
        """`abstention` and `ranker` replace the shipped models (for the fit scripts)."""
        settings = settings or Settings.from_env()
        read_version_manifest(serving_path(settings.index_dir))  # a missing or damaged index: say so before the model
        ranker = ranker if ranker is not None else load_ranker()  # a broken model file fails before the model loads
        abstention = abstention or load_abstention()
        embedder = load_embedder(
            settings.model, settings.embed_backend, settings.query_threads, settings.model_cache_dir
        )
        # FAISS's OpenMP threads spin on a single question's search, work too small to share: the docs golden file's
        # eval spent 70 s of CPU on 400 questions with them, 62 s without, and answered faster. numpy's BLAS threads
        # wait the same way on late interaction's product: on two cores with the other one busy it took 15.8 ms on
        # two threads against 1.0 ms on one, and the seeds questions' `ask` p50 was 52-67 ms against 27 ms.
        threadpool_limits(limits=settings.query_threads)  # every pool: OpenMP and BLAS
        index = load_index(settings.index_dir, model_identity(embedder))
        return cls(settings, Retriever(index, embedder), ranker, abstention, embedder)

    @classmethod
    def built_with(
        cls, settings: Settings, abstention: LinearModel | None = None, ranker: LinearModel | None = None
    ) -> Assistant:
        """An assistant on `settings.index_dir` with the embedding model and backend that index was built with,
        whatever the settings name: the fit scripts read indexes built with models other than the default."""
        model = read_version_manifest(serving_path(settings.index_dir)).get("model", {})
        recorded = {"model": model.get("name"), "embed_backend": model.get("backend")}
        chosen = dataclasses.replace(settings, **{k: v for k, v in recorded.items() if v})
        return cls.from_settings(chosen, abstention, ranker)

    def with_settings(self, **overrides) -> Assistant:
        """The same loaded index, model and learned weights under changed answer settings (for tuning scripts)."""
        settings = dataclasses.replace(self.settings, **overrides)
        return Assistant(settings, self._retriever, self._ranker, self._abstention, self._embedder)

    def follow_versions(self) -> None:
        """Serve each new published version without a restart (servers call this once; idempotent)."""
        if self._follower is None:
            embedder = self._embedder
            if embedder is None:
                raise RuntimeError("follow_versions needs an Assistant made by from_settings (it holds the model)")
            identity = model_identity(embedder)
            self._follower = VersionFollower(
                self.settings.index_dir,
                self._retriever.version,
                lambda path: Retriever(load_version(path, identity), embedder),
                self._swap,
                self.settings.reload_interval_s,
            )
            self._follower.start()

    def refresh_index(self) -> str:
        """Load and serve the version `CURRENT` names now if it is new and sound; returns the version served."""
        self.follow_versions()
        assert self._follower is not None
        self._follower.check(wait=True)
        return self._retriever.version

    def _swap(self, retriever: Retriever) -> None:
        self._retriever = retriever  # one reference assignment: requests hold the retriever they started with

    def with_chat_model(self, chat_model: BaseChatModel) -> Assistant:
        """The same index and weights, answering with this LangChain chat model (`rag.langchain` passes the user's)."""
        from rag.llm import LLMAnswerer

        assistant = self.with_settings(answerer="llm")
        assistant._llm = LLMAnswerer(chat_model)
        return assistant

    @property
    def status(self) -> IndexStatus:
        retriever = self._retriever
        summary = summarize(retriever.index.manifest)
        return IndexStatus(
            version=retriever.version,  # the folder it was loaded from, as `Answer.index_version` says
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
        return _final_answer(self.stream(question, history, top_k=top_k, retrieval=retrieval, answerer=answerer))

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
        yield from self._stream(question, history, top_k, retrieval, answerer)

    def ask_and_search(
        self,
        question: str,
        history: History = (),
        *,
        top_k: int | None = None,
        retrieval: str | None = None,
        depth: int = 10,
    ) -> tuple[Answer, SearchResult]:
        """The answer and the first `depth` ranked passages of the same retrieval (what `search` returns for
        the question; with the LLM answerer, for the query it rewrote): one retrieval where an eval run would
        make two. The answer is the one `ask` gives: its `top_k` passages are the first of the same ranking."""
        ranking: list[SearchResult] = []
        answer = _final_answer(self._stream(question, history, top_k, retrieval, None, ranking, depth))
        return answer, ranking[0]

    def _stream(
        self,
        question: str,
        history: History,
        top_k: int | None,
        retrieval: str | None,
        answerer: str | None,
        ranking: list[SearchResult] | None = None,
        ranking_depth: int = 0,
    ) -> Iterator[str | Answer]:
        """`stream`; with `ranking`, the retrieval ranks `ranking_depth` passages too and appends them to it."""
        started = time.perf_counter()
        answerer = answerer or self.settings.answerer
        if answerer not in ANSWERERS:
            raise QuestionError(f"Unknown answerer {answerer!r}: use one of {', '.join(ANSWERERS)}")
        k = self.settings.top_k if top_k is None else top_k
        depth = k
        if ranking is not None:
            check_question(question, history, k)  # a bad top_k gets its message, not a failed max()
            depth = max(k, ranking_depth)
        prepared = self._prepare(
            question,
            history,
            depth,
            retrieval or self.settings.retrieval_mode,
            use_llm=answerer == "llm",
        )
        if ranking is not None:
            passages = tuple(c.passage for c in prepared.ranked.candidates[:ranking_depth])
            ranking.append(SearchResult(query=prepared.query.text, passages=passages, timings_ms=prepared.timings_ms))
            ranked = prepared.ranked
            top = dataclasses.replace(ranked, candidates=ranked.candidates[:k], scores=ranked.scores[:k])
            prepared = dataclasses.replace(prepared, ranked=top, depth=k * RETRIEVAL_DEPTH_PER_PASSAGE)
        timings = dict(prepared.timings_ms)
        notes = list(prepared.notes)
        used = "extractive"
        task = prepared.query.intent == "task"
        unreferenced = points_back_to_nothing(question, history, self.settings.followup_max_terms)
        if task:
            notes.append(TASK_NOTE)
        elif unreferenced:
            notes.append(UNREFERENCED_NOTE)
        confidence = answer_confidence(prepared.ranked, self._abstention)
        declined = task or unreferenced or confidence == "declined"
        cautioned = not declined and confidence == "unsure"
        if cautioned:
            notes.append(CAUTION_NOTE)
        # the extractive answer holds a unit for each thing the question asks: searched only when it answers
        asks = () if declined or answerer == "llm" else self._search_asks(prepared, timings)
        stage = time.perf_counter()
        if declined:
            draft = abstain(prepared.ranked)
            yield draft.text
        elif answerer == "llm":
            draft, used = yield from self._stream_llm(prepared, history, notes)
        else:
            draft = extract_answer(prepared.ranked, self._shape, asks)
            yield draft.text
        timings["answer"] = elapsed_ms(stage)
        timings["total"] = elapsed_ms(started)
        shown = question if len(question) <= 2000 else question[:2000] + " …"
        yield Answer(
            question=shown,
            text=draft.text,
            citations=draft.citations,
            abstained=draft.abstained,
            query=prepared.query.text,
            related=draft.related,
            notes=tuple(notes),
            cautioned=cautioned,
            timings_ms=timings,
            answerer=used,
            index_version=prepared.version,
        )

    def search(
        self, question: str, history: History = (), *, k: int = 10, retrieval: str | None = None, rewrite: bool = True
    ) -> SearchResult:
        """Ranked passages only; `rewrite=False` searches the raw question, ignoring history."""
        prepared = self._prepare(
            question, history if rewrite else (), k, retrieval or self.settings.retrieval_mode, use_llm=False
        )
        passages = tuple(c.passage for c in prepared.ranked.candidates)
        return SearchResult(query=prepared.query.text, passages=passages, timings_ms=prepared.timings_ms)

    def inspect(self, question: str, history: History = (), *, k: int = 20, mode: str = "hybrid") -> Inspection:
        """The features the learned ranking and abstention read for `question` (`mode` retrieval)."""
        prepared = self._prepare(question, history, k, mode, use_llm=False)
        ranked = prepared.ranked
        return Inspection(
            query=prepared.query.text,
            rank_features=RANK_FEATURES,
            candidates=tuple((c.passage, c.features) for c in ranked.candidates),
            abstention_features=ABSTENTION_FEATURES,
            abstention=abstention_features(ranked),
        )

    def synthetic_queries(self) -> list[SyntheticQuery]:
        """The training queries the ingest made from this index's corpus structure (for `evals/fit_ranker.py`)."""
        return read_synthetic(self._retriever.index.path)

    # ------------------------------------------------------------------------------------------ stages

    def _prepare(self, question: str, history: History, k: int, mode: str, use_llm: bool) -> _Prepared:
        check_question(question, history, k)
        retriever = self._retriever  # read once: a version swapped in meanwhile serves the next request
        timings: dict[str, float] = {}
        notes: list[str] = []
        started = time.perf_counter()

        def llm_rewrite(text: str, turns: History) -> str | None:
            try:
                return self._llm_answerer().rewrite_query(text, turns)
            except GenerationError as exc:
                notes.append(
                    f"The language model could not rewrite the follow-up ({exc}); used the conversation's subject."
                )
                return None  # `parse_query` rewrites it as it does without the LLM

        # Without the LLM, `parse_query` rewrites a follow-up itself and keeps what it carries over as context.
        # A name typed in lower case is read as the corpus writes it; each word looked up once per question.
        spelling = functools.cache(retriever.corpus_spelling)
        # A word spelt like an error's name (`SASL_SSL`) reports an error only when the corpus names an error so.
        error_name = functools.cache(retriever.names_an_error)
        query = parse_query(
            question,
            history,
            self.settings.max_question_chars,
            llm_rewrite if use_llm else None,
            context_words=self.settings.followup_context_words,
            spelling=spelling,
            error_name=error_name,
        )
        if query.trimmed:
            notes.insert(0, TRIMMED_NOTE)
        timings["parse"] = elapsed_ms(started)
        ranked = self._retrieve_and_rank(retriever, query, k, mode, timings)
        # The LLM's rewrite (`use_llm`) restates a follow-up whole, pronoun or not.
        # A question that does not point back may still lean on the conversation: when it is a fragment
        # (`_leans_on_history`), or when searched with the conversation's subject its best passage scores more than
        # `followup_lean_margin` above its best passage searched alone ("which gauge tells us per node whether the
        # node is currently leading?" after a KRaft quorum's outage). One that asks what a thing no turn named is
        # (`Query.new_subject`: "what's a ktable?" after listing ACLs) starts a new subject and is searched alone.
        may_lean = bool(history) and not use_llm and not query.followup and not query.new_subject
        leans = may_lean and self._leans_on_history(question, ranked)
        if leans or (may_lean and math.isfinite(self.settings.followup_lean_margin)):
            started = time.perf_counter()
            leaning = parse_query(
                question,
                history,
                self.settings.max_question_chars,
                leaning=True,
                context_words=self.settings.followup_context_words,
                spelling=spelling,
                error_name=error_name,
            )
            query, ranked = self._read_otherwise(retriever, leaning, query, ranked, k, mode, preferred=leans)
            timings["leaning"] = elapsed_ms(started)
        # One that goes on from the conversation with a subject of its own ("and how do I make each poll return
        # fewer records?" after transactions) is searched alone too, and kept alone on the same margin.
        elif (
            query.followup
            and not use_llm
            and continues_with_own_subject(question, history, self.settings.followup_max_terms)
        ):
            started = time.perf_counter()
            alone = parse_query(
                question, (), self.settings.max_question_chars, spelling=spelling, error_name=error_name
            )
            query, ranked = self._read_otherwise(retriever, alone, query, ranked, k, mode)
            timings["alone"] = elapsed_ms(started)
        notes += [READ_AS_NOTE.format(wrong=wrong, right=right) for wrong, right in ranked.pool.query.read_as]
        return _Prepared(query, tuple(notes), ranked, timings, retriever, k * RETRIEVAL_DEPTH_PER_PASSAGE)

    def _leans_on_history(self, question: str, ranked: Ranked) -> bool:
        """Whether a question asked in a conversation with nothing in its words pointing back (`is_followup`)
        should be searched with the conversation's subject too: the knowledge base does not answer it alone
        ("which JMX bean?" after "how do I monitor consumer lag?"), or it is a fragment that does not say what
        it is about (`names_its_subject`: "any prerequisites?", "what's the default?") whose passages, found
        alone, are not close to it (their best cosine under `followup_weak_dense`)."""
        if should_abstain(ranked, self._abstention):
            return True
        fragment = not names_its_subject(question, self.settings.followup_max_terms)
        best = max((c.dense for c in ranked.candidates[:TOP_PASSAGES]), default=0.0)
        return fragment and best < self.settings.followup_weak_dense

    def _read_otherwise(
        self,
        retriever: Retriever,
        other: Query,
        query: Query,
        ranked: Ranked,
        k: int,
        mode: str,
        preferred: bool = False,
    ) -> tuple[Query, Ranked]:
        """`other`, another reading of the question (leaning on the conversation, or alone), searched and kept over
        (`query`, `ranked`) when it is `preferred` or its best passage scores `followup_lean_margin` above theirs,
        and the abstention would not decline it."""
        ranked_other = self._retrieve_and_rank(retriever, other, k, mode, {})
        if (
            preferred or _scores_above(ranked_other, ranked, self.settings.followup_lean_margin)
        ) and not should_abstain(ranked_other, self._abstention):
            return other, ranked_other
        return query, ranked

    def _retrieve_and_rank(
        self, retriever: Retriever, query: Query, k: int, mode: str, timings: dict[str, float]
    ) -> Ranked:
        pool = retriever.retrieve(query, k * RETRIEVAL_DEPTH_PER_PASSAGE, mode, self._first_stage)
        timings.update(pool.timings_ms)
        started = time.perf_counter()
        ranked = rank(pool, k, self.settings.max_per_section, self._ranker)
        ranked = dataclasses.replace(
            ranked,
            candidates=retriever.with_earlier_context(ranked.candidates),
            references=retriever.named_entries(ranked.candidates),
        )
        timings["rank"] = elapsed_ms(started)
        return ranked

    def _search_asks(self, prepared: _Prepared, timings: dict[str, float]) -> tuple[Ranked, ...]:
        """The passages each of the question's asks retrieves searched alone (`Query.asks`), with its cosines,
        ranked as the ask alone ranks them."""
        started = time.perf_counter()
        retriever, mode = prepared.retriever, prepared.ranked.pool.mode
        asks = tuple(
            rank(
                retriever.retrieve(
                    parse_query(ask, (), self.settings.max_question_chars), prepared.depth, mode, self._first_stage
                ),
                prepared.depth,
                self.settings.max_per_section,
                self._ranker,
            )
            for ask in prepared.query.asks
        )
        timings["asks"] = elapsed_ms(started)
        return asks

    def _stream_llm(self, prepared: _Prepared, history: History, notes: list[str]):
        passages = section_passages(prepared.ranked.candidates)
        try:
            llm_draft = None
            for event in self._llm_answerer().stream(prepared.query.question, history, passages):
                if isinstance(event, str):
                    yield event
                else:
                    llm_draft = event
            if llm_draft is None or (not llm_draft.citations and not llm_draft.abstained):
                raise GenerationError("its answer cited none of the passages")
        except GenerationError as exc:
            log.warning("LLM answer failed, falling back to extractive: %s", exc)
            notes.append(LLM_FALLBACK_NOTE.format(reason=exc))
            draft = extract_answer(prepared.ranked, self._shape)
            yield "\n\n" + draft.text
            return draft, "extractive"
        notes.extend(llm_draft.notes)
        if llm_draft.abstained:
            return abstain(prepared.ranked), "llm"
        return Draft(llm_draft.text, llm_draft.citations, abstained=False), "llm"

    def _llm_answerer(self):
        if self._llm is None:
            from rag.llm import LLMAnswerer, build_chat_model

            s = self.settings
            self._llm = LLMAnswerer(
                build_chat_model(s.llm_provider, s.llm_base_url, s.llm_model, s.llm_timeout_s, s.llm_temperature)
            )
        return self._llm


def _scores_above(ranked: Ranked, other: Ranked, margin: float) -> bool:
    """`ranked`'s best passage scores more than `margin` above `other`'s (learned scores of one model)."""
    return bool(ranked.scores) and (not other.scores or ranked.scores[0] > other.scores[0] + margin)


def _final_answer(events: Iterator[str | Answer]) -> Answer:
    """The `Answer` that ends a stream of events, the stream run to its end."""
    answers = [event for event in events if isinstance(event, Answer)]
    assert len(answers) == 1
    return answers[0]


def check_question(question: object, history: History, k: object) -> None:
    """Refuse unusable input before any work: empty or huge questions and history, `k` outside 1-50."""
    if not isinstance(question, str) or not question.strip():
        raise QuestionError("The question is empty: type a question or paste an error message")
    if len(question) > MAX_QUESTION_CHARS:
        raise QuestionError(
            f"The question is {len(question):,} characters long, over the limit of {MAX_QUESTION_CHARS:,}: "
            "paste the error message and the lines around it, not the whole log"
        )
    if sum(len(str(turn.get("content", ""))) for turn in history) > 4 * MAX_QUESTION_CHARS:
        raise QuestionError("The conversation is too long to search with: start a new conversation")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_TOP_K:
        raise QuestionError(f"top_k must be a whole number from 1 to {MAX_TOP_K}, got {k!r}")
