"""What answers over the Kafka documentation must contain: the issue's examples as regression tests.

Each test asks the real assistant over an index of /work/shared/corpora/kafka-docs (built once per
session by the `kafka_docs_index` fixture) and prints the answer when it fails.
"""

from __future__ import annotations

import re

import pytest

from rag import Answer, Assistant
from rag.index_store import read_chunk_table
from rag.query import parse_query
from rag.ranking import RANK_FEATURES
from rag.retrieval import FirstStage
from rag.units import build_units

# The first test also builds the Kafka-docs index (several minutes on a busy 2-core machine).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

PROTOCOL_ERRORS = "generated/protocol_errors.html"
CONFIG_PAGES = {"generated/kafka_config.html", "generated/topic_config.html"}
PRODUCER_PASTE = (
    "$ bin/kafka-console-producer.sh --bootstrap-server localhost:9092 --topic orders\n"
    "[2024-05-02 10:11:12,345] WARN [Producer clientId=console-producer] Error while fetching metadata with "
    "correlation id 7 : {orders=UNKNOWN_TOPIC_OR_PARTITION} (org.apache.kafka.clients.NetworkClient)"
)
FENCE = re.compile(r"^(`{3,}|~{3,})[\w-]*\s*$")


@pytest.fixture(scope="module")
def docs(kafka_docs_index, settings_factory) -> Assistant:
    return Assistant.from_settings(settings_factory(kafka_docs_index))


def shown(answer: Answer) -> str:
    """The answer as a failing test prints it: text, citations and related passages."""
    lines = [f"question: {answer.question!r}", f"query: {answer.query!r}", f"abstained: {answer.abstained}", "---"]
    lines.append(answer.text)
    lines.append("---")
    lines += [f"[{c.marker}] {c.passage.source_path} :: {c.passage.heading}" for c in answer.citations]
    lines += [f"related: {p.source_path} :: {p.heading}" for p in answer.related]
    return "\n".join(lines)


def _passages(docs: Assistant, question: str, k: int = 5) -> str:
    return "\n".join(f"{p.source_path} :: {p.heading} :: {p.text[:120]!r}" for p in docs.search(question, k=k).passages)


def _outside_fences(text: str) -> list[str]:
    lines, fence = [], ""
    for line in text.split("\n"):
        stripped = line.strip()
        if fence:
            if stripped == fence:
                fence = ""
            continue
        match = FENCE.match(stripped)
        if match:
            fence = match.group(1)
            continue
        lines.append(line)
    return lines


def _fenced_blocks(text: str) -> list[str]:
    return re.findall(r"^(`{3,}|~{3,})[\w-]*\n(.*?)\n\1\s*$", text, re.S | re.M)


def test_error_code_121_is_answered_from_the_protocol_error_table(docs):
    question = "what does kafka error code 121 mean?"
    first = docs.search(question).passages[0]
    assert first.source_path == PROTOCOL_ERRORS, f"first passage {first.source_path}:\n{_passages(docs, question)}"
    answer = docs.ask(question)
    assert not answer.abstained, shown(answer)
    assert "INVALID_RECORD_STATE" in answer.text, shown(answer)
    assert answer.citations[0].passage.source_path == PROTOCOL_ERRORS, shown(answer)
    # The table's header row is chunks earlier: the row still names what its code and flag are.
    assert "`INVALID_RECORD_STATE` (Code: 121 · Retriable: False)" in answer.text, shown(answer)


def test_a_producer_error_pasted_with_its_command_finds_the_error_not_the_tool(docs):
    passages = docs.search(PRODUCER_PASTE).passages
    first = passages[0]
    listing = _passages(docs, PRODUCER_PASTE)
    assert first.source_path != "upgrade.html", f"the first passage is an upgrade note:\n{listing}"
    about_error = "UNKNOWN_TOPIC_OR_PARTITION" in first.text or "does not host this topic-partition" in first.text
    assert about_error, f"the first passage is not about the topic/partition error:\n{listing}"
    answer = docs.ask(PRODUCER_PASTE)
    assert not answer.abstained, shown(answer)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in answer.text or "topic-partition" in answer.text, shown(answer)


def test_an_error_on_the_same_line_as_the_command_that_raised_it_leads_the_answer(docs):
    """The user's line starts with the command and goes on to the exception it printed: the exception is what
    they ask about (it was read as part of the command line, and the topic-creation section led)."""
    answer = docs.ask(
        "kafka-topics.sh --create fails with InvalidReplicationFactorException: Replication factor: 3 larger "
        "than available brokers: 1."
    )
    assert answer.text.startswith("`INVALID_REPLICATION_FACTOR` (Code: 38"), shown(answer)


def test_an_error_pasted_after_the_users_label_on_one_line_is_answered_from_the_docs(docs):
    """ "SSL handshake failed: javax.net.ssl.SSLHandshakeException: …": the JDK's exception class is in no page,
    and read as the user's own sentence it was a class they ask about that the docs never name, so the
    assistant declined; the message is what host name verification is about."""
    answer = docs.ask(
        "SSL handshake failed: javax.net.ssl.SSLHandshakeException: No subject alternative names matching IP "
        "address 10.0.0.5 found"
    )
    assert not answer.abstained, shown(answer)
    assert "ssl.endpoint.identification.algorithm" in answer.text, shown(answer)


def test_a_question_the_docs_do_not_answer_alone_is_answered_with_the_conversations_subject(docs):
    """ "which JMX bean?" after a question about consumer lag points back with no pronoun: searched alone it
    was declined as not covered; searched with the conversation's subject it is answered."""
    asked = "how to monitor consumer lag"
    history = [{"role": "user", "content": asked}, {"role": "assistant", "content": docs.ask(asked).text}]
    answer = docs.ask("which JMX bean?", history)
    assert not answer.abstained, shown(answer)
    assert answer.query.startswith("which JMX bean?") and "consumer" in answer.query, shown(answer)


def test_each_ask_of_a_two_part_question_is_answered_from_the_passage_the_ask_ranks_first(docs):
    """ "…by default, and how do I raise it for one topic?": the page on per-topic overrides answers the second ask
    and leads; for the first, its "the server default is used" outscored the `message.max.bytes` entry, which the
    ask alone ranks first, and the default was missing."""
    answer = docs.ask("what's the max size of a single message by default, and how do I raise it for one topic?")
    assert "max.message.bytes=" in answer.text, shown(answer)
    assert "`message.max.bytes`" in answer.text and "Default: 1048588" in answer.text, shown(answer)


def test_another_pages_entry_of_the_same_setting_is_not_quoted_again(docs):
    """The broker reference and the tiered-storage reference both hold `remote.log.storage.system.enable`, alike
    but for an update mode: the answer quotes the entry once, and what only the second says under its name."""
    answer = docs.ask("how to enable tiered storage")
    assert not answer.abstained, shown(answer)
    entry = "`remote.log.storage.system.enable`: Whether to enable tiered storage functionality"
    assert answer.text.count(entry) == 1, shown(answer)


def test_plain_words_that_run_together_into_a_method_name_are_no_name_the_question_asks_about(docs):
    """ "the number of partitions" runs together into Streams' `Repartitioned.numberOfPartitions(…)`, a method in
    code: a question in plain English is not about it (its join section ranked on that false name). Words that
    run together into a metric's name still are (`test_a_metric_asked_about_in_words_is_answered_from_its_row`)."""
    inspection = docs.inspect("how do I increase the number of partitions", k=10)
    focus = inspection.rank_features.index("focus_identifier")
    named = [p.heading for p, features in inspection.candidates if features[focus] > 0]
    assert not named, named


def test_a_chunk_opening_with_the_block_the_chunk_before_ends_with_carries_its_lead_in(docs):
    """Chunks overlap: the section's earlier chunk ends with "When you execute this script you will see the
    throttle engage:" and the tool's output, and the next chunk opens with the same output, bare. Quoted from
    the later chunk, the output led an answer with nothing to say what it is."""
    question = "kafka-reassign-partitions.sh --execute --throttle 50000000 prints what when the throttle engages?"
    pool = docs._retriever.retrieve(parse_query(question), 40, "hybrid", FirstStage.from_settings(docs.settings))
    output = "```\nThe inter-broker throttle limit was set to 50000000 B/s"
    opening = [c for c in pool.candidates if c.passage.text.startswith(output)]
    assert opening, [c.passage.text[:60] for c in pool.candidates]
    (read,) = docs._retriever.with_earlier_context(tuple(opening[:1]))
    assert read.block_lead_in == "When you execute this script you will see the throttle engage:"


def test_a_code_block_two_chunks_hold_is_quoted_once_under_its_lead_in(docs):
    """The block ends one chunk of the section under its lead-in and opens the next one alone: the bare copy led
    the answer and the block showed again under its lead-in."""
    answer = docs.ask("what does allow.everyone.if.no.acl.found mean")
    assert answer.text.count("allow.everyone.if.no.acl.found=true") == 1, shown(answer)
    assert not answer.text.startswith("```"), shown(answer)


@pytest.mark.parametrize(
    ("question", "command"),
    [
        # the block is cut for size: its first piece (the command) checks, the rest is its output
        (
            "how do I see the lag of a consumer group from the command line?",
            "kafka-consumer-groups.sh --bootstrap-server localhost:9092 --describe --group my-group",
        ),
        # the command is in the third passage, under two about unclean leader election
        ("how do I run a preferred leader election?", "--election-type preferred"),
    ],
)
def test_a_how_to_answer_shows_the_command_that_does_it(docs, question, command):
    """The lag question showed two rows of the tool's output and not the command that prints them; the
    election question showed sentences about elections and not the command that runs one."""
    answer = docs.ask(question)
    assert command in answer.text, shown(answer)


@pytest.mark.parametrize(
    ("question", "row"),
    [
        ('my consumer keeps getting "The coordinator is not aware of this member" and rebalances', "UNKNOWN_MEMBER_ID"),
        (
            "WARN [Consumer clientId=c1, groupId=g1] Offset commit failed on partition orders-0 at offset 120: "
            "The coordinator is loading and hence can't process requests.",
            "COORDINATOR_LOAD_IN_PROGRESS",
        ),
        ("Confluent.Kafka.ProduceException: Broker: Unknown Producer Id", "UNKNOWN_PRODUCER_ID"),
        # an error named in the user's words, in a line with no level, logger or exception to mark it
        ("Received unknown topic or partition error in fetch for partition orders-0", "UNKNOWN_TOPIC_OR_PARTITION"),
        # the client's log message pasted bare, with no level, logger or exception to mark it as one
        (
            "Offset commit failed on partition events-0 at offset 42: The coordinator is not aware of this member.",
            "UNKNOWN_MEMBER_ID",
        ),
        # a client's own wording of the broker's error, and an error's name quoted in words
        (
            'sarama consumer keeps logging "kafka server: The requested offset is outside the range of offsets '
            'maintained by the server for the given topic/partition". What does it mean?',
            "OFFSET_OUT_OF_RANGE",
        ),
        ('confluent-kafka-go gives "Broker: Leader not available" after creating the topic', "LEADER_NOT_AVAILABLE"),
        # the exception's error, not the request the log line's context names (`api=CREATE_TOPICS`)
        (
            "ERROR [KafkaApi-1] Error when handling request: clientId=adminclient-1, correlationId=5, "
            "api=CREATE_TOPICS org.apache.kafka.common.errors.PolicyViolationException: Topic replication factor "
            "must be at least 2",
            "POLICY_VIOLATION",
        ),
        # a broker's message with its values filled in, quoted in the user's sentence
        (
            'creating a topic fails with "Replication factor: 3 larger than available brokers: 1"',
            "INVALID_REPLICATION_FACTOR",
        ),
        # an error object as a librdkafka-based client prints it, below a sentence naming another setting
        (
            "our topic has min.insync.replicas=2, so I set acks=2 on the producer to match. now sends fail with\n"
            'KafkaError{code=INVALID_REQUIRED_ACKS,val=21,str="Broker: Invalid required acks value"}',
            "INVALID_REQUIRED_ACKS",
        ),
    ],
)
def test_a_quoted_or_pasted_error_message_leads_with_the_row_that_says_it(docs, question, row):
    answer = docs.ask(question)
    assert not answer.abstained, shown(answer)
    assert f"`{row}` (Code: " in _opening(answer), shown(answer)


def test_a_message_pasted_alone_is_answered_by_its_row_not_by_the_rows_around_it(docs):
    """The client's message with nothing else ("The coordinator is not available.") names its row; read as a
    plain question, it was answered by that row and four rows beside it in the error table."""
    answer = docs.ask("The coordinator is not available.")
    assert not answer.abstained, shown(answer)
    assert "`COORDINATOR_NOT_AVAILABLE` (Code: " in _opening(answer), shown(answer)
    for other in ("BROKER_NOT_AVAILABLE", "REPLICA_NOT_AVAILABLE", "NOT_COORDINATOR"):
        assert f"`{other}`" not in answer.text, shown(answer)


def test_words_of_an_error_line_that_spell_a_request_name_do_not_lead_with_that_request(docs):
    """The words "Failed to update metadata" spell UPDATE_METADATA, which the docs carry as a request (the
    ACL table's row), not as an error: the ACL row must not lead as if it were the pasted error's."""
    answer = docs.ask("KafkaTimeoutError: Failed to update metadata after 60.0 secs.")
    lead = next(block for block in answer.text.split("\n\n") if not block.startswith("**"))
    assert "UPDATE_METADATA" not in lead, shown(answer)


def test_a_container_variable_is_answered_from_the_setting_it_sets(docs):
    answer = docs.ask(
        "I set KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 in docker-compose but clients outside "
        "docker can't connect"
    )
    assert not answer.abstained, shown(answer)
    assert "`advertised.listeners`" in _opening(answer), shown(answer)


def _opening(answer: Answer) -> str:
    """The first lines of an answer outside code blocks: where what leads it stands (after a part heading)."""
    return "\n".join(_outside_fences(answer.text)[:3])


def test_sasl_mechanisms_are_listed_with_their_lead_in(docs):
    answer = docs.ask("Which SASL mechanisms does Kafka support?")
    assert not answer.abstained, shown(answer)
    for mechanism in ("GSSAPI", "PLAIN", "SCRAM"):
        assert mechanism in answer.text, f"{mechanism} missing\n{shown(answer)}"
    # the list stays under the sentence that introduces it: a cited lead-in line, then "- " items
    assert re.search(r"^[^\n-][^\n]*\[\d+\]\n- ", answer.text, re.M), f"list without its lead-in\n{shown(answer)}"


def test_items_of_a_list_begun_in_an_earlier_chunk_are_shown_under_its_lead_in(docs):
    # The REST API's endpoint list spans several chunks; the later ones began with bare items.
    question = "how do I see the configuration of all tasks of a connector via REST?"
    answer = docs.ask(question)
    assert not answer.abstained, shown(answer)
    assert "tasks-config" in answer.text, shown(answer)
    lead_in = "The following are the currently supported REST API endpoints: [1]\n- "
    assert answer.text.startswith(lead_in), shown(answer)
    # The items of both chunks under the lead-in once, as the page lists them: the section is one source.
    assert answer.text.count("The following are the currently supported REST API endpoints") == 1, shown(answer)
    assert answer.text.index("/tasks` -") < answer.text.index("/tasks-config` -"), shown(answer)
    for citation in answer.citations:  # the lead-in is cited to the section that holds it
        assert all(quote in citation.passage.text for quote in citation.quotes), shown(answer)


def test_a_code_block_begun_in_a_later_chunk_is_shown_under_the_lead_in_ending_the_one_before(docs):
    # ops.html's multi-tenancy example: "In the following example, user Alice … is granted write permissions to
    # …" ends one chunk, the kafka-acls.sh command it introduces begins the next.
    answer = docs.ask("how do I grant user Alice write access to all topics starting with acme.infosec.?")
    assert not answer.abstained, shown(answer)
    lead_in = re.search(r"^In the following example, user Alice[^\n]*\[(\d+)\]\n```", answer.text, re.M)
    assert lead_in, f"the command without its lead-in\n{shown(answer)}"
    assert answer.text.count("In the following example, user Alice") == 1, shown(answer)  # not again on its own
    # Both chunks are of one section, cited as one source whose text holds the lead-in and the command after it.
    section = answer.citations[int(lead_in.group(1)) - 1]
    assert any("In the following example, user Alice" in quote for quote in section.quotes), shown(answer)
    text = section.passage.text
    assert text.index("In the following example, user Alice") < text.index("--resource-pattern-type prefixed"), shown(
        answer
    )
    for citation in answer.citations:  # every quote verbatim from the section it is cited to
        assert all(quote in citation.passage.text for quote in citation.quotes), shown(answer)


@pytest.mark.parametrize(
    ("question", "error"),
    [
        ("my producer gets NotEnoughReplicasException", "NOT_ENOUGH_REPLICAS"),
        ("what causes OutOfOrderSequenceException?", "OUT_OF_ORDER_SEQUENCE_NUMBER"),
        ("what does InvalidReplicationFactorException mean when creating a topic?", "INVALID_REPLICATION_FACTOR"),
        # named one word apart from its error
        ("our producer gets RecordBatchTooLargeException for one topic, what does it mean?", "RECORD_LIST_TOO_LARGE"),
    ],
)
def test_an_exception_named_in_the_users_words_is_answered_by_its_error(docs, question, error):
    """The docs never spell these exception classes, but their error rows are the answer: a question that names
    one in its own words, no stack trace pasted, was declined as asking about something the corpus lacks."""
    answer = docs.ask(question)
    assert not answer.abstained, shown(answer)
    assert f"`{error}` (Code:" in answer.text, shown(answer)


def test_a_key_spelt_in_capitals_is_answered_by_its_entry(docs):
    answer = docs.ask("MAX_POLL_INTERVAL_MS default?")  # declined as a name the docs lack, before
    assert not answer.abstained, shown(answer)
    assert "`max.poll.interval.ms`" in answer.text and "300000" in answer.text, shown(answer)


@pytest.mark.parametrize(
    "question",
    [
        "why do my consumers keep getting NotLeaderOrFollowerException after a broker restart",  # CamelCase in docs
        "producer fails with InvalidProducerEpochException, what does it mean",  # the docs name its error only
        "the UnderReplicatedPartitions metric is above zero on one broker, what should I check",  # a metric
        "consumer logs org.apache.kafka.common.errors.UnknownMemberIdException: The coordinator is not aware of "
        "this member",  # a class at the end of its package path
    ],
)
def test_a_question_typed_in_lower_case_is_answered_as_with_its_names_capitals(docs, question):
    """Typed all in lower case, the names lose the capitals the parse reads them by: the lower-case questions
    were declined or led by another page (`casing.corpus_cased`)."""
    written, lower = docs.ask(question), docs.ask(question.lower())
    assert not written.abstained, shown(written)
    assert not lower.abstained, shown(lower)
    assert lower.citations[0].passage == written.citations[0].passage, f"{shown(written)}\n\n{shown(lower)}"
    assert lower.text.split("\n")[0] == written.text.split("\n")[0], f"{shown(written)}\n\n{shown(lower)}"


def test_a_misspelt_key_is_answered_by_its_entry(docs):
    answer = docs.ask("max.pol.interval.ms default")  # declined as a key the docs lack, before
    assert not answer.abstained, shown(answer)
    assert "`max.poll.interval.ms`" in _opening(answer) and "300000" in answer.text, shown(answer)


def test_the_default_of_acks_is_all(docs):
    answer = docs.ask("What is the default value of acks for the producer?")
    assert not answer.abstained, shown(answer)
    assert "acks" in answer.text, shown(answer)
    assert re.search(r"\bdefault\b[^.\n]{0,40}\ball\b", answer.text, re.I), f"no 'default ... all'\n{shown(answer)}"
    assert answer.citations[0].passage.source_path == "generated/producer_config.html", shown(answer)
    # Said of its entry with what the setting is, not with the note that ends its description (the entry
    # was cut in two chunks, the second opening at "Note that enabling idempotence requires …").
    assert "`acks`: The number of acknowledgments" in answer.text, shown(answer)


def test_an_answer_quotes_the_best_of_the_next_passage_too(docs):
    """The design page's sentences on acks=all rank first; the entry of the setting that makes "all" mean
    enough replicas (a broker or a topic setting) is a lower passage's best unit, and tells the user more than
    the first's fifth sentence."""
    answer = docs.ask("how do I make sure a message is written to all replicas before the producer gets an ack?")
    assert answer.citations[0].passage.source_path == "design.html", shown(answer)
    entries = [c for c in answer.citations if c.passage.heading.endswith("min.insync.replicas")]
    assert {c.passage.source_path for c in entries} <= CONFIG_PAGES, shown(answer)
    assert entries, shown(answer)
    assert "`min.insync.replicas`: When a producer sets acks" in answer.text, shown(answer)


RELATED_MENTION = re.compile(r"`([^`]+)`(?: \((default (.+?)|no default)\))? \[(\d+)\]")


@pytest.mark.parametrize(
    ("question", "setting"),
    [
        # Answers that quote what they need and close by naming a setting they do not quote. (The forty-second
        # session's adapter answers the earlier examples, "how long does the group coordinator keep committed
        # offsets of an empty group?", with the setting's own entry, which leaves nothing for this line; since
        # the fifty-second session's new-passage weight, so is "how do I make sure a message is written to all
        # replicas …?" with `min.insync.replicas`'s: `test_an_answer_quotes_the_best_of_the_next_passage_too`;
        # since the sixty-fifth session, when two settings' entries stand apart by their keys, "how often does
        # MirrorMaker 2 copy consumer group offsets …?" quotes `emit.checkpoints.enabled`'s entry whole.)
        ("what controls how big a producer batch can get?", "max.request.size"),
        ("what decides when a follower drops out of the ISR?", "replica.lag.time.max.ms"),
    ],
)  # fmt: skip
def test_an_answer_closes_with_the_settings_it_does_not_name_cited_to_their_entries(docs, question, setting):
    answer = docs.ask(question)
    assert "\nRelated settings: " in answer.text and len(answer.text) <= 860, shown(answer)
    body, line = answer.text.split("\nRelated settings: ")
    mentions = RELATED_MENTION.findall(line)
    assert setting in [key for key, *_ in mentions], shown(answer)
    cited = {c.marker: c.passage for c in answer.citations}
    for key, _, default, marker in mentions:
        entry = cited[int(marker)]
        assert entry.section_path[-1] == key, shown(answer)  # cited to the setting's own entry
        assert not default or f"Default: | {default}" in entry.text, shown(answer)  # its default, as the entry says
        assert f"`{key}`:" not in body, shown(answer)  # not a setting whose entry the answer shows


def test_the_entry_that_answers_is_shown_after_another_settings_entry_that_leads(docs):
    """`sync.group.offsets.enabled` ranks first; the interval's entry, next, says how often. It was left out as
    bringing nothing new: its words were counted with the labels every entry repeats (Type, Default, ...)."""
    answer = docs.ask("mm2 how often are consumer group offsets synced to the target")
    entry = "`sync.group.offsets.interval.seconds`: Frequency of consumer group offset sync."
    assert entry in answer.text, shown(answer)
    assert "Default: 60" in answer.text, shown(answer)


def test_a_question_that_asks_two_things_is_answered_on_both(docs):
    question = (
        "Our checkout service's producer throws BufferExhaustedException during flash sales. Which setting bounds "
        "the producer's buffer memory, and is there a producer metric for how long appends wait for buffer space?"
    )
    answer = docs.ask(question)
    assert "`buffer.memory`" in answer.text, shown(answer)
    assert "bufferpool-wait" in answer.text, shown(answer)  # the second ask's row, not another metric's


@pytest.mark.parametrize(
    ("question", "entries"),
    [
        ("what's the difference between retention.ms and segment.ms", ("`retention.ms`: ", "`segment.ms`: ")),
        (
            "NOT_ENOUGH_REPLICAS vs NOT_ENOUGH_REPLICAS_AFTER_APPEND, what's the difference?",
            ("`NOT_ENOUGH_REPLICAS` (Code: 19", "`NOT_ENOUGH_REPLICAS_AFTER_APPEND` (Code: 20"),
        ),
        (
            "what do error codes 6 and 15 mean?",
            ("`NOT_LEADER_OR_FOLLOWER` (Code: 6", "`COORDINATOR_NOT_AVAILABLE` (Code: 15"),
        ),
    ],
)
def test_each_setting_or_error_the_question_asks_about_is_shown_with_its_entry(docs, question, entries):
    answer = docs.ask(question)
    assert not answer.abstained, shown(answer)
    for entry in entries:
        assert entry in answer.text, f"no {entry!r}\n{shown(answer)}"


def test_reducing_partitions_is_not_supported(docs):
    answer = docs.ask("Can I shrink a topic from 12 partitions down to 6?")
    assert not answer.abstained, shown(answer)
    wanted = "does not currently support reducing the number of partitions"
    assert wanted in " ".join(answer.text.split()), shown(answer)


@pytest.mark.xfail(
    strict=True,
    reason="known miss: share-group settings and protocol rows cover the question's words, so the learned "
    "abstention sees a covered question although no passage names a tool for it",
)
def test_share_group_cli_is_not_documented_so_it_abstains(docs):
    """The 3.9 docs never mention kafka-share-groups.sh (grep of the extracted text): the honest answer is
    'not covered', not the consumer-groups tool."""
    answer = docs.ask("which CLI command shows the state of a share group?")
    assert answer.abstained, shown(answer)


@pytest.mark.parametrize(
    ("question", "subject"),
    [
        ("Brokers restart and the ISR for topic invoices-v2 shrinks to 1. Why?", "ISR"),
        ("Consumer lag on group fraud-scorer is growing. How can I see the lag per partition from the CLI?", "lag"),
    ],
    ids=["topic", "group"],
)
def test_the_users_own_topic_or_group_name_does_not_make_a_covered_question_unknown(docs, question, subject):
    """The docs' commands take `--topic` and `--group`: the word after "topic" or "group" is the user's own
    name, not a subject the knowledge base lacks (both questions were declined before)."""
    answer = docs.ask(question)
    assert not answer.abstained, shown(answer)
    assert subject in answer.text, shown(answer)


@pytest.mark.parametrize(
    ("question", "metric"),
    [
        (
            "Prometheus on our AWS MSK cluster shows UnderMinIsrPartitionCount at 3 for broker 2. What does it count "
            "and what should it normally be?",
            "UnderMinIsrPartitionCount",
        ),
        (
            "Datadog says OfflinePartitionsCount is 1 since this morning on our Kubernetes cluster. What does that "
            "metric mean?",
            "OfflinePartitionsCount",
        ),
    ],
    ids=["under-min-isr", "offline-partitions"],
)
def test_a_metric_named_beside_the_users_monitoring_stack_is_answered_from_its_row(docs, question, metric):
    """The metric's name is what the question is about, whatever tools the user names around it: its row
    leads (both questions were declined before: their stacks' names are unknown to the docs)."""
    answer = docs.ask(question)
    assert not answer.abstained, shown(answer)
    assert metric in answer.text.split("\n\n")[0], shown(answer)  # the metric's row leads


@pytest.mark.parametrize(
    ("question", "metric", "sibling"),
    [
        (
            "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions is 5 on broker 2, what does it mean",
            "name=UnderReplicatedPartitions",
            "name=LeaderCount",
        ),
        (
            "what is kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce",
            "name=TotalTimeMs",
            "name=RequestQueueTimeMs",
        ),
        (
            "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec dropped to zero",
            "name=MessagesInPerSec",
            "name=NoKeyCompactedTopicRecordsPerSec",
        ),
    ],
    ids=["under-replicated", "total-time", "messages-in"],
)
def test_a_pasted_mbean_is_answered_by_its_own_row_not_by_the_rows_of_its_type(docs, question, metric, sibling):
    """Every row of the pasted MBean's type names `ReplicaManager` (or `RequestMetrics`, …), and the rows read
    alike: the one that also names the metric leads, and the others of its table, which the paste names only by
    part, are left out (`LeaderCount` led the first answer)."""
    answer = docs.ask(question)
    assert not answer.abstained, shown(answer)
    assert metric in answer.text.split("\n\n")[0], shown(answer)
    assert sibling not in answer.text, shown(answer)


@pytest.mark.parametrize(
    ("question", "metric"),
    [
        ("which metric shows under replicated partitions?", "UnderReplicatedPartitions"),
        ("what is the request queue time ms metric?", "RequestQueueTimeMs"),
        ("what does the under min isr partition count metric mean?", "UnderMinIsrPartitionCount"),
    ],
    ids=["under-replicated", "request-queue-time", "under-min-isr"],
)
def test_a_metric_asked_about_in_words_is_answered_from_its_row(docs, question, metric):
    """Users write a metric's name as words; the docs write it as one CamelCase name in the MBean cell of
    its row. "Under replicated partitions" was answered from MirrorMaker's monitoring section, "request queue
    time ms" from the controller's event queue."""
    answer = docs.ask(question)
    assert metric in answer.text.split("\n\n")[0], shown(answer)  # the metric's row leads


def test_the_rows_a_question_asks_for_are_shown_though_they_share_most_words_with_the_first(docs):
    """The controller's metrics rows all say "The number of … as observed by this Controller" under the same
    MBean prefix: counted as their own words, the Global Topic Count row was no news after the Offline Partition
    Count row, and rows about errors and replica imbalance were shown instead."""
    answer = docs.ask("which controller metrics show how many topics and partitions the cluster has?")
    assert "name=GlobalTopicCount" in answer.text, shown(answer)


@pytest.mark.parametrize(
    ("question", "metric"),
    [
        ("IsrShrinksPerSec is non zero on one broker, should I worry?", "name=IsrShrinksPerSec"),
        # typed without a "?": embedded with one since the seventy-ninth session; before, the throttled
        # replication prose ranked above the metric's row
        ("what's BytesInPerSec", "name=BytesInPerSec"),
    ],
    ids=["isr-shrinks", "bytes-in"],
)
def test_a_metric_named_alone_ranks_the_row_whose_mbean_cell_names_it_first(docs, question, metric):
    """The row leads with a description ("ISR shrink rate") and names the metric only in its MBean cell, which
    makes it the metric's entry; both ranked second, under prose that mentions the metric or replicas."""
    assert metric in docs.search(question, k=5).passages[0].text, _passages(docs, question)


def test_a_fact_about_a_metric_its_row_gives_is_not_padded_with_passages_that_do_not_name_it(docs):
    """The metric's row names it only in its MBean cell; as the subject of the lead, that name keeps out other
    passages' sentences that do not carry it ("security is optional", message format notes followed the row)."""
    answer = docs.ask("IsrShrinksPerSec is non zero on one broker")
    assert "name=IsrShrinksPerSec" in answer.text.split("\n\n")[0], shown(answer)
    assert {c.marker for c in answer.citations} == {1}, shown(answer)


def test_a_log_line_pasted_alone_and_answered_by_its_errors_row_is_not_padded_with_passages_not_naming_it(docs):
    """The client's warning names its error and nothing else of the user's: the words around the error
    ("Error while fetching metadata") brought an upgrade note on removed producer settings after the row."""
    answer = docs.ask(
        "WARN [Producer clientId=producer-1] Error while fetching metadata with correlation id 7 : "
        "{orders=LEADER_NOT_AVAILABLE}"
    )
    assert _opening(answer).startswith("`LEADER_NOT_AVAILABLE` (Code: 5"), shown(answer)
    cited = [c.passage for c in answer.citations]
    assert all("leader_not_available" in p.identifiers for p in cited), shown(answer)


@pytest.mark.parametrize(
    ("paste", "opening", "names"),
    [
        # The client's exception class is the protocol error it stands for: the row answers it, and the design
        # chapter's sentences on committed messages that followed it ("For now let's assume a perfect, lossless
        # broker …") name neither.
        (
            "org.apache.kafka.common.errors.ProducerFencedException: There is a newer producer with the same "
            "transactionalId which fences the current one.",
            "`PRODUCER_FENCED` (Code: 90",
            {"producer_fenced", "producerfencedexception"},
        ),
        # A class named otherwise than its error (`OUT_OF_ORDER_SEQUENCE_NUMBER`, which no spelling of the class
        # gives) is the row its pasted message describes; the Streams security guide's sentences on misconfigured
        # applications ("If you incorrectly configure a security setting …") followed the row under a cause and a
        # check heading.
        (
            "org.apache.kafka.common.errors.OutOfOrderSequenceException: The broker received an out of order "
            "sequence number",
            "`OUT_OF_ORDER_SEQUENCE_NUMBER` (Code: 45",
            {"out_of_order_sequence_number", "outofordersequenceexception"},
        ),
    ],
)
def test_an_exception_pasted_alone_is_its_errors_row_and_not_padded_with_passages_not_naming_it(
    docs, paste, opening, names
):
    answer = docs.ask(paste)
    assert _opening(answer).startswith(opening), shown(answer)
    for passage in (c.passage for c in answer.citations):
        assert names & set(passage.identifiers), shown(answer)


def test_a_command_with_no_lead_in_of_its_own_is_shown_after_the_sentence_that_says_what_it_does(docs):
    """The tiered-storage quick start's topic-level command sets `remote.storage.enable=false`; the sentence before
    it says so ("If you want to completely disable tiered storage …"), but ends with no colon, so the block has
    no lead-in. Shown alone after "You can also re-enable tiered storage feature at the topic level.", it read as
    the way to enable it."""
    answer = docs.ask("how do I enable tiered storage on a topic")
    assert not answer.abstained, shown(answer)
    text, command = answer.text, "--add-config 'remote.storage.enable=false"
    if command in text:
        before_command = text[: text.index(command)].rsplit("```", 1)[0]
        assert "completely disable tiered storage" in before_command.rstrip().rsplit("\n\n", 1)[-1], shown(answer)


def test_a_metric_written_out_under_another_owner_is_not_the_entry_of_the_docs_metric_of_its_name(docs):
    """`MaxLag` is the replica fetcher's metric in the docs' table, and also one of Confluent's cluster links:
    a question writing the cluster link's MBean out is not about the docs' row."""
    index = RANK_FEATURES.index("defines_identifier")

    def defining_rows(question: str) -> list[str]:
        inspection = docs.inspect(question, k=20)
        return [p.heading for p, features in inspection.candidates if features[index] and "name=MaxLag" in p.text]

    assert defining_rows("kafka.server:type=ReplicaFetcherManager,name=MaxLag is at 50k on broker 3, is that bad?")
    assert not defining_rows(
        "kafka.server.link:type=ClusterLinkFetcherManager,name=MaxLag is at 50k on our DR cluster, is that bad?"
    )


def test_a_paste_no_error_row_defines_is_not_answered_with_other_rows_of_the_error_table(docs):
    """A Streams deserialization failure is no protocol error: the error table's rows (RECORD_LIST_TOO_LARGE,
    REQUEST_TIMED_OUT, …) only read like it, and six of them made the whole answer."""
    answer = docs.ask(
        "org.apache.kafka.streams.errors.StreamsException: Exception caught in process. taskId=0_1, "
        "processor=KSTREAM-SOURCE-0000000000, topic=orders, partition=1, offset=12, "
        "stacktrace=org.apache.kafka.common.errors.SerializationException: Size of data received by "
        "LongDeserializer is not 8"
    )
    assert PROTOCOL_ERRORS not in {c.passage.source_path for c in answer.citations}, shown(answer)


@pytest.mark.parametrize(
    ("question", "definition"),
    [
        ("what is the ISR?", "which is known as the ISR"),
        ("what is a KTable?", "A KTable is an abstraction of a changelog stream"),
        ("what is log compaction?", "Log compaction is a mechanism"),
        ("what is a state store?", "Kafka Streams provides so-called state stores"),
        ("what is mirrormaker?", "MirrorMaker (version 2), a tool to replicate data"),
    ],
    ids=["isr", "ktable", "log-compaction", "state-store", "mirrormaker"],
)
def test_a_question_asking_what_a_thing_is_leads_with_the_sentence_that_says_it(docs, question, definition):
    """ "what is the ISR?" was led by a table of ISR metrics, "what is a KTable?" by a sentence that only
    mentions one; the sentence that says what it is ranked lower, for "what is log compaction?" tenth."""
    answer = docs.ask(question)
    assert definition in answer.text.split("\n\n")[0], shown(answer)


@pytest.mark.parametrize(
    "question",
    [
        # a request to translate: declined whatever it is about (the pasted exception is covered)
        "Translate this error into German: org.apache.kafka.common.errors.TimeoutException: Topic orders not "
        "present in metadata after 60000 ms.",
        # the docs mention schema registries in passing (ops.html multi-tenancy): only "Confluent" is unknown, a
        # word of no vocabulary in the asking sentence (`asked_foreign_terms`)
        "How do I set up compatibility modes in Confluent Schema Registry?",
        # another product's rules for a setting the docs cover: the asking sentence names a product they never do
        "Does Amazon MSK let me change unclean.leader.election.enable in a custom MSK configuration?",
        "Does Redpanda honour min.insync.replicas when acks=all?",
    ],
    ids=["translate", "schema-registry", "managed-service-setting", "other-broker-setting"],
)
def test_out_of_scope_questions_abstain(docs, question):
    answer = docs.ask(question)
    assert answer.abstained, shown(answer)
    assert answer.citations == ()


def test_the_users_framework_named_in_the_asking_sentence_does_not_decline_a_covered_setting(docs):
    """ "in Spring Kafka" names a framework the docs never mention, in the sentence that asks; the setting it
    asks about is covered, and its row answers."""
    answer = docs.ask("How do I set max.poll.interval.ms in Spring Kafka?")
    assert not answer.abstained, shown(answer)
    assert "max.poll.interval.ms" in answer.text.split("\n\n")[0], shown(answer)


@pytest.mark.parametrize(
    ("question", "tool"),
    [
        ("How do I list all consumer groups?", "kafka-consumer-groups.sh"),
        ("How do I create a topic from the command line?", "kafka-topics.sh"),
    ],
    ids=["list-groups", "create-topic"],
)
def test_a_command_in_an_answer_is_a_fenced_block(docs, question, tool):
    answer = docs.ask(question)
    assert not answer.abstained, shown(answer)
    blocks = [code for _, code in _fenced_blocks(answer.text)]
    assert any(tool in code for code in blocks), f"no fenced {tool} block\n{shown(answer)}"
    loose = [line for line in _outside_fences(answer.text) if re.match(r"^\s*\$?\s*bin/kafka-[\w-]+\.sh ", line)]
    assert loose == [], f"command lines outside a fence: {loose}\n{shown(answer)}"


def test_a_tool_option_the_tool_no_longer_knows_is_answered_by_the_note_that_removed_it(docs):
    """The tool's output names the option of the pasted command: the command is what went wrong, and the
    upgrade note on that tool's option answers, not the passages about ZooKeeper the error's words match."""
    answer = docs.ask(
        "upgraded to 3.7 and our script fails:\n```\n$ kafka-topics.sh --zookeeper zk1:2181 --list\n"
        'Exception in thread "main" joptsimple.UnrecognizedOptionException: zookeeper is not a recognized option\n'
        "```\nwhat do I use now?"
    )
    assert "The `--zookeeper` option was removed from the `kafka-topics`" in answer.text, shown(answer)
    assert "--bootstrap-server" in answer.text, shown(answer)


def test_a_config_error_naming_its_setting_is_not_padded_with_other_errors_rows(docs):
    """ "Invalid value -1 for configuration segment.bytes" shares its words with INVALID_CONFIG and
    INVALID_REQUIRED_ACKS, not its subject: the setting's entry answers it, and no protocol error's row."""
    answer = docs.ask(
        "org.apache.kafka.common.config.ConfigException: Invalid value -1 for configuration segment.bytes: "
        "Value must be at least 14"
    )
    assert answer.text.startswith("`segment.bytes`"), shown(answer)
    assert "(Code: " not in answer.text, shown(answer)


@pytest.mark.parametrize(
    ("question", "page"),
    [
        ("what is request.timeout.ms on the KafkaProducer by default?", "3.3 Producer Configs"),
        ("what is the default request.timeout.ms of the AdminClient?", "3.7 Admin Configs"),
        ("how do i turn on gzip compression on a producer", "3.3 Producer Configs"),
    ],
    ids=["camel-case-producer", "camel-case-admin", "producer"],
)
def test_a_setting_on_several_pages_is_answered_from_the_page_the_question_names(docs, question, page):
    """`KafkaProducer` names the producer's page by its words; "kafka" alone tells no page apart (the Streams
    and Connect pages both hold it), so it does not take the lead to the Streams entry and its other default."""
    answer = docs.ask(question)
    assert page in answer.citations[0].passage.section_path, shown(answer)


def test_every_answer_cites_verbatim_quotes(docs):
    for question in ("what does kafka error code 121 mean?", "Which SASL mechanisms does Kafka support?"):
        answer = docs.ask(question)
        for citation in answer.citations:
            for quote in citation.quotes:
                assert quote in citation.passage.text, (quote, shown(answer))


def test_a_usage_listing_cut_over_chunks_is_quoted_as_code_not_as_fragments(kafka_docs_index):
    """The reset tool's usage output spans three chunks. The ones that begin inside it are stored as such,
    so their option lines are one code unit, not sentence fragments ("this option to view these
    topics)."), and the prose after its closing fence is prose, not a code block."""
    table = read_chunk_table(kafka_docs_index)
    rows = [r for r in table.to_pylist() if r["source_path"] == "streams/developer-guide/app-reset-tool.html"]
    inside = [r for r in rows if r["continues_code"]]
    assert inside, "no chunk of the reset tool page begins inside its usage listing"
    firsts = []
    for row in inside:
        units = build_units(row["text"], row["section_path"][-1], row["continues_code"])
        prose = "\n".join(part for u in units if u.kind != "code" for part in u.parts)
        assert not re.search(r"^--[a-z]", prose, re.M), prose  # an option line quoted as a sentence
        firsts.append(units[0].kind)
        assert len(row["unit_vectors"]) == len(units)  # embedded at ingest as the answerer builds them
    assert "code" in firsts  # the chunks cut from the middle of the listing
    assert set(firsts) != {"code"}  # and the one that begins at its closing fence: prose after it


KCAT_PASTE = (
    "```\n$ kcat -b kafka-1:9092 -C -t payments -o beginning -e\n"
    "% Reached end of topic payments [2] at offset 5531: exiting\n```\n"
)
DUMP_LOG_PASTE = (
    "```\n$ bin/kafka-dump-log.sh --files /var/kafka/orders-0/00000000000000000000.log --print-data-log\n"
    "baseOffset: 0 lastOffset: 9 count: 10 baseSequence: 0 lastSequence: 9 producerId: 17 producerEpoch: 0 "
    "partitionLeaderEpoch: 0 isTransactional: false isControl: false position: 0 CreateTime: 1717405521000 "
    "size: 512 magic: 2 compresscodec: none crc: 2338710941 isvalid: true\n```\n"
)


def test_a_tool_the_docs_never_name_asked_about_by_its_pasted_command_is_declined(docs):
    """kcat is no Kafka tool and the docs never name it: asked why it did what its pasted command printed, the
    honest answer is 'not covered', not Kafka's own consumer docs."""
    answer = docs.ask(KCAT_PASTE + "why does kcat exit there instead of waiting for new messages?")
    assert answer.abstained, shown(answer)


def test_a_field_of_a_documented_tools_output_is_answered_from_the_format_it_prints(docs):
    """The dump tool prints the record batch's fields; the one the user asks about (`partitionLeaderEpoch`)
    names the format, and the others it printed (`producerId`) are context, so the protocol error row that
    mentions a producerId does not lead."""
    answer = docs.ask(DUMP_LOG_PASTE + "what does partitionLeaderEpoch mean in this output?")
    assert not answer.abstained, shown(answer)
    assert answer.citations[0].passage.heading.endswith("5.3.1 Record Batch"), shown(answer)
    assert "UNKNOWN_PRODUCER_ID" not in answer.text, shown(answer)


def test_a_field_the_docs_spell_otherwise_does_not_make_a_documented_tools_output_uncovered(docs):
    """The dump tool prints `isControl`; the docs write `isControlBatch`. The field is the tool's, and the docs
    cover the tool: asked about, it is answered, not declined as a name the docs lack."""
    answer = docs.ask(DUMP_LOG_PASTE + "what's the isControl flag on these batches for?")
    assert not answer.abstained, shown(answer)


def test_a_setting_the_answer_names_is_related_from_its_entry_though_no_ranked_passage_is_it(docs):
    """The log cleaner's design section names `log.cleaner.max.compaction.lag.ms`, whose entry ranks below the
    answer's passages: the retriever reads it for the name (`Retriever.named_entries`), and the answer closes with
    its default, cited to it."""
    question = "how does the log cleaner decide when a compacted partition is dirty enough to clean?"
    answer = docs.ask(question)
    ranked = {p.chunk_id for p in docs.search(question, k=5).passages}
    body, _, line = answer.text.partition("\nRelated settings: ")
    mentions = {key: (default, int(marker)) for key, _, default, marker in RELATED_MENTION.findall(line)}
    key = "log.cleaner.max.compaction.lag.ms"
    assert key in mentions and key in body, shown(answer)
    default, marker = mentions[key]
    entry = next(c.passage for c in answer.citations if c.marker == marker)
    assert entry.section_path[-1] == key, shown(answer)
    assert entry.chunk_id not in ranked and f"Default: | {default}" in entry.text, shown(answer)


def test_a_setting_described_in_prose_under_its_own_heading_is_related_with_its_entrys_default(docs):
    """The Streams guide describes `state.dir` under its own heading without its default: that section is not the
    setting's entry, so the answer still closes with the entry's default, cited to the reference page."""
    answer = docs.ask("where does a kafka streams app store local state by default?")
    body, _, line = answer.text.partition("\nRelated settings: ")
    mentions = {key: (default, int(marker)) for key, _, default, marker in RELATED_MENTION.findall(line)}
    assert "`state.dir`" in body and "state.dir" in mentions, shown(answer)
    default, marker = mentions["state.dir"]
    entry = next(c.passage for c in answer.citations if c.marker == marker)
    assert default == "${java.io.tmpdir}" and f"Default: | {default}" in entry.text, shown(answer)
    assert entry.source_path == "generated/streams_config.html", shown(answer)


def _conversation(docs: Assistant, *asked: str) -> list[dict[str, str]]:
    """The turns of `asked`, each answered by the assistant with the turns before it."""
    history: list[dict[str, str]] = []
    for question in asked:
        answer = docs.ask(question, history)
        history += [{"role": "user", "content": question}, {"role": "assistant", "content": answer.text}]
    return history


def test_a_question_that_names_no_subject_of_its_own_is_searched_with_the_conversations(docs):
    """ "which setting should I raise?" points back with no pronoun and has words enough to pass for a question of
    its own: searched alone it was answered with `segment.index.bytes`. Searched with the conversation's subject its
    best passage scores far higher (`followup_lean_margin`), so that search answers it."""
    history = _conversation(docs, "my consumer group keeps rebalancing every few minutes")
    answer = docs.ask("which setting should I raise?", history)
    assert "consumer" in answer.query and "rebalanc" in answer.query, shown(answer)
    assert "segment.index.bytes" not in answer.text and "timeout" in answer.text, shown(answer)


def test_a_question_on_a_new_subject_in_a_conversation_is_searched_alone(docs):
    history = _conversation(docs, "my consumer group keeps rebalancing every few minutes")
    answer = docs.ask("why are quotas needed?", history)
    assert answer.query == "why are quotas needed?", shown(answer)
    assert "quota" in answer.text.lower(), shown(answer)


def test_a_follow_up_that_goes_on_with_a_subject_of_its_own_is_answered_on_that_subject(docs):
    """ "and how do I make each poll return fewer records?" opens as a follow-up but points at nothing: searched
    with the conversation's transactions it led with a Connect transaction example. Searched alone its best
    passage scores far higher, so that search answers it."""
    history = _conversation(docs, "what is transaction.timeout.ms?")
    answer = docs.ask("and how do I make each poll return fewer records?", history)
    assert "transaction" not in answer.query, shown(answer)
    assert answer.text.startswith("`max.poll.records`"), shown(answer)


def test_a_question_under_a_ticket_tag_is_answered_as_without_it(docs):
    """ "[prod]" is the user's tag, not a product the docs lack: the question under it is the same question."""
    answer = docs.ask("[prod] how do I change the retention of just one topic to 3 days?")
    assert not answer.abstained, shown(answer)
    assert "retention.ms" in answer.text, shown(answer)


def test_a_pasted_errors_row_is_shown_without_the_rows_of_other_errors_its_asks_match(docs):
    """ "is that error retriable, and which broker setting …?" matched every row of the error table by its
    header's words: the NONE row (code 0, no description) was quoted, and the ask "is that error retriable" held
    the next row that scored for it (NETWORK_EXCEPTION, code 8)."""
    answer = docs.ask(
        "consumer log during the broker restart:\n```\nWARN [Consumer clientId=app-2, groupId=app] Offset commit "
        "failed on partition events-1 at offset 5512: The request timed out.\n```\nis that error retriable, and "
        "which broker setting controls how long the commit waits?"
    )
    assert "`REQUEST_TIMED_OUT` (Code: 7 · Retriable: True)" in answer.text, shown(answer)
    assert re.findall(r"\(Code: -?\d+", answer.text) == ["(Code: 7"], shown(answer)


def test_a_ticket_tag_is_no_product_but_the_label_under_it_still_is(docs):
    """ "[prod]" counted as an unknown product's name (31 answerable docs tuning questions declined under it);
    "ksqlDB:" under it still labels a product the docs do not cover."""

    def unknown_label(question: str) -> float:
        inspection = docs.inspect(question)
        return dict(zip(inspection.abstention_features, inspection.abstention, strict=True))["unknown_label"]

    assert unknown_label("[prod] how do I create a topic with 6 partitions?") == 0.0
    assert unknown_label("[Strimzi] how do I create a topic with 6 partitions?") == 1.0
    assert unknown_label("[prod] ksqlDB: how do I create a stream from a topic?") == 1.0
    assert docs.ask("[prod] ksqlDB: how do I create a stream from a topic?").abstained


def test_the_output_of_a_command_is_shown_with_the_command_that_printed_it(docs):
    """The quorum tool's example is cut for size: its last piece (`CurrentObservers`) matched best and was shown under
    "the following command displays a summary of the metadata quorum:" without the command."""
    answer = docs.ask("how do I see CurrentVoters and CurrentObservers of the KRaft quorum?")
    assert "bin/kafka-metadata-quorum.sh --bootstrap-server localhost:9092 describe --status" in answer.text, shown(
        answer
    )


def test_a_how_to_that_names_a_security_protocol_is_not_laid_out_as_a_fault(docs):
    """`SASL_SSL` is spelt like an error's name (`NOT_ENOUGH_REPLICAS`), but no error of the docs has that name:
    the question asks how to do something and gets no cause / what to do / how to check headings."""
    answer = docs.ask("how to enable SASL_SSL with SCRAM on brokers")
    assert not answer.abstained and "**" not in answer.text, shown(answer)
    assert "sasl.enabled.mechanisms=SCRAM-SHA-256" in answer.text, shown(answer)


def test_a_sentence_after_a_lead_in_brought_in_for_a_later_one_is_shown_once(docs):
    """The sentence after the lead "How can the client find out …?" is brought in as what a later sentence leans
    on, then again as what the lead introduces: it was shown twice."""
    answer = docs.ask("how do I find which partition leader is on which broker")
    blocks = [re.sub(r"\s*\[\d+\]$", "", b.strip()) for b in re.split(r"\n\s*\n", answer.text) if b.strip()]
    assert "This information is dynamic" in answer.text, shown(answer)
    assert len(blocks) == len(set(blocks)), shown(answer)


def test_a_class_pasted_with_its_package_in_the_question_is_no_foreign_word(docs):
    """`javax.net.ssl.SSLHandshakeException` written inline after the user's words: its package ("javax") counted
    as a word of another product the user asks with, and the question was declined although the passage on host
    name verification ranked first."""
    answer = docs.ask(
        "SSL handshake failed between broker and client, javax.net.ssl.SSLHandshakeException: No subject "
        "alternative names matching IP address found"
    )
    assert not answer.abstained, shown(answer)
    assert any(c.passage.heading.endswith("Host Name Verification") for c in answer.citations), shown(answer)


def test_an_error_the_question_does_not_name_does_not_follow_from_another_passage(docs):
    """A client's connection warning was answered by `bootstrap.servers`, then by the rows of
    UNKNOWN_TOPIC_OR_PARTITION and TRANSACTIONAL_ID_NOT_FOUND from a lower passage: listed under the answer, an
    error reads as the one the user has."""
    answer = docs.ask(
        "Connection to node -1 (localhost/127.0.0.1:9092) could not be established. Broker may not be available."
    )
    assert not answer.abstained, shown(answer)
    assert "(Code:" not in answer.text, shown(answer)


def test_a_class_two_error_names_fit_reads_as_the_one_its_message_names(docs):
    """`RecordTooLargeException` is MESSAGE_TOO_LARGE, a word apart, but TELEMETRY_TOO_LARGE is a word apart too:
    neither was read, and the paste was answered from `replica.fetch.max.bytes`, whose default is the number in
    the message. The message ("The message is …") names the one it is."""
    answer = docs.ask(
        "producer throws RecordTooLargeException: The message is 2097152 bytes when serialized which is larger "
        "than 1048576"
    )
    first = next(b for b in answer.text.split("\n\n") if not b.startswith("**"))
    assert first.startswith("`MESSAGE_TOO_LARGE`"), shown(answer)
    assert "TELEMETRY_TOO_LARGE" not in answer.text, shown(answer)


def test_a_question_that_names_a_thing_and_then_points_to_it_is_answered(docs):
    """ "what is idempotence and do I need it?" was declined with the note for a question that points back to
    nothing: "it" points to what its first clause asks to have defined."""
    answer = docs.ask("what is idempotence and do I need it?")
    assert not answer.abstained, shown(answer)
    assert "`enable.idempotence`" in answer.text, shown(answer)


def test_what_an_acronym_means_in_kafka_is_answered_by_the_sentence_that_defines_it(docs):
    """ "what does ISR mean in kafka?" was no definition ask (only "what does ISR mean?" was), and the answer led
    with a sentence that uses the ISR instead of the one that says what it is."""
    answer = docs.ask("what does ISR mean in kafka?")
    first = next(b for b in answer.text.split("\n\n") if not b.startswith("**"))
    assert "known as the ISR" in first, shown(answer)


def test_a_comparison_of_two_things_is_answered_by_what_each_is(docs):
    """ "what's the difference between a KStream and a KTable?" led with a sentence on transformations; the Streams
    guide says what each is, and the answer shows both, KStream's first."""
    answer = docs.ask("what's the difference between a KStream and a KTable?")
    first = "A KStream is an abstraction of a record stream"
    second = "A KTable is an abstraction of a changelog stream"
    assert answer.text.startswith(first) and second in answer.text, shown(answer)


def test_what_a_partition_is_is_not_answered_by_a_sentence_on_partitioning(docs):
    """ "Semantic partitioning means …" read as saying what a partition is and led "what is a partition?"."""
    answer = docs.ask("what is a partition?")
    assert not answer.text.startswith("Semantic partitioning"), shown(answer)


def test_a_setting_named_by_a_plain_word_of_the_question_does_not_lead_from_a_lower_passage(docs):
    """ "list all consumer groups?" writes "groups" as prose does: the MirrorMaker `groups` entry (third passage)
    led, above the consumer-group tool's `--list` example in the first."""
    answer = docs.ask("list all consumer groups?")
    first = next(b for b in answer.text.split("\n\n") if not b.startswith("**"))
    assert "kafka-consumer-groups.sh --bootstrap-server localhost:9092 --list" in first, shown(answer)
