"""From what a user typed to a retrieval query: log reduction and follow-up rewriting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag.query import MAX_SIGNAL_CHARS, is_followup, looks_like_log, reduce_to_signal, rewrite_followup

REPO = Path(__file__).resolve().parents[1]

TRACE = """2024-05-01 12:00:01,123 ERROR [kafka-producer-network-thread | producer-1] o.a.k.c.p.i.Sender - \
[Producer clientId=producer-1, transactionalId=tx-7f3a9c2e1b4d5a6f] Aborting producer batches due to fatal error
2024-05-01 12:00:01,124 ERROR Sender failed for request 0a1b2c3d4e5f60718293a4b5 on host 10.0.0.12:9092
org.apache.kafka.common.errors.ProducerFencedException: There is a newer producer with the same transactionalId \
which fences the current one.
\tat org.apache.kafka.clients.producer.internals.TransactionManager.lambda$fail$2(TransactionManager.java:350)
\tat org.apache.kafka.clients.producer.internals.Sender.run(Sender.java:244)
\tat java.base/java.lang.Thread.run(Thread.java:829)
Caused by: org.apache.kafka.common.errors.InvalidProducerEpochException: Producer attempted to produce with an \
old epoch.
\t... 12 more
"""

HISTORY = [
    {"role": "user", "content": "my producer fails with ProducerFencedException when transaction.timeout.ms is low"},
    {"role": "assistant", "content": "Another producer with the same transactional.id took over [1]."},
]


# ------------------------------------------------------------------------------------------ log reduction


def test_stack_trace_keeps_exceptions_messages_and_caused_by():
    reduced = reduce_to_signal(TRACE, 4000)
    assert reduced.trimmed is True
    assert (
        "org.apache.kafka.common.errors.ProducerFencedException: There is a newer producer with the same "
        "transactionalId which fences the current one."
    ) in reduced.text
    assert (
        "org.apache.kafka.common.errors.InvalidProducerEpochException: Producer attempted to produce with an old epoch."
    ) in reduced.text
    assert "Aborting producer batches due to fatal error" in reduced.text
    assert reduced.text.index("ProducerFencedException") < reduced.text.index("InvalidProducerEpochException")


@pytest.mark.parametrize(
    "noise",
    [
        "2024-05-01",
        "12:00:01",
        ",123",  # timestamps
        "ERROR",  # levels
        "producer-1]",
        "clientId=producer-1",  # bracketed thread and client context
        "TransactionManager.java",
        "Sender.run",
        "Thread.run",
        "12 more",
        "\tat ",  # frames
        "0a1b2c3d4e5f60718293a4b5",
        "7f3a9c2e1b4d5a6f",  # hex ids
        "10.0.0.12",
        ":9092",  # hosts
        "Caused by:",
    ],
)
def test_stack_trace_noise_is_dropped(noise):
    assert noise not in reduce_to_signal(TRACE, 4000).text


def test_thread_names_are_dropped():
    """A thread name must not come back through the identifier pass (it looks like a CLI tool name)."""
    reduced = reduce_to_signal(TRACE, 4000)
    assert "network-thread" not in reduced.text


def test_kafka_client_host_format_is_dropped():
    """Kafka clients print nodes as `hostname/ip:port`; the hostname identifies this occurrence, not the problem."""
    log = (
        "[2024-05-01T12:00:01.123Z] WARN [Consumer clientId=c-1, groupId=orders] Connection to node 3 "
        "(broker-3.prod.example.com/10.0.0.12:9092) could not be established. Broker may not be available.\n"
        "[2024-05-01T12:00:02.456Z] WARN [Consumer clientId=c-1, groupId=orders] Bootstrap broker "
        "broker-3.prod.example.com:9092 (id: -1 rack: null) disconnected\n"
    )
    reduced = reduce_to_signal(log, 4000)
    assert "could not be established" in reduced.text
    assert "10.0.0.12" not in reduced.text
    assert "prod.example.com" not in reduced.text


def test_prose_around_a_paste_and_config_keys_stay():
    reduced = reduce_to_signal(f"my app logs this:\n{TRACE}\nwhat should I do? transaction.timeout.ms is 60000", 4000)
    assert reduced.text.startswith("my app logs this")
    assert "what should I do? transaction.timeout.ms is 60000" in reduced.text
    assert "ProducerFencedException" in reduced.text


def test_plain_question_is_only_whitespace_normalised():
    reduced = reduce_to_signal("  What   does\n error code 121 mean?  ", 4000)
    assert reduced.text == "What does error code 121 mean?"
    assert reduced.trimmed is False


def test_long_prose_is_trimmed():
    reduced = reduce_to_signal("consumer lag keeps growing on partition seven. " * 200, 4000)
    assert reduced.trimmed is True
    assert len(reduced.text) <= MAX_SIGNAL_CHARS
    assert reduced.text.startswith("consumer lag keeps growing")


def test_looks_like_log():
    assert looks_like_log(TRACE)
    assert not looks_like_log("what does error code 121 mean?")
    assert not looks_like_log("ERROR once is not a log")


def test_200_kb_paste_is_reduced_to_its_signal_quickly():
    paste = TRACE * (200_000 // len(TRACE) + 1)
    started = time.perf_counter()
    reduced = reduce_to_signal(paste, 4000)
    elapsed = time.perf_counter() - started
    assert reduced.trimmed is True
    assert len(reduced.text) <= MAX_SIGNAL_CHARS
    assert "ProducerFencedException" in reduced.text
    assert reduced.text.count("ProducerFencedException: There is a newer producer") == 1  # repeats collapse
    assert elapsed < 2.0  # a correctness guard against a stall, kept generous


def _reduce_in_subprocess(expression: str, timeout: float = 8.0) -> dict:
    """Run `reduce_to_signal(<expression>)` in a child process: a regex that never finishes fails the test
    instead of freezing the session (the re module holds the GIL)."""
    code = (
        "import json, time\n"
        "from rag.query import reduce_to_signal\n"
        f"text = {expression}\n"
        "started = time.perf_counter()\n"
        "reduced = reduce_to_signal(text, 4000)\n"
        "print(json.dumps({'seconds': time.perf_counter() - started, 'chars': len(text),"
        " 'trimmed': reduced.trimmed, 'length': len(reduced.text)}))\n"
    )
    try:
        result = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
            env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"reduce_to_signal({expression}) ran for more than {timeout:.0f} s (regex backtracking)")
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "expression",
    [
        "'x' * 200_000",  # one 200 KB token: a pasted blob with no spaces or newlines
        "'a-' * 100_000",
        "'A_' * 100_000",
        "'a.b-' * 50_000",
        "'org.apache.' * 20_000",
        "''.join(chr(c) for c in range(0x20, 0x2fff)) * 20",
    ],
)
def test_single_line_200_kb_inputs_do_not_stall(expression):
    report = _reduce_in_subprocess(expression)
    assert report["chars"] >= 200_000
    assert report["trimmed"] is True
    assert report["length"] <= MAX_SIGNAL_CHARS
    assert report["seconds"] < 2.0


def test_binary_junk_and_odd_unicode_do_not_crash():
    junk = "\x00\x01\x02 ProducerFencedException \udcff \u202e \u200b \U0001f600 漢字 Ωmega \x7f\x1b[31m"
    reduced = reduce_to_signal(junk, 4000)
    assert "ProducerFencedException" in reduced.text
    assert "漢字" in reduced.text and "Ωmega" in reduced.text
    assert not any(ord(ch) < 32 or ch in "\x7f\u202e\udcff" for ch in reduced.text)


def test_random_bytes_are_treated_as_text():
    rng_bytes = bytes((i * 7919 + 13) % 256 for i in range(200_000))
    for junk in (rng_bytes.decode("latin-1"), rng_bytes.decode("utf-8", errors="replace")):
        started = time.perf_counter()
        reduced = reduce_to_signal(junk, 4000)
        assert time.perf_counter() - started < 2.0
        assert reduced.trimmed is True
        assert len(reduced.text) <= 4000
        assert all(ch.isprintable() for ch in reduced.text)


# ------------------------------------------------------------------------------------------ follow-ups


@pytest.mark.parametrize(
    "question",
    [
        "and what's its default?",
        "when does it become a real problem?",
        "how do I fix that?",
        "what about consumers",
        "ok",
    ],
)
def test_follow_ups_are_detected(question):
    assert is_followup(question, HISTORY)


@pytest.mark.parametrize(
    "question",
    [
        "What does error code 121 mean?",
        "what is max.poll.interval.ms?",
        "Why does my consumer get InvalidMessageSizeException?",
        "How should a share consumer acknowledge each record to avoid broker redelivery after lock expiry?",
    ],
)
def test_standalone_questions_are_not_follow_ups_and_are_not_rewritten(question):
    assert not is_followup(question, HISTORY)
    assert rewrite_followup(question, HISTORY) == question


def test_no_user_turn_means_no_follow_up():
    assert not is_followup("and what's its default?", [])
    assert not is_followup("and what's its default?", [{"role": "assistant", "content": "Hello [1]."}])
    assert rewrite_followup("and what's its default?", []) == "and what's its default?"


def test_rewrite_carries_the_subject_of_earlier_turns():
    rewritten = rewrite_followup("and what's its default?", HISTORY)
    assert rewritten.startswith("and what's its default? (")
    for identifier in ("producerfencedexception", "transaction.timeout.ms", "transactional.id"):
        assert identifier in rewritten
    assert "ProducerFencedException" in rewritten


def test_rewrite_prefers_the_latest_user_turn():
    history = [
        {"role": "user", "content": "consumer rebalances when max.poll.interval.ms is exceeded"},
        {"role": "assistant", "content": "Poll more often [1]."},
        {"role": "user", "content": "now the share consumer acks fail with INVALID_RECORD_STATE"},
        {"role": "assistant", "content": "The record lock expired [1]."},
    ]
    rewritten = rewrite_followup("how do I fix it?", history)
    subject = rewritten.removeprefix("how do I fix it? (")
    assert subject.index("invalid_record_state") < subject.index("max.poll.interval.ms")


def test_rewrite_is_deterministic():
    assert rewrite_followup("and its default?", HISTORY) == rewrite_followup("and its default?", HISTORY)
