"""The lexical side: one tokenizer for chunks and questions, and BM25 scores that rank the right text first."""

from __future__ import annotations

import re
import tracemalloc

import bm25s
import numpy as np
import pytest

from rag.lexical import (
    BM25_FILES,
    bm25_scores,
    correction,
    document_frequency,
    inflection_pattern,
    load_bm25,
    noun_pattern,
    parts_only,
    rows_holding,
    tokenize,
    word_roots,
    write_bm25,
)
from tests.conftest import SEEDS

TEXTS = [
    "The producer aborts the transaction when transaction.timeout.ms expires before the commit.",
    "A consumer rebalance happens when max.poll.interval.ms passes between two polls.",
    "Share group acknowledgement failed with INVALID_RECORD_STATE for a record already acknowledged.",
    "Describe the share group with kafka-share-groups.sh --describe --group my-group.",
    "Brokers replicate partitions to followers; the ISR lists the replicas in sync.",
]


def test_compound_tokens_whole_plus_parts():
    assert tokenize("Set transaction.timeout.ms") == ["set", "transaction.timeout.ms", "transaction", "timeout", "ms"]
    assert tokenize("INVALID_RECORD_STATE") == ["invalid_record_state", "invalid", "record", "state"]
    assert tokenize("kafka-share-groups.sh") == ["kafka-share-groups.sh", "kafka", "share", "group", "sh"]


def test_lower_case_and_stopwords_out():
    assert tokenize("What is THE Consumer doing in a Group?") == ["consumer", "group"]


@pytest.mark.parametrize(
    ("word", "folded"),
    [
        ("partitions", "partition"),
        ("brokers", "broker"),
        ("retries", "retry"),
        ("processes", "process"),
        ("batches", "batch"),
        ("indexes", "index"),
        ("classes", "class"),
        ("caches", "cach"),
        ("cache", "cach"),  # its plural adds only "s": the singular folds with it
        ("status", "status"),
        ("class", "class"),
        ("analysis", "analysis"),
        ("ms", "ms"),
    ],
)
def test_plural_folding(word, folded):
    assert tokenize(word) == [folded]


def test_question_and_chunk_fold_to_the_same_tokens():
    assert set(tokenize("rebalances of consumers")) == set(tokenize("consumer rebalance"))
    # "Which setting caps the memory of Streams record caches?" never met `statestore.cache.max.bytes`' "cache".
    assert set(tokenize("record caches")) <= set(tokenize("record cache statestore.cache.max.bytes"))


@pytest.fixture(scope="module")
def bm25(tmp_path_factory):
    return _built(TEXTS, tmp_path_factory.mktemp("bm25"))


def _built(texts, directory, **options):
    write_bm25(texts, directory / "bm25", **options)
    return load_bm25(directory / "bm25")


@pytest.mark.parametrize(
    ("query", "best"),
    [
        ("transaction timeout", 0),
        ("transaction.timeout.ms", 0),
        ("why do consumers rebalance?", 1),
        ("max.poll.interval.ms", 1),
        ("invalid record state", 2),
        ("INVALID_RECORD_STATE", 2),
        ("kafka-share-groups.sh", 3),
        ("in-sync replicas of brokers", 4),
    ],
)
def test_bm25_ranks_the_right_text_first(bm25, query, best):
    scores = bm25_scores(bm25, query)
    assert scores.shape == (len(TEXTS),)
    assert scores.dtype == np.float32
    assert int(np.argmax(scores)) == best
    assert scores[best] > 0
    assert sorted(scores, reverse=True)[1] < scores[best]


def test_unknown_words_score_zero(bm25):
    assert bm25_scores(bm25, "rabbitmq exchange binding").tolist() == [0.0] * len(TEXTS)
    assert bm25_scores(bm25, "the of and").tolist() == [0.0] * len(TEXTS)


def test_left_out_tokens_do_not_score(bm25):
    assert bm25_scores(bm25, "share group", left_out={"share", "group"}).tolist() == [0.0] * len(TEXTS)
    assert bm25_scores(bm25, "share group", left_out={"share"}).tolist() == bm25_scores(bm25, "group").tolist()


def test_parts_only_are_the_parts_a_text_never_uses_as_words():
    text = "Lag on group payments-reader from dc-east; the payments team owns it"
    assert parts_only(text, {"payments-reader", "dc-east"}) == {"reader", "dc", "east"}  # "payments" stands alone too
    assert parts_only(text, set()) == frozenset()


def test_text_without_tokens_still_indexes(tmp_path):
    index = _built(["the of", "consumer lag"], tmp_path)
    scores = bm25_scores(index, "consumer")
    assert scores[0] == 0 and scores[1] > 0


def test_postings_give_each_rows_terms_and_document_frequencies(tmp_path):
    """What retrieval reads from the index instead of keeping each chunk's terms in memory."""
    loaded = _built(TEXTS, tmp_path)
    rows = np.arange(len(TEXTS))
    for token in ["share", "group", "transaction.timeout.ms", "consumer", "isr", "absent"]:
        holding = [token in tokenize(text) for text in TEXTS]
        assert rows_holding(loaded, token, rows).tolist() == holding, token
        assert document_frequency(loaded, token) == sum(holding), token
    assert rows_holding(loaded, "share", np.asarray([0, 3])).tolist() == [False, True]
    assert rows_holding(loaded, "share", np.asarray([], dtype=np.int64)).tolist() == []


def test_the_build_holds_a_spill_of_postings_not_the_corpus(tmp_path):
    """10,000 texts of 50 distinct words make half a million postings (6 MB as int32 triples, more sorted);
    with a spill of 10,000 the build's arrays stay near a spill's size, whatever the corpus."""
    words = [f"word{n}" for n in range(400)]
    texts = (" ".join(words[(i * 7 + j * 13) % len(words)] for j in range(50)) for i in range(10_000))
    tracemalloc.start()
    try:
        write_bm25(texts, tmp_path / "bm25", spill_entries=10_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert int(np.load(tmp_path / "bm25" / BM25_FILES["indptr"])[-1]) == 500_000
    assert peak < 2 << 20, peak


@pytest.mark.parametrize("spill_entries", [7, 300, 1 << 22])
def test_the_spilling_build_scores_exactly_as_bm25s_own_index(tmp_path, spill_entries):
    """Postings spilled to disk in sorted runs and merged token range by token range, in ranges of a few
    entries (a token's postings bigger than a range among them; each run read an entry or a few at a
    time) or in one: bm25s' own scores, from bm25s' loader."""
    texts = [*TEXTS, "", "the a of", *(p.read_text(encoding="utf-8")[:4000] for p in sorted(SEEDS.iterdir()))]
    reference = bm25s.BM25()
    reference.index([tokenize(t) or [""] for t in texts], show_progress=False)
    ours = _built(iter(texts), tmp_path, spill_entries=spill_entries)
    assert sorted(p.name for p in (tmp_path / "bm25").iterdir()) == sorted(BM25_FILES.values())  # no scratch left
    for query in ["share group describe", "transaction.timeout.ms", "consumer rebalance poll", "isr", "zzqx", *TEXTS]:
        np.testing.assert_allclose(bm25_scores(ours, query), bm25_scores(reference, query), atol=1e-5)


CORPUS_FREQUENCY = {
    "partition": 40,
    "offset": 30,
    "default": 50,
    "increase": 9,
    "rebalancing": 5,
    "string": 7,
    "mechanism": 6,
    "topic": 60,
}


@pytest.mark.parametrize(
    ("word", "right"),
    [
        ("partitons", "partitions"),  # a letter left out; the corpus's token is the singular
        ("offets", "offsets"),
        ("mechanimss", "mechanisms"),  # two letters swapped, whose token is folded only once they are not
        ("defualt", "default"),  # two letters swapped
        ("incrase", "increase"),
        ("partition", None),  # the corpus uses it
        ("spring", None),  # another product's word: no letter is replaced ("string")
        ("kafkajs", None),  # no letter is taken away
        ("offet", None),  # too short to tell a letter left out from another word
        ("toipc", "topic"),  # but not to read two letters swapped
        ("tpoic", "topic"),
        ("topi", None),  # four letters: too short for either
        ("rebalacing2", None),  # not a word
        ("zzqxflurbo", None),  # nothing near it
    ],
)
def test_a_misspelt_word_is_read_as_the_word_one_left_out_or_swapped_letter_away_the_corpus_uses(word, right):
    assert correction(word, lambda token: CORPUS_FREQUENCY.get(token, 0)) == right


@pytest.mark.parametrize(
    ("word", "text", "found"),
    [
        ("Hubs", "an event hub", True),
        ("replica", "preferred replicas", True),
        ("quotas", "a quota", True),
        ("Shrinking", "the ISR shrinks", True),
        ("REST", "the rest proxy", True),
        ("REST", "the ret", False),  # an acronym is not folded
        ("REST", "a restart", False),  # nor inflected
        ("Added", "add", False),  # "-ed" is cut only from a stem of four letters or more
        ("log", "logarithm", False),  # four more letters at most
    ],
)
def test_a_word_is_found_in_any_inflection(word, text, found):
    assert bool(re.search(rf"\b{inflection_pattern(word)}\b", text)) is found


@pytest.mark.parametrize(
    ("word", "text", "found"),
    [
        ("partition", "two partitions", True),
        ("partitions", "a partition", True),
        ("entry", "the entries", True),
        ("caches", "a cache", True),
        ("ISR", "the ISRs", True),
        ("partition", "semantic partitioning", False),  # a word formed from it is another word
        ("replica", "replicated", False),
    ],
)
def test_a_noun_is_found_singular_or_plural_only(word, text, found):
    assert bool(re.search(rf"\b{noun_pattern(word)}\b", text, re.I)) is found


@pytest.mark.parametrize(
    ("word", "stems"),
    [
        ("refreshed", ("refresh",)),
        ("rhyming", ("rhym", "rhyme")),
        ("tripping", ("tripp", "trippe", "trip")),  # a doubled consonant undone
        ("acked", ()),  # too short a stem to tell
        ("spring", ()),
        ("consumer", ()),  # only "-ing" and "-ed" forms
        ("dont", ("don", "do")),  # a negative contraction typed without its apostrophe
        ("didnt", ("didn", "did")),
    ],
)
def test_a_word_names_the_words_it_may_be_formed_from(word, stems):
    assert word_roots(word) == stems
