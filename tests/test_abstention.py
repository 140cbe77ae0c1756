"""Abstention features and the decision over a hand-made ranked list."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from rag.abstention import (
    ABSTENTION_FEATURES,
    ABSTENTION_PATH,
    TOP_PASSAGES,
    abstention_features,
    answer_confidence,
    answerable_score,
    load_abstention,
    should_abstain,
    unfitted_abstention,
)
from rag.ranking import LinearModel, Ranked, model_paths
from tests.test_ranking import make_candidate, make_pool


def _features(ranked: Ranked) -> dict[str, float]:
    values = abstention_features(ranked)
    assert len(values) == len(ABSTENTION_FEATURES)
    return dict(zip(ABSTENTION_FEATURES, values, strict=True))


def _ranked(candidates, scores, question="why is my consumer lagging?", **evidence) -> Ranked:
    pool = make_pool(candidates, question=question, **evidence)
    return Ranked(pool, tuple(candidates), tuple(scores))


def _model(name: str, weight: float = 1.0, threshold: float = 0.0, bias: float = 0.0) -> LinearModel:
    size = len(ABSTENTION_FEATURES)
    weights = tuple(weight if f == name else 0.0 for f in ABSTENTION_FEATURES)
    return LinearModel("abstention", ABSTENTION_FEATURES, (0.0,) * size, (1.0,) * size, weights, bias, threshold)


def test_nothing_retrieved_gives_zeros_and_abstains():
    ranked = _ranked([], [])
    assert abstention_features(ranked) == (0.0,) * len(ABSTENTION_FEATURES)
    assert should_abstain(ranked, _model("top_score", threshold=-100.0)) is True


def test_scores_gap_and_similarities():
    candidates = [
        make_candidate("a", dense=0.4, features={"sentence": 0.55}),
        make_candidate("b", dense=0.7, features={"sentence": 0.35}),
        make_candidate("c", dense=0.2, features={"sentence": 0.1}),
        make_candidate("d", dense=0.99, features={"sentence": 0.99}),  # below the top three: not read
    ]
    features = _features(_ranked(candidates, [2.0, 1.25, 0.5, 0.1]))
    assert features["top_score"] == 2.0
    assert features["score_gap"] == pytest.approx(0.75)
    assert features["best_dense"] == pytest.approx(0.7)
    assert features["best_sentence"] == pytest.approx(0.55)
    assert TOP_PASSAGES == 3


def test_one_candidate_has_no_gap():
    assert _features(_ranked([make_candidate("a")], [1.5]))["score_gap"] == 0.0


def test_coverage_is_the_idf_weighted_share_of_terms_in_the_top_three():
    candidates = [
        make_candidate("a", matched_terms=frozenset({"consumer"})),
        make_candidate("b", matched_terms=frozenset({"lag"})),
        make_candidate("c"),
        make_candidate("d", matched_terms=frozenset({"why"})),  # fourth: not read
    ]
    weights = {"why": 1.0, "consumer": 2.0, "lag": 3.0, "my": 4.0}
    features = _features(_ranked(candidates, [4, 3, 2, 1], term_weights=weights))
    assert features["coverage"] == pytest.approx(5.0 / 10.0)


def test_unknown_terms_and_names_come_from_the_evidence():
    ranked = _ranked(
        [make_candidate("a")],
        [1.0],
        question="Does Debezium work with Kafka and Flink?",
        unknown_term_share=0.25,
        names=3,
        unknown_names=("Debezium",),
    )
    features = _features(ranked)
    assert features["unknown_terms"] == 0.25
    assert features["unknown_names"] == pytest.approx(1 / 3)


def test_no_names_means_no_unknown_name_share():
    assert _features(_ranked([make_candidate("a")], [1.0], names=0, unknown_names=()))["unknown_names"] == 0.0


def test_focus_match_needs_a_top_three_passage_carrying_a_focus_identifier():
    question = "what does INVALID_RECORD_STATE mean?"
    carried = [make_candidate("a"), make_candidate("b", identifiers=("invalid_record_state",))]
    assert _features(_ranked(carried, [2, 1], question=question))["focus_match"] == 1.0
    fourth = [*(make_candidate(str(i)) for i in range(3)), make_candidate("d", identifiers=("invalid_record_state",))]
    assert _features(_ranked(fourth, [4, 3, 2, 1], question=question))["focus_match"] == 0.0


def test_unknown_names_count_unless_everything_the_question_is_about_is_covered():
    """ "Our Spring Boot app gets ProducerFencedException": the user's own stack is unknown to the corpus,
    but the one identifier the question is about is covered, so the names say nothing about coverage.
    "spring-kafka: with ack-mode MANUAL_IMMEDIATE, when does it commit after enable.auto.commit=false?" asks
    about an identifier no passage carries beside a covered one: there the product name counts (cross-validated
    on the tuning parts, the decision then declines more such questions and fewer answerable ones)."""
    question = "Our Spring Boot app gets ProducerFencedException, what does it mean?"
    covered = [make_candidate("a", identifiers=("producerfencedexception",))]
    features = _features(_ranked(covered, [1.0], question=question, names=2, unknown_names=("Spring", "Boot")))
    assert features["focus_match"] == 1.0
    assert features["unknown_names"] == 0.0
    partly = _features(
        _ranked(covered, [1.0], question=question, names=2, unknown_names=("Spring", "Boot"),
                focus_identifiers=2, unknown_focus_identifiers=1)
    )  # fmt: skip
    assert (partly["focus_match"], partly["unknown_names"]) == (1.0, 1.0)
    uncovered = _features(_ranked([make_candidate("b")], [1.0], question=question, names=2, unknown_names=("Spring",)))
    assert (uncovered["unknown_names"], uncovered["focus_match"]) == (0.5, 0.0)


def test_an_unknown_label_counts_unless_everything_the_question_is_about_is_covered():
    """ "Redpanda: how do I create a topic?" names a subject the corpus lacks; "Spring Boot: our app gets
    ProducerFencedException" labels the user's stack and asks about an error a passage covers."""
    plain = _features(_ranked([make_candidate("a")], [1.0], question="Redpanda: how do I create a topic?",
                               unknown_label_share=1.0))  # fmt: skip
    assert plain["unknown_label"] == 1.0
    question = "Spring Boot: our app gets ProducerFencedException, what does it mean?"
    covered = [make_candidate("a", identifiers=("producerfencedexception",))]
    assert _features(_ranked(covered, [1.0], question=question, unknown_label_share=1.0))["unknown_label"] == 0.0
    uncovered = [make_candidate("b")]
    assert _features(_ranked(uncovered, [1.0], question=question, unknown_label_share=1.0))["unknown_label"] == 1.0


def test_an_unknown_name_in_the_asking_sentence_counts_even_when_the_question_is_covered():
    """ "Can I set message.timestamp.before.max.ms in a custom MSK configuration?" asks about MSK, whose rules
    no passage gives, however well the setting is covered: unlike `unknown_names`, no exception."""
    question = "Can I set message.timestamp.before.max.ms in a custom MSK configuration?"
    covered = [make_candidate("a", identifiers=("message.timestamp.before.max.ms",))]
    features = _features(_ranked(covered, [1.0], question=question, names=1, unknown_names=("MSK",),
                                 unknown_asked_name_share=1.0))  # fmt: skip
    assert (features["focus_match"], features["unknown_names"], features["asked_unknown_names"]) == (1.0, 0.0, 1.0)


def test_an_identifier_the_asking_sentence_names_and_no_chunk_carries_counts():
    """ "What's the kafka-get-offsets.sh command to print the latest offsets?" asks about a tool the docs never
    name, whatever the passages about offsets cover."""
    question = "What's the kafka-get-offsets.sh command to print the latest offsets?"
    about_offsets = [make_candidate("a", identifiers=("kafka-consumer-groups",))]
    features = _features(_ranked(about_offsets, [1.0], question=question, unknown_asked_identifier_share=1.0))
    assert features["asked_unknown_identifiers"] == 1.0
    assert _features(_ranked(about_offsets, [1.0], question=question))["asked_unknown_identifiers"] == 0.0


def test_a_name_of_several_words_the_corpus_never_writes_counts():
    """ "Which REST Proxy property controls the timeout?" asks about a product named in words the corpus uses."""
    question = "Which REST Proxy property controls the consumer timeout?"
    about_consumers = [make_candidate("a", identifiers=("session.timeout.ms",))]
    features = _features(_ranked(about_consumers, [1.0], question=question, unknown_asked_phrase_share=1.0))
    assert features["asked_unknown_phrases"] == 1.0
    assert _features(_ranked(about_consumers, [1.0], question=question))["asked_unknown_phrases"] == 0.0


def test_a_name_the_asking_sentence_uses_counts_when_no_top_passage_holds_it():
    """ "RabbitMQ: how do I set a message TTL …?" is about a product the corpus may mention in passing, but not in
    the passages about message TTLs that answer it; a name a top-three passage holds does not count, nor does a
    sentence's capitalised first word ("How")."""
    question = "RabbitMQ: how do I set a message TTL on a group of queues with a policy?"
    about_ttl = [make_candidate("a", matched_terms=frozenset({"ttl", "message"})), make_candidate("b")]
    assert _features(_ranked(about_ttl, [2.0, 1.0], question=question))["asked_names_off_top"] == 0.5
    fourth = [*about_ttl, make_candidate("c"), make_candidate("d", matched_terms=frozenset({"rabbitmq"}))]
    assert _features(_ranked(fourth, [4, 3, 2, 1], question=question))["asked_names_off_top"] == 0.5
    held = [make_candidate("a", matched_terms=frozenset({"ttl", "rabbitmq"}))]
    assert _features(_ranked(held, [1.0], question=question))["asked_names_off_top"] == 0.0
    opener = "How do I configure rack awareness in Kafka?"
    about_kafka = [make_candidate("a", matched_terms=frozenset({"kafka", "rack"}))]
    assert _features(_ranked(about_kafka, [1.0], question=opener))["asked_names_off_top"] == 0.0


def test_the_fit_inspects_with_a_model_that_weighs_no_feature():
    model = unfitted_abstention()
    assert model.features == ABSTENTION_FEATURES
    ranked = _ranked([make_candidate("a")], [3.0], unknown_asked_name_share=1.0)
    assert answerable_score(ranked, model) == 0.0


def test_a_context_identifier_is_not_a_focus_match():
    question = "$ bin/kafka-topics.sh --describe --topic orders\nERROR something went wrong"
    candidates = [make_candidate("a", identifiers=("kafka-topics",))]
    assert _features(_ranked(candidates, [1.0], question=question))["focus_match"] == 0.0


def test_focus_unknown_is_the_share_of_focus_identifiers_no_chunk_carries():
    ranked = _ranked(
        [make_candidate("a")], [1.0], question="FOO_BAR and BAZ_QUX?", focus_identifiers=2, unknown_focus_identifiers=1
    )
    assert _features(ranked)["focus_unknown"] == 0.5
    assert _features(_ranked([make_candidate("a")], [1.0], focus_identifiers=0))["focus_unknown"] == 0.0


def test_features_are_finite():
    candidates = [make_candidate(str(i), dense=0.1 * i, features={"sentence": 0.2}) for i in range(5)]
    assert all(math.isfinite(v) for v in abstention_features(_ranked(candidates, [5, 4, 3, 2, 1])))


def test_decision_is_the_score_against_the_threshold():
    ranked = _ranked([make_candidate("a", dense=0.35)], [1.0])
    assert answerable_score(ranked, _model("best_dense", 2.0, bias=-0.5)) == pytest.approx(0.2)
    assert should_abstain(ranked, _model("best_dense", threshold=0.3)) is False
    assert should_abstain(ranked, _model("best_dense", threshold=0.4)) is True


def test_a_single_retriever_is_held_to_its_own_threshold(tmp_path):
    """A dense-only or BM25-only list scores lower than the hybrid's: the model's threshold for that mode
    decides, and the hybrid's where none was fitted; the thresholds survive the model file."""
    candidates = [make_candidate("a", dense=0.35)]
    model = dataclasses.replace(_model("best_dense", threshold=0.4), mode_thresholds={"dense": 0.3})
    path = tmp_path / "abstention.json"
    path.write_text(model.to_json(), encoding="utf-8")
    model = load_abstention(path)
    assert model.mode_thresholds == {"dense": 0.3}
    for mode, declined in (("hybrid", True), ("dense", False), ("bm25", True)):
        ranked = Ranked(make_pool(candidates, mode=mode), tuple(candidates), (1.0,))
        assert should_abstain(ranked, model) is declined, mode


def test_a_score_between_the_threshold_and_the_caution_threshold_is_answered_unsure(tmp_path):
    """best_dense 0.35 scores 0.35: declined under 0.4, unsure under a caution of 0.5, sure under none or 0.3; the
    caution threshold survives the model file, and a single retriever (fitted on none) is never unsure."""
    ranked = _ranked([make_candidate("a", dense=0.35)], [1.0])
    cases = ((0.4, 0.5, "declined"), (0.3, 0.5, "unsure"), (0.3, None, "sure"), (0.0, 0.3, "sure"))
    for threshold, caution, expected in cases:
        model = dataclasses.replace(_model("best_dense", threshold=threshold), caution_threshold=caution)
        path = tmp_path / "abstention.json"
        path.write_text(model.to_json(), encoding="utf-8")
        assert load_abstention(path).caution_threshold == caution
        assert answer_confidence(ranked, load_abstention(path)) == expected, (threshold, caution)
        assert should_abstain(ranked, model) is (expected == "declined")
    single = Ranked(make_pool([make_candidate("a", dense=0.35)], mode="dense"), ranked.candidates, (1.0,))
    unsure = dataclasses.replace(_model("best_dense", threshold=0.3), caution_threshold=0.5)
    assert answer_confidence(single, unsure) == "sure"


def test_shipped_abstention_model_loads_with_the_features_the_code_computes():
    assert model_paths()["abstention"] == ABSTENTION_PATH
    model = load_abstention()
    assert model.features == ABSTENTION_FEATURES
    assert np.isfinite(model.threshold)
    assert set(model.mode_thresholds) == {"dense", "bm25"}
    assert all(np.isfinite(t) and t < model.threshold for t in model.mode_thresholds.values())
