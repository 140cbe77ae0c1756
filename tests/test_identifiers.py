"""Identifier extraction: what retrieval matches exactly, on both the chunk and the question side."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rag.identifiers import (
    MBean,
    command_flags,
    error_names,
    exception_names,
    extract_identifiers,
    is_plain_two_part,
    mbeans_written,
    metric_entries,
    phrase_names,
    run_together_names,
)

REPO = Path(__file__).resolve().parents[1]

STACK_TRACE = """2024-05-01 12:00:01,123 ERROR [kafka-producer-network-thread | producer-1] o.a.k.c.p.i.Sender - \
[Producer clientId=producer-1, transactionalId=tx-7f3a9c2e1b4d5a6f] Aborting producer batches due to fatal error
org.apache.kafka.common.errors.ProducerFencedException: There is a newer producer with the same transactionalId.
\tat org.apache.kafka.clients.producer.internals.TransactionManager.lambda$fail$2(TransactionManager.java:350)
\tat org.apache.kafka.clients.producer.internals.Sender.run(Sender.java:244)
\tat java.base/java.lang.Thread.run(Thread.java:829)
Caused by: org.apache.kafka.common.errors.InvalidProducerEpochException: Producer attempted an old epoch.
\t... 12 more
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("got a TimeoutException and then OutOfMemoryError", {"timeoutexception", "outofmemoryerror"}),
        ("org.apache.kafka.common.errors.ProducerFencedException: fenced", {"producerfencedexception"}),
        ("Caused by: java.lang.IllegalStateException: no", {"illegalstateexception"}),
        ("INVALID_RECORD_STATE and UNKNOWN_TOPIC_OR_PARTITION", {"invalid_record_state", "unknown_topic_or_partition"}),
        ("what does error code 121 mean", {"code:121"}),
        ("Error code 121 · Non-retriable Producer", {"code:121"}),
        ("the broker answered with error_code=47", {"code:47"}),
        ("code: 007", {"code:7"}),
        ("what do error codes 6 and 15 mean?", {"code:6", "code:15"}),
        ("codes 6, 15 or 27", {"code:6", "code:15", "code:27"}),
        ('INVALID_RECORD(87, "This record has failed the validation on broker")', {"invalid_record", "code:87"}),
        ("set transaction.timeout.ms above max.poll.interval.ms", {"transaction.timeout.ms", "max.poll.interval.ms"}),
        ("use `enable.idempotence=true` and isolation.level", {"enable.idempotence", "isolation.level"}),
        ("group.share.record.lock.duration.ms", {"group.share.record.lock.duration.ms"}),
        ("min.insync.replicas. With acks=all it fails", {"min.insync.replicas"}),  # a key ending a sentence
        ("raise linger.ms.", {"linger.ms"}),
        ("KIP-932, kip-447 and KAFKA-12345", {"kip-932", "kip-447", "kafka-12345"}),
        ("see KAFKA-13598. Then retry", {"kafka-13598"}),
        ("brokers kafka-1:9092 and kafka-2:9092", set()),  # hosts, not JIRA tickets
        # a ticket before its title, as a KIP page or a JIRA issue heads itself
        ("KIP-467: Augment ProduceResponse error messaging", {"kip-467"}),
        ("KAFKA-9144: zombie producer", {"kafka-9144"}),
        # a KIP as people type it; a version after "Kafka" is none
        ("what is KIP 467 about, and kip932?", {"kip-467", "kip-932"}),
        ("Kafka 4 brokers on KIP 5", set()),
        ("run kafka-share-groups.sh --describe", {"kafka-share-groups"}),
        # two dotted words: a key's shape without a word list; abbreviations and files are not
        ("set buffer.memory and bootstrap.servers", {"buffer.memory", "bootstrap.servers"}),
        ("e.g. at 3 p.m. with cakey.pem and truststore.jks", set()),
        ("bin/kafka-consumer-groups.sh and kafka-topics.bat", {"kafka-consumer-groups", "kafka-topics"}),
        ("$ bin/kafka-streams-application-reset --help", {"kafka-streams-application-reset"}),
        ("ls /var/kafka-logs/orders-0 on kafka-prod-03:9092", set()),  # a directory and a host, not tools
        ("call initTransactions() then commitTransaction()", {"inittransactions", "committransaction"}),
        (
            "INVALID_RECORD_STATE | 121 | False | The record state is invalid. The acknowledgement of delivery "
            "could not be completed.",
            {"invalid_record_state", "code:121"},
        ),
        (
            "UNKNOWN_TOPIC_OR_PARTITION | 3 | True | This server does not host this topic-partition.",
            {"unknown_topic_or_partition", "code:3"},
        ),  # fmt: skip
        ("NONE | 0 | False |", set()),  # a one-word name is not an error name
    ],
)
def test_identifier_kinds(text, expected):
    assert set(extract_identifiers(text)) == expected


@pytest.mark.parametrize(
    "text",
    [
        "edit server.properties and run start.sh, then read broker.log",
        "e.g. this and i.e. that, etc. and so on",
        "the org.apache.kafka.clients package and com.example.app",
        "see www.example.com or kafka.apache.org",
        "versions 3.6.0 and 0.10.1 behave alike",
        "the acks setting and the retries one",
        "Exception handling is hard",  # a bare word is not a class name
        "a SCALA_VERSION placeholder",
    ],
)
def test_non_identifiers_are_not_extracted(text):
    assert extract_identifiers(text) == ()


def test_output_is_sorted_unique_lower_case():
    found = extract_identifiers("TimeoutException, timeoutexception? TimeoutException! KIP-1 kip-1 ACKS_ALL")
    assert found == ("acks_all", "kip-1", "timeoutexception")


def test_question_and_chunk_sides_agree():
    chunk = "Set `transaction.timeout.ms` when INVALID_RECORD_STATE (error code 121) appears; see KIP-932."
    question = "what is transaction.timeout.ms, invalid record state INVALID_RECORD_STATE, code 121, kip-932?"
    assert set(extract_identifiers(question)) <= set(extract_identifiers(chunk))


def test_error_table_rows_define_their_codes():
    """A protocol-errors table: each row's code is extracted, but a number in a description is not a code."""
    table = (
        "Error | Code | Retriable | Description\n"
        "UNKNOWN_SERVER_ERROR | -1 | False | The server experienced an unexpected error when processing the request.\n"
        "INVALID_RECORD_STATE | 121 | False | The record state is invalid. The acknowledgement of delivery could not "
        "be completed.\n"
        "SOME_ERROR | 7 | True | Retry after 500 ms or 3 attempts."
    )
    found = set(extract_identifiers(table))
    assert {"code:121", "code:-1", "code:7"} <= found
    assert "code:500" not in found and "code:3" not in found


METRICS_TABLE = (
    "Description | Mbean name | Normal value\n"
    "# of under replicated partitions (|ISR| < |all replicas|) | "
    "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions | 0\n"
    "Max lag in messages btw follower and leader replicas | "
    "kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica | lag should be proportional\n"
    "Request rate | kafka.network:type=RequestMetrics,name=RequestsPerSec,request={Produce|FetchConsumer},"
    "version=([0-9]+) | \n"
    "The administrator can watch kafka.server:type=ReplicaManager,name=LeaderCount during the move."
)


def test_a_metrics_row_is_the_entry_of_the_mbean_in_its_cell_but_prose_naming_one_is_not():
    """The docs' metrics tables lead with a description and name the metric only in the MBean cell; keys after
    the name (`clientId`, `request`, `version`) belong to the cell, whatever characters their values hold."""
    assert metric_entries(METRICS_TABLE) == {
        MBean("kafka.server:type=replicamanager,", "underreplicatedpartitions"),
        MBean("kafka.server:type=replicafetchermanager,", "maxlag"),
        MBean("kafka.network:type=requestmetrics,", "requestspersec"),
    }


def test_an_mbean_written_anywhere_is_read_with_its_owner():
    written = mbeans_written(
        "kafka.server.link:type=ClusterLinkFetcherManager,name=MaxLag,clientId=ClusterLink shows 120k, "
        "and (kafka.server:type=ReplicaManager,name=LeaderCount) dropped"
    )
    assert written == {
        MBean("kafka.server.link:type=clusterlinkfetchermanager,", "maxlag"),
        MBean("kafka.server:type=replicamanager,", "leadercount"),
    }


def test_stack_trace_identifiers():
    found = set(extract_identifiers(STACK_TRACE))
    assert {"producerfencedexception", "invalidproducerepochexception"} <= found
    assert not any(i.endswith(".java") or i.startswith("org.") for i in found)


def _timed_in_subprocess(expression: str, timeout: float = 30.0) -> float:
    """Seconds `extract_identifiers(<expression>)` takes, run in a child process so a regex that never
    finishes fails this test instead of freezing the session (the re module holds the GIL). The timeout also
    covers starting Python and importing `rag` on a loaded machine; the limit that matters is the assert."""
    code = (
        "import time, json\n"
        "from rag.identifiers import extract_identifiers\n"
        f"STACK_TRACE = {STACK_TRACE!r}\n"
        f"text = {expression}\n"
        "started = time.perf_counter()\n"
        "extract_identifiers(text)\n"
        "print(json.dumps({'seconds': time.perf_counter() - started, 'chars': len(text)}))\n"
    )
    try:
        result = subprocess.run(
            [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=timeout, check=True
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"extract_identifiers({expression}) ran for more than {timeout:.0f} s (regex backtracking)")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["chars"] >= 200_000
    return report["seconds"]


@pytest.mark.parametrize(
    "expression",
    [
        "STACK_TRACE * (200_000 // len(STACK_TRACE) + 1)",  # a 200 KB log paste
        "'org.apache.' * 20_000",  # a long dotted run with no class name at its end
        "'a.' * 100_000",
        "'a.b-' * 50_000",
        "'A_' * 100_000",
        "'x' * 200_000",
        "'codes ' + '1 and ' * 40_000",
    ],
)
def test_no_catastrophic_backtracking_on_200_kb(expression):
    """A correctness guard, not a benchmark: a stall here freezes every thread of the service."""
    assert _timed_in_subprocess(expression) < 2.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("org.apache.kafka.common.errors.NotEnoughReplicasException: The size", ("not_enough_replicas",)),
        (
            "SSLHandshakeException and InvalidReplicationFactorException",
            ("invalid_replication_factor", "ssl_handshake"),
        ),
        ("a KafkaException, a TimeoutError and no exception at all", ()),  # one word: no error name to stand for
    ],
)
def test_error_names_of_exception_classes(text, expected):
    assert error_names(text) == expected


def test_an_error_name_stands_for_the_exception_classes_that_spell_it():
    assert exception_names(["not_enough_replicas", "code:19", "linger.ms"]) == {
        "notenoughreplicasexception",
        "notenoughreplicaserror",
    }
    text = "org.apache.kafka.common.errors.NotEnoughReplicasException: The size"
    assert set(extract_identifiers(text)) <= exception_names(error_names(text))


@pytest.mark.parametrize(
    ("identifier", "plain"),
    [("buffer.memory", True), ("kafka.streams", True), ("linger.ms", True), ("max.poll.records", False),
     ("dc-1.orders", False), ("code:121", False), ("kip-500", False)],
)  # fmt: skip
def test_plain_two_part_words_are_the_ones_only_the_corpus_can_tell(identifier, plain):
    assert is_plain_two_part(identifier) is plain


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Broker: Unknown Producer Id", ("unknown_producer", "unknown_producer_id", "producer_id")),
        # punctuation and tokens that are no plain word end a run: no "broker_unknown", no "not_enough_replicas"
        ("Broker: Not enough in-sync replicas", ("not_enough",)),
        ("read_committed is on, 3 retries", ("is_on",)),
        (
            "one two three four five six seven",
            (
                "one_two",
                "one_two_three",
                "one_two_three_four",
                "one_two_three_four_five",
                "one_two_three_four_five_six",
                "two_three",
            ),
        ),
    ],
)
def test_runs_of_words_spelt_as_error_names(text, expected):
    assert phrase_names(text, 6 if text.startswith("one") else 100) == expected


def test_runs_of_three_to_five_words_written_as_one_word():
    """A metric or class the corpus writes as one CamelCase name, as a user writes it in words; a hyphen
    joins words, punctuation ends a run, and two words run together are left out ("key store")."""
    names = run_together_names("Which metric shows under-replicated partitions? key store, request queue time ms", 100)
    assert "underreplicatedpartitions" in names and "requestqueuetimems" in names
    assert "metricshowsunder" in names  # which of them the corpus writes as one name is for retrieval
    assert "partitionskeystore" not in names  # "?" ends the run
    assert "keystore" not in names
    assert run_together_names("one two three four five", 2) == ("onetwothree", "twothreefour")
    assert "underminisrpartitioncount" in run_together_names("the under min isr partition count metric", 100)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "$ bin/kafka-consumer-groups.sh --bootstrap-server localhost:9092 --describe --group my-group",
            {"bootstrap-server", "describe", "group"},
        ),
        ("kafka-topics.sh --topic=orders --partitions 3", {"topic", "partitions"}),
        ("prose -- with a dash, a---rule, x--y and --Upper or --9", set()),
    ],
)
def test_command_flags_are_the_option_names_without_dashes(text, expected):
    assert command_flags(text) == expected
