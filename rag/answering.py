"""The offline answerer: pick the sentences of the retrieved passages that answer the question, lay
them out for troubleshooting, and cite each one; or abstain when the evidence is weak.

Sentences are quoted verbatim (their vectors were computed at ingest, see `rag.sentences`), so
every claim is in its passage by construction. The layout groups them as "what it means / likely
cause", "what to do" and "how to check". Deterministic for the same index and question.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import numpy as np

from rag.identifiers import extract_identifiers
from rag.lexical import tokenize
from rag.passages import NOT_COVERED, Citation, Passage
from rag.retrieval import Hit, Ranking, Retriever

_DO = re.compile(
    r"^(?:- )?(?:\d+\)\s*)?(?:Set|Use|Ensure|Make sure|Increase|Decrease|Reduce|Raise|Lower|Upgrade|Restart|Add|"
    r"Configure|Enable|Disable|Avoid|Review|Try|Consider|Switch|Turn|Call|Provide|Remove|Delete|Tune|Track|"
    r"Acknowledge|Commit|Bring|Include|Change|Migrate|Replace|Deploy|Wait|Retry|Handle)\b"
    r"|\byou (?:can|should|need to|must|have to|will have to)\b|\bworkaround\b|\bthe fix\b"
    r"|\bto (?:fix|avoid|resolve)\b",
    re.I,
)
_CHECK = re.compile(
    r"^(?:- )?(?:#|\$ |bin/|kafka-[\w-]+|grep |jstack|jmap|zookeeper-shell)"
    r"|\b(?:check|verify|monitor|look for|describe|"
    r"inspect|metrics?|jmx|MaxLag|kafka-[\w-]+\.sh)\b",
    re.I,
)
_CODE_LINE = re.compile(r"^(?:#|\$ |bin/|kafka-[\w-]+(?:\.sh)?\s|grep |[\w.-]+\.sh\s)")
_DOTTED_KEY = re.compile(r"(?<![`\w.])([a-z][a-z0-9_-]*(?:\.[a-z0-9_-]+)+)(?![`\w(])")

MIN_SENTENCES = 5
TOP_PASSAGE_SENTENCES = 2
RELATIVE_CUTOFF = 0.3  # past MIN_SENTENCES, sentences this far below the best one are left out
LEAD_BONUS = 0.06  # the first sentence of a passage (a FAQ answer's first line) usually answers it
SENTENCE_WEIGHT = 0.5
PASSAGE_WEIGHT = 0.35
RANK_WEIGHT = 0.15

_HEADINGS = (("cause", "**What it means / likely cause**"), ("do", "**What to do**"), ("check", "**How to check**"))


@dataclass(frozen=True)
class Draft:
    text: str
    citations: tuple[Citation, ...]
    abstained: bool
    related: tuple[Passage, ...] = ()


@dataclass(frozen=True)
class Evidence:
    """How well the retrieved passages match the question: the inputs to the abstention decision."""

    best_dense: float
    term_coverage: float
    unknown_names: tuple[str, ...]  # names in the question the corpus never mentions (other products, features)
    off_topic: bool
    identifier_match: bool  # a top passage carries an exact identifier from the question (error code, exception)


@dataclass(frozen=True)
class AbstentionPolicy:
    """Thresholds from `Settings`, calibrated on the golden set's answerable and unanswerable questions."""

    min_dense: float
    min_term_coverage: float
    min_dense_with_unknown_name: float


# Requests no troubleshooting knowledge base answers, whatever words they share with it.
_OFF_TOPIC = re.compile(r"\b(?:poems?|haikus?|limericks?|songs?|lyrics|jokes?|recipes?|weather|horoscope)\b", re.I)
# A name as people write one: capitalised inside the sentence, CamelCase, or an acronym with letters.
_NAME = re.compile(
    r"(?<![\w.])(?:[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*|[A-Z]{2,}[a-z]*[0-9]*|[A-Z][a-z]+[0-9]*|[A-Z][0-9]+)(?![\w.])"
)


def assess(retriever: Retriever, question: str, query: str, ranking: Ranking) -> Evidence:
    rows = [hit.row for hit in ranking.hits[:3]]
    best = max((hit.dense for hit in ranking.hits), default=0.0)
    # The user's own identifiers only: a follow-up's rewrite carries the earlier turns' identifiers.
    asked = set(extract_identifiers(question))
    return Evidence(
        best_dense=best,
        term_coverage=retriever.term_coverage(query, rows),
        unknown_names=tuple(name for name in _names(question) if retriever.unknown_term(name)),
        off_topic=bool(_OFF_TOPIC.search(question)),
        identifier_match=any(asked & set(hit.identifiers) for hit in ranking.hits[:3]),
    )


def should_abstain(evidence: Evidence, policy: AbstentionPolicy) -> bool:
    return (
        evidence.off_topic
        or evidence.best_dense < policy.min_dense
        or evidence.term_coverage < policy.min_term_coverage
        # "Our Spring Boot app gets ProducerFencedException": the user's own stack is named, the error is covered.
        or (
            bool(evidence.unknown_names)
            and not evidence.identifier_match
            and evidence.best_dense < policy.min_dense_with_unknown_name
        )
    )


def _names(question: str) -> list[str]:
    """Name-like words, skipping each sentence's first word (capitalised for grammar, not as a name)."""
    names = []
    for sentence in re.split(r"(?<=[.!?:])\s+|\n+", question):
        for match in _NAME.finditer(sentence):
            if match.start() > 0 or not match.group(0).istitle():
                names.append(match.group(0))
    return names


def abstain(retriever: Retriever, ranking: Ranking, related: int = 3) -> Draft:
    passages = tuple(retriever.passage(hit) for hit in ranking.hits[:related])
    note = " The closest passages are listed as possibly related." if passages else ""
    return Draft(text=NOT_COVERED + note, citations=(), abstained=True, related=passages)


@dataclass(frozen=True)
class _Unit:
    hit_index: int
    position: int  # index of the unit in its passage
    text: str
    vector: np.ndarray
    score: float
    bucket: str


_WANTS_FIX = re.compile(
    r"\b(?:fix|resolve|solve|avoid|prevent|stop|get rid|workaround|recover|handle|deal with)\b", re.I
)
_WANTS_CHECK = re.compile(r"\b(?:check|diagnose|debug|monitor|tell whether|find out|inspect|command)\b", re.I)
INTENT_BONUS = 0.08


def question_intent(question: str) -> str | None:
    """Which part of a troubleshooting answer the question asks for, if it says."""
    if _WANTS_FIX.search(question):
        return "do"
    if _WANTS_CHECK.search(question):
        return "check"
    return None


def extract_answer(retriever: Retriever, query: str, ranking: Ranking, max_sentences: int, question: str = "") -> Draft:
    """The best-supported sentences of the ranked passages, grouped and cited with [n] markers."""
    query_terms = set(tokenize(query))
    query_identifiers = set(ranking.query_identifiers)
    intent = question_intent(question or query)
    units: list[_Unit] = []
    for hit_index, hit in enumerate(ranking.hits):
        scored = _score_units(retriever, hit, hit_index, ranking.query_vector, query_terms, query_identifiers)
        units.extend(
            dataclasses.replace(u, score=u.score + INTENT_BONUS) if intent and u.bucket == intent else u for u in scored
        )
    if not units:
        return abstain(retriever, ranking)
    ranked = sorted(units, key=lambda u: (-u.score, u.hit_index, u.position))
    best = ranked[0]
    # The top passage won retrieval on evidence sentence similarity cannot see (identifiers, BM25,
    # its heading), so its best sentences always make the answer.
    top_passage = [u for u in ranked if u.hit_index == 0][:TOP_PASSAGE_SENTENCES]
    # The sentence after the best one often carries its specifics ("Specifically, it drops to 100ms").
    follower = next((u for u in units if u.hit_index == best.hit_index and u.position == best.position + 1), None)
    chosen: list[_Unit] = []
    for unit in [*top_passage, best, *([follower] if follower else []), *ranked]:
        if len(chosen) == max_sentences:
            break
        if unit in chosen or any(float(unit.vector @ other.vector) > 0.9 for other in chosen):
            continue  # already chosen, or a near-duplicate of a sentence already chosen
        if len(chosen) >= MIN_SENTENCES and unit.score < best.score - RELATIVE_CUTOFF:
            break
        chosen.append(unit)
    return _render(retriever, ranking.hits, chosen)


def _score_units(retriever, hit: Hit, hit_index: int, query_vector, query_terms, query_identifiers) -> list[_Unit]:
    """A sentence scores by its own similarity and by its passage's (whose heading gives it context)."""
    row = retriever.row(hit.row)
    units = retriever.units(hit.row)
    vectors = retriever.index.unit_vectors[hit.row]
    if len(units) != len(vectors):  # a chunk table written by another splitter version: skip, never misquote
        return []
    heading = " ".join(row["section_path"][1:])
    scored = []
    for position, (unit, vector) in enumerate(zip(units, vectors, strict=True)):
        text = unit.text
        if _is_heading_like(text):
            continue
        similarity = float(vector @ query_vector)
        overlap = len(unit.terms & query_terms) / (len(query_terms) or 1)
        identifiers = len(unit.identifiers & query_identifiers)
        score = (
            SENTENCE_WEIGHT * similarity
            + PASSAGE_WEIGHT * hit.dense
            + RANK_WEIGHT / (1 + hit_index)
            + 0.15 * overlap
            + 0.06 * min(identifiers, 2)
            + (LEAD_BONUS if position == 0 else 0.0)
        )
        scored.append(_Unit(hit_index, position, text, vector, score, _bucket(text, heading)))
    return scored


def _is_heading_like(text: str) -> bool:
    stripped = text.strip()
    return len(stripped.split()) < 4 and not _CODE_LINE.match(stripped) or stripped.endswith("?")


def _bucket(text: str, heading: str) -> str:
    if _CODE_LINE.match(text.strip()) or re.search(r"diagnos|monitor", heading, re.I):
        return "check"
    if _DO.search(text) or re.search(r"solution|workaround|how (?:do|to|can|should)", heading, re.I):
        return "do"
    if _CHECK.search(text):
        return "check"
    return "cause"


def _render(retriever: Retriever, hits: tuple[Hit, ...], chosen: list[_Unit]) -> Draft:
    markers: dict[int, int] = {}
    for unit in sorted(chosen, key=lambda u: ([b for b, _ in _HEADINGS].index(u.bucket), -u.score)):
        markers.setdefault(unit.hit_index, len(markers) + 1)
    groups = {bucket: [u for u in chosen if u.bucket == bucket] for bucket, _ in _HEADINGS}
    used = [bucket for bucket, _ in _HEADINGS if groups[bucket]]
    lines: list[str] = []
    for bucket, title in _HEADINGS:
        if not groups[bucket]:
            continue
        if len(used) > 1:
            lines.append(title)
        for unit in sorted(groups[bucket], key=lambda u: -u.score):
            lines.append(f"- {_format_unit(unit.text)} [{markers[unit.hit_index]}]")
        lines.append("")
    citations = tuple(
        Citation(
            marker=marker,
            passage=retriever.passage(hits[hit_index]),
            quotes=tuple(u.text for u in sorted(chosen, key=lambda u: -u.score) if u.hit_index == hit_index),
        )
        for hit_index, marker in sorted(markers.items(), key=lambda item: item[1])
    )
    return Draft(text="\n".join(lines).strip(), citations=citations, abstained=False)


def _format_unit(text: str) -> str:
    """Commands and config keys in code formatting; the words themselves stay as in the source."""
    text = re.sub(r"^- ", "", text.strip())
    if _CODE_LINE.match(text) and "`" not in text:
        return f"`{text}`"
    return _DOTTED_KEY.sub(lambda m: f"`{m.group(1)}`" if extract_identifiers(m.group(1)) else m.group(1), text)
