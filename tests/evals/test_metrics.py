"""Metrics on toy inputs whose values are worked out by hand in each test."""

from __future__ import annotations

import dataclasses
import math

import pytest

from evals.golden import PARTS, part_of
from evals.metrics import (
    QuestionScore,
    citation_ok,
    facts_found,
    first_rank,
    flips,
    grade,
    hit,
    key_fact_recall,
    ndcg,
    percentile,
    reciprocal_rank,
    regressions,
    source_precision,
    summarise,
    summarise_parts,
    supports,
)

LOG2_3 = math.log2(3)


def test_grade_evidence_beats_source_and_ignores_case_and_whitespace():
    text = "Set the\n  Isolation.Level   setting to read_committed."
    assert grade(text, "b.txt", ["isolation.level setting"], ["a.txt"]) == 2
    assert grade(text, "a.txt", ["not in there"], ["a.txt"]) == 1
    assert grade(text, "b.txt", ["not in there"], ["a.txt"]) == 0


def test_grade_ignores_blank_evidence_and_has_no_sources_for_unanswerable():
    assert grade("anything", "a.txt", ["", "   "], []) == 0


def test_first_rank_is_one_based_and_none_when_absent():
    assert first_rank([0, 1, 2, 2]) == 3
    assert first_rank([0, 1, 2, 2], at_least=1) == 2
    assert first_rank([0, 1, 1]) is None
    assert first_rank([]) is None


@pytest.mark.parametrize(
    ("rank", "k", "expected"), [(3, 1, 0.0), (3, 3, 1.0), (1, 1, 1.0), (None, 10, 0.0), (11, 10, 0.0)]
)
def test_hit(rank, k, expected):
    assert hit(rank, k) == expected


def test_reciprocal_rank_cut_at_ten():
    assert reciprocal_rank(1) == 1.0
    assert reciprocal_rank(4) == 0.25
    assert reciprocal_rank(10) == 0.1
    assert reciprocal_rank(11) == 0.0
    assert reciprocal_rank(None) == 0.0


def test_ndcg_graded_with_an_assumed_relevant_passage():
    # retrieved [0, 2]: DCG = 2/log2(3); ideal [2, 0]: 2
    assert ndcg([0, 2]) == pytest.approx((2 / LOG2_3) / 2)
    # only same-document passages: [1, 0, 0]; ideal [2, 1, 0, 0] = 2 + 1/log2(3)
    assert ndcg([1, 0, 0]) == pytest.approx(1 / (2 + 1 / LOG2_3))
    assert ndcg([2, 1]) == pytest.approx(1.0)
    assert ndcg([2, 2, 0]) == pytest.approx(1.0)
    # [1, 2] at k=1: DCG 1, ideal 2
    assert ndcg([1, 2], k=1) == pytest.approx(0.5)


def test_ndcg_is_zero_when_nothing_relevant_within_k():
    assert ndcg([]) == 0.0
    assert ndcg([0] * 10 + [2]) == 0.0


def test_facts_found_per_group_with_aliases():
    answer = "Set `isolation.level` to READ_COMMITTED [1]."
    facts = [["read_committed"], ["isolation level", "isolation.level"], ["transactional.id"]]
    found = facts_found(answer, facts)
    assert found == (True, True, False)
    assert key_fact_recall(found) == pytest.approx(2 / 3)


def test_key_fact_recall_undefined_without_facts():
    assert facts_found("anything", []) == ()
    assert key_fact_recall(()) is None
    assert key_fact_recall((False, False)) == 0.0


def test_supports_by_content_words():
    passage = "Increase max.poll.interval.ms when message processing is slow."
    # content words: processing slow increase max poll interval (ms, is: too short) -> all present
    assert supports(passage, "Processing is slow: increase max.poll.interval.ms [1].")
    assert not supports(passage, "Decrease fetch.min.bytes to lower latency.")


def test_supports_threshold_is_inclusive():
    passage = "alpha bravo charlie delta"
    assert supports(passage, "alpha bravo charlie delta echo")  # 4 of 5 = 0.8
    assert not supports(passage, "alpha bravo charlie echo foxtrot")  # 3 of 5 = 0.6
    assert supports(passage, "alpha bravo charlie echo foxtrot", threshold=0.6)


def test_supports_falls_back_to_containment_without_content_words():
    assert supports("it is on", "is on")
    assert not supports("it is on", "to be")


def test_citation_ok_by_evidence_or_supported_quotes():
    passage = "Set isolation.level=read_committed on the consumer to skip aborted records."
    assert citation_ok(passage, (), ["isolation.level=read_committed"])
    assert not citation_ok(passage, (), ["transactional.id"])
    assert citation_ok(passage, ("Set isolation.level=read_committed on the consumer.",), [])
    assert not citation_ok(passage, ("Set isolation.level=read_committed.", "Restart every broker twice a day."), [])


def test_percentile_interpolates_like_numpy():
    assert percentile([40, 10, 30, 20], 50) == pytest.approx(25)
    assert percentile([10, 20, 30, 40], 95) == pytest.approx(38.5)  # pos 2.85 -> 30 + 0.85 * 10
    assert percentile([7], 95) == 7
    assert percentile([], 50) is None


def _score(qid, answerable, grades, facts, cites, abstained, latency, ctx, answer=0, raw=None, tags=(), cited=()):
    return QuestionScore(
        id=qid,
        tags=tags,
        sources=("a.txt",) if answerable else (),
        answerable=answerable,
        followup=raw is not None,
        grades=grades,
        raw_grades=raw or (),
        facts_found=facts,
        citations_ok=cites,
        abstained=abstained,
        latency_ms=latency,
        context_chars=ctx,
        answer_chars=answer,
        cited_sources=cited,
    )


TOY = [
    _score("A", True, (1, 2, 0), (True, False), (True, True), False, 100, 1000, answer=120, cited=("a.txt", "z.txt")),
    _score(
        "B",
        True,
        (0, 0, 0, 0, 0, 2),
        (False, False),
        (True, False),
        False,
        200,
        2000,
        answer=900,
        raw=(2,),
        cited=("a.txt", "a.txt"),
    ),
    _score("C", True, (0,) * 10, (False,), (), True, 300, 3000, answer=5000),
    _score("D", False, (0, 0), (), (), True, 400, 0, answer=70),
    _score("E", False, (0,), (), (False,), False, 500, 500, answer=4000),
]


def test_question_score_properties():
    a, b, c, d, e = TOY
    assert (a.rank, a.doc_rank, a.raw_rank) == (2, 1, None)
    assert (b.rank, b.doc_rank, b.raw_rank) == (6, 6, 1)
    assert c.rank is None and c.doc_rank is None
    assert a.key_fact_recall == 0.5 and a.facts_ok
    assert b.citation_precision == 0.5 and c.citation_precision is None
    assert [s.passed for s in TOY] == [True, False, False, True, False]
    assert a.outcome() == {"part": part_of("A"), "pass": True, "hit@5": True, "facts_ok": True, "abstained": False}
    assert d.outcome() == {"part": part_of("D"), "pass": True, "hit@5": None, "facts_ok": None, "abstained": True}
    assert [s.part for s in TOY] == [part_of(s.id) for s in TOY]


def test_the_caution_is_scored_on_answered_questions_by_the_failures_it_marks():
    """Answered: A passes, B and E fail; C and D abstained and count for neither figure. The caution marks A and
    B: half of what it marks fails, and it marks one of the two failures."""
    marked = {"A", "B", "C"}
    scores = [dataclasses.replace(s, cautioned=s.id in marked) for s in TOY]
    m = summarise(scores)
    assert m["caution_precision"] == pytest.approx(1 / 2)
    assert m["caution_recall"] == pytest.approx(1 / 2)
    assert summarise(TOY)["caution_precision"] is None and summarise(TOY)["caution_recall"] == 0.0


def test_source_precision_is_the_share_of_citations_from_the_items_sources():
    assert source_precision(["ops.html", "design.html", "ops.html"], ["ops.html"]) == pytest.approx(2 / 3)
    assert source_precision([], ["ops.html"]) is None
    abstained = _score("X", True, (2,), (False,), (), True, 1, 1, cited=("b.txt",))
    assert abstained.source_precision is None  # an abstention cites nothing it answers with


def test_summarise_toy_run():
    m = summarise(TOY)
    # answerable: A (rank 2), B (rank 6), C (none)
    assert m["hit@1"] == 0.0
    assert m["hit@3"] == pytest.approx(1 / 3)
    assert m["hit@5"] == pytest.approx(1 / 3)
    assert m["hit@10"] == pytest.approx(2 / 3)
    assert m["mrr@10"] == pytest.approx((1 / 2 + 1 / 6 + 0) / 3)
    ndcg_a = (1 + 2 / LOG2_3) / (2 + 1 / LOG2_3)
    ndcg_b = (2 / math.log2(7)) / 2
    assert m["ndcg@10"] == pytest.approx((ndcg_a + ndcg_b + 0) / 3)
    assert m["key_fact_recall"] == pytest.approx((0.5 + 0 + 0) / 3)
    # per answer with citations: A 1.0, B 0.5, E 0.0
    assert m["citation_precision"] == pytest.approx(0.5)
    # answered answerable items with citations: A cites its source and another page, B only its source
    assert m["source_precision"] == pytest.approx((0.5 + 1.0) / 2)
    assert m["abstention_recall"] == pytest.approx(0.5)
    assert m["over_abstention"] == pytest.approx(1 / 3)
    assert m["answerable_accuracy"] == pytest.approx(1 / 3)
    assert m["p50_ms"] == pytest.approx(300)
    assert m["p95_ms"] == pytest.approx(480)  # pos 3.8 -> 400 + 0.8 * 100
    assert m["avg_context_chars"] == pytest.approx(1300)
    assert m["answer_chars_p50"] == pytest.approx(510)  # answered answerable items only: A 120, B 900
    assert m["doc_hit@1"] == pytest.approx(1 / 3)
    assert m["doc_hit@5"] == pytest.approx(1 / 3)
    assert m["doc_hit@10"] == pytest.approx(2 / 3)
    assert m["doc_mrr@10"] == pytest.approx((1 + 1 / 6) / 3)
    assert m["followup_hit@5"] == 0.0
    assert m["followup_raw_hit@5"] == 1.0
    assert m["followup_mrr@10"] == pytest.approx(1 / 6)
    assert m["followup_raw_mrr@10"] == 1.0
    assert (m["questions"], m["answerable"], m["unanswerable"], m["followups"]) == (5, 3, 2, 1)


def test_summarise_undefined_metrics_are_none():
    m = summarise([TOY[3]])  # one unanswerable item
    assert m["hit@5"] is None and m["key_fact_recall"] is None and m["over_abstention"] is None
    assert m["abstention_recall"] == 1.0
    assert m["answer_chars_p50"] is None  # no answered answerable item
    empty = summarise([])
    assert empty["p50_ms"] is None and empty["questions"] == 0


def test_summarise_parts_gives_every_metric_per_part():
    ids = [f"q{n}" for n in range(12)]
    scores = [_score(qid, True, (2,), (True,), (True,), False, 10.0 * n, 100, answer=n) for n, qid in enumerate(ids)]
    parts = summarise_parts(scores)
    assert list(parts) == list(PARTS)
    for part in PARTS:
        members = [s for s in scores if part_of(s.id) == part]
        assert members and parts[part] == summarise(members)
        assert set(parts[part]) == set(summarise(scores))
    assert parts["tune"]["questions"] + parts["test"]["questions"] == len(scores)


def test_regressions_respect_direction_and_tolerance():
    old = {
        "hit@5": 0.9,
        "mrr@10": 0.8,
        "key_fact_recall": 0.85,
        "abstention_recall": 1.0,
        "over_abstention": 0.0,
        "ndcg@10": 0.9,
    }
    new = {
        "hit@5": 0.88,
        "mrr@10": 0.77,
        "key_fact_recall": 0.95,
        "abstention_recall": 0.97,
        "over_abstention": 0.03,
        "ndcg@10": 0.1,
    }
    assert regressions(old, new) == [
        ("mrr@10", 0.8, 0.77),
        ("abstention_recall", 1.0, 0.97),
        ("over_abstention", 0.0, 0.03),
    ]
    assert regressions(old, old) == []
    assert regressions({"hit@5": None}, {"hit@5": 0.1}) == []


def test_flips_both_ways_only_for_common_ids():
    old = {"a": {"pass": True}, "b": {"pass": False}, "c": {"pass": True}, "gone": {"pass": True}}
    new = {"a": {"pass": False}, "b": {"pass": True}, "c": {"pass": True}, "added": {"pass": False}}
    assert flips(old, new) == (["a"], ["b"])
