"""The one settings object, read from `KAFKA_RAG_*` environment variables at entry points.

Pure functions never take `Settings`; entry points (CLI, UI, Slack, evals) load it once with their
flags as `Settings.from_env(**overrides)`, and pass plain values down. Secrets (LLM keys, Slack tokens) are not
settings: they are read from the environment where they are used and never logged or serialised.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_type_hints

from rag.errors import ConfigurationError
from rag.query import CONTEXT_WORDS

BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# all-MiniLM-L6-v2 with the low-rank adapter fitted on the tuning parts merged in (`rag.adapter`)
ADAPTED_MODEL = "kafka-rag/all-MiniLM-L6-v2-kafka"
DEFAULT_MODEL = ADAPTED_MODEL
# onnx: torch's vectors (cosine 1.0000) at 2x the encoding speed, and a query process that never imports
# torch (cold `kafka-rag ask` in ~2 s instead of ~9 s); measured in README "Embedding runtime".
DEFAULT_EMBED_BACKEND = "onnx"
EMBED_BACKENDS = ("onnx", "onnx-int8", "torch")
DEFAULT_MODEL_CACHE_DIR = Path("~/.cache/kafka-rag")
ENV_PREFIX = "KAFKA_RAG_"


@dataclass(frozen=True)
class Settings:
    # where things are
    index_dir: Path = Path("index")
    sources: tuple[str, ...] = ("seeds",)
    feedback_path: Path = Path("feedback.jsonl")

    # ingest
    model: str = DEFAULT_MODEL
    embed_backend: str = DEFAULT_EMBED_BACKEND  # onnx | onnx-int8 | torch: for ingest and queries alike
    model_cache_dir: Path = DEFAULT_MODEL_CACHE_DIR  # the onnx backends' graphs, exported here on first use
    spark_master: str = "local[*]"
    chunk_size: int = 1300  # characters of body text per chunk (heading path not counted); evals/tune_chunking.py
    chunk_overlap: int = 217  # characters carried into the next chunk when a section is split
    # text | unit-mean: a chunk's vector is the model's for its text, or the mean of its evidence units'
    # (a shorter ingest, ranking a little worse on the tuning parts: README "Speed")
    chunk_vectors: str = "text"
    encode_batch_size: int = 4  # texts per forward pass: 4 encodes 10-15% faster than 16 on CPU (README "Speed")
    arrow_batch_size: int = 1000  # rows per Arrow batch between the JVM and Python workers
    threads_per_task: int = 1  # embedding (torch/ONNX Runtime) threads in each Spark task: tasks x threads <= cores
    flat_index_max: int = 50_000  # exact search up to here; IVF + exact re-rank above (benchmarks/scale.py)
    keep_versions: int = 3  # complete versions kept after a publish (plus any a running server holds)

    # serving
    reload_interval_s: float = 5.0  # how often servers look at CURRENT for a new version; 0 never

    # retrieval (first stage; the second stage's weights are data: rag/ranker.json)
    retrieval_mode: str = "hybrid"  # dense | bm25 | hybrid
    top_k: int = 5
    candidates: int = 40  # per retriever before fusion
    rrf_k: int = 20
    dense_weight: float = 1.0
    bm25_weight: float = 1.0
    identifier_weight: float = 2.0  # with rrf_k: chosen by evals/tune_fusion.py (evals/reports/tune_fusion.md)
    sentence_weight: float = 1.0  # best-unit similarity, a fourth ranking in the fusion
    max_per_section: int = 4

    # answering (chosen on the tuning parts by evals/tune_answers.py; abstention is data: rag/abstention.json)
    answerer: str = "extractive"  # extractive | llm
    max_units_fact: int = 5  # evidence units in the answer to a question that asks for a fact
    max_units_troubleshoot: int = 6  # ... to one that reports an error or asks for a fix
    # Units this far below the lead unit's score are left out, and units of higher-ranked passages are raised by
    # unit_rank_weight times their passage's prior (`rag.answering.passage_priors`: 1 / (1 + rank) until the
    # forty-sixth session, now the ranker's probability relative to the first passage's). Re-chosen held out from
    # the adapter (`evals/tune_answers.py --half-indexes ... --only unit_relative_cutoff unit_rank_weight`,
    # evals/reports/tune_unit_prior.md): a new question's cosines say less than the served index's in-sample
    # ones, and the passage's rank more (0.4 and 0.3 before). With the relative probability, 0.3 and 0.8 did
    # worse than 0.5 on the tuning questions held out from adapter and ranker alike (quality_history, 46th).
    unit_relative_cutoff: float = 0.8
    unit_min_novelty: float = 0.35  # share of new content words a following unit must bring
    unit_overlap_weight: float = 0.0
    unit_identifier_weight: float = 0.0
    unit_rank_weight: float = 0.5
    unit_neighbour_weight: float = 0.05  # for a unit next to one already in the answer, in the same passage
    # For a unit of a passage the answer quotes nothing of yet, when the next unit is picked: depth in the first
    # passage costs the facts of the next ones. Chosen by `evals/tune_answers.py --half-indexes ... --only
    # unit_new_passage_weight` (evals/reports/tune_new_passage_weight.md; 0.1-0.25 all gain, and `--check`
    # chose 0.2 on either half of the tuning questions, gaining on the other:
    # evals/reports/tune_new_passage_weight_check.md).
    unit_new_passage_weight: float = 0.2
    unit_echo_weight: float = 0.3  # against a unit that repeats the user's pasted command, or names another exception
    unit_echo_share: float = 0.8  # ... or a code unit with this share of its words in the question (their log lines)
    # For a unit that says what to do (a command, a config line, an imperative) when the question asks how to do
    # something (`Query.how_to`): "how do I make Kafka spread replicas over the zones?" is answered by the line
    # that sets `broker.rack`, which scores under the sentences that describe rack awareness. Chosen by
    # `evals/tune_answers.py --half-indexes ... --only unit_action_weight` (evals/reports/tune_action_weight.md).
    unit_action_weight: float = 0.1
    # A question that asks several things holds the best unit for each ask searched alone, when it scores this
    # much (`rag.answering.AnswerShape.ask_min`).
    unit_ask_min: float = 0.8
    # A unit whose cosine with the question stays under this is added only right beside one chosen for its own
    # sake, as its sequel or its preamble, never in a chain (`rag.answering.AnswerShape.floor`): a sentence that
    # merely scores near the lead ("ZooKeeper has been upgraded to version 3.6.3" under an answer about `acks`)
    # tells the user nothing. Units naming what the question is about are exempt. Chosen by `evals/tune_answers.py
    # --half-indexes ... --only unit_floor` on cosines held out from the adapter (evals/reports/tune_unit_floor.md):
    # on the served index the tuning questions' cosines are in-sample, and the same search chose 0.35 there.
    unit_floor: float = 0.2
    # A follow-up asks for something new: its answer is not led by a sentence of this many words or more that the
    # conversation's last answer already showed, when another unit it could lead with rises over the floor and
    # scores within unit_told_max_gap of it (`rag.answering._told`); a shorter one is a fact worth repeating
    # ("By default, clients receive an unlimited quota."). 0 words turns it off, a gap of 9 bounds nothing. Chosen
    # by `evals/tune_followups.py --half-indexes ...` on the tuning follow-ups asked after the assistant's own
    # answers (evals/reports/tune_followups.md): smaller gaps led fewer answers with a key fact.
    unit_told_min_words: int = 12
    unit_told_max_gap: float = 9.0
    # In a conversation, a question of at most followup_max_terms search terms that names no identifier and asks
    # what no thing is (`rag.query.names_its_subject`: "any prerequisites?", "what's the default?") is searched
    # with the conversation's subject when, searched alone, its passages' best cosine stays under
    # followup_weak_dense (`Assistant._leans_on_history`). 0 terms turns it off.
    followup_max_terms: int = 2
    followup_weak_dense: float = 0.5
    # ... and, whatever its words, when searched with the conversation's subject its best passage scores more than
    # followup_lean_margin above its best passage searched alone (learned scores); inf never compares (no second
    # search). All three chosen by `evals/tune_leaning.py --half-indexes ...` (evals/reports/tune_leaning.md).
    followup_lean_margin: float = 1.0
    # A follow-up leaning on the conversation is searched with the identifiers of the earlier user turns and the
    # first followup_context_words content words of the last one (`rag.query.rewrite_followup`, `CONTEXT_WORDS`).
    followup_context_words: int = CONTEXT_WORDS
    # The rendered answer (quoted words, names, labels, markers, part headings) stays within this many
    # characters: concise by construction on any mix of questions (a limit on the tuning parts' median alone
    # let the test parts' answers run longer). Chosen by `evals/tune_answers.py --only answer_max_chars`:
    # the largest bound whose tuning-part medians stay within 860 characters.
    answer_max_chars: int = 925
    # Setting entries among the first passages that the answer does not quote, named after it with their defaults,
    # as many as keep it within related_settings_max_chars (`rag.answering._with_related_settings`). Chosen by
    # `evals/tune_answers.py --only related_settings_max related_settings_depth related_settings_max_chars`
    # (evals/reports/tune_related_settings.md).
    related_settings_max: int = 3
    related_settings_depth: int = 5
    related_settings_max_chars: int = 860
    max_question_chars: int = 4000  # longer input is reduced to its signal with a note
    query_threads: int = 1  # embedding, OpenMP (FAISS) and BLAS (numpy) threads when serving: concurrent requests
    # beat intra-op threads on few cores
    llm_provider: str = "openai"  # openai | ollama
    llm_base_url: str = ""
    llm_model: str = ""
    llm_timeout_s: float = 30.0
    llm_temperature: float = 0.0

    # web UI
    ui_host: str = "127.0.0.1"
    ui_port: int = 7860
    ui_concurrency: int = 8
    ui_auth: str = ""  # "user:password" turns on the login form (rate-limited per client: ui/guard.py)
    # Conversations the web UI keeps in memory; the least recently used beyond this are dropped. Every API
    # call without a session opens one (~57 KB of state measured), which Gradio's own default keeps 10,000 of.
    ui_sessions: int = 500

    def __post_init__(self) -> None:
        if self.chunk_size < 100:
            raise ConfigurationError(f"chunk_size must be at least 100 characters, got {self.chunk_size}")
        if not 0 <= self.chunk_overlap < self.chunk_size:
            raise ConfigurationError(
                f"chunk_overlap must be between 0 and chunk_size ({self.chunk_size}), got {self.chunk_overlap}"
            )
        if not 1 <= self.top_k <= MAX_TOP_K:
            raise ConfigurationError(f"top_k must be between 1 and {MAX_TOP_K}, got {self.top_k}")
        if self.ui_sessions < 1:
            raise ConfigurationError(f"ui_sessions must be at least 1, got {self.ui_sessions}")
        if self.keep_versions < 1:
            raise ConfigurationError(f"keep_versions must be at least 1, got {self.keep_versions}")
        if self.followup_context_words < 0:
            raise ConfigurationError(f"followup_context_words must be 0 or more, got {self.followup_context_words}")
        if self.reload_interval_s < 0:
            raise ConfigurationError(f"reload_interval_s must be 0 (off) or more, got {self.reload_interval_s}")
        if self.retrieval_mode not in RETRIEVAL_MODES:
            raise ConfigurationError(
                f"retrieval_mode must be one of {', '.join(RETRIEVAL_MODES)}, got {self.retrieval_mode!r}"
            )
        if self.embed_backend not in EMBED_BACKENDS:
            raise ConfigurationError(
                f"embed_backend must be one of {', '.join(EMBED_BACKENDS)}, got {self.embed_backend!r}"
            )
        if self.chunk_vectors not in CHUNK_VECTORS:
            raise ConfigurationError(
                f"chunk_vectors must be one of {', '.join(CHUNK_VECTORS)}, got {self.chunk_vectors!r}"
            )
        if self.answerer not in ANSWERERS:
            raise ConfigurationError(f"answerer must be one of {', '.join(ANSWERERS)}, got {self.answerer!r}")
        if self.llm_provider not in LLM_PROVIDERS:
            raise ConfigurationError(
                f"llm_provider must be one of {', '.join(LLM_PROVIDERS)}, got {self.llm_provider!r}"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read `KAFKA_RAG_<FIELD>` variables, then apply keyword overrides (CLI flags) that are not None."""
        environ = os.environ if environ is None else environ
        hints = get_type_hints(cls)
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            raw = environ.get(ENV_PREFIX + field.name.upper())
            if raw is not None:
                values[field.name] = _parse(field.name, hints[field.name], raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


MAX_TOP_K = 50
MAX_QUESTION_CHARS = 250_000  # a longer paste is refused; up to here a log is reduced to its signal (<5 s)
RETRIEVAL_MODES = ("dense", "bm25", "hybrid")
CHUNK_VECTORS = ("text", "unit-mean")
ANSWERERS = ("extractive", "llm")
LLM_PROVIDERS = ("openai", "ollama")


def _parse(name: str, kind: Any, raw: str) -> Any:
    try:
        if kind is Path:
            return Path(raw)
        if kind is int:
            return int(raw)
        if kind is float:
            return float(raw)
        if kind == tuple[str, ...]:
            return tuple(part for part in raw.split(",") if part)
        return raw
    except ValueError as exc:
        raise ConfigurationError(f"{ENV_PREFIX}{name.upper()}={raw!r} is not a valid {kind.__name__}") from exc
