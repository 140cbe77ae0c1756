"""Abstention: say "not covered" when the ranked passages do not answer the question.

A learned decision over retrieval features (scores, their gap, how much of the question the top
passages cover, words and names the corpus never uses), not word lists: what a list of off-topic
words or product names would decide is read from the corpus itself. The weights and the threshold
are data (`abstention.json` beside this module), fitted by `evals/fit_abstention.py` on the tuning
parts of the golden files and calibrated to keep over-abstention on answerable questions low. Between
declining and answering plainly, a band of scores where answers are about as often wrong as right gets an
answer with a caution (`evals/fit_caution.py` fits where the band ends).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from rag.lexical import tokenize
from rag.query import Query
from rag.ranking import LinearModel, Ranked, model_paths
from rag.retrieval import Candidate

ABSTENTION_FEATURES = (
    "top_score",  # the learned ranking score of the first passage
    "score_gap",  # first minus second ranking score
    "best_dense",  # best cosine of the question and a top passage
    "best_sentence",  # best cosine of the question and one evidence unit of a top passage
    "coverage",  # IDF-weighted share of the question's terms found in the top three passages
    "unknown_terms",  # IDF-weighted share of the question's terms the corpus never uses
    "unknown_words",  # the part of it the embedding model reads as whole words: everyday words ("yesterday",
    # "recipe") say less about a subject the corpus lacks than names no vocabulary holds ("redpanda", "sarama")
    "unknown_names",  # share of the question's names (products, APIs) the corpus never mentions, unless
    # every identifier the question is about is covered and a top passage carries one ("our Spring Boot app
    # gets X": X is covered); "spring-kafka: when does MANUAL_IMMEDIATE commit?" keeps its unknown names
    "focus_match",  # a top-three passage carries an identifier the question is about
    "focus_unknown",  # share of the identifiers the question is about that no passage carries
    "unknown_label",  # share of the words of the question's opening label ("Redpanda:") the corpus never uses;
    # as with names, the label of the user's own stack ("Spring Boot: ProducerFencedException …") does not count
    # when everything the question is about is covered
    "asked_unknown_names",  # share of the asking sentences' names the corpus never mentions, with no exception:
    # "Can I set X in a custom MSK configuration?" asks about MSK, however well X is covered
    "asked_unknown_identifiers",  # share of the identifiers the asking sentences name that no chunk carries
    # ("what's the kafka-get-offsets.sh command …?"): sharper than `focus_unknown`, which also counts a pasted
    # error line's exception the docs may answer under its error's name
    "asked_unknown_phrases",  # share of the asking sentences' names of several words that the corpus never writes
    # together ("Which REST Proxy property …?"), though it may use each word
    "asked_foreign_terms",  # IDF-weighted share of the asking sentences' terms neither the corpus nor the model's
    # vocabulary knows: a product named in lower case ("… tiered storage on redpanda?")
    "asked_names_off_top",  # share of the asking sentences' names whose words no top passage holds, known to the
    # corpus or not: a product it mentions in passing ("RabbitMQ", "Event Hubs") is not what its passages are about
)
TOP_PASSAGES = 3
Confidence = Literal["declined", "unsure", "sure"]
ABSTENTION_PATH = model_paths()["abstention"]


def abstention_features(ranked: Ranked) -> tuple[float, ...]:
    """The decision's inputs, in `ABSTENTION_FEATURES` order; all zeros when nothing was retrieved."""
    candidates = ranked.candidates
    if not candidates:
        return (0.0,) * len(ABSTENTION_FEATURES)
    evidence = ranked.pool.evidence
    top = candidates[:TOP_PASSAGES]
    weights = evidence.term_weights
    covered = set().union(*(c.matched_terms for c in top))
    coverage = sum(w for t, w in weights.items() if t in covered) / (sum(weights.values()) or 1.0)
    scores = sorted(ranked.scores, reverse=True)
    focus = ranked.pool.query.focus_identifiers
    focus_match = bool(focus) and any(set(c.identifiers) & focus for c in top)
    all_focus_covered = focus_match and not evidence.unknown_focus_identifiers
    return (
        scores[0],
        scores[0] - scores[1] if len(scores) > 1 else 0.0,
        max(c.dense for c in top),
        max(c.feature("sentence") for c in top),
        coverage,
        evidence.unknown_term_share,
        evidence.unknown_word_share,
        len(evidence.unknown_names) / evidence.names if evidence.names and not all_focus_covered else 0.0,
        1.0 if focus_match else 0.0,
        evidence.unknown_focus_identifiers / evidence.focus_identifiers if evidence.focus_identifiers else 0.0,
        evidence.unknown_label_share if not all_focus_covered else 0.0,
        evidence.unknown_asked_name_share,
        evidence.unknown_asked_identifier_share,
        evidence.unknown_asked_phrase_share,
        evidence.unknown_asked_foreign_share,
        _names_off_top(ranked.pool.query, top),
    )


def _names_off_top(query: Query, top: Sequence[Candidate]) -> float:
    """Of the names the asking sentences use (`Query.asked_names`; not a capitalised first word, which is a name
    only when the corpus lacks it, nor one of the user's own resources), the share none of `top` holds whole."""
    names = [
        words
        for name in query.asked_names
        if name not in query.opening_names and (words := frozenset(tokenize(name))) and not words <= query.own_terms
    ]
    return sum(not any(words <= c.matched_terms for c in top) for words in names) / len(names) if names else 0.0


def unfitted_abstention() -> LinearModel:
    """A model over the features the code computes that weighs none of them: what `evals/fit_abstention.py`
    inspects questions with, so a changed feature list does not stop the refit the shipped file then asks for."""
    zeros = (0.0,) * len(ABSTENTION_FEATURES)
    return LinearModel("abstention", ABSTENTION_FEATURES, zeros, (1.0,) * len(ABSTENTION_FEATURES), zeros)


def load_abstention(path: Path = ABSTENTION_PATH) -> LinearModel:
    return LinearModel.load(path, ABSTENTION_FEATURES)


def answerable_score(ranked: Ranked, model: LinearModel) -> float:
    """The model's log-odds that the passages answer the question."""
    return float(model.scores(np.asarray([abstention_features(ranked)], dtype=np.float64))[0])


def should_abstain(ranked: Ranked, model: LinearModel) -> bool:
    return answer_confidence(ranked, model) == "declined"


def answer_confidence(ranked: Ranked, model: LinearModel) -> Confidence:
    """How far the passages answer the question: declined under the model's threshold for the retrieval mode;
    unsure under its caution threshold (fitted on hybrid retrieval only), where answers are about as often wrong
    as right, so they come with a caution; else sure."""
    if not ranked.candidates:
        return "declined"
    score = answerable_score(ranked, model)
    if score < model.mode_thresholds.get(ranked.pool.mode, model.threshold):
        return "declined"
    caution = model.caution_threshold
    return "unsure" if caution is not None and ranked.pool.mode == "hybrid" and score < caution else "sure"
