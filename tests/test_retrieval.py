"""First-stage retrieval on the real seeds index: candidates, their features, and the query evidence."""

from __future__ import annotations

import copy
import dataclasses
import functools
import math

import numpy as np
import pytest

from rag.chunking import dense_text, lexical_text
from rag.embedding import load_embedder, model_identity
from rag.errors import RetrievalError
from rag.identifiers import MBean
from rag.index_store import load_index
from rag.ingest import unread_units
from rag.lexical import tokenize
from rag.query import parse_query
from rag.ranking import RANK_FEATURES, load_ranker, rank
from rag.retrieval import FirstStage, Retriever, metric_tokens
from rag.tokens import late_interaction
from rag.units import build_units, unit_texts

pytestmark = pytest.mark.slow

ERROR_PAGE = "000_0424dccc37dbf1fb.txt"
EOS_GUIDE = "002_5d9f9cd9ceb365b0.txt"

# Upper bounds of each feature; the RRF feature sums the four fused orders' weights at most.
SHARES = ("bm25", "heading_bm25", "heading_overlap", "term_coverage", "focus_identifier", "context_identifier")

QUESTIONS = [
    "what does error code 121 mean",
    "INVALID_RECORD_STATE share group acknowledgement",
    "What is transaction.timeout.ms and what should I set it to?",
    "$ bin/kafka-share-groups.sh --bootstrap-server localhost:9092 --describe --group g\n"
    "ERROR org.apache.kafka.common.errors.InvalidRecordStateException: The record state is invalid.",
    "write me a poem about kafka",
    "zzqx flurbo",
]


@pytest.fixture(scope="module")
def retriever(assistant) -> Retriever:
    return assistant._retriever


@pytest.fixture(scope="module")
def stage(settings) -> FirstStage:
    return FirstStage.from_settings(settings)


@pytest.fixture(scope="module")
def index_retriever(settings) -> Retriever:
    """A retriever on the seeds index without an assistant: the candidates and features, no ranker."""
    embedder = load_embedder(settings.model, settings.embed_backend)
    return Retriever(load_index(settings.index_dir, model_identity(embedder)), embedder)


def _top(pool, k=5):
    return rank(pool, k, max_per_section=4, model=load_ranker()).candidates


def test_misspelt_words_of_the_user_are_searched_as_the_corpus_spells_them(retriever):
    query = parse_query("how do i incrase partitons of a topic? spring-kafka and kafkajs both say refused")
    corrected = retriever._spelling_corrected(query)
    assert "increase partitions of a topic" in corrected.text and "increase" in corrected.tokens
    assert "spring-kafka" in corrected.text and "kafkajs" in corrected.text and "refused" in corrected.text
    assert corrected.question == query.question  # the user's words are kept for the answer


def test_a_misspelt_word_that_ends_its_sentence_is_corrected_and_a_file_name_is_not(retriever):
    query = parse_query("we cannot incrase partitons. see server.log and a.txt")
    corrected = retriever._spelling_corrected(query)
    assert "increase partitions." in corrected.text
    assert "server.log" in corrected.text and "a.txt" in corrected.text


@pytest.mark.parametrize("mode", ["hybrid", "dense", "bm25"])
@pytest.mark.parametrize("question", QUESTIONS, ids=range(len(QUESTIONS)))
def test_features_are_finite_and_in_range(retriever, stage, question, mode):
    pool = retriever.retrieve(parse_query(question), 20, mode, stage)
    assert pool.mode == mode
    rrf_max = stage.dense + stage.bm25 + stage.identifier + stage.sentence
    for candidate in pool.candidates:
        features = dict(zip(RANK_FEATURES, candidate.features, strict=True))
        assert all(math.isfinite(v) for v in candidate.features), features
        assert 0.0 <= features["rrf"] <= rrf_max + 1e-6, features
        if mode != "hybrid":
            assert features["rrf"] == 0.0
        assert -1.0 - 1e-5 <= features["dense"] <= 1.0 + 1e-5
        assert -1.0 - 1e-5 <= features["sentence"] <= 1.0 + 1e-5
        for name in SHARES:
            assert 0.0 <= features[name] <= 1.0 + 1e-9, (name, features)
        assert features["defines_identifier"] in (0.0, 1.0)
        assert 0.0 <= features["position"] < 1.0
        assert candidate.feature("dense") == pytest.approx(candidate.dense)
        assert math.isfinite(candidate.first_stage)


def test_candidates_come_in_first_stage_order_without_duplicates(retriever, stage):
    pool = retriever.retrieve(parse_query("consumer rebalance and max.poll.interval.ms"), 20, "hybrid", stage)
    scores = [c.first_stage for c in pool.candidates]
    assert scores == sorted(scores, reverse=True)
    ids = [c.passage.chunk_id for c in pool.candidates]
    assert len(ids) == len(set(ids)) >= 20
    assert max(c.feature("bm25") for c in pool.candidates) == pytest.approx(1.0)
    assert max(c.feature("heading_bm25") for c in pool.candidates) in (0.0, pytest.approx(1.0))


def test_unit_scores_follow_the_units_of_each_chunk(retriever, stage):
    query = parse_query("how do I check the state of a share group?")
    pool = retriever.retrieve(query, 10, "hybrid", stage)
    vector, _ = retriever._queries.encode(query.embedded_text)
    for candidate in pool.candidates:
        passage = candidate.passage
        units = build_units(passage.text, passage.section_path[-1] if passage.section_path else "")
        assert len(candidate.unit_scores) == len(units) == len(candidate.unit_vectors), passage.chunk_id
        np.testing.assert_allclose(candidate.unit_scores, candidate.unit_vectors @ vector, atol=1e-5)
        if len(units):
            assert candidate.feature("sentence") == pytest.approx(float(candidate.unit_scores.max()), abs=1e-6)


def test_a_question_typed_without_its_question_mark_is_embedded_as_with_it(retriever, stage):
    """A chat message's missing "?" moved the question's vector: "what does ProducerFencedException actually mean for
    a transactional producer" lost both key facts its "?" form finds."""
    question = "what does ProducerFencedException actually mean for a transactional producer"
    typed, asked = (retriever.retrieve(parse_query(q), 10, "hybrid", stage) for q in (question, f"{question}?"))
    scores = {c.passage.chunk_id: c.unit_scores for c in asked.candidates}
    assert [c.passage.chunk_id for c in typed.candidates] == list(scores)
    for candidate in typed.candidates:
        np.testing.assert_allclose(candidate.unit_scores, scores[candidate.passage.chunk_id], atol=1e-6)


LATE_CHECKED = 6  # candidates of each kind whose late interaction is recomputed


@pytest.mark.parametrize(
    ("question", "phrase"),
    [("what is the fetch session", "fetch session"), ("what is transaction.timeout.ms", "transaction.timeout.ms")],
)
def test_late_interaction_is_the_max_sim_of_the_questions_tokens_with_the_chunks(
    index_retriever, stage, question, phrase
):
    """Each candidate's feature is the MaxSim of the question's word pieces with its chunk's, as the model
    makes them for its text under its heading path (at most 256 word pieces) followed, for a longer chunk, by
    those of the evidence units it did not read whole, in the index's basis; a chunk saying the question's
    words scores above every chunk saying none of them."""
    query = parse_query(question)
    assert index_retriever._spelling_corrected(query).text == query.text  # what the retriever encodes
    # Encoding a candidate's units again costs about a second: the pool's first few, and a few that say the phrase
    # and a few that say none of its words, are checked.
    pool = index_retriever.retrieve(query, 20, "hybrid", stage).candidates
    words = phrase.replace(".", " ").split()
    read = [dense_text(candidate.passage.section_path, candidate.passage.text).lower() for candidate in pool]
    saying_rows = [n for n, text in enumerate(read) if phrase in text][:LATE_CHECKED]
    silent_rows = [n for n, text in enumerate(read) if not any(w in text for w in words)][:LATE_CHECKED]
    candidates = [pool[n] for n in sorted({*range(LATE_CHECKED), *saying_rows, *silent_rows})]
    embedder, basis = index_retriever._queries._embedder, index_retriever.index.token_basis
    _, (question_tokens,) = embedder.encode_with_tokens([query.embedded_text])
    texts = [dense_text(candidate.passage.section_path, candidate.passage.text) for candidate in candidates]
    tokens = []
    for candidate, text in zip(candidates, texts, strict=True):
        passage = candidate.passage
        units = unit_texts(passage.text, passage.section_path, candidate.continues_code)
        _, (own, *unit_tokens) = embedder.encode_with_tokens([text, *units])
        row = {"text": passage.text, "section_path": passage.section_path, "continues_code": candidate.continues_code}
        tokens.append(np.concatenate([own, *(unit_tokens[i] for i in unread_units(row, embedder.read_chars(text)))]))
    counts = [len(t) for t in tokens]
    assert max(counts) > 254 and min(counts) > 0  # a long chunk's unread units follow its 256 word pieces
    expected = late_interaction(
        basis.project(question_tokens), basis.project(np.concatenate(tokens)), np.cumsum([0, *counts])
    )
    found = np.array([candidate.feature("late_interaction") for candidate in candidates])
    np.testing.assert_allclose(found, expected, atol=0.02)
    assert np.all((found > 0) & (found <= 1 + 1e-6))

    # What the model reads of a chunk is its heading path too ("3. Transaction timeouts").
    saying = [score for score, text in zip(found, texts, strict=True) if phrase in text.lower()]
    silent = [score for score, text in zip(found, texts, strict=True) if not any(w in text.lower() for w in words)]
    assert len(saying) >= 2 and len(silent) >= 5
    assert min(saying) > max(silent)


def test_matched_terms_and_identifiers_are_the_questions(retriever, stage):
    query = parse_query("INVALID_RECORD_STATE share group acknowledgement")
    pool = retriever.retrieve(query, 10, "hybrid", stage)
    names = {i.name for i in query.identifiers}
    for candidate in pool.candidates:
        passage = candidate.passage
        # Read from the BM25 postings, they are exactly the question's terms in the chunk's indexed text.
        indexed = set(tokenize(lexical_text(passage.section_path, passage.text)))
        assert candidate.matched_terms == indexed & pool.evidence.term_weights.keys()
        assert set(candidate.identifiers) == names & set(passage.identifiers)
    assert set(pool.evidence.term_weights) == set(query.tokens)
    assert any(candidate.identifiers for candidate in pool.candidates)


def _carriers(retriever, identifier: str) -> set[str]:
    """The chunk ids whose identifiers include `identifier`."""
    chunks = retriever.index.chunks
    return {
        chunk_id
        for chunk_id, identifiers in zip(
            chunks.column("chunk_id").to_pylist(), chunks.column("identifiers").to_pylist(), strict=True
        )
        if identifier in identifiers
    }


def test_identifier_candidates_are_every_chunk_carrying_the_identifier(retriever, stage):
    query = parse_query("INVALID_RECORD_STATE")
    carriers = _carriers(retriever, "invalid_record_state")
    pool = retriever.retrieve(query, 40, "hybrid", stage)
    assert carriers and carriers <= {c.passage.chunk_id for c in pool.candidates}


def test_the_identifier_channel_hands_down_at_most_depth_candidates(retriever, stage):
    """A name carried by more chunks than the depth (a tool or setting in a big corpus) brings only its
    strongest carriers, as the other channels bring their top `depth`: every channel gives at most one
    candidate here, where the identifier's eight or so carriers would otherwise all come."""
    carriers = _carriers(retriever, "commit.interval.ms")
    narrow = dataclasses.replace(stage, candidates=1)
    pool = retriever.retrieve(parse_query("commit.interval.ms"), 1, "hybrid", narrow)
    assert len(carriers) > 4 >= len(pool.candidates)
    assert carriers & {c.passage.chunk_id for c in pool.candidates}


def test_a_focus_identifier_puts_its_passage_first(retriever, stage):
    query = parse_query("INVALID_RECORD_STATE keeps showing up, what is going on?")
    assert query.focus_identifiers == {"invalid_record_state"}
    pool = retriever.retrieve(query, 20, "hybrid", stage)
    first = _top(pool)[0]
    assert first.passage.source_path == ERROR_PAGE, first.passage.heading
    assert first.identifiers == ("invalid_record_state",)
    assert first.feature("focus_identifier") == 1.0
    assert first.feature("defines_identifier") == 1.0  # the page's heading path names the error


def test_the_entry_of_a_setting_the_user_only_says_they_have_is_not_marked_as_defining_it(retriever, stage):
    """The seeds' EOS section defines `commit.interval.ms`: for a question about the setting, not for one that
    gives it as the user's setup and asks about something else."""
    asked = retriever.retrieve(parse_query("What does commit.interval.ms do?"), 20, "hybrid", stage)
    assert any(c.feature("defines_identifier") == 1.0 for c in asked.candidates)
    setup = parse_query("We run with commit.interval.ms=100. Why do our output records arrive in bursts?")
    pool = retriever.retrieve(setup, 20, "hybrid", stage)
    assert setup.focus_identifiers == {"commit.interval.ms"}  # still what the question names
    carriers = [c for c in pool.candidates if c.feature("focus_identifier") > 0]
    assert carriers and all(c.feature("defines_identifier") == 0.0 for c in pool.candidates)


def test_a_metrics_row_is_the_entry_of_its_metric_by_the_token_a_question_finds_the_name_by():
    """`UnderReplicatedPartitions` is searched as the BM25 token `underreplicatedpartition` (`_carried_names`)."""
    row = "# of under replicated partitions | kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions | 0"
    assert metric_tokens(row) == {
        "underreplicatedpartition": MBean("kafka.server:type=replicamanager,", "underreplicatedpartitions")
    }
    assert metric_tokens("watch kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions closely") == {}


def test_a_camel_case_name_the_corpus_holds_is_an_identifier_the_question_is_about(retriever, stage):
    """`RocksDB` matches no identifier pattern, yet the seeds hold it as a word: the question is about it,
    as about a key, and the chunks holding it are candidates; `ZorbFlux`, which no chunk holds, is not."""
    pool = retriever.retrieve(parse_query("why does RocksDB memory keep growing in ZorbFlux?"), 20, "hybrid", stage)
    assert pool.query.focus_identifiers == {"rocksdb"}
    assert pool.evidence.focus_identifiers == 1 and pool.evidence.unknown_focus_identifiers == 0
    holding = [c for c in pool.candidates if "rocksdb" in c.passage.text.lower()]
    assert holding and all(c.identifiers == ("rocksdb",) and c.feature("focus_identifier") == 1.0 for c in holding)
    assert all(c.identifiers == () for c in pool.candidates if c not in holding)


def test_words_the_corpus_writes_as_one_camel_case_name_are_that_name(retriever, stage):
    """ "last stable offset lag" is the seeds' `LastStableOffsetLag` metric, which the question is about as if
    it had named it; "never the less" runs together into a word the seeds hold too, but as a plain word."""
    pool = retriever.retrieve(
        parse_query("what does the last stable offset lag show? never the less, is it per partition?"),
        20,
        "hybrid",
        stage,
    )
    assert pool.query.focus_identifiers == {"laststableoffsetlag"}
    holding = [c for c in pool.candidates if "LastStableOffsetLag" in c.passage.text]
    assert holding and all(c.feature("focus_identifier") == 1.0 for c in holding)


def test_a_pasted_exception_class_finds_the_error_it_stands_for(retriever, stage):
    query = parse_query(
        "our share consumer dies with\n"
        "org.apache.kafka.common.errors.InvalidRecordStateException: oops\n"
        "org.apache.kafka.common.errors.ZorblattFrobnicationException: not a Kafka error"
    )
    pool = retriever.retrieve(query, 20, "hybrid", stage)
    assert {"invalid_record_state", "invalidrecordstateexception"} <= pool.query.focus_identifiers
    assert "zorblatt_frobnication" not in pool.query.focus_identifiers  # the corpus does not carry it
    # The seeds never spell InvalidRecordStateException, but its error name is known: only Zorblatt's is not.
    assert pool.evidence.unknown_focus_identifiers == 1
    first = _top(pool)[0]
    assert first.passage.source_path == ERROR_PAGE, first.passage.heading
    assert first.feature("defines_identifier") == 1.0


def test_a_chunk_defining_the_error_of_a_pasted_error_line_is_marked_but_not_one_the_user_names_in_prose(
    retriever, stage
):
    pasted = retriever.retrieve(
        parse_query("ERROR org.apache.kafka.common.errors.InvalidRecordStateException: oops"), 20, "hybrid", stage
    )
    marked = {c.passage.source_path for c in pasted.candidates if c.defines_pasted_error}
    assert marked == {ERROR_PAGE}
    named = retriever.retrieve(parse_query("what does INVALID_RECORD_STATE mean?"), 20, "hybrid", stage)
    assert not any(c.defines_pasted_error for c in named.candidates)


def test_an_error_printed_in_words_finds_the_error_it_names(retriever, stage):
    query = parse_query(
        "our .NET share consumer throws this, what is it?\n"
        "Confluent.Kafka.ConsumeException: Broker: Invalid record state"
    )
    pool = retriever.retrieve(query, 20, "hybrid", stage)
    assert "invalid_record_state" in pool.query.focus_identifiers
    assert "invalid_record" not in pool.query.focus_identifiers  # the longest carried run only
    first = _top(pool)[0]
    assert first.passage.source_path == ERROR_PAGE, first.passage.heading
    assert first.feature("defines_identifier") == 1.0


def test_the_rows_whose_description_a_pasted_message_says_are_named_by_their_first_cell():
    from rag.query import message_words
    from rag.retrieval import _rows_saying

    text = (
        "Error | Code | Retriable | Description\n"
        "COORDINATOR_LOAD_IN_PROGRESS | 14 | True | The coordinator is loading and hence can't process requests.\n"
        "NOT_COORDINATOR | 16 | True | This is not the correct coordinator.\n"
        "The coordinator is loading and hence can't process requests, as this prose line says too."
    )
    loading = message_words("The coordinator is loading and hence can't process requests.")
    assert _rows_saying([text], loading) == ["coordinator_load_in_progress"]
    assert _rows_saying([text], message_words("Offset commit failed: " + loading)) == ["coordinator_load_in_progress"]
    assert _rows_saying([text], message_words("is not the correct coordinator")) == ["not_coordinator"]
    assert _rows_saying([text], message_words("coordinator is")) == []  # too few words to tell a message by


def test_a_message_in_a_clients_own_words_names_the_row_sharing_its_longest_run_of_words():
    """Clients print the broker's error in their own words; the row sharing the longest run of five or more
    words with the message is the one, across every chunk of the table, and a row that says the message
    whole still wins."""
    from rag.query import message_words
    from rag.retrieval import _rows_saying

    first_chunk = (
        "Error | Code | Retriable | Description\n"
        "OFFSET_OUT_OF_RANGE | 1 | False | The requested offset is not within the range of offsets maintained by "
        "the server.\n"
        "UNKNOWN_MEMBER_ID | 25 | False | The coordinator is not aware of this member."
    )
    second_chunk = (
        "GROUP_SUBSCRIBED_TO_TOPIC | 86 | False | Deleting offsets of a topic is forbidden while the consumer group "
        "is actively subscribed to it.\n"
        "GROUP_ID_NOT_FOUND | 69 | False | The group id does not exist."
    )
    chunks = [first_chunk, second_chunk]
    sarama = message_words("The requested offset is outside the range of offsets maintained by the server for the")
    assert _rows_saying(chunks, sarama) == ["offset_out_of_range"]
    librdkafka = message_words("Broker: The consumer group is actively subscribed to the topic")
    assert _rows_saying(chunks, librdkafka) == ["group_subscribed_to_topic"]
    assert _rows_saying(chunks, message_words("the group id of the consumer is wrong")) == []  # 3 words shared
    exact = message_words("The coordinator is not aware of this member. of the consumer group is actively")
    assert _rows_saying(chunks, exact) == ["unknown_member_id"]


def test_a_message_printed_with_its_values_names_the_row_whose_description_holds_its_words():
    """A broker fills its message in ("Replication factor: 3 larger than available brokers: 1"): no run of five
    words is left of the row's description, but every word of the message but its values is in it."""
    from rag.query import message_words
    from rag.retrieval import _rows_saying

    text = (
        "Error | Code | Retriable | Description\n"
        "INVALID_PARTITIONS | 37 | False | Number of partitions is below 1.\n"
        "INVALID_REPLICATION_FACTOR | 38 | False | Replication factor is below 1 or larger than the number of "
        "available brokers.\n"
        "INVALID_REPLICA_ASSIGNMENT | 39 | False | Replica assignment is invalid."
    )
    printed = message_words("Replication factor: 3 larger than available brokers: 1")
    assert _rows_saying([text], printed) == ["invalid_replication_factor"]
    # Words no description holds ("exceeds", "count"): no message of this table.
    assert _rows_saying([text], message_words("Replication factor of the topic exceeds broker count")) == []
    assert _rows_saying([text], message_words("partitions below 1")) == []  # too few words to tell a message by


def test_a_dotted_key_one_slip_from_a_carried_key_is_that_key():
    """A letter left out or two swapped: the carried key one such slip away, the one most chunks carry."""
    import pyarrow as pa

    from rag.retrieval import _IdentifierLookup

    lookup = _IdentifierLookup(
        pa.chunked_array(
            [
                [["max.poll.interval.ms", "auto.offset.reset"], ["max.poll.interval.ms"]],
                [["retention.ms", "log.retention.ms"], ["max.poll.intervals.ms"]],
            ]
        )
    )
    assert lookup.key_misspelt_as("max.pol.interval.ms") == "max.poll.interval.ms"  # not `max.poll.intervals.ms`
    assert lookup.key_misspelt_as("auto.offest.reset") == "auto.offset.reset"
    assert lookup.key_misspelt_as("retnetion.ms") == "retention.ms"
    assert lookup.key_misspelt_as("retention.ms") is None  # carried: spelt right
    assert lookup.key_misspelt_as("max.poll.interval.mx") is None  # a letter replaced: another name
    assert lookup.key_misspelt_as("retentionms") is None  # no dotted name


def test_a_misspelt_key_is_searched_and_known_as_the_key(retriever, stage):
    query = parse_query("what does auto.ofset.reset do when the group has no committed offset?")
    pool = retriever.retrieve(query, 20, "hybrid", stage)
    assert "auto.offset.reset" in pool.query.focus_identifiers
    assert "auto.ofset.reset" not in {i.name for i in pool.query.identifiers}
    assert "auto.offset.reset" in pool.query.text
    assert pool.evidence.unknown_focus_identifiers == 0
    assert "auto.offset.reset" in pool.candidates[0].identifiers


def test_a_name_is_an_error_where_a_chunk_defining_it_holds_an_error_code(retriever):
    assert retriever.names_an_error("invalid_record_state")  # "Kafka Error INVALID_RECORD_STATE / Error code 121"
    assert not retriever.names_an_error("create_time")  # a timestamp type the seeds mention
    assert not retriever.names_an_error("no_such_name")


def test_an_exception_class_stands_for_the_error_name_with_one_more_word():
    """Kafka names `GroupAuthorizationException` for `GROUP_AUTHORIZATION_FAILED`; an exact name wins, and
    a prefix shared by two longer names is not guessed."""
    import pyarrow as pa

    from rag.retrieval import _IdentifierLookup

    lookup = _IdentifierLookup(
        pa.chunked_array(
            [[["group_authorization_failed"], ["not_enough_replicas", "not_enough_replicas_after_append"]],
             [["invalid_x_one", "invalid_x_two"], ["out_of_order_sequence_number_of_record"]]]
        )
    )  # fmt: skip
    assert lookup.error_name("group_authorization") == "group_authorization_failed"
    assert lookup.error_name("not_enough_replicas") == "not_enough_replicas"
    assert lookup.error_name("invalid_x") is None
    assert lookup.error_name("out_of_order_sequence") is None  # two more words
    assert lookup.error_name("zorblatt") is None


def test_an_exception_class_stands_for_the_one_error_name_a_word_apart_but_in_its_last_word():
    """Kafka names `RecordBatchTooLargeException` for `RECORD_LIST_TOO_LARGE`: one word of three or more replaced,
    when one carried name fits. Not the last word, which says what went wrong, nor in a two-word name."""
    import pyarrow as pa

    from rag.retrieval import _IdentifierLookup

    lookup = _IdentifierLookup(
        pa.chunked_array(
            [[["record_list_too_large", "delegation_token_expired"], ["sasl_authentication"]],
             [["invalid_x_size", "invalid_y_size"], ["message_too_large"]]]
        )
    )  # fmt: skip
    assert lookup.error_name_one_word_apart("record_batch_too_large") == "record_list_too_large"
    assert lookup.error_name_one_word_apart("record_too_large") == "message_too_large"
    assert lookup.error_name_one_word_apart("delegation_token_disabled") is None  # the last word differs
    assert lookup.error_name_one_word_apart("ssl_authentication") is None  # two words
    assert lookup.error_name_one_word_apart("invalid_z_size") is None  # two names fit
    assert lookup.error_name_one_word_apart("record_batch_too_small") is None


def test_of_several_error_names_a_word_apart_the_one_whose_word_the_question_writes():
    """The 3.9 error table has TELEMETRY_TOO_LARGE beside MESSAGE_TOO_LARGE, so `RecordTooLargeException` fits
    both; its message ("The message is 2097152 bytes when serialized …") writes the word that tells them apart."""
    import pyarrow as pa

    from rag.retrieval import _IdentifierLookup

    lookup = _IdentifierLookup(pa.chunked_array([[["message_too_large"], ["telemetry_too_large"]]]))
    assert lookup.error_name_one_word_apart("record_too_large") is None
    assert lookup.error_name_one_word_apart("record_too_large", frozenset({"message", "byte"})) == "message_too_large"
    assert lookup.error_name_one_word_apart("record_too_large", frozenset({"producer"})) is None
    both = frozenset({"message", "telemetry"})
    assert lookup.error_name_one_word_apart("record_too_large", both) is None


def test_a_variable_or_a_frameworks_property_stands_for_the_key_it_spells():
    """Container images set `advertised.listeners` from `KAFKA_ADVERTISED_LISTENERS` (or `KAFKA_CFG_…`), and
    Spring Boot sets `auto.offset.reset` from `spring.kafka.consumer.auto-offset-reset`."""
    import pyarrow as pa

    from rag.retrieval import _IdentifierLookup

    lookup = _IdentifierLookup(
        pa.chunked_array(
            [
                [["advertised.listeners", "listeners", "auto.offset.reset"]],
                [["log.retention.hours", "retention.hours", "kafka_heap_opts", "default.replication.factor"]],
                [["topic.creation.enable", "kafka.server"]],
            ]
        )
    )
    assert lookup.key_spelt_as("kafka_advertised_listeners") == "advertised.listeners"
    assert lookup.key_spelt_as("kafka_cfg_log_retention_hours") == "log.retention.hours"  # the longest key
    assert lookup.key_spelt_as("log_retention_hours") == "log.retention.hours"  # the key itself, in capitals
    assert lookup.key_spelt_as("kafka_heap_opts") is None  # the corpus names the variable itself
    assert lookup.key_spelt_as("kafka_listeners") is None  # a one-word key is no dotted key
    assert lookup.key_spelt_as("not_enough_replicas") is None
    # A framework's property under its own prefix; not a key of the corpus's own prefixes, nor a tool's name.
    assert lookup.key_spelt_as("spring.kafka.consumer.auto-offset-reset") == "auto.offset.reset"
    assert lookup.key_spelt_as("topic.creation.default.replication.factor") is None
    assert lookup.key_spelt_as("kafka-advertised-listeners") is None


def test_a_question_naming_a_variable_searches_the_key_and_knows_it(retriever, stage):
    query = parse_query("we set KAFKA_TRANSACTIONAL_ID_EXPIRATION_MS=60000 in compose, what does it change?")
    pool = retriever.retrieve(query, 20, "hybrid", stage)
    assert "transactional.id.expiration.ms" in pool.query.focus_identifiers
    assert "kafka_transactional_id_expiration_ms" not in pool.query.focus_identifiers
    assert pool.evidence.unknown_focus_identifiers == 0


def test_an_error_code_question_puts_the_defining_page_first(retriever, stage):
    pool = retriever.retrieve(parse_query("what does error code 121 mean?"), 20, "hybrid", stage)
    first = _top(pool)[0]
    assert first.passage.source_path == ERROR_PAGE, first.passage.heading
    assert "code:121" in first.passage.identifiers


def test_a_tool_in_the_command_line_is_a_context_identifier_feature(retriever, stage):
    query = parse_query(
        "$ bin/kafka-share-groups.sh --bootstrap-server localhost:9092 --describe --group g\n"
        "ERROR org.apache.kafka.common.errors.InvalidRecordStateException: The record state is invalid."
    )
    assert "kafka-share-groups" in query.context_identifiers
    pool = retriever.retrieve(query, 20, "hybrid", stage)
    carrying = [c for c in pool.candidates if "kafka-share-groups" in c.passage.identifiers]
    assert carrying, "the seeds' diagnostic commands name kafka-share-groups.sh"
    for candidate in carrying:
        assert candidate.feature("context_identifier") > 0.0
        assert "kafka-share-groups" in candidate.identifiers
    for candidate in pool.candidates:
        if "kafka-share-groups" not in candidate.passage.identifiers:
            assert candidate.feature("context_identifier") == 0.0


def _evidence(retriever, stage, question):
    return retriever.retrieve(parse_query(question), 5, "hybrid", stage).evidence


def test_everyday_words_the_corpus_lacks_are_told_from_names_no_vocabulary_holds(retriever, stage):
    # "yesterday" is a word of the embedding model's vocabulary that the seeds never use; "zorblatt" is in
    # neither, like another product's name.
    everyday = _evidence(retriever, stage, "why is the consumer lagging since yesterday?")
    foreign = _evidence(retriever, stage, "why is the consumer lagging since zorblatt?")
    assert everyday.unknown_term_share > 0.0
    assert everyday.unknown_term_share == pytest.approx(foreign.unknown_term_share)  # both words unknown alike
    assert everyday.unknown_word_share > foreign.unknown_word_share
    assert foreign.unknown_word_share < foreign.unknown_term_share


def test_a_word_of_no_vocabulary_in_the_asking_sentence_is_an_unknown_subject(retriever, stage):
    evidence = functools.partial(_evidence, retriever, stage)
    # a product named in lower case, which no name check sees
    assert evidence("how do I set the consumer lag alert on zorblatt?").unknown_asked_foreign_share > 0.0
    # the same word outside the asking sentence is the user's setup, and an exception class is what they got
    assert evidence("we run zorblatt. how do I set the consumer lag alert?").unknown_asked_foreign_share == 0.0
    assert evidence("why does the consumer throw ZorblattLagException?").unknown_asked_foreign_share == 0.0
    # with its package written in the sentence too: the package is where the class lives
    assert evidence("consumer fails, zorg.quux.ZorblattLagException: lag too high").unknown_asked_foreign_share == 0.0
    # a compound of known words, and a quantity, are no other product's words
    assert evidence("how do I see which consumer groups are lag-free since 9am?").unknown_asked_foreign_share == 0.0
    # nor an inflection of a known word that the model's vocabulary lacks whole ("trip", not "tripping")
    assert evidence("the consumer keeps lagging. what is it tripping over?").unknown_asked_foreign_share == 0.0
    assert evidence("why doesnt the consumer commit?").unknown_asked_foreign_share == 0.0  # "doesn't", typed fast


def test_query_evidence_reads_unknown_words_names_and_identifiers(retriever, stage):
    known = retriever.retrieve(parse_query("transaction timeout"), 5, "hybrid", stage).evidence
    assert known.unknown_term_share == 0.0
    assert known.unknown_names == () and known.unknown_focus_identifiers == 0

    unknown = retriever.retrieve(
        parse_query("We use Zorblatt with the share consumer, why does it fail?\nFLURBO_QUUX_ERROR"), 5, "hybrid", stage
    ).evidence
    assert 0.0 < unknown.unknown_term_share < 1.0
    assert unknown.names >= 1 and "Zorblatt" in unknown.unknown_names
    assert unknown.focus_identifiers == 1 and unknown.unknown_focus_identifiers == 1
    weights = unknown.term_weights
    assert weights["zorblatt"] > weights["consumer"]  # a word the corpus never uses weighs most


def test_the_users_own_resources_in_a_pasted_command_are_not_unknown_words(retriever, stage):
    """'zorbgroup' is the group the user's command names: their resource, not a topic the corpus lacks."""
    prose = "the transaction timeout hits zorbgroup"
    alone = retriever.retrieve(parse_query(prose), 5, "hybrid", stage).evidence
    pasted = retriever.retrieve(
        parse_query(f"{prose}\nbin/kafka-consumer-groups.sh --describe --group zorbgroup"), 5, "hybrid", stage
    ).evidence
    assert alone.unknown_term_share > 0.0
    assert pasted.unknown_term_share == 0.0
    assert pasted.term_weights["zorbgroup"] == alone.term_weights["zorbgroup"]  # still a weighed search term


def test_a_name_after_a_word_the_corpus_takes_as_an_option_is_the_users_own(retriever, stage):
    """The seed corpus's commands take `--group`: "group zorbgroup" names the user's group, as
    `--group zorbgroup` would; "bunch zorbgroup" does not."""
    assert "group" in retriever.index.manifest["command_flags"]
    named = retriever.retrieve(parse_query("the transaction timeout hits group zorbgroup"), 5, "hybrid", stage)
    other = retriever.retrieve(parse_query("the transaction timeout hits bunch zorbgroup"), 5, "hybrid", stage)
    assert "zorbgroup" in named.query.own_terms and named.evidence.unknown_term_share == 0.0
    assert "zorbgroup" not in other.query.own_terms and other.evidence.unknown_term_share > 0.0


def test_numbers_the_corpus_never_uses_are_values_not_unknown_words(retriever, stage):
    """A pasted log's offsets and sizes say nothing about the subject: they neither weigh as search
    terms nor count as words the corpus lacks; a number it does use stays a term."""
    plain = retriever.retrieve(parse_query("the transaction timeout hits"), 5, "hybrid", stage).evidence
    valued = retriever.retrieve(
        parse_query("the transaction timeout hits 412883120 or 1,874.2 times"), 5, "hybrid", stage
    ).evidence
    assert valued.term_weights.keys() == plain.term_weights.keys() | {"time"}
    assert valued.unknown_term_share == plain.unknown_term_share == 0.0
    assert "121" in retriever.retrieve(parse_query("error code 121"), 5, "hybrid", stage).evidence.term_weights


def test_a_hyphenated_word_the_corpus_uses_in_no_spelling_is_a_name_whose_parts_are_not_searched(retriever):
    query = parse_query("why does transaction-zorb time out, and max-poll-interval-ms or transaction-timeout-ms?")
    assert retriever._foreign_compounds(query) == {"transaction-zorb"}  # the others spell corpus keys


def test_a_quoted_resource_name_is_not_an_unknown_identifier(retriever, stage):
    """'zorb1.frob_topic' is the user's own topic, quoted in their words: searched, but not evidence that
    the corpus lacks what they ask about."""
    quoted = retriever.retrieve(
        parse_query("why does 'zorb1.frob_topic' hit the transaction timeout?"), 5, "hybrid", stage
    )
    bare = retriever.retrieve(parse_query("why does zorb1.frob_topic hit the transaction timeout?"), 5, "hybrid", stage)
    assert quoted.query.focus_identifiers == bare.query.focus_identifiers == {"zorb1.frob_topic"}
    assert bare.evidence.unknown_focus_identifiers == 1 and bare.evidence.unknown_term_share > 0.0
    assert quoted.evidence.unknown_focus_identifiers == 0 and quoted.evidence.unknown_term_share == 0.0


def test_the_share_of_an_opening_labels_words_the_corpus_never_uses(retriever, stage):
    """Versions and the user's own names do not count; a hyphenated word is unknown only by a part."""

    def share(question: str) -> float:
        return retriever.retrieve(parse_query(question), 5, "hybrid", stage).evidence.unknown_label_share

    assert share("Zorblatt consumer 2.1: why does the transaction timeout hit?") == pytest.approx(0.5)
    assert share("[zorblatt-frobber] why does the transaction timeout hit?") == 1.0
    assert share("transaction-timeout consumer: why does it hit?") == 0.0
    assert share("why does the transaction timeout hit Zorblatt?") == 0.0  # no label: `unknown_names` reads it


def test_a_ticket_tags_word_counts_only_when_no_vocabulary_holds_it_and_it_shortens_no_corpus_word(retriever, stage):
    """ "[prod]" (of "producer", "production") and "[urgent]" (an everyday word) say where or how urgent, not what
    about; "[Zorblatt]" names a product."""

    def share(question: str) -> float:
        return retriever.retrieve(parse_query(question), 5, "hybrid", stage).evidence.unknown_label_share

    assert share("[prod] why does the transaction timeout hit?") == 0.0
    assert share("[urgent] why does the transaction timeout hit?") == 0.0
    assert share("[Zorblatt] why does the transaction timeout hit?") == 1.0
    assert share("[prod zorblatt] why does the transaction timeout hit?") == pytest.approx(0.5)
    assert share("[prod] Zorblatt: why does the transaction timeout hit?") == 1.0  # the label under it, whole


def test_the_share_of_the_asking_sentences_names_the_corpus_never_uses(retriever, stage):
    """Names in the sentences that ask count, those of the user's stack (before them, or called "our") do not; a
    known capitalised first word is grammar, not a name, and a name the user quotes as their own resource is
    theirs."""

    def share(question: str) -> float:
        return retriever.retrieve(parse_query(question), 5, "hybrid", stage).evidence.unknown_asked_name_share

    assert share("Can I raise the transaction timeout in a custom Zorblatt configuration?") == 1.0
    assert share("Can I raise the transaction timeout for the Zorblatt Kafka consumer?") == pytest.approx(0.5)
    assert share("Our Zorblatt app times out. Which setting is the transaction timeout?") == 0.0
    assert share("Which setting is the transaction timeout of our Zorblatt app?") == 0.0  # theirs: their stack
    assert share("Which setting is the transaction timeout of 'Zorblatt'?") == 0.0
    assert share("why does the transaction time out?") == 0.0


def test_the_share_of_the_asking_sentences_identifiers_no_chunk_carries(retriever, stage):
    """An identifier the user asks about by name that the corpus never carries counts; one it carries does not, nor
    one only in a pasted line, nor a name the user quotes as their own resource."""

    def share(question: str) -> float:
        return retriever.retrieve(parse_query(question), 5, "hybrid", stage).evidence.unknown_asked_identifier_share

    assert share("What does kafka-zorblatt-offsets.sh print for a transaction timeout?") == 1.0
    assert share("Which is bigger, transaction.timeout.ms or zorblatt.flush.max.ms?") == pytest.approx(0.5)
    assert share("What does transaction.timeout.ms do?") == 0.0
    assert share("$ kafka-zorblatt-offsets.sh --list\nwhy does the transaction time out?") == 0.0
    assert share("why does the transaction time out?") == 0.0


def test_an_exception_the_user_names_is_known_by_the_error_it_stands_for(retriever, stage):
    """ "my share consumer gets InvalidRecordStateException": the seeds never spell the class, but its error
    `INVALID_RECORD_STATE` is theirs, so neither the asking sentence's identifiers nor its words count it as
    unknown; an exception no error name stands for still does."""

    def evidence(question: str):
        return retriever.retrieve(parse_query(question), 5, "hybrid", stage).evidence

    named = evidence("my share consumer gets InvalidRecordStateException")
    assert named.unknown_asked_identifier_share == 0.0 and named.unknown_term_share == 0.0
    other = evidence("my share consumer gets ZorblattFrobnicationException")
    assert other.unknown_asked_identifier_share == 1.0 and other.unknown_term_share > 0.0


def test_a_key_the_user_spells_in_capitals_is_known_as_that_key(retriever, stage):
    """`TRANSACTION_TIMEOUT_MS` (a container variable's or a code constant's spelling) is the seeds'
    `transaction.timeout.ms`: what the question is about, and no identifier or word the corpus lacks."""
    pool = retriever.retrieve(parse_query("TRANSACTION_TIMEOUT_MS default?"), 5, "hybrid", stage)
    assert "transaction.timeout.ms" in pool.query.focus_identifiers
    assert pool.evidence.unknown_asked_identifier_share == 0.0 and pool.evidence.unknown_term_share == 0.0


def test_the_share_of_the_asking_sentences_names_of_several_words_the_corpus_never_writes(retriever, stage):
    """A product named in words the corpus knows is one it never mentions when it never writes two of them
    together ("Record Coordinator"); next to each other in either order and any inflection, or as one word
    (`StreamThread`), they are written, and one such pair is enough. A name with a word the corpus lacks is
    left to the share of unknown names."""

    def share(question: str) -> float:
        return retriever.retrieve(parse_query(question), 5, "hybrid", stage).evidence.unknown_asked_phrase_share

    assert share("Does the Record Coordinator retry a transaction?") == 1.0
    assert share("Does the Transaction Coordinator retry?") == 0.0
    assert share("Do Transaction Coordinators abort a hung transaction?") == 0.0
    assert share("Does the Stream Thread retry?") == 0.0
    assert share("Does the Coordinator Transaction retry?") == 0.0  # in either order
    assert share("Does the Session Track retry?") == 1.0  # "… session. Track …": a sentence ends between them
    assert share("Is the Transaction Coordinator Zone relevant?") == 0.0
    assert share("Does the Record Coordinator or the Transaction Coordinator retry?") == pytest.approx(0.5)
    assert share("Our Record Coordinator retries. Why does the transaction time out?") == 0.0
    assert share("Does the Zorblatt Coordinator retry?") == 0.0  # a word the corpus lacks: an unknown name's share


def test_a_name_written_as_code_is_known_only_as_the_corpus_writes_it(retriever, stage):
    """A field or member of some API in backticks is not the corpus's for using its words ("transaction", "wait",
    "pending"): only written whole, as the member a path ends in, or as a key spelt with underscores."""

    def share(question: str) -> float:
        return retriever.retrieve(parse_query(question), 5, "hybrid", stage).evidence.unknown_asked_name_share

    assert share("What does `transaction_wait_pending` do?") == 1.0
    assert share("Does `transactionWaitPending` retry?") == 1.0
    assert share("Does `producer.zorbTransaction()` retry?") == 1.0
    assert share("Does `producer.commitTransaction()` retry?") == 0.0  # the corpus's `commitTransaction`
    assert share("What does `transactional_id` default to?") == 0.0  # the corpus's `transactional.id`
    assert share("What does `transactional.id` do?") == 0.0  # a key: an identifier, not a name


def test_a_name_known_by_its_parts_is_not_unknown(retriever, stage):
    evidence = retriever.retrieve(parse_query("How does a ShareConsumer acknowledge?"), 5, "hybrid", stage).evidence
    assert "ShareConsumer" not in evidence.unknown_names


def test_an_artifact_id_with_a_part_the_corpus_lacks_is_unknown(retriever, stage):
    query = parse_query("Does zorblatt-consumer-binder commit offsets? And kafka-consumer-groups?")
    evidence = retriever.retrieve(query, 5, "hybrid", stage).evidence
    assert "zorblatt-consumer-binder" in evidence.unknown_names
    assert "kafka-consumer-groups" not in evidence.unknown_names


def test_a_sentence_opening_word_counts_as_a_name_only_when_the_corpus_lacks_it(retriever, stage):
    evidence = retriever.retrieve(parse_query("Zorblatt: how does the consumer commit?"), 5, "hybrid", stage).evidence
    assert evidence.unknown_names == ("Zorblatt",) and evidence.names == 1
    evidence = retriever.retrieve(parse_query("Consumer offsets: how are they committed?"), 5, "hybrid", stage).evidence
    assert evidence.unknown_names == () and evidence.names == 0


def test_bm25_mode_only_returns_lexical_matches(retriever, stage):
    pool = retriever.retrieve(parse_query("zzqx flurbo"), 20, "bm25", stage)
    assert pool.candidates == ()
    pool = retriever.retrieve(parse_query("transaction.timeout.ms"), 20, "bm25", stage)
    assert pool.candidates and all(c.first_stage > 0 for c in pool.candidates)


def test_unknown_mode_is_refused(retriever, stage):
    with pytest.raises(RetrievalError, match="Unknown retrieval mode 'fuzzy': use one of"):
        retriever.retrieve(parse_query("lag"), 5, "fuzzy", stage)


def test_timings_are_reported(retriever, stage):
    pool = retriever.retrieve(parse_query("lag"), 5, "hybrid", stage)
    assert {"embed_query", "dense", "bm25", "features"} <= set(pool.timings_ms)
    assert all(v >= 0 for v in pool.timings_ms.values())


def test_retrieval_is_deterministic(retriever, stage):
    query = parse_query("exactly once transactions producer")
    first = retriever.retrieve(query, 20, "hybrid", stage)
    second = retriever.retrieve(query, 20, "hybrid", stage)
    assert [(c.passage.chunk_id, c.features) for c in first.candidates] == [
        (c.passage.chunk_id, c.features) for c in second.candidates
    ]


def test_a_two_part_key_counts_where_the_corpus_carries_it(retriever, stage):
    """Two dotted words are a key when the corpus names them (`processing.guarantee`). "isolation.mode" is
    no key of this corpus: not searched as one, but, shaped like its keys (`isolation.level`), still something
    the question asks about that it lacks. A topic's name ("dc7.payments") or a quoted name is neither."""
    pool = retriever.retrieve(parse_query("does isolation.mode change processing.guarantee?"), 5, "hybrid", stage)
    assert pool.query.focus_identifiers == {"processing.guarantee"}
    assert pool.evidence.focus_identifiers == 2 and pool.evidence.unknown_focus_identifiers == 1
    for question in ("does dc7.payments change processing.guarantee?", "does 'isolation.mode' change it?"):
        evidence = retriever.retrieve(parse_query(question), 5, "hybrid", stage).evidence
        assert evidence.unknown_focus_identifiers == 0, question


def test_rows_read_together_equal_rows_read_one_by_one_across_record_batches(retriever):
    """`_records` takes the candidates' rows from each record batch at once; cut the table into small batches so
    the rows asked for straddle their boundaries."""
    chunks = retriever.index.chunks
    retriever = copy.copy(retriever)
    retriever._batches = chunks.to_batches(max_chunksize=7)
    retriever._batch_starts = np.cumsum([0, *(len(batch) for batch in retriever._batches)])
    assert len(retriever._batches) > 3
    rows = sorted({0, 6, 7, 8, 13, 14, 20, len(chunks) // 2, len(chunks) - 1})
    records = retriever._records(rows)
    assert list(records) == rows
    assert records == {row: chunks.slice(row, 1).to_pylist()[0] for row in rows}


@pytest.mark.parametrize(
    ("word", "spelt"),
    [
        ("producerfencedexception", "ProducerFencedException"),  # as a chunk writes it
        ("streamthread", "StreamThread"),
        ("invalid_record_state", "INVALID_RECORD_STATE"),
        ("invalidrecordstateexception", "InvalidRecordStateException"),  # no chunk names it; its error is carried
        ("unknownservererror", "UnknownServerError"),  # UNKNOWN_SERVER_ERROR
        ("groupauthorizationexception", None),  # neither it nor its error is in the seeds
        ("flurbo", None),
        ("kafka", "Kafka"),  # capitalised inside the seeds' sentences
        ("jmx", "JMX"),
        ("consumer", None),  # capitalised only where a sentence opens
    ],
)
def test_the_corpus_spelling_of_a_word_is_how_a_chunk_writes_it_or_the_class_of_a_carried_error(retriever, word, spelt):
    assert retriever.corpus_spelling(word) == spelt


def test_a_question_parsed_with_the_corpus_spelling_names_the_error_its_lower_case_class_stands_for(retriever):
    typed = "share consumer logs invalidrecordstateexception on acknowledge"
    assert {i.name for i in parse_query(typed).identifiers} == set()
    query = parse_query(typed, spelling=retriever.corpus_spelling)
    assert "invalidrecordstateexception" in {i.name for i in query.identifiers}
    assert "invalid_record_state" in {i.name for i in query.error_names}
    assert query.question == typed
