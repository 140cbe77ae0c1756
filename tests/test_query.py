"""From what a user typed to a retrieval query: log reduction and follow-up rewriting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag.lexical import tokenize
from rag.query import (
    CAPITALISED_THROUGHOUT,
    MAX_SIGNAL_CHARS,
    asked_identifiers,
    continues_with_own_subject,
    decased,
    is_followup,
    line_place,
    looks_like_log,
    names_its_subject,
    opening_label,
    parse_query,
    points_back_to_nothing,
    prose_capitalisation,
    question_asks,
    reduce_to_signal,
    rewrite_followup,
    switches_subject,
    users_words,
    without_greeting,
    without_quote_marks,
    without_salutations,
)

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


@pytest.mark.parametrize(
    ("pasted", "searched"),
    [
        ("Error: Could not find or load main class kafka.Kafka", "Could not find or load main class kafka.Kafka"),
        ("ERROR Error while creating ephemeral at /brokers/ids/1", "Error while creating ephemeral at /brokers/ids/1"),
        ("[WARN] Connection to node -1 could not be established.", "Connection to node -1 could not be established."),
        # a level the user's own sentence names is what they ask about
        ("what does ERROR mean in the broker log?", "what does ERROR mean in the broker log?"),
    ],
)
def test_a_log_level_or_error_label_opening_a_one_line_paste_is_not_searched(pasted, searched):
    """The level or the "Error:" label is the line's template: kept, "error" matched the protocol error table's
    heading ("Error Codes") better than anything "Could not find or load main class" says."""
    assert reduce_to_signal(pasted, 4000).text == searched


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


def test_reading_what_the_user_gives_a_value_does_not_backtrack_into_long_words():
    """The pattern once tried every start inside a word and backtracked through the rest of it: 500-character
    lines cost 11 ms each to read instead of well under one. A 200 KB word in a child process shows it at once."""
    code = "from rag.query import _GIVEN_VALUE\nprint(len(_GIVEN_VALUE.findall('k' * 200_000)))"
    try:
        result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=8.0)
    except subprocess.TimeoutExpired:
        pytest.fail("the given-value pattern ran for more than 8 s on one 200 KB word (regex backtracking)")
    assert result.stdout.strip() == "0", result.stderr


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
        "Alice left. how do I take hers off again?",
        "why?",
        "how do I fix that?",
        "what about consumers",
        "ok",
        # continuing without pointing back: a contrast, or a closing "then" / "too"
        "what if I only want to reprocess the last 24 hours instead of everything?",
        "how long is data kept locally then?",
        "what else should I check on the brokers?",
        "do consumers need the setting too?",
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
        # a question in the conversation that names its own subject, however short
        "how long are tombstones kept?",
        "how do i see which replicas are in sync for a topic?",
        "what does the log cleaner do with tombstones after compaction runs?",
        "why is the partition reassignment too slow on our brokers?",
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


def _conversation(*exchanges: tuple[str, str]) -> list[dict[str, str]]:
    """History turns from (user question, assistant answer) pairs."""
    turns: list[dict[str, str]] = []
    for asked, said in exchanges:
        turns += [{"role": "user", "content": asked}, {"role": "assistant", "content": said}]
    return turns


def test_rewrite_prefers_the_latest_user_turn():
    history = _conversation(
        ("consumer rebalances when max.poll.interval.ms is exceeded", "Poll more often [1]."),
        ("now the share consumer acks fail with INVALID_RECORD_STATE", "The record lock expired [1]."),
    )
    rewritten = rewrite_followup("how do I fix it?", history)
    subject = rewritten.removeprefix("how do I fix it? (")
    assert subject.index("invalid_record_state") < subject.index("max.poll.interval.ms")


def test_a_follow_up_of_a_follow_up_carries_the_subject_the_one_before_leaned_on():
    history = _conversation(
        ("how do I enable SASL/SCRAM?", "Configure the SCRAM mechanism on the brokers [1]."),
        ("how do I create the users for it?", "Create SCRAM credentials with kafka-configs.sh [1]."),
    )
    rewritten = rewrite_followup("and delete one?", history)
    assert rewritten.startswith("and delete one? (")
    assert "SCRAM" in rewritten and "users" in rewritten, rewritten


def test_a_follow_up_is_searched_with_the_first_context_words_content_words_of_the_last_turn():
    history = _conversation(("our nightly billing export consumer stalls whenever the cluster rebalances", "Hm [1]."))
    rewritten = rewrite_followup("how do I fix it?", history, context_words=3)
    assert rewritten == "how do I fix it? (nightly billing export)", rewritten
    assert parse_query("how do I fix it?", history, context_words=3).text == rewritten
    assert "rebalances" in rewrite_followup("how do I fix it?", history, context_words=9)


def test_asking_words_are_the_asking_sentences_words_only():
    assert "redpanda" in parse_query("how do i set up tiered storage on redpanda?").asking_words
    pasted = parse_query(f"{METADATA_WARN}\nwhich setting is that about?")
    assert "setting" in pasted.asking_words and "orders" not in pasted.asking_words
    assert parse_query(METADATA_WARN).asking_words == ()  # a bare paste asks nothing in the user's words
    # a field the pasted output labels is the tool's, not a word the user brings
    dump = "```\nbaseOffset: 0 isControl: false position: 0\n```\nwhat's the isControl flag for?"
    assert parse_query(dump).asking_words == ("flag",)


def test_a_follow_up_of_a_question_that_may_have_leaned_carries_the_subject_before_it():
    # "what's the first step?" names words of its own, so it is no follow-up by its words; the service may still
    # have searched it with the migration (`Assistant._prepare`), and the question after it is about that.
    history = _conversation(
        ("we're migrating from zookeeper to kraft", "Plan the migration to KRaft [1]."),
        ("what's the first step?", "Provision the KRaft controller quorum [1]."),
    )
    rewritten = rewrite_followup("can we roll back halfway?", history, leaning=True)
    assert "first step" in rewritten and "zookeeper" in rewritten and "kraft" in rewritten, rewritten


def test_a_long_chain_of_follow_ups_is_rewritten_without_deep_recursion():
    history = _conversation(*[("and then?", "It retries [1].")] * 3000)  # an API client may send any history
    assert rewrite_followup("and then?", history).startswith("and then?")


def test_rewrite_is_deterministic():
    assert rewrite_followup("and its default?", HISTORY) == rewrite_followup("and its default?", HISTORY)


# ------------------------------------------------------------------------------------------ parse_query

PRODUCER_COMMAND = "$ bin/kafka-console-producer.sh --bootstrap-server localhost:9092 --topic orders"
METADATA_WARN = (
    "[2024-05-02 10:11:12,345] WARN [Producer clientId=console-producer] Error while fetching metadata with "
    "correlation id 7 : {orders=UNKNOWN_TOPIC_OR_PARTITION} (org.apache.kafka.clients.NetworkClient)"
)


@pytest.mark.parametrize(
    ("line", "place"),
    [
        (PRODUCER_COMMAND, "command"),
        ("bin/kafka-topics.sh --create --topic t --partitions 3", "command"),
        ("kafka-consumer-groups.sh --describe --group g", "command"),
        ("--bootstrap-server localhost:9092 --group g", "command"),  # a continuation: flags only
        ("\tat org.apache.kafka.clients.NetworkClient.poll(NetworkClient.java:12)", "frame"),
        ("    at org.apache.kafka.streams.KafkaStreams.start(KafkaStreams.java:601)", "frame"),
        ("\t... 12 more", "frame"),
        (METADATA_WARN, "error"),
        ("2024-05-02 10:11:12,345 ERROR [main] Sender failed", "error"),
        ("org.apache.kafka.common.errors.TimeoutException: Topic orders not present in metadata", "error"),
        ("Caused by: java.lang.IllegalStateException: no", "error"),
        # an error object as a librdkafka-based client prints it
        ('KafkaError{code=INVALID_REQUIRED_ACKS,val=21,str="Broker: Invalid required acks value"}', "error"),
        ("the KafkaError{} object we log is empty", "question"),
        ("why does my producer keep failing?", "question"),
        ("what is the default value of acks?", "question"),
        # a sentence that quotes a command asks about it; a command line in backticks is still one
        ("Is it `kafka-get-offsets.sh --topic orders --time -1`, and what does `--time -2` return?", "question"),
        ("`kafka-topics.sh --create --topic t --partitions 3`", "command"),
        # a sentence of the user's own that quotes a log line is theirs; a log line with a quoted part is a log line
        ('kcat keeps printing "% ERROR: Local: Broker transport failure", what flag fixes it?', "question"),
        ("Connect workers log `WARN The configuration 'x' was supplied but isn't a known config`. Why?", "question"),
        ('2024-05-02 10:11:12,345 ERROR [main] Sender failed with "Broker transport failure" on the way', "error"),
        ('"ERROR Shutdown broker because all log dirs in /var/kafka have failed"', "error"),
        ("WARN Connection to node 1 could not be established.", "error"),
        ("kafka-1 | ERROR Error while fetching metadata", "error"),
        # a log level named in the user's own sentence, not written where a log line writes it
        ("how do I set the log level to WARN only for the consumer, not the admin client?", "question"),
        ("every stream thread writes this at INFO every couple of minutes:", "question"),
        # flags after a sentence's opening words are options it names, not a command line
        ("Command must include exactly one action: --generate, --execute, --verify, --cancel, or --list", "question"),
        ("it errors out, complaining that --delete-config can't be combined with --bootstrap-server", "question"),
        ("kafka-topics --create --topic t --partitions 3", "command"),
        # ... and so are options amid the user's own words, wherever those stand; help text opens with its option
        ("I put --throttle on verify thinking it keeps the limit. where does --throttle belong?", "question"),
        ("ok so --describe --members shows nothing for this group", "question"),
        ("--describe --members --group billing", "command"),
        ("zk lost quorum for 15 minutes and kafka-topics.sh --create and kafka-acls --add hung. expected?", "command"),
    ],
)
def test_line_place(line, place):
    assert line_place(line) == place


def test_a_sentence_naming_options_after_a_paste_is_searched():
    """The user's asking line after the paste was read as a command line by its two options, and dropped from
    what is searched: only the tool's message was left."""
    query = parse_query(
        "```\n$ kafka-reassign-partitions.sh --bootstrap-server k:9092 --verify --reassignment-json-file r.json "
        '--throttle 80000000\nOption "[throttle]" can\'t be used with action "[verify]"\n```\n'
        "I put --throttle on verify thinking that keeps the limit in place. where does --throttle belong?"
    )
    assert "where does --throttle belong" in query.text


def test_a_question_typed_after_the_error_on_its_line_is_the_users_own():
    """The error line ran to the end of the line, so the product the user's own question names was never read
    as asked about: an error Kafka's docs describe, asked of another product, was answered."""
    query = parse_query(
        "org.apache.kafka.common.errors.RecordTooLargeException: The message is 2000000 bytes when serialized "
        "which is larger than 1048576. can Redpanda Console show which producer sent it?"
    )
    assert {"Redpanda", "Console"} <= set(query.asked_names)
    assert {i.place for i in query.identifiers if i.name == "recordtoolargeexception"} == {"error"}


def test_names_written_as_code_in_the_asking_sentence_are_asked_names():
    query = parse_query("coming from NATS: what do `max_ack_pending` and `ackWait()` do, and is `retention.ms` alike?")
    assert {"max_ack_pending", "ackWait"} <= set(query.asked_names)
    assert "retention.ms" not in query.asked_names  # a key: among the identifiers asked about
    assert "retention.ms" in query.asked


TOOL_OUTPUT = (
    "```\n$ ./rpk topic describe orders -p\nPARTITION  LEADER  EPOCH  REPLICAS\n0          1       4      [1 2 3]\n"
    "leaderEpoch: 4 highWatermark: 1200 logStartOffset: 0\n```\n"
)


@pytest.mark.parametrize(
    ("asking", "asked"),
    [
        ("why does rpk show epoch 4 there?", {"rpk"}),  # the program the asking sentence names
        ("what does this output mean?", set()),  # the program, but not named: the paste is context
        ("what's the leaderEpoch field?", {"rpk"}),  # a field its output labels: the program that printed it
    ],
    ids=["program-named", "program-unnamed", "field"],
)
def test_a_pasted_commands_program_and_its_output_fields_are_asked_names_as_the_program(asking, asked):
    """Whether the docs cover a tool's output is whether they cover the tool, whatever the output's fields
    are called (the dump tool prints `isControl`, the docs write `isControlBatch`)."""
    assert set(parse_query(TOOL_OUTPUT + asking).asked_names) == asked


def test_a_field_of_pasted_output_is_context_unless_the_users_own_words_name_it():
    query = parse_query(TOOL_OUTPUT + "what's the leaderEpoch field?")
    assert {"highwatermark", "logstartoffset"} <= query.pasted_fields
    assert "leaderepoch" not in query.pasted_fields
    assert not parse_query("highWatermark: 1200\nwhy is it stuck?").pasted_fields  # not pasted: the user's line


def test_a_programs_field_with_no_command_above_it_is_no_asked_name():
    assert parse_query("```\nleaderEpoch: 4\n```\nwhat's the leaderEpoch?").asked_names == ()


@pytest.mark.parametrize(
    "question",
    [
        "with security.protocol=SASL_SSL set on the client, why does the producer hang?",  # was `asl_ssl`
        "our consumer logs offsetEpoch=Optional.empty on every poll, is that bad?",  # was `ptional.empty`
    ],
)
def test_a_value_the_user_gives_a_setting_is_no_identifier_they_ask_about(question):
    """A setting given a value is the user's setup, and so is the value: what was left of it once the key and its
    first letter were cut off counted as an asked identifier the corpus lacks."""
    assert parse_query(question).asked == frozenset()


def test_names_in_a_message_the_user_quotes_are_the_logs_not_asked_names():
    quoted = parse_query(
        'what does "Fetch position FetchPosition{offset=1234, offsetEpoch=Optional.empty} is out of range for '
        'partition orders-3, resetting offset" mean?'
    )
    assert quoted.asked_names == () and quoted.asked == frozenset()
    # a command quoted as code is what the user asks about, and so is a short quoted name
    command = parse_query("is it `kafka-log-dirs.sh --describe --topic-list clickstream` or something else?")
    assert "kafka-log-dirs" in command.asked
    assert "FetchPosition" in parse_query('what is a "FetchPosition" in the consumer?').asked_names


def test_a_sentence_naming_a_log_level_is_the_users_own_and_asks():
    """It was read as a log line, so the question had no asking sentence: no label, no names asked about."""
    query = parse_query("kafkajs: how do i plug our logger in via `logCreator` and set the log level to WARN only?")
    assert query.label == ("kafkajs",)
    assert "logCreator" in query.asked_names


def test_a_sentence_quoting_a_log_line_asks_and_reports_a_fault():
    query = parse_query('the broker prints "ERROR Shutdown broker: all log dirs have failed", what is `log.dirs`?')
    assert query.intent == "troubleshoot"
    assert query.asked == frozenset({"log.dirs"})


def test_command_line_is_context_and_the_error_line_is_focus():
    query = parse_query(f"{PRODUCER_COMMAND}\n{METADATA_WARN}")
    assert {(i.name, i.place) for i in query.identifiers} == {
        ("kafka-console-producer", "command"),
        ("unknown_topic_or_partition", "error"),
    }
    assert query.focus_identifiers == {"unknown_topic_or_partition"}
    assert query.context_identifiers == {"kafka-console-producer"}


def test_an_error_a_tool_printed_into_a_code_block_is_an_error_line():
    """What a tool printed into the user's code block reports a fault even in plain words ("Error: …"); the
    tool's other output and the user's own sentences keep their places."""
    paste = (
        "trying to rewind a group and the tool refuses:\n```\n"
        "$ kafka-consumer-groups.sh --bootstrap-server k:9092 --group g --reset-offsets --to-earliest --execute\n"
        "Valid replica already elected for partitions orders-0\n"
        "Error completing leader election (PREFERRED) for partition: orders-2: "
        "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: The preferred leader was not available.\n"
        "```\nwhat am I supposed to do here?"
    )
    query = parse_query(paste)
    assert query.intent == "troubleshoot"
    assert ("preferredleadernotavailableexception", "error") in {(i.name, i.place) for i in query.identifiers}
    assert "```" not in query.text and "supposed to do" in query.text
    # unfenced, the same words are the user's own sentence about an error, and a fence alone reports nothing
    assert parse_query("what does 'Error completing leader election' mean?").intent == "fact"
    assert parse_query("how do I list groups?\n```\nValid replica already elected\n```").intent == "fact"


@pytest.mark.parametrize(
    "printed",
    [
        'Exception in thread "main" joptsimple.UnrecognizedOptionException: zookeeper is not a recognized option',
        "zookeeper is not a recognized option",  # the tool's output line, with no error word
        "Exception: ZooKeeper is not a recognized option",  # a flag's word in another case (a name's, respelt)
        "WARN: No action will be performed as the --execute option is missing.",  # another option of the tool
        'Missing required argument "[bootstrap-server]"',  # an option as joptsimple quotes it
    ],
)
def test_a_command_whose_output_names_its_option_is_what_the_question_is_about(printed):
    """A usage error: the tool and what its command line passes are the subject, searched with the error."""
    query = parse_query(f"```\n$ kafka-topics.sh --zookeeper zk:2181 --list\n{printed}\n```\nwhat do I use now?")
    assert ("kafka-topics", "error") in {(i.name, i.place) for i in query.identifiers}
    assert "kafka-topics" in query.tokens


def test_a_command_whose_output_names_no_option_stays_context():
    """ "Replication factor: 3 larger than available brokers" starts no message with `--replication-factor`'s
    word, nor `--topic`'s: the error is about the cluster, and the tool is context."""
    query = parse_query(
        "$ kafka-topics.sh --create --topic t --replication-factor 3 --bootstrap-server k:9092\n"
        "Error while executing topic command : Replication factor: 3 larger than available brokers: 1.\nwhy?"
    )
    assert ("kafka-topics", "command") in {(i.name, i.place) for i in query.identifiers}
    assert "kafka-topics" not in query.tokens


def test_a_column_heading_the_command_printed_names_no_option():
    """`GROUP` heads a column of `--describe --group`'s output: a heading in capitals, not the bare `--group` of a
    usage error, so the tool stays context."""
    query = parse_query(
        "lag keeps climbing:\n```\n$ kafka-consumer-groups.sh --bootstrap-server k:9092 --describe --group g\n"
        "GROUP  TOPIC  PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG\ng  t  0  10  20  10\n```\nwhich number is right?"
    )
    assert ("kafka-consumer-groups", "command") in {(i.name, i.place) for i in query.identifiers}
    assert "kafka-consumer-groups" not in query.tokens


def test_command_line_is_dropped_from_the_text_when_the_paste_has_an_error_line():
    query = parse_query(f"{PRODUCER_COMMAND}\n{METADATA_WARN}")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in query.text
    assert "kafka-console-producer" not in query.text and "--bootstrap-server" not in query.text
    assert "kafka-console-producer" not in " ".join(query.tokens)
    assert query.trimmed is True
    assert query.tokens == tuple(tokenize(query.text))


def test_stack_frames_are_dropped_and_their_classes_are_context():
    query = parse_query(
        "org.apache.kafka.common.errors.TimeoutException: Topic orders not present in metadata after 60000 ms.\n"
        "\tat org.apache.kafka.clients.producer.KafkaProducer.doSend(KafkaProducer.java:1000)\n"
    )
    assert "TimeoutException" in query.text
    assert "KafkaProducer.java" not in query.text
    assert "timeoutexception" in query.focus_identifiers


@pytest.mark.parametrize(
    "paste",
    [
        f"my kafka-console-producer.sh hangs, why?\n{PRODUCER_COMMAND}",
        f"{PRODUCER_COMMAND}\nmy kafka-console-producer.sh hangs, why?",
    ],
    ids=["prose-first", "command-first"],
)
def test_identifier_in_prose_is_focus_even_when_the_command_repeats_it(paste):
    query = parse_query(paste)
    assert "kafka-console-producer" in query.focus_identifiers
    assert "kafka-console-producer" not in query.context_identifiers
    assert {i.place for i in query.identifiers if i.name == "kafka-console-producer"} == {"question"}


def test_identifier_in_an_error_line_is_focus_even_when_the_command_repeats_it():
    paste = (
        "$ bin/kafka-configs.sh --bootstrap-server b:9092 --alter --entity-type topics --entity-name orders "
        "--add-config max.message.bytes=2000000\n"
        "org.apache.kafka.common.errors.InvalidConfigurationException: max.message.bytes is out of range"
    )
    query = parse_query(paste)
    assert {i.place for i in query.identifiers if i.name == "max.message.bytes"} == {"error"}
    assert {"max.message.bytes", "invalidconfigurationexception"} <= query.focus_identifiers
    assert query.context_identifiers == {"kafka-configs"}


@pytest.mark.parametrize(
    ("paste", "error", "tool"),
    [
        (
            "kafka-topics.sh --create --topic t --partitions 3 fails with InvalidReplicationFactorException: "
            "Replication factor: 3 larger than available brokers: 1.",
            "invalidreplicationfactorexception",
            "kafka-topics",
        ),
        (
            "$ bin/kafka-console-producer.sh --topic t --bootstrap-server b:9092 "
            "org.apache.kafka.common.errors.TimeoutException: Topic t not present in metadata after 60000 ms.",
            "timeoutexception",
            "kafka-console-producer",
        ),
    ],
    ids=["prose-between", "error-right-after"],
)
def test_a_command_line_going_on_to_its_error_is_context_and_the_error_focus(paste, error, tool):
    query = parse_query(paste)
    assert query.focus_identifiers == {error}
    assert query.context_identifiers == {tool}
    assert query.intent == "troubleshoot"
    assert "--topic" not in query.text and error in query.text.lower()


@pytest.mark.parametrize(
    ("paste", "error"),
    [
        (
            "SSL handshake failed: javax.net.ssl.SSLHandshakeException: No subject alternative names matching IP "
            "address 10.0.0.5 found",
            "sslhandshakeexception",
        ),
        (
            "Consumer error: org.apache.kafka.clients.consumer.CommitFailedException: Commit cannot be completed "
            "since the group has already rebalanced",
            "commitfailedexception",
        ),
    ],
    ids=["jdk-exception", "kafka-exception"],
)
def test_the_users_label_before_a_pasted_error_on_its_line_leaves_the_error_an_error_line(paste, error):
    """ "<their words>: <exception>: <message>" is the user's label and the error they paste: the exception sits
    in an error line, which is no asking sentence of theirs (a class the docs never name is no topic they do not
    cover), and the label stays the question's opening label."""
    query = parse_query(paste)
    assert [(i.name, i.place) for i in query.identifiers] == [(error, "error")]
    assert query.asked == frozenset()
    assert query.label == tuple(paste.split(":", 1)[0].split())


@pytest.mark.parametrize(
    "sentence",
    [
        "why does the consumer throw CommitFailedException: Commit cannot be completed?",
        # the error quoted as code in the user's sentence, its own message after a colon: the sentences after it
        # are still the user's asks
        'and it raises `cimpl.KafkaException: KafkaError{code=TOPIC_DELETION_DISABLED,val=73,str="Topic deletion is '
        'disabled."}`. What exactly do I ask them to change, and does it need a broker restart?',
    ],
    ids=["no-colon-before", "quoted-as-code"],
)
def test_a_sentence_that_names_or_quotes_its_error_stays_the_users_own(sentence):
    query = parse_query(sentence)
    assert {i.place for i in query.identifiers} == {"question"}


@pytest.mark.parametrize(
    ("line", "focus", "context"),
    [
        (
            "kafka-acls.sh --add fails with SecurityDisabledException on a fresh cluster. what did we forget",
            {"securitydisabledexception"},
            {"kafka-acls"},
        ),
        (
            "java client on a slim image gets TopicAuthorizationException after the upgrade",
            {"topicauthorizationexception"},
            set(),
        ),
    ],
    ids=["tool-then-prose", "java-as-a-word"],
)
def test_a_line_that_opens_with_a_program_and_goes_on_in_the_users_words_is_theirs(line, focus, context):
    """A line placed by its opening program was a command line to its end: the exception the user's own words
    name was context, and the tool they ran became what the question was about, or nothing was."""
    query = parse_query(line)
    assert query.focus_identifiers == focus
    assert query.context_identifiers == context


@pytest.mark.parametrize(
    "line",
    [
        "kafka-topics.sh --bootstrap-server k:9092 --alter --topic t --replication-factor 3 Option "
        '"[replication-factor]" can\'t be used with option "[alter]"',
        "$ kafka-acls.sh --add fails with SecurityDisabledException on a fresh cluster",
        "kafka-storage.sh format -t abc -c config/server.properties",
    ],
    ids=["printed-message-in-capitals", "after-a-prompt", "subcommand"],
)
def test_a_command_line_and_what_it_printed_stay_one_command_line(line):
    assert {i.place for i in parse_query(line).identifiers} == {"command"}


def test_a_command_line_with_a_name_that_is_no_printed_error_stays_one_command_line():
    query = parse_query("docker run -e KAFKA_CFG_NODE_ID=0 -e KAFKA_CFG_PROCESS_ROLES=broker apache/kafka")
    assert {i.place for i in query.identifiers} == {"command"}


def test_a_tool_only_in_the_command_line_is_context():
    query = parse_query(f"it prints this:\n{PRODUCER_COMMAND}\n{METADATA_WARN}")
    assert "kafka-console-producer" in query.context_identifiers
    assert "kafka-console-producer" not in query.focus_identifiers
    assert query.text.startswith("it prints this")


def test_flag_values_of_a_pasted_command_are_the_users_own_terms():
    query = parse_query(
        "the group did not move\n"
        "bin/kafka-consumer-groups.sh --bootstrap-server broker1:9092 --group billing --topic=invoices --execute"
    )
    assert {"billing", "broker1", "9092"} <= query.own_terms
    assert not {"execute", "kafka-consumer-groups", "group", "topic"} & query.own_terms
    assert parse_query("why is group billing stuck?").own_terms == frozenset()  # prose names nothing of its own


def test_one_word_values_of_a_pasted_configuration_are_the_users_own_terms():
    # kdP015 (a tuning question) was declined: "DC1" and "DC2" in the sentence that asks looked like products
    # the corpus never mentions, while the user had named their clusters so in the mm2.properties they pasted.
    query = parse_query(
        "MirrorMaker 2 between our two DCs:\n```\nclusters = DC1, DC2\nDC1->DC2.enabled = true\n"
        "connector.class = io.debezium.connector.postgresql.PostgresConnector\nretention.ms: 604800000\n```\n"
        "Will DC1.orders be mirrored back into DC1 as DC2.DC1.orders?"
    )
    assert {"dc1", "dc2"} <= query.own_terms
    assert not {"debezium", "postgresconnector", "604800000"} & query.own_terms  # a class, a number
    assert "dc1" not in parse_query("clusters = DC1, DC2\nWill DC1 mirror back?").own_terms  # not pasted in a block


def test_a_name_quoted_in_the_users_words_is_their_own_term():
    query = parse_query(
        "Topic 'some_topic' shows up on the target as 'cluster1.some_topic'. Why can't I \"switch\" over?"
    )
    assert {"some_topic", "cluster1.some_topic", "switch"} <= query.own_terms
    assert "cluster1.some_topic" in query.focus_identifiers  # still searched for
    assert parse_query("why can't the consumer's group 'rebalance quickly'?").own_terms == frozenset()  # not one word


def test_a_name_the_user_gives_after_named_or_called_is_their_own_term():
    # "primary" is a part of MirrorMaker's `primary.bootstrap.servers`, which made the topic look like a key
    # of this corpus that no chunk carries, and the question was declined.
    query = parse_query("mm2 creates topics named primary.orders on the backup cluster, can we keep the name?")
    assert {"primary.orders", "primary", "order"} <= query.own_terms
    assert {"billing-v2"} <= parse_query("our group called `billing-v2` lags").own_terms
    assert parse_query("what is the setting named after the group?").own_terms == frozenset()  # "after" is no name


def test_each_word_of_the_users_own_lines_is_paired_with_the_name_after_it():
    query = parse_query(
        "Consumer lag on group fraud-scorer is growing for topic `invoices-v2`.\n"
        "bin/kafka-consumer-groups.sh --describe --group other-group"
    )
    assert {("group", "fraud-scorer"), ("topic", "invoices-v2"), ("lag", "on")} <= set(query.named_after)
    assert not any(name == "other-group" for _, name in query.named_after)  # a command line's values are own_terms
    assert "fraud-scorer" not in query.own_terms  # whether "group" names the user's own is the corpus's call


@pytest.mark.parametrize(
    ("question", "messages"),
    [
        (
            'consumer logs "The coordinator is not aware of this member." on every poll',
            ("the coordinator is not aware of this member",),
        ),
        (
            "org.apache.kafka.common.errors.TimeoutException: Topic orders not present in metadata after 60000 ms.",
            ("topic orders not present in metadata after 60000 ms",),
        ),
        ("it says `Broker may not be available` and retries", ("broker may not be available",)),
        (
            "it throws `SomeAdminException: An error occurred: Broker: The group is not empty right now`",
            (
                "someadminexception an error occurred broker the group is not empty right now",
                "an error occurred broker the group is not empty right now",
                "broker the group is not empty right now",
                "the group is not empty right now",
            ),
        ),
        (
            "WARN [Consumer clientId=c1, groupId=g1] Offset commit failed on partition orders-0 at offset 120: "
            "The coordinator is loading and hence can't process requests.",
            ("the coordinator is loading and hence can t process requests",),
        ),
        # a client's log message pasted as the user's own line, without its level and logger
        (
            "Offset commit failed on partition events-0 at offset 42: The coordinator is not aware of this member.",
            ("the coordinator is not aware of this member",),
        ),
        ("{new-group-2 NON_EMPTY_GROUP: The group is not empty.}", ("the group is not empty",)),
        ("Topic \"orders\" and the key 'user.id' are ours, is that a problem?", ()),  # one-word names are no messages
        # a question that is one statement quoting no message is a message pasted bare (without a question mark
        # a question reads as one too); with a question mark it is none
        ("The coordinator is not available.", ("the coordinator is not available",)),
        ("is the coordinator not available", ("is the coordinator not available",)),
        ("is the coordinator not available?", ()),
        ("$ kafka-topics.sh --create --topic x --config 'cleanup.policy=compact,delete now please'", ()),  # a command
        (
            "Caused by: org.apache.kafka.common.KafkaException: Failed to construct kafka producer",
            (
                "org apache kafka common kafkaexception failed to construct kafka producer",
                "failed to construct kafka producer",
            ),
        ),
    ],
)
def test_quoted_and_printed_messages(question, messages):
    assert parse_query(question).messages == messages


def test_a_command_alone_is_searched_as_typed():
    """With nothing but a command line, the command is what the question is about: it stays in the text."""
    query = parse_query(PRODUCER_COMMAND)
    assert "kafka-console-producer" in query.text
    assert query.context_identifiers == {"kafka-console-producer"}


@pytest.mark.parametrize(
    ("question", "intent"),
    [
        ("What is the default value of acks for the producer?", "fact"),
        ("Which SASL mechanisms does Kafka support?", "fact"),
        ("what does error code 121 mean?", "fact"),
        ("Why does my consumer keep rebalancing?", "troubleshoot"),
        ("how do I fix a consumer that is stuck?", "troubleshoot"),
        ("the lag keeps on growing since this morning", "troubleshoot"),
        # "keep" as in retain or maintain asks for a fact, not a fix.
        ("how long does kafka keep a tombstone on a compacted topic before it disappears?", "fact"),
        ("Does a Streams app keep the same application.id across restarts?", "fact"),
        ("org.apache.kafka.common.errors.RecordTooLargeException: The message is 2000000 bytes", "troubleshoot"),
        (f"{PRODUCER_COMMAND}\n{METADATA_WARN}", "troubleshoot"),
        ("How do I check the lag of a consumer group?", "check"),
        ("how can I verify that replication is healthy?", "check"),
        ("write me a Go consumer that commits offsets after each batch", "task"),
        ("Our app gets RecordTooLargeException. Can you write a Jira ticket about it?", "task"),
        (f"Please summarize this for a status update:\n{METADATA_WARN}", "task"),
        ("Translate this into German: org.apache.kafka.common.errors.TimeoutException: Expired", "task"),
        ("translate the retention.ms description into german", "task"),
        ("summarize the differences between acks=1 and acks=all", "fact"),  # what the docs say, shortened
        ("How do I write a custom partitioner?", "fact"),
        ("give me a python script that consumes from kafka", "task"),
        ("tell me a joke about kafka", "task"),
        # the making verb typed with one slip: two letters swapped, or one left out
        ("wrtie me a short poem about consumer lag", "task"),
        ("can you transalte this into Spanish: the broker is down", "task"),
        ("please sumarize this for our standup", "task"),
        ("wirte throughput dropped after the upgrade, why?", "troubleshoot"),  # no request follows the slip
        # after a greeting of a few words, the request still opens its sentence
        ("hi team, write me a python script that upserts the orders topic into postgres", "task"),
        ("quick one - translate this into Japanese: the broker is down", "task"),
        ("can you give me some sample code for a transactional producer?", "task"),
        ("give me an example of a producer config with acks=all", "fact"),  # the docs have examples
        ("tell me the default of linger.ms", "fact"),
        ("Write throughput dropped after the upgrade, why?", "troubleshoot"),
        # "failed" naming a thing asks how to act on it; failing reports a fault.
        ("how to restart a failed connector task via rest", "fact"),
        ("my connector task failed after the upgrade", "troubleshoot"),
        # asking how to do something with what failed reports no fault: what to do answers it
        ("how to make kafka connect restart failed tasks automatically", "fact"),
        ("connect keeps restarting failed tasks, how to stop it", "troubleshoot"),
        ("how do I find out why the failed task stopped", "troubleshoot"),
        ("the producer is failing with timeouts", "troubleshoot"),
        (f"{PRODUCER_COMMAND}\nERROR generate a new cluster id failed: write this down", "troubleshoot"),
        # what a thing can handle is a fact; how the user is to handle something asks for a fix
        ("how many partitions can a single broker handle?", "fact"),
        ("how should we handle a RecordTooLargeException?", "troubleshoot"),
        ("what is the best way to handle poison pill records?", "troubleshoot"),
    ],
)
def test_intent(question, intent):
    assert parse_query(question).intent == intent


@pytest.mark.parametrize(
    ("question", "intent"),
    [
        ("how to enable SASL_SSL with SCRAM on brokers", "fact"),  # a security protocol, not an error
        ("docker: what does KAFKA_CFG_MAX_CONNECTIONS_PER_IP=100 limit?", "fact"),  # an environment variable
        ("what does UNKNOWN_TOPIC_OR_PARTITION mean", "troubleshoot"),  # an error the corpus names
        ("our SASL_SSL producer gets UNKNOWN_TOPIC_OR_PARTITION", "troubleshoot"),
        ("SASL_SSL client logs ERROR on startup", "troubleshoot"),  # an error marked otherwise
    ],
)
def test_a_word_spelt_like_an_error_name_reports_one_only_when_the_corpus_names_an_error_so(question, intent):
    errors = {"unknown_topic_or_partition"}
    assert parse_query(question, error_name=errors.__contains__).intent == intent
    # Without a corpus to ask, every such word reads as an error's name.
    assert parse_query(question).intent == "troubleshoot"


@pytest.mark.parametrize(
    ("question", "how_to"),
    [
        ("how do i make kafka spread replicas of a partition over the zones?", True),
        ("How to change retention on one topic?", True),
        ("we're retiring broker 4. is there a command that drains all its partitions?", True),
        ("what's the command to list consumer groups", True),
        ("whats the command to list consumer groups", True),
        ("what is the default of linger.ms?", False),
        ("how does the log cleaner pick a segment?", False),  # how it works, not what to do
        # a pasted line is not the user's question
        ("```\nERROR how to recover: unknown\n```\nwhat does this mean?", False),
    ],
)
def test_a_question_that_asks_how_to_do_something(question, how_to):
    assert parse_query(question).how_to is how_to


def test_names_keep_the_sentence_opening_word_apart():
    query = parse_query("Which SASL mechanisms does Kafka support? Does it work with Okta?")
    assert query.names == ("SASL", "Kafka", "Okta")
    assert query.opening_names == ("Which", "Does")


def test_a_name_that_ends_its_sentence_is_a_name_and_a_dotted_one_is_not():
    """ "… picked LastAppliedRecordLagMs." and "… with KMinion." name what the user asks about; the sentence's
    dot is no part of a package or host (`Foo.bar`), which is still no name."""
    query = parse_query("We alert on LastAppliedRecordLagMs. It is flat. We export lag with KMinion. See Foo.bar")
    assert {"LastAppliedRecordLagMs", "KMinion"} <= set(query.names)
    assert not {"Foo", "Foo.bar"} & set(query.names)


def _as_title(question: str) -> str:
    """Each lower-case word capitalised, as a title is typed; `NOT_ENOUGH_REPLICAS` as it was."""
    return " ".join(word[:1].upper() + word[1:] if word.islower() else word for word in question.split(" "))


@pytest.mark.parametrize(
    "question",
    [
        "why did my consumer lag spike after we upgraded the brokers yesterday?",
        "producer gets NOT_ENOUGH_REPLICAS errors after a broker went down since KIP-500, how do i fix it?",
    ],
)
@pytest.mark.parametrize("recase", [str.upper, _as_title], ids=["capitals", "title"])
def test_a_question_capitalised_throughout_reads_as_typed_in_lower_case(question, recase):
    """Typed in capitals or as a title, every word looked like a name: "YESTERDAY" a product the corpus lacks,
    "Why Did My Consumer" an error's name; the question was declined that is answered in lower case."""
    typed, cased = parse_query(question), parse_query(recase(question))
    assert (cased.names, cased.opening_names, cased.asked_names) == (
        typed.names,
        typed.opening_names,
        typed.asked_names,
    )
    assert cased.asked_phrases == typed.asked_phrases and cased.label == typed.label
    assert cased.tokens == typed.tokens
    assert {i.name for i in cased.identifiers} == {i.name for i in typed.identifiers}
    assert cased.question == recase(question)  # the user's words are kept for the answer


def test_decasing_keeps_code_pasted_lines_and_identifiers_and_leaves_ordinary_capitals_alone():
    shouted = "WHY DOES `KafkaProducer` FAIL WITH NOT_ENOUGH_REPLICAS ON KIP-500 CLUSTERS?\n```\nERROR Fatal Error\n```"
    assert decased(shouted) == (
        "why does `KafkaProducer` fail with NOT_ENOUGH_REPLICAS on KIP-500 clusters?\n```\nERROR Fatal Error\n```"
    )
    written = "Which SASL mechanisms does Kafka support? We run Redpanda Console."
    assert decased(written) == written and prose_capitalisation(written) < CAPITALISED_THROUGHOUT
    assert prose_capitalisation("```\nONLY CODE\n```") is None
    assert prose_capitalisation("what's a KTable?") is None  # one plain word, a name: no sign of how it is typed


def test_capitalised_as_a_title_the_words_in_capitals_stay_names():
    """ "Amazon MSK: Can I Set …" keeps MSK a name, as it is in "Amazon MSK: can I set …"; typed with caps lock on,
    no capitals mark a name."""
    titled = "Amazon MSK: Can I Set The Retention Of A Topic With IAM Auth?"
    assert decased(titled) == "amazon MSK: can I set the retention of A topic with IAM auth?"
    assert "MSK" in parse_query(titled).names
    assert decased(titled.upper()) == "amazon msk: can I set the retention of A topic with iam auth?"


def test_typed_in_capitals_the_words_in_title_case_stay_names():
    """With caps lock on, a word the user typed in title case was typed so on purpose: "Amazon MSK Serverless"
    keeps its two names, as the title rule keeps MSK; the words in capitals read as lower-case prose."""
    shouted = "How DO I CONFIGURE A Java CLIENT TO AUTHENTICATE TO AN Amazon MSK Serverless CLUSTER WITH IAM?"
    assert (
        decased(shouted)
        == "How do I configure A Java client to authenticate to an Amazon msk Serverless cluster with iam?"
    )
    assert {"Amazon", "Serverless"} <= set(parse_query(shouted).names)


@pytest.mark.parametrize(
    ("question", "asked"),
    [
        ("how do i add partitions?\n\nThanks,\nPriya Raghunathan", "how do i add partitions?\n"),
        ("why is it slow?\nCheers,\nBob", "why is it slow?"),
        (
            "Hello Kafka team,\n\nhow do i add partitions?\n\nBest regards,\nMarek Nowak\nSenior Engineer, Payments",
            "\nhow do i add partitions?\n",
        ),
        # not set apart as a letter's, or what the user has: kept
        ("hi,\nwhat is isr?", "hi,\nwhat is isr?"),
        ("In KRaft,\nhow do I list voters?", "In KRaft,\nhow do I list voters?"),
        ("We have two clusters:\nprod-eu,\nprod-us", "We have two clusters:\nprod-eu,\nprod-us"),
        ("why does it fail?\n\nKafka 3.9,\nretention.ms=1000", "why does it fail?\n\nKafka 3.9,\nretention.ms=1000"),
        ("my config:\n```\nfoo,\nbar\n```", "my config:\n```\nfoo,\nbar\n```"),
        ("Thanks,", "Thanks,"),
    ],
)
def test_a_letters_greeting_and_sign_off_are_not_the_question(question, asked):
    assert without_salutations(question) == asked


def test_a_signatures_name_is_no_name_the_question_asks_about():
    question = "Which SASL mechanisms does Kafka support?\n\nThanks,\nPriya Raghunathan"
    assert parse_query(question).names == ("SASL", "Kafka")


def test_names_with_a_lower_case_start_artifact_ids_and_quoted_programs():
    query = parse_query("Can ksqlDB read it? We use spring-cloud-stream-binder and run `zorb cluster config set x`.")
    assert {"ksqlDB", "spring-cloud-stream-binder", "zorb"} <= set(query.names)


def test_hyphenated_words_files_and_hosts_are_not_artifact_names():
    query = parse_query("A deny-by-default rule? We run kafka-console-consumer.sh against my-host-name-1.example.com")
    assert not any("-" in name for name in query.names)


def test_names_come_from_the_users_own_words_not_the_paste():
    query = parse_query(f"my Debezium connector logs this\n{METADATA_WARN}")
    assert "Debezium" in query.names
    assert "Producer" not in query.names and "NetworkClient" not in query.names


def test_names_of_a_prose_line_that_mentions_an_error_name():
    query = parse_query("We use Debezium and see INVALID_RECORD_STATE on the share consumer, why?")
    assert "invalid_record_state" in query.focus_identifiers
    assert "Debezium" in query.names


def test_parse_query_with_history_carries_the_subject_as_focus_when_the_follow_up_asks_for_a_property_of_it():
    query = parse_query("and what's its default?", HISTORY)
    assert query.question == "and what's its default?"
    assert query.text == rewrite_followup("and what's its default?", HISTORY)
    assert "transaction.timeout.ms" in query.focus_identifiers


def test_parse_query_with_history_carries_the_subject_as_context_when_the_follow_up_may_ask_another_thing():
    """What the earlier turns name is searched with the follow-up, as the conversation it sits in: the
    follow-up may ask about another thing ("and without exactly-once?"), so the passage defining the earlier
    subject is not made the answer, as it is for an identifier the question itself names."""
    query = parse_query("and when does that become a real problem?", HISTORY)
    assert "transaction.timeout.ms" in query.text
    assert "transaction.timeout.ms" in query.context_identifiers
    assert "transaction.timeout.ms" not in query.focus_identifiers
    named = parse_query("and is max.block.ms longer than that?", HISTORY)
    assert "max.block.ms" in named.focus_identifiers and "transaction.timeout.ms" in named.context_identifiers


def test_parse_query_uses_the_given_rewrite():
    calls = []

    def rewrite(text, history):
        calls.append((text, list(history)))
        return "rewritten max.poll.interval.ms"

    query = parse_query("and its default?", HISTORY, rewrite=rewrite)
    assert calls == [("and its default?", HISTORY)]
    assert query.text == "rewritten max.poll.interval.ms"
    assert "max.poll.interval.ms" in query.focus_identifiers


def test_parse_query_rewrites_itself_when_the_given_rewrite_cannot():
    """An LLM that fails to restate the follow-up returns None: the follow-up is then rewritten and placed as
    without an LLM, its carried identifiers context, not what it asks about."""
    query = parse_query("and when does that become a real problem?", HISTORY, rewrite=lambda text, history: None)
    assert query.text == rewrite_followup("and when does that become a real problem?", HISTORY)
    assert "transaction.timeout.ms" in query.context_identifiers
    assert "transaction.timeout.ms" not in query.focus_identifiers


def test_parse_query_without_history_never_calls_the_rewrite():
    query = parse_query("what is acks?", rewrite=lambda text, history: pytest.fail("rewrite called"))
    assert query.text == "what is acks?"
    assert query.trimmed is False


def test_parse_query_of_a_200_kb_paste_is_fast_and_bounded():
    paste = (f"{PRODUCER_COMMAND}\n{METADATA_WARN}\n" + TRACE) * 400
    started = time.perf_counter()
    query = parse_query(paste, max_chars=4000)
    assert time.perf_counter() - started < 5.0
    assert len(query.text) <= MAX_SIGNAL_CHARS
    assert "unknown_topic_or_partition" in query.focus_identifiers


def test_exception_classes_bring_their_error_names_with_their_place():
    query = parse_query(
        "$ bin/kafka-topics.sh --create --topic t\n"
        "Error while executing topic command : org.apache.kafka.common.errors.InvalidReplicationFactorException: x"
    )
    assert [i.name for i in query.error_names] == ["invalid_replication_factor"]
    assert query.error_names[0].focus  # the error line, not the command that raised it
    assert "invalid_replication_factor" not in {i.name for i in query.identifiers}  # retrieval adds it if known


def test_runs_of_words_of_error_lines_are_error_phrases():
    query = parse_query(
        "our .NET producer fails now and then; we never join group twice\n"
        "Confluent.Kafka.ProduceException: Broker: Unknown Producer Id"
    )
    phrases = {i.name: i.place for i in query.error_phrases}
    assert phrases["unknown_producer_id"] == "error"
    # The user's own words may name an error too, in their place: whether `JOIN_GROUP` is one (it is a
    # request's name in the docs) is for retrieval to look up.
    assert phrases["join_group"] == "question"
    assert "unknown_producer_id" not in {i.name for i in query.identifiers}  # retrieval adds it if known


def test_an_error_named_in_the_users_own_words_is_an_error_phrase_of_the_question():
    query = parse_query("Received unknown topic or partition error in fetch for partition orders-0")
    phrases = {i.name: i.place for i in query.error_phrases}
    assert phrases["unknown_topic_or_partition"] == "question"


def test_the_users_own_words_run_together_are_candidate_names_but_a_pasted_lines_are_not():
    query = parse_query(
        "which metric shows under replicated partitions on the broker?\n"
        "[2024-03-01 10:12:44,120] WARN [ReplicaFetcher replicaId=2] Error in fetch request for offline log dirs"
    )
    assert "underreplicatedpartitions" in query.run_together
    assert "offlinelogdirs" not in query.run_together  # the log line is what the tool printed
    assert "underreplicatedpartitions" not in {i.name for i in query.identifiers}  # retrieval adds it if known


def test_a_quoted_message_in_the_users_words_gives_error_phrases_too():
    query = parse_query('confluent-kafka-go gives "Broker: Leader not available" right after we create the topic')
    phrases = {i.name: i.place for i in query.error_phrases}
    assert phrases["leader_not_available"] == "error"
    assert phrases["create_the_topic"] == phrases["right_after"] == "question"  # outside the quotes


def test_rewrite_takes_the_previous_answers_subject_from_its_first_source():
    answer = "Set `min.insync.replicas` to 2. [1]\n\nSee `unclean.leader.election.enable` and LOG_DIR_NOT_FOUND. [2]"
    history = [{"role": "user", "content": "how do I stop losing writes?"}, {"role": "assistant", "content": answer}]
    rewritten = rewrite_followup("and what's its default?", history)
    assert "min.insync.replicas" in rewritten
    assert "unclean.leader.election.enable" not in rewritten and "log_dir_not_found" not in rewritten
    unmarked = [history[0], {"role": "assistant", "content": "Set min.insync.replicas to 2."}]
    assert "min.insync.replicas" in rewrite_followup("and what's its default?", unmarked)


def test_rewrite_takes_the_subject_from_the_answers_lead_not_from_what_its_source_says_after_it():
    answer = (
        "**What it means / likely cause**\n\nThe consumer is kicked when `max.poll.interval.ms` passes. [1]\n\n"
        "For the cooperative protocol see KIP-429. [1]"
    )
    history = [{"role": "user", "content": "my group keeps rebalancing"}, {"role": "assistant", "content": answer}]
    rewritten = rewrite_followup("how do I check it?", history)
    assert "max.poll.interval.ms" in rewritten and "kip-429" not in rewritten


def test_a_follow_up_knows_the_words_of_the_last_answer_and_a_standalone_question_does_not():
    answer = "`retention.ms`: This configuration controls the maximum time we will retain a log. [1]"
    history = [
        {"role": "user", "content": "which setting keeps data for a week?"},
        {"role": "assistant", "content": "An older answer."},
        {"role": "user", "content": "and per topic?"},
        {"role": "assistant", "content": answer},
    ]
    told = parse_query("and how do I change it?", history).told
    assert told == " retention ms this configuration controls the maximum time we will retain a log 1 "
    assert "older" not in told
    assert parse_query("What does the Kafka Streams commit.interval.ms setting control?", history).told == ""
    assert parse_query("and how do I change it?").told == ""


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        (
            "Producer throws\n`org.apache.kafka.clients.producer.BufferExhaustedException: Failed to allocate memory`\n"
            "and it does not recover. Which producer memory setting is this, what's its default, and is there a "
            "producer metric that shows appends waiting for it?",
            ("Which producer memory setting is this", "is there a producer metric that shows appends waiting for it"),
        ),
        (
            "Should we run 5 controllers, and is it OK to run brokers and controllers on the same nodes?",
            ("Should we run 5 controllers", "is it OK to run brokers and controllers on the same nodes"),
        ),
        (
            "How do I add partitions to a topic? Does adding them move existing records?",
            ("How do I add partitions to a topic", "Does adding them move existing records"),
        ),
        ("How do I add partitions to a topic?", ()),  # one ask
        ("Topic orders keeps growing and the cleaner is idle, why is that?", ()),  # a statement, then one ask
        (
            "```\nwhat is this? and why is that broken?\n```\nWhat does the stack trace above mean for our consumers?",
            (),
        ),
        # "What is acks" has too few words to be searched alone: with the statement before it
        (
            "Our consumer group lags. What is acks and which setting raises throughput?",
            ("Our consumer group lags. What is acks", "which setting raises throughput"),
        ),
        (
            "User:ledger-writer already has WRITE on the ledger topic. Which ACL is missing, and what's the "
            "kafka-acls command to add it?",
            (
                "User:ledger-writer already has WRITE on the ledger topic. Which ACL is missing",
                "what's the kafka-acls command to add it",
            ),
        ),
        # ... but not with an ask before it: "what's its default" leans on that one, whose answer it sits beside
        (
            "What does the acks setting control on a producer? And what's its default?",
            ("What does the acks setting control on a producer",),
        ),
        # typed with no question mark at all, a sentence that opens with a question word asks
        (
            "How do I add partitions to a topic. Does adding them move existing records",
            ("How do I add partitions to a topic", "Does adding them move existing records"),
        ),
        # ... but with one anywhere, only the sentences ending in it do
        ("Our consumer group lags. How do I add partitions. Does adding them move existing records?", ()),
    ],
)
def test_a_question_that_asks_several_things_has_an_ask_for_each(question, asks):
    assert question_asks(question) == asks
    assert parse_query(question).asks == asks


def test_a_follow_up_has_no_asks_of_its_own():
    history = [{"role": "user", "content": "what does acks do?"}, {"role": "assistant", "content": "acks sets ..."}]
    question = "and what is its default, and does it change with idempotence enabled?"
    assert question_asks(question)
    assert parse_query(question, history).asks == ()


@pytest.mark.parametrize(
    ("question", "asked"),
    [
        ("what's the difference between retention.ms and segment.ms", {"retention.ms", "segment.ms"}),
        (
            "NOT_ENOUGH_REPLICAS vs NOT_ENOUGH_REPLICAS_AFTER_APPEND, what's the difference?",
            {"not_enough_replicas", "not_enough_replicas_after_append"},
        ),
        # A setting the user gives a value, and one named in a sentence that does not ask, are what they have set.
        (
            "We turned on tiered storage (remote.storage.enable=true, retention.ms=604800000). We also set "
            "segment.bytes to 1 GB. Which setting limits what stays on local disk?",
            set(),
        ),
        (
            "Consumer keeps rebalancing:\n"
            "org.apache.kafka.clients.consumer.CommitFailedException: Commit cannot be completed\n"
            "Should I raise max.poll.interval.ms or session.timeout.ms?",
            {"max.poll.interval.ms", "session.timeout.ms"},
        ),
        # In the asking sentence itself, the setting given a value is what the user has set.
        ("With linger.ms=20 already, should I also raise batch.size?", {"batch.size"}),
    ],
)
def test_the_identifiers_a_question_asks_about_are_those_of_its_asking_sentences(question, asked):
    assert asked_identifiers(question) == asked
    assert parse_query(question).asked == asked


def test_a_paste_ends_the_sentence_before_it():
    """The lead-in of a paste is no part of the question asked after it: here the asking sentence names
    neither the user's connector nor its cluster, and a setting given a value before the paste is setup."""
    question = (
        "Load-testing an SQS source connector on our Connect cluster with offset.flush.timeout.ms=5000:\n"
        "```\nWorkerSourceTask{id=test-1} Failed to flush, timed out while waiting for producer to flush\n```\n"
        "Which worker settings control how long it waits here?"
    )
    query = parse_query(question)
    assert query.asked_names == ("Which",)
    assert query.asked == frozenset()
    joined = question.replace("\n```\nWorkerSourceTask{id=test-1} Failed to flush, timed out while waiting for "
                              "producer to flush\n```\n", " ")  # fmt: skip
    assert "SQS" in parse_query(joined).asked_names  # no paste between: one sentence


@pytest.mark.parametrize(
    ("question", "names"),
    [
        # The product the user asks about, not the stack they run: only the asking sentence's names.
        (
            "Our Spring Boot service writes to a three-broker cluster. Can I set message.timestamp.before.max.ms "
            "in a custom MSK configuration?",
            ("MSK", "Can"),
        ),
        ("Redpanda: what's the rpk command to create a topic?", ("Redpanda",)),
        ("why is my consumer lagging", ()),
        # A name the user calls theirs, in the asking sentence or another, is their stack.
        ("Which producer metrics in our Datadog feed show the queue time?", ("Which",)),
        ("Our legacy PHP consumers read `clicks`. Can the Zorblatt PHP consumers read it?", ("Zorblatt", "Can")),
        ("This quarter we stay on ext4. Which mount options help?", ("Which",)),  # "this" owns no later sentence
        # So is a name the user says they use, in a statement's order; asked about, it is the subject.
        ("We use Zorblatt and see INVALID_RECORD_STATE, why?", ("We",)),
        ("I'm running a Zorblatt app, which setting limits the fetch size?", ()),
        ("Can we run Zorblatt pull queries against a stream?", ("Zorblatt", "Can")),
        ("Why do we use Zorblatt?", ("Zorblatt", "Why")),
    ],
)
def test_the_names_a_question_asks_about_are_those_of_its_asking_sentences(question, names):
    assert parse_query(question).asked_names == names


@pytest.mark.parametrize(
    ("question", "phrases"),
    [
        ("Which REST Proxy property controls the consumer instance timeout?", (("REST", "Proxy"),)),
        # A question word opening the sentence is grammar, a name opening it is not; three words stay one name.
        ("Can the Strimzi Topic Operator revert a config change?", (("Strimzi", "Topic", "Operator"),)),
        ("Event Hubs Premium: can I use transactions?", (("Event", "Hubs", "Premium"),)),
        # Only the asking sentences: the product the user runs is their stack.
        ("We run on Azure Event Hubs. Which setting limits the fetch size?", ()),
        ("Can our Spring Boot app set the fetch size?", ()),  # theirs
        ("Does `Topic Operator` revert it?", ()),  # quoted as code
        ('my broker log says "Shrinking ISR from 1,2,3 to 1", why?', ()),  # quoted as a message
        ("my broker log says Shrinking ISR all the time, why?", ()),  # a participle opens a clause
        ("Using Kafka Streams, which setting caps memory?", (("Kafka", "Streams"),)),
        ("Does the Zorblatt operator revert it?", ()),  # one name is no name of several words
        ("what is the ISR?", ()),
        # A message pasted without its colon: the capitalised article opens its sentence, it names nothing.
        ("RecordTooLargeException The message is 2097152 bytes when serialized which is larger than 1048576", ()),
    ],
)
def test_the_names_of_several_words_a_question_asks_about(question, phrases):
    assert parse_query(question).asked_phrases == phrases


@pytest.mark.parametrize(
    ("question", "thing"),
    [
        ("what is the ISR?", ("ISR",)),
        ("What are quotas?", ("quotas",)),
        ("so what's a tombstone", ("tombstone",)),
        ("what does log compaction mean?", ("log", "compaction")),
        ("define preferred replica", ("preferred", "replica")),
        # after a greeting or a label of a few words
        ("hey, what does ISR mean", ("ISR",)),
        ("what does ISR stand for?", ("ISR",)),
        ("whats a broker?", ("broker",)),  # "what's" typed without its apostrophe
        ("what exactly is a consumer group?", ("consumer", "group")),
        ("so what is a partition exactly?", ("partition",)),
        ("can you explain what a tombstone is?", ("tombstone",)),
        ("tell me what a KTable is", ("KTable",)),
        ("what is the meaning of ISR?", ("ISR",)),
        # a label, then "what is it?": the label is the thing
        ("interactive queries - what are they?", ("interactive", "queries")),
        ("KTable: whats that?", ("KTable",)),
        ("ok, what is that?", ()),  # a discourse word is no label
        ("what does ISR mean in kafka?", ("ISR",)),
        ("what does LEO stand for in Kafka replication?", ("LEO",)),
        ("quick one: what is a tombstone?", ("tombstone",)),
        ("Hi all - what is a tombstone?", ("tombstone",)),
        # what it is for, or where it lives, is said around the thing
        ("what is log compaction used for?", ("log", "compaction")),
        ("what is a standby replica in Kafka Streams?", ("standby", "replica")),
        ("what is the controller in kraft", ("controller",)),
        ("what is in sync replica", ("in", "sync", "replica")),
        # asks more, points back, names an identifier, or is a whole question
        ("what is it?", ()),
        ("what does it mean in production?", ()),
        ("can you explain what it is?", ()),
        ("explain how compaction works", ()),
        ("what is kafka error code 121?", ()),
        ("what's the difference between acks=1 and acks=all?", ()),
        ("what is the recommended number of partitions per broker?", ()),
        ("Our consumer lags.\nwhat is the ISR?", ()),
        ("what is a tombstone, and how long is it kept?", ()),
        ("we enabled compaction last week and the disk is still full, what is wrong?", ()),
    ],
)
def test_a_question_that_only_asks_what_a_thing_is_names_the_thing(question, thing):
    assert parse_query(question).defined == thing


@pytest.mark.parametrize(
    ("question", "things"),
    [
        ("KStream vs KTable - what's the actual difference?", (("KStream",), ("KTable",))),
        ("what's the difference between a broker and a controller?", (("broker",), ("controller",))),
        ("event time versus processing time", (("event", "time"), ("processing", "time"))),
        ("KStream and KTable - what's the difference?", (("KStream",), ("KTable",))),
        # what follows the second thing is the question's own
        ("broker vs controller in kraft, what's the difference?", (("broker",), ("controller",))),
        (
            "kafka streams vs kafka connect for pulling rows out of postgres?",
            (("kafka", "streams"), ("kafka", "connect")),
        ),
        # one word before a thing of several shares its last words
        ("difference between tumbling and hopping windows?", (("tumbling", "windows"), ("hopping", "windows"))),
        ("static vs dynamic membership", (("static", "membership"), ("dynamic", "membership"))),
        # identifiers name the entries that answer it; a question is no thing
        ("acks=1 vs acks=all", ()),
        ("what's the difference between acks=1 and acks=all?", ()),
        ("how do I choose vs what is recommended", ()),
        ("KStream vs KTable?\nwe use both", ()),
    ],
)
def test_a_question_that_compares_two_things_asks_what_each_is_the_first_leading(question, things):
    query = parse_query(question)
    assert query.compared == things
    assert query.defined == (things[0] if things else ())
    assert not parse_query(question, [{"role": "user", "content": "what is a ktable?"}], leaning=True).compared


def test_a_word_cut_by_the_owner_window_calls_nothing_the_users():
    """Only the last 60 characters before a name are read for its owner; "flavour" cut to "our" owns nothing."""
    question = "Which setting limits the flav" + "our " + "a" * 27 + " " + "b" * 27 + " Zorblatt lag?"
    assert "Zorblatt" in parse_query(question).asked_names


# ------------------------------------------------------------------------------------------ opening label


@pytest.mark.parametrize(
    ("question", "label"),
    [
        ("KafkaJS 2.2: the consumer crashes on rebalance", ("KafkaJS", "2.2")),
        ("[Strimzi] how do I restart a failed task?", ("Strimzi",)),
        ("  Go with IBM/sarama: which strategy?", ("Go", "with", "IBM", "sarama")),
        ("Amazon MSK serverless:\nwhat is the partition limit?", ("Amazon", "MSK", "serverless")),
        # An opening "In …," or "With the …," sets the subject as a label does.
        ("In Zorblatt (Go), how do I start from the oldest offset?", ("Zorblatt", "(Go)")),
        ("With the Zorblatt operator, how do I restart a task?", ("Zorblatt", "operator")),
        # after a greeting of a few words
        ("hi team, Zorblatt 2.2: the consumer crashes on rebalance", ("Zorblatt", "2.2")),
        ("hey all, In Zorblatt (Go), how do I start from the oldest offset?", ("Zorblatt", "(Go)")),
    ],
)
def test_a_question_opening_with_a_label_names_its_subject_there(question, label):
    assert opening_label(question) == label
    query = parse_query(question)
    assert (query.tag or query.label) == label  # a bracketed tag is the question's tag (`Query.tag`)


@pytest.mark.parametrize(
    "question",
    [
        "java.lang.IllegalStateException: No current assignment for partition orders-0",  # a pasted error
        "[2024-03-01 10:12:44,120] WARN [ReplicaFetcher replicaId=2] Error in fetch",  # a log line
        "when I restart the broker it always says: not enough replicas",  # a sentence, not a label
        "why does my consumer lag? it says: timeout",  # the colon is not on the opening words
        "how do I set acks",
        "In my tests the consumer keeps rebalancing, why?",  # six words before the comma: a clause, not a label
    ],
)
def test_errors_log_lines_and_sentences_are_no_label(question):
    assert opening_label(question) == ()


@pytest.mark.parametrize(
    ("question", "setup"),
    [
        ("We run with processing.guarantee=exactly_once_v2. How often does Streams commit?", {"processing.guarantee"}),
        ('Connector config: {"tasks.max": "4"}\nWhy does it run one task only?', {"tasks.max"}),
        ("compose env:\n  segment.ms: 3600000\nwhy do old segments stay?", {"segment.ms"}),
        # an error the user names in prose is what they ask about, whichever sentence asks
        ("INVALID_RECORD_STATE keeps showing up in our logs. What is going on?", set()),
        # a setting an asking sentence names is asked about, even with a value elsewhere
        ("We set retention.ms=3600000. Why does retention.ms not delete anything?", set()),
        ("what does commit.interval.ms do?", set()),
    ],
)
def test_the_settings_a_user_gives_a_value_outside_the_asking_sentences_are_their_setup(question, setup):
    assert parse_query(question).setup_identifiers == setup


@pytest.mark.parametrize(
    ("question", "history", "asking"),
    [
        # every sentence asks: nothing is only said around the question
        ("what does linger.ms do?", (), ()),
        ("Which metric shows lag? And which shows rebalances?", (), ()),
        # what the user says they have is left out; the asking sentence is kept
        ("Our consumers have a long max.poll.interval.ms. Which metric shows it?", (), ("metric", "show")),
        # a pasted error line is what the user reports: kept with the asking sentence
        (
            "Deploys fail:\nERROR Consumer exceeded max.poll.interval.ms\nwhy does the group rebalance?",
            (),
            (
                "group",
                "rebalance",
                "error",
                "consumer",
                "exceeded",
                "max.poll.interval.ms",
                "max",
                "poll",
                "interval",
                "ms",
            ),
        ),
        # a follow-up leans on the conversation: its sentences are not told apart
        (
            "We use acks=all. And what is its default?",
            ({"role": "user", "content": "what does linger.ms do?"}, {"role": "assistant", "content": "It waits."}),
            (),
        ),
    ],
)
def test_the_asking_tokens_are_those_of_the_asking_sentences_and_pasted_errors(question, history, asking):
    assert parse_query(question, history).asking_tokens == asking


@pytest.mark.parametrize(
    ("question", "named"),
    [
        ("how often?", False),
        ("any prerequisites?", False),
        ("default value?", False),
        ("what's the default?", False),  # the default of what was just discussed
        ("what's a ktable?", True),  # asks what a thing is
        ("what is static membership?", True),
        ("what does linger.ms do?", True),  # names an identifier
        ("how do I see which replicas are in sync for a topic?", True),  # more words than a fragment has
    ],
)
def test_names_its_subject(question, named):
    assert names_its_subject(question, max_terms=3) is named


def test_a_question_read_as_leaning_on_the_conversation_carries_its_subject():
    history = [{"role": "user", "content": "what does isolation.level do on the consumer?"}]
    alone = parse_query("any prerequisites?", history)
    leaning = parse_query("any prerequisites?", history, leaning=True)
    assert not alone.followup and alone.text == "any prerequisites?"
    assert leaning.followup and "isolation.level" in leaning.text
    assert parse_query("any prerequisites?", (), leaning=True).text == "any prerequisites?"


@pytest.mark.parametrize(
    ("question", "switches"),
    [
        ("what's a ktable?", True),  # the conversation was about ACLs
        ("Hi, what is zero copy?", True),
        ("what does acl mean?", False),  # the conversation named it
        ("what are the ACLs for?", False),
        ("how do I list them?", False),  # no definition asked
        ("what's the default?", False),
    ],
)
def test_switches_subject(question, switches):
    history = [
        {"role": "user", "content": "how do i list the acls set on a topic?"},
        {"role": "assistant", "content": "Run kafka-acls.sh --list --topic <topic> [1]."},
    ]
    assert switches_subject(question, history) is switches
    assert not switches_subject(question, [])


@pytest.mark.parametrize(
    ("question", "nothing"),
    [
        ("how do I fix this?", True),
        ("what does it mean", True),
        ("Hi, which of them is it?", True),
        ("is there exactly-once support?", False),  # "there is" points at nothing
        ("consumer group", False),  # says what it is about, though in few words
        ("is it safe to delete __consumer_offsets?", False),  # names an identifier
        ("how do I fix it? org.apache.kafka.common.errors.TimeoutException: Expiring 10 record(s)", False),
        # the clause before the pointing word names what it points to
        ("what is a rebalance and how do I avoid it?", False),
        ("ISR, what is it?", False),
        ("what are quotas and how do I set them?", False),
        ("What is the ISR, and why does it shrink?", False),
        ("how do I fix it and what is it?", True),  # the definition comes after the pointing word
        ("what is it and how do I fix it?", True),
    ],
)
def test_a_question_that_points_back_with_no_subject_points_to_nothing_without_a_conversation(question, nothing):
    assert points_back_to_nothing(question, [], max_terms=2) is nothing
    asked = [{"role": "user", "content": "my consumer gets CommitFailedException"}]
    assert not points_back_to_nothing(question, asked, max_terms=2)


@pytest.mark.parametrize(
    ("question", "own_subject"),
    [
        ("and how do I make each poll return fewer records?", True),
        ("what if I only want to reprocess the last 24 hours instead?", True),  # goes on, points at nothing
        ("and what's its default?", False),  # points back
        ("and for consumers?", False),  # too few words to say what it is about
        ("how do I make each poll return fewer records?", False),  # no follow-up at all
    ],
)
def test_a_follow_up_that_only_goes_on_from_the_conversation_may_have_a_subject_of_its_own(question, own_subject):
    asked = [{"role": "user", "content": "what is transaction.timeout.ms?"}]
    assert continues_with_own_subject(question, asked, max_terms=2) is own_subject
    assert not continues_with_own_subject(question, [], max_terms=2)


@pytest.mark.parametrize(
    ("question", "read"),
    [
        ("hi team, how many stream threads does an instance run?", "how many stream threads does an instance run?"),
        ("Hey all - quick one: what is acks?", "quick one: what is acks?"),
        ("Hi! is it safe to delete __consumer_offsets?", "is it safe to delete __consumer_offsets?"),
        ("good morning folks, why is my consumer lagging?", "why is my consumer lagging?"),
        ("hey Priya,\nwhere is the broker log?", "where is the broker log?"),
        ("hello world example for Kafka Streams?", "hello world example for Kafka Streams?"),  # no greeting
        ("high watermark, what is it?", "high watermark, what is it?"),
        ("hi", "hi"),  # nothing after it: the greeting is all there is
    ],
)
def test_a_chats_opening_greeting_is_no_part_of_the_question(question, read):
    assert without_greeting(question) == read
    assert parse_query(question).text == parse_query(read).text
    assert "team" not in users_words("hi team, how do I list topics?")


def test_a_bracketed_tag_is_the_questions_tag_only():
    """ "[prod] …" labels the question as a ticket's tag does: its words are the tag's, not words the question
    searches or asks with (counted there too, "prod" had a covered question declined). Its names stay names, and
    the question under it may have a label of its own."""
    tagged, plain = parse_query("[prod] how do I delete a topic?"), parse_query("how do I delete a topic?")
    assert (tagged.tag, tagged.label) == (("prod",), ())
    assert (tagged.text, tagged.tokens, tagged.asking_words) == (plain.text, plain.tokens, plain.asking_words)
    product = parse_query("[Redpanda Console] how do I delete a topic?")
    assert product.tag == ("Redpanda", "Console") and "Redpanda" in product.names
    labelled = parse_query("[prod] ksqlDB: how do I delete a stream?")
    assert (labelled.tag, labelled.label) == (("prod",), ("ksqlDB",))
    assert parse_query("[prod]").tokens == ("prod",)  # a tag alone is all the question there is
    logged = parse_query("[2024-03-01 10:12:44,120] WARN [ReplicaFetcher replicaId=2] Error in fetch")
    assert logged.tag == logged.label == () and "error" in logged.tokens  # a log line's timestamp is no tag


def test_a_reply_s_quote_marks_are_taken_away_outside_code_blocks_the_reply_did_not_quote():
    forwarded = (
        "can someone help Dana with this?\n"
        "> why does my consumer keep rebalancing?\n"
        ">> it happens every 5 minutes\n"
        ">\n"
        "> ```\n"
        "> $ bin/kafka-consumer-groups.sh --describe --group billing\n"
        "> ```\n"
        "```\n"
        "> a shell's continuation prompt\n"
        "```"
    )
    assert without_quote_marks(forwarded) == (
        "can someone help Dana with this?\n"
        "why does my consumer keep rebalancing?\n"
        "it happens every 5 minutes\n"
        "\n"
        "```\n"
        "$ bin/kafka-consumer-groups.sh --describe --group billing\n"
        "```\n"
        "```\n"
        "> a shell's continuation prompt\n"
        "```"
    )
    assert without_quote_marks("a -> b and x > 3") == "a -> b and x > 3"


def test_a_quoted_question_is_read_as_the_question_and_a_quoted_command_as_a_command():
    quoted = parse_query("> why does my consumer keep rebalancing?\n> it happens every 5 minutes")
    plain = parse_query("why does my consumer keep rebalancing?\nit happens every 5 minutes")
    assert (quoted.text, quoted.asking_words, quoted.intent) == (plain.text, plain.asking_words, plain.intent)
    assert "rebalancing" in quoted.asking_words
    command = parse_query("> bin/kafka-topics.sh --bootstrap-server kafka-1:9092 --list\nwhy is it empty?")
    assert {i.place for i in command.identifiers if i.name == "kafka-topics"} == {"command"}


def test_curly_quotes_are_read_as_straight_ones():
    curly = parse_query("what\u2019s the \u201cLeader not available\u201d error my producer logs?")
    straight = parse_query('what\'s the "Leader not available" error my producer logs?')
    assert (curly.text, curly.messages, curly.error_phrases) == (
        straight.text,
        straight.messages,
        straight.error_phrases,
    )
    assert straight.error_phrases


@pytest.mark.parametrize(
    ("text", "embedded"),
    [
        (
            "what does ProducerFencedException mean for a producer",
            "what does ProducerFencedException mean for a producer?",
        ),
        (
            "we see lag after a deploy. how do I find the slow partition",
            "we see lag after a deploy. how do I find the slow partition?",
        ),
        ("how do I list topics?", "how do I list topics?"),
        ("Could not find a 'KafkaClient' entry in the JAAS configuration", None),
        ("Can't connect to the coordinator", None),
        ("my consumer lags behind after every deploy", None),
        ("how do I set the retention of one topic:", None),
    ],
)
def test_a_question_typed_without_its_question_mark_is_embedded_with_it(text, embedded):
    assert parse_query(text).embedded_text == (embedded or text)
