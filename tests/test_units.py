"""Evidence units: what the extractive answerer may quote, always verbatim from the chunk."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from rag.chunking import chunk_document
from rag.documents import load_document
from rag.units import (
    ELISION,
    MAX_BLOCK_CHARS,
    MAX_UNIT_CHARS,
    MIN_UNIT_CHARS,
    EvidenceUnit,
    before_closing_block,
    build_units,
    continued_block_end,
    defines,
    inside_fence,
    is_bare_row,
    is_log,
    is_runnable,
    is_title,
    lead_in,
    lead_in_ending,
    leading_block_end,
    list_ending,
    points_ahead,
    render_list_items,
    render_setting_mention,
    render_shared_lead,
    render_unit,
    row_cells,
    setting_default,
    starts_in_list,
    starts_with_code,
    stops_mid_sentence,
    table_start,
    unit_texts,
    with_block_lead_in,
    with_table_header,
)

SEEDS = Path(__file__).resolve().parents[1] / "seeds"
KAFKA_DOCS = Path("/work/shared/corpora/kafka-docs")
DOC_PAGES = ("ops.html", "security.html", "generated/producer_config.html", "generated/protocol_errors.html")

SETTINGS = "\n".join(
    [
        "The number of acknowledgments the producer requires. This controls durability.",
        "",
        "Type: | string",
        "Default: | all",
        "Valid Values: | [all, -1, 0, 1]",
        "Importance: | low",
        "",
        "retries",
        "Setting a value greater than zero will cause the client to resend any record whose send fails"
        " with a potentially transient error. Keep it high.",
        "",
        "Type: | int",
        "Default: | 2147483647",
        "Valid Values: | [0,...,2147483647]",
        "Importance: | high",
    ]
)

ERRORS = "\n".join(
    [
        "Error | Code | Retriable | Description",
        "UNKNOWN_SERVER_ERROR | -1 | False | The server experienced an unexpected error when processing the request.",
        "INVALID_RECORD_STATE | 121 | False | The record state is invalid."
        " The acknowledgement of delivery could not be completed.",
        "NONE | 0 | False |",
    ]
)


def _kinds(units: list[EvidenceUnit]) -> list[str]:
    return [u.kind for u in units]


# ------------------------------------------------------------------------------------------ prose


def test_prose_splits_at_sentence_ends_but_not_after_abbreviations():
    text = "Kafka is a log. It is also durable, e.g. it stores data on disk. Brokers replicate partitions!"
    assert [u.text for u in build_units(text)] == [
        "Kafka is a log.",
        "It is also durable, e.g. it stores data on disk.",
        "Brokers replicate partitions!",
    ]
    assert _kinds(build_units(text)) == ["sentence"] * 3


def test_a_short_remark_in_parentheses_ending_a_line_stays_with_its_sentence():
    text = "- A restart triggers another rebalance. (reported to fail 65% of the time)\n- Upgrade the client."
    assert [u.text for u in build_units(text)] == [
        "- A restart triggers another rebalance. (reported to fail 65% of the time)",
        "- Upgrade the client.",
    ]
    # A remark that goes on, or a sentence of its own in parentheses, is split as before.
    assert len(build_units("Set acks to all. (See the producer configs.) Then retry the send.")) == 3


def test_short_fragments_are_dropped_and_long_sentences_capped():
    long_sentence = "word " * 300
    units = build_units(f"Ok.\n\nYes!\n\n{long_sentence}")
    assert [u.text for u in units] == [long_sentence.strip()[:MAX_UNIT_CHARS]]
    assert all(len(u.text) >= MIN_UNIT_CHARS for u in units)


def test_empty_text_has_no_units():
    assert build_units("") == []
    assert build_units("   \n\n  ") == []


def test_positions_count_the_units_in_text_order():
    units = build_units(f"First sentence of the chunk.\n\n{ERRORS}\n\nLast sentence of the chunk.")
    assert [u.position for u in units] == list(range(len(units)))
    assert units[0].text == "First sentence of the chunk." and units[-1].text == "Last sentence of the chunk."


# ------------------------------------------------------------------------------------------ lists


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("Using GraalVM Based Native Apache Kafka Docker Image", True),
        ("Invoke the application reset tool from the command line", True),
        ("The native image is experimental.", False),
        ("- Reset output topics of an application", False),  # a list item states something
        ("Kafka supports the following SASL mechanisms:", False),
    ],
)
def test_a_title_line_is_told_apart_from_a_statement(text, title):
    (unit,) = build_units(text)
    assert is_title(unit) is title


def test_a_lead_in_and_its_list_are_one_unit():
    text = (
        "Brokers authenticate clients. Kafka supports the following SASL mechanisms:\n\n"
        "- GSSAPI (Kerberos)\n- PLAIN\n- SCRAM-SHA-256\n- OAUTHBEARER\n\nEach needs its own JAAS section."
    )
    units = build_units(text)
    assert _kinds(units) == ["sentence", "list", "sentence"]
    assert units[1].parts == (
        "Kafka supports the following SASL mechanisms:",
        "- GSSAPI (Kerberos)\n- PLAIN\n- SCRAM-SHA-256\n- OAUTHBEARER",
    )
    assert not any(u.text == "- PLAIN" or u.text.startswith("- GSSAPI") for u in units)


def test_a_long_list_is_cut_at_item_boundaries_and_every_piece_keeps_the_lead_in():
    items = [f"- Item number {n} explains one more cause of the failure in some detail here." for n in range(20)]
    text = "Common causes:\n" + "\n".join(items)
    units = build_units(text)
    assert set(_kinds(units)) == {"list"}
    assert all(u.parts[0] == "Common causes:" for u in units)
    assert all(len(u.text) <= MAX_BLOCK_CHARS for u in units)
    pieces = [u for u in units if "\n" in u.parts[1]]
    assert len(pieces) > 1
    quoted = [line for u in pieces for line in u.parts[1].split("\n")]
    assert quoted == items  # whole items, each once, in order
    # Each item is a unit of its own too, with the lead-in: a question about one of them finds it alone.
    assert sorted(u.parts[1] for u in units if u not in pieces) == sorted(items)
    assert [u.position for u in units] == list(range(len(units)))


def test_an_item_alone_in_its_piece_of_a_cut_list_is_not_given_twice():
    long_item = "- " + "A long item that fills a piece by itself with its explanation. " * 11
    items = [long_item.strip(), "- A short item.", "- Another short item."]
    units = build_units("Steps:\n" + "\n".join(items))
    assert len({u.parts for u in units}) == len(units)
    assert [u.parts[1] for u in units if u.item] == items[1:]


def test_a_list_that_fits_one_unit_gives_no_unit_per_item():
    items = ["- --to-earliest : Reset offsets to earliest offset.", "- --to-latest : Reset offsets to latest offset."]
    (unit,) = build_units("--reset-offsets has the following scenarios to choose from:\n" + "\n".join(items))
    assert unit.parts[1] == "\n".join(items)


NESTED_LIST = (
    "- Authentication using either SSL or SASL. Kafka supports the following SASL mechanisms:\n"
    "  - SASL/GSSAPI (Kerberos) - starting at version 0.9.0.0\n"
    "  - SASL/PLAIN - starting at version 0.10.0.0\n"
    "- Authorization of read / write operations by clients"
)
# "Steps are given below." is never quoted alone (it points at what follows), and its list's items were sentences
# without it: "Rotate the secret by rolling upgrade, and" answered how to rotate the delegation token secret.
STEPS_BELOW = (
    "We require a re-deployment when the secret needs to be rotated. Steps are given below.\n\n"
    "- Expire all existing tokens.\n- Rotate the secret by rolling upgrade, and\n- Generate new tokens\n\n"
    "We intend to automate this in a future Kafka release."
)


@pytest.mark.parametrize(
    ("text", "lead_in", "last_item"),
    [
        (NESTED_LIST, "Kafka supports the following SASL mechanisms:", "SASL/PLAIN - starting at version 0.10.0.0"),
        (STEPS_BELOW, "Steps are given below.", "- Generate new tokens"),
    ],
    ids=["a nested list with the item that introduces it", "a list with the sentence that points down to it"],
)
def test_a_list_stays_with_the_sentence_that_introduces_it(text, lead_in, last_item):
    units = build_units(text)
    assert _kinds(units) == ["sentence", "list", "sentence"]
    assert units[1].parts[0] == lead_in
    assert units[1].parts[1].endswith(last_item)


def test_items_without_a_lead_in_are_sentences():
    text = "- Ensure each record is acknowledged once. Track the state.\n- Reduce the acknowledgement delay."
    units = build_units(text)
    assert _kinds(units) == ["sentence"] * 3
    assert units[0].text == "- Ensure each record is acknowledged once."


def test_a_list_of_bare_names_stays_with_the_sentence_before_it_even_without_a_colon():
    # Quoted one by one, "- `num.io.threads`" led an answer about a full disk: a name alone states nothing.
    text = (
        "The size of thread pools may be updated dynamically. Updates are restricted to a range.\n\n"
        "- `num.network.threads`\n- `num.io.threads`\n- `background.threads`"
    )
    units = build_units(text)
    assert _kinds(units) == ["sentence", "list"]
    assert units[1].parts == (
        "Updates are restricted to a range.",
        "- `num.network.threads`\n- `num.io.threads`\n- `background.threads`",
    )


def test_items_that_are_sentences_or_lack_prose_before_them_stay_sentences():
    sentences = "The pools can grow.\n\n- The network pool serves requests.\n- The I/O pool writes to disk."
    assert _kinds(build_units(sentences)) == ["sentence"] * 3
    assert _kinds(build_units("- `num.io.threads`\n- `background.threads`")) == ["sentence"] * 2


def test_the_items_of_a_list_without_a_lead_in_are_marked_with_where_their_list_starts():
    text = (
        "Plan the move.\n\n- Set up a new cluster running 0.8.\n- Mirror the data into it. Then wait a day.\n\n"
        "Prose after the list.\n\n- Another list starts here."
    )
    units = build_units(text)
    starts = {u.text: u.list_start for u in units}
    first = text.index("- Set up")
    assert starts["- Set up a new cluster running 0.8."] == first
    assert starts["- Mirror the data into it."] == first
    assert starts["Then wait a day."] == first  # the item's next sentence
    assert starts["- Another list starts here."] == text.index("- Another")
    assert starts["Plan the move."] == starts["Prose after the list."] == -1
    led = build_units("These steps follow:\n\n- Set up a new cluster.\n- Mirror the data into it.")
    assert [u.list_start for u in led] == [-1]  # a list with its lead-in is one unit already


def test_the_entries_of_a_table_of_contents_are_titles_never_quoted():
    """A question about encryption at rest was answered with toc.html's list of sections ("- 7.8 ZooKeeper
    Encryption"): a list of titles numbered like sections names topics and states nothing."""
    toc = (
        "- 7.4 Authentication using SASL\n- 7.5 Authorization and ACLs\n- 7.7 ZooKeeper Authentication\n"
        "  - New Clusters\n    - ZooKeeper SASL Authentication\n  - Migrating Clusters\n- 7.8 ZooKeeper Encryption"
    )
    units = build_units(toc)
    assert {u.kind for u in units} == {"sentence", "list"} and all(is_title(u) for u in units)
    # A list of names, numbered steps and an item that starts with a number say something.
    sasl = "Kafka supports the following SASL mechanisms:\n\n- GSSAPI (Kerberos)\n- PLAIN\n- SCRAM-SHA-256"
    steps = "To upgrade:\n\n1. Stop the broker\n2. Start it again"
    for text in (sasl, steps, "- 1.5 is the default ratio", "- 2.8 Kafka brokers can be upgraded one at a time."):
        assert not any(is_title(u) for u in build_units(text)), text


def test_an_items_own_heading_above_its_text_is_a_title_never_quoted():
    # "Adding Acls [1]" was quoted as if it stated something.
    text = (
        "- Adding Acls\n  Suppose you want to add an acl for User:Bob. You can do that with the CLI.\n"
        "- Removing Acls.\n  Removing them is much the same.\n"
        "- Listing Acls"
    )
    units = build_units(text)
    kinds = {u.text: u.kind for u in units}
    assert kinds["- Adding Acls"] == "title"  # a heading of the lines under it
    assert kinds["- Removing Acls."] == "sentence"  # ends like a sentence
    assert kinds["- Listing Acls"] == "sentence"  # nothing under it: the item is its content
    assert [is_title(u) for u in units if u.text.startswith("- ")] == [True, False, False]


def test_render_list_items_shows_the_items_in_text_order_one_line_each():
    text = (
        "- Set up a new cluster running 0.8.\n- Mirror the data into it. Then wait a day.\n- Decommission the old one."
    )
    units = build_units(text)
    assert render_list_items(list(reversed(units)), text, 3) == (
        "- Set up a new cluster running 0.8. [3]\n- Mirror the data into it. Then wait a day.\n"
        "- Decommission the old one."
    )


@pytest.mark.parametrize(
    ("text", "ending"),
    [
        ("Intro.\n\nIt supports these:\n\n- GSSAPI\n- PLAIN\n  with its own JAAS file", ("It supports these:", True)),
        ("- SCRAM-SHA-256\n- SCRAM-SHA-512", ("", False)),  # all list: it began in an earlier chunk
        ("Items follow.\n\n- a\n- b", ("", True)),  # the prose before does not introduce it
        ("We list:\n\n- a\n\nThen prose.", None),  # the list ended before the chunk did
        ("Plain prose only.", None),
    ],
)
def test_list_ending_tells_how_a_chunk_ends_inside_a_list(text, ending):
    assert list_ending(text) == ending


def test_a_sentence_that_points_down_to_a_list_begun_in_the_chunk_is_its_lead_in():
    assert list_ending(STEPS_BELOW[: STEPS_BELOW.index("- Rotate")]) == ("Steps are given below.", True)


def test_the_leading_items_of_a_chunk_take_the_lead_in_of_their_list():
    text = "- `POST /connectors` - create one. It needs a name.\n  - nested\n- `GET /` - version\n\nProse after."
    end = leading_block_end(text)
    assert text[:end].endswith("- `GET /` - version") and starts_in_list(text)
    assert leading_block_end("Prose first.\n- item") == 0
    units = build_units(text)
    shown = [with_block_lead_in(u, "The endpoints are:") for u in units]
    assert shown[0].kind == "list" and shown[0].parts == ("The endpoints are:", "- `POST /connectors` - create one.")
    assert shown[1] is units[1]  # "It needs a name." is no item: it stays a sentence
    assert with_block_lead_in(units[0], "") is units[0]


def test_the_later_sentences_of_a_leading_item_go_under_the_lead_in_on_their_items_line():
    """Shown apart from their item's first sentence, "This endpoint is deprecated." and "Please use …" read as
    items of their own: they join it under the lead-in, and keep the list they belong to."""
    text = (
        "- `GET /tasks-config` - get every task's configuration. This endpoint is deprecated. Please use "
        "`GET /tasks` instead.\n- `PUT /stop` - stop the connector."
    )
    units = build_units(text)
    shown = [with_block_lead_in(u, "The endpoints are:") for u in units]
    assert [u.kind for u in shown] == ["list"] * 4
    assert len({u.list_start for u in shown}) == 1 and shown[0].list_start >= 0
    assert shown[2].parts == ("The endpoints are:", "Please use `GET /tasks` instead.")
    assert render_shared_lead(shown, 1).split("\n") == [
        "The endpoints are: [1]",
        "- `GET /tasks-config` - get every task's configuration. This endpoint is deprecated. Please use "
        "`GET /tasks` instead.",
        "- `PUT /stop` - stop the connector.",
    ]
    # shown without the sentence before it, a later sentence is not joined to another item's line
    lines = render_shared_lead([shown[0], shown[2], shown[3]], 1).split("\n")
    assert lines[1] == "- `GET /tasks-config` - get every task's configuration." and "Please use" not in lines[1]


def test_a_chunk_that_begins_with_its_own_code_block_takes_the_lead_in_ending_the_chunk_before():
    earlier = "Grants are managed per principal. In the following example, Alice may write to acme topics."
    assert lead_in_ending(earlier) == "In the following example, Alice may write to acme topics."
    assert lead_in_ending("Alice may write. Nothing follows.") == ""
    assert lead_in_ending("Configure it like this:\n\n```\nacks=all\n```") == ""  # it holds its block
    text = "```\n$ bin/kafka-acls.sh --add --allow-principal User:Alice\n```\n\nAfter the block."
    assert starts_with_code(text) and not starts_with_code(text, continues_code=True)
    assert text[: leading_block_end(text)].endswith("User:Alice")
    code = build_units(text)[0]
    shown = with_block_lead_in(code, "In the following example, Alice may write to acme topics.")
    assert shown.kind == "code" and shown.parts == (
        "In the following example, Alice may write to acme topics.",
        code.text,
    )
    assert with_block_lead_in(shown, "Another lead-in:") is shown  # a block with its own lead-in keeps it


@pytest.mark.parametrize(
    ("sentence", "ahead"),
    [
        ("Configure the broker as follows.", True),
        ("In the following example, Alice may write to acme topics.", True),
        ("The settings are:", True),
        ("Alice may write to acme topics.", False),
    ],
)
def test_a_sentence_that_announces_what_follows_points_ahead(sentence, ahead):
    assert points_ahead(build_units(sentence)[0]) is ahead


# ------------------------------------------------------------------------------------------ code


def test_a_code_block_stays_whole_with_its_lead_in():
    command = (
        "$ bin/kafka-topics.sh --bootstrap-server localhost:9092 --alter --topic my_topic_name \\\n    --partitions 40"
    )
    text = (
        "You can change a topic with the topic tool. To add partitions you can do\n\n"
        f"```\n{command}\n```\n\nThe new partitions start empty."
    )
    units = build_units(text)
    assert _kinds(units) == ["sentence", "code", "sentence"]
    assert units[1].parts == ("To add partitions you can do", command)


def test_a_sentence_that_announces_the_block_in_words_is_its_lead_in():
    """ "… like the following (note that …)." ends with a period, not a colon, and still introduces the block."""
    text = (
        "One can also add super users in server.properties like the following (note the semicolon).\n"
        "```\nsuper.users=User:Bob;User:Alice\n```\n"
        "The following features are not fully implemented in KRaft mode."
    )
    units = build_units(text)
    assert _kinds(units) == ["code", "sentence"]
    assert units[0].parts[0].startswith("One can also add super users")
    assert units[1].text == "The following features are not fully implemented in KRaft mode."  # no block follows


def test_a_code_block_without_lead_in_is_one_unit():
    text = "The broker logs this.\n\n```\nERROR [Broker id=1] first line\nat kafka.server.X.y(X.scala:12)\n```"
    units = build_units(text)
    assert units[1].kind == "code" and units[1].parts == (
        "ERROR [Broker id=1] first line\nat kafka.server.X.y(X.scala:12)",
    )


def test_a_chunk_that_begins_inside_a_code_block_starts_as_code():
    text = (
        "                        to delete (do a dry-run without\n"
        "                        this option to view these topics).\n"
        "--to-datetime <String>  Reset offsets to offset from datetime.\n"
        "```\n\n"
        "Only one of these scenarios can be defined.\n\n"
        "```\nbin/kafka-streams-application-reset.sh --application-id app\n```"
    )
    units = build_units(text, "Reset tool", continues_code=True)
    assert _kinds(units) == ["code", "sentence", "code"]
    assert units[0].parts[0].endswith("Reset offsets to offset from datetime.")
    assert units[2].parts == ("bin/kafka-streams-application-reset.sh --application-id app",)
    # Read as a chunk of its own, the closing fence would open a block and the code lines become sentences.
    assert "sentence" in _kinds(build_units(text, "Reset tool"))[:2]


@pytest.mark.parametrize(
    ("text", "inside"),
    [
        ("Run:\n```\nbin/kafka-topics.sh --list", True),
        ("Run:\n```\nbin/kafka-topics.sh --list\n```\nDone.", False),
        ("Run:\n````\n```\nnested\n```", True),  # a longer fence closes only with as many backticks
        ("No code here.", False),
    ],
)
def test_whether_text_ends_inside_a_fenced_block(text, inside):
    assert inside_fence(text) is inside


def test_a_long_code_block_is_cut_at_lines_and_a_comment_stays_with_its_command():
    lines = []
    for n in range(12):
        lines += [
            f"# step {n}: describe the group",
            f"bin/kafka-consumer-groups.sh --describe --group group-{n} --verbose",
        ]
    text = "Run these:\n```\n" + "\n".join(lines) + "\n```"
    units = build_units(text)
    assert len(units) > 1 and set(_kinds(units)) == {"code"}
    assert all(u.parts[0] == "Run these:" for u in units)
    for unit in units:
        code = unit.parts[1].split("\n")
        assert code[0].startswith("# step") and code[-1].startswith("bin/")
    assert [line for u in units for line in u.parts[1].split("\n")] == lines


_HANDLER = """import java.util.Properties;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.streams.errors.ProductionExceptionHandler;
import org.apache.kafka.streams.errors.ProductionExceptionHandler.ProductionExceptionHandlerResponse;

public class IgnoreRecordTooLargeHandler implements ProductionExceptionHandler {
    public void configure(Map<String, Object> config) {}

    public ProductionExceptionHandlerResponse handle(final ErrorHandlerContext context,
                                                     final ProducerRecord<byte[], byte[]> record,
                                                     final Exception exception) {
        if (exception instanceof RecordTooLargeException) {
            return ProductionExceptionHandlerResponse.CONTINUE;
        } else {
            return ProductionExceptionHandlerResponse.FAIL;
        }
    }
}

Properties settings = new Properties();

// other various kafka streams settings, e.g. bootstrap servers, application id, etc

settings.put(StreamsConfig.PRODUCTION_EXCEPTION_HANDLER_CLASS_CONFIG,
             IgnoreRecordTooLargeHandler.class);"""


def test_a_long_code_block_is_cut_between_declarations_not_inside_a_statement():
    # The Streams guide's handler example, past the size limit with its lead-in: cut before the first line that
    # did not fit, a piece opened with "final Exception exception) {", the end of a method's signature.
    lead = "If you want to provide an exception handler that always ignores records that are too large, you could:"
    units = build_units(f"{lead}\n```\n{_HANDLER}\n```")
    pieces = [u.parts[1] for u in units if u.kind == "code"]
    assert len(pieces) > 1
    assert [line for piece in pieces for line in piece.split("\n") if line] == [
        line for line in _HANDLER.split("\n") if line
    ]
    for before, piece in itertools.pairwise(pieces):
        first = piece.split("\n")[0].strip()
        assert not first.startswith(("}", ")", "final ")) and not before.rstrip().endswith((",", "("))
    checking = next(piece for piece in pieces if "instanceof RecordTooLargeException" in piece)
    assert (
        checking.split("\n")[0]
        .strip()
        .startswith(("public ProductionExceptionHandlerResponse handle(", "public class"))
    )


def test_unfenced_comment_and_command_lines_are_one_code_unit():
    text = (
        "# Describe share group state and members\n"
        "kafka-share-groups.sh --bootstrap-server localhost:9092 --describe --group g1\n"
        "# Look for share session events in logs\n"
        "grep 'ShareFetch' /var/log/kafka/server.log | tail -50"
    )
    assert build_units(text) == [EvidenceUnit("code", (text,))]


def test_unfenced_log_lines_are_one_code_unit_with_their_lead_in():
    log = (
        "WARN [Kafka Server 0], Retrying controlled shutdown after the previous attempt failed... "
        "(kafka.server.KafkaServer)\n"
        "WARN [Kafka Server 0], Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed"
    )
    text = f"If a controlled shutdown attempt fails, you will see error messages like the following:\n\n{log}"
    units = build_units(text)
    assert _kinds(units) == ["code"]
    assert units[0].parts[1] == log
    assert render_unit(units[0], 1).startswith(
        f"If a controlled shutdown attempt fails, you will see error messages like the following: [1]\n```\n{log}\n```"
    )


def test_the_lines_an_exception_message_wraps_onto_stay_in_its_code_unit():
    """A blog's exception wrapped at 80 columns was quoted as its first line, then "lower than streams commit
    interval 30000." as a sentence of its own."""
    exception = (
        "java.lang.IllegalArgumentException: Transaction timeout 10000 was set \n"
        "lower than streams commit interval 30000. This will cause ongoing transaction\n"
        " always timeout due to inactivity caused by long commit interval. Consider\n"
        "'commit.interval.ms' config, or increase the transaction timeout."
    )
    text = f"Streams throws the following exception:\n{exception}\nThe fix is to raise the transaction timeout."
    units = build_units(text)
    assert _kinds(units) == ["code", "sentence"]
    assert units[0].parts[1] == exception
    assert is_log(units[0].parts[1])  # what one sees, shown as the cause, not as a step to take
    assert units[1].text == "The fix is to raise the transaction timeout."


def test_an_unfenced_indented_excerpt_is_one_code_unit_with_its_lead_in():
    """A schema, config or code excerpt pasted as plain lines stays whole, as a fenced block would."""
    schema = (
        "Produce Response (Version: 8) => [responses] throttle_time_ms\n"
        "  responses => topic [partition_responses]\n"
        "    partition => INT32\n"
        "    error_records => [INT64]         // new field\n"
        "    error_message => STRING          // new field"
    )
    lead_in = "We propose to add the following new fields into the produce response:"
    for gap in ("\n\n", "\n"):
        units = build_units(f"{lead_in}{gap}{schema}\n\nThat is all.")
        assert _kinds(units) == ["code", "sentence"]
        assert units[0].parts == (lead_in, schema)
        assert "```\nProduce Response (Version: 8)" in render_unit(units[0], 1)


@pytest.mark.parametrize(
    "text",
    [
        # prose wrapped at a fixed width, flush left
        "Kafka keeps the log for the retention time\nand deletes whole segments once they\nare older than that.",
        # a wrapped message whose continuation lines carry a stray space
        "lower than the commit interval. This will cause the transaction\n always to time out. Consider\n"
        " reconfiguring the commit interval.",
        # indented lines that end like sentences: quoted prose, not code
        "Notes:\n  The first note ends here.\n  The second one too.\n  And the third.",
    ],
)
def test_wrapped_or_quoted_prose_is_not_an_excerpt(text):
    assert "code" not in _kinds(build_units(text))


@pytest.mark.parametrize(
    "line",
    [
        "[2024-06-02 11:04:19,332] ERROR [Producer clientId=p1] Aborting producer batches (o.a.k.c.p.i.Sender)",
        "2024-06-02T11:04:19.332Z INFO Kafka version: 3.9.0",
        "ERROR [ReplicaFetcherThread-0-6], Error for partition [test,22] to broker 6",
        "org.apache.kafka.common.errors.TimeoutException: Timeout expired",
        "kafka.common.KafkaException: Should not set log end offset on partition",
        '"exception":org.apache.kafka.streams.errors.TaskMigratedException: Error encountered sending record',
        "at org.apache.kafka.clients.producer.internals.Sender.run(Sender.java:244)",
    ],
)
def test_log_records_exceptions_and_stack_frames_are_code(line):
    units = build_units(f"Prose before it comes here.\n{line}")
    assert _kinds(units) == ["sentence", "code"]
    assert is_log(units[1].parts[-1])


@pytest.mark.parametrize(
    "code",
    [
        "$ bin/kafka-topics.sh --describe --topic orders",
        "> bin/kafka-acls.sh --bootstrap-server localhost:9092 --list --topic Test-topic",
        "acks=all\nenable.idempotence=true",
        "bootstrap.servers = [broker1:9093,...]",
        '{\n  "connector.class": "FileStreamSink",\n  "topics": "orders"\n}',
        "log.cleaner.max.compaction.lag.ms",
        "--to-earliest                         Reset offsets to earliest offset.",
        "<dependency>\n  <artifactId>kafka-clients</artifactId>\n</dependency>",
        'source.to("streams-pipe-output");',
        "KStream<String, Long> left = ...;",
        "    (aggKey, newValue, aggValue) -> aggValue + newValue,",
    ],
)
def test_commands_settings_and_program_code_are_runnable(code):
    assert is_runnable(code)


@pytest.mark.parametrize(
    "code",
    [
        '/brokers/ids/[0...N] --> {"jmx_port":...,"host":...,"port":...} (ephemeral node)',
        "The inter-broker throttle limit was set to 50000000 B/s\nSuccessfully started partition reassignment",
        "my-topic                       1          2               3               1          consumer-1",
        "us-west         us-east\n=========       =================\nfoo-topic  -->  us-west.foo-topic",
        "total length     : 4 bytes\nerror code       : 2 bytes",
        '{"line":"foo","data_source":"test-file-source"}',
    ],
)
def test_what_a_block_only_shows_is_not_runnable(code):
    """A tool's output, a data layout, a diagram or a format: what something looks like, nothing to do."""
    assert not is_runnable(code)


def test_commands_are_not_log():
    assert not is_log("kafka-share-groups.sh --describe --group g1\ngrep 'ShareFetch' server.log")
    assert not is_log("ERROR [Broker id=1] first line\nbin/kafka-topics.sh --list")


@pytest.mark.parametrize(
    "line",
    [
        "Error handling in Kafka Streams is configurable.",
        "The TimeoutException is thrown when the request times out.",
        "At most once delivery means messages may be lost.",
    ],
)
def test_prose_about_errors_stays_prose(line):
    assert "code" not in _kinds(build_units(line))


# ------------------------------------------------------------------------------------------ tables


def test_a_config_setting_keeps_its_key_description_and_default():
    first, second = [u for u in build_units(SETTINGS, heading="acks") if u.kind == "setting"]
    assert first.kind == "setting" and first.subject == "acks"  # its heading is only in the section path
    assert first.parts[0] == "The number of acknowledgments the producer requires. This controls durability."
    assert "Default: | all" in first.parts[-1] and "Valid Values: | [all, -1, 0, 1]" in first.parts[-1]
    assert second.kind == "setting" and second.subject == "retries"
    assert second.parts[:2] == (
        "retries",
        "Setting a value greater than zero will cause the client to resend any record whose send fails"
        " with a potentially transient error.",
    )
    assert "Default: | 2147483647" in second.text


def test_what_a_setting_or_row_states_leaves_out_the_labels_and_header_it_shares():
    acks, retries = [u for u in build_units(SETTINGS, heading="acks") if u.kind == "setting"]
    assert acks.stated_text == (
        "acks: The number of acknowledgments the producer requires. This controls durability.\nstring\nall\n"
        "[all, -1, 0, 1]\nlow"
    )
    assert retries.stated_text.startswith("retries\nSetting a value") and "Default" not in retries.stated_text
    row = next(u for u in build_units(ERRORS) if u.kind == "row" and u.subject == "INVALID_RECORD_STATE")
    assert row.stated_text == row.parts[-1] and "Retriable" not in row.stated_text


def test_the_rest_of_a_setting_description_stays_quotable():
    units = build_units(SETTINGS, heading="acks")
    assert [u.text for u in units if u.kind == "sentence"] == ["Keep it high."]
    assert units[0].parts[0].endswith("This controls durability.")  # a short first sentence takes the next along


def test_a_protocol_error_row_keeps_its_name_and_code_and_is_not_split():
    units = build_units(ERRORS, heading="Protocol errors")
    assert _kinds(units) == ["row"] * 3  # the header row is not a unit of its own
    row = next(u for u in units if u.subject == "INVALID_RECORD_STATE")
    assert row.parts == ("Error | Code | Retriable | Description", ERRORS.split("\n")[2])
    assert "121" in row.text and row.text.endswith("could not be completed.")


def test_rows_without_their_header_in_the_chunk_are_units_too():
    units = build_units("\n".join(ERRORS.split("\n")[1:]))
    assert [u.subject for u in units] == ["UNKNOWN_SERVER_ERROR", "INVALID_RECORD_STATE", "NONE"]
    assert all(len(u.parts) == 1 for u in units)


def test_rows_whose_first_cell_begins_with_a_hash_are_rows_not_comments():
    """The monitoring table counts things: "# of under minIsr partitions | … | 0" is a row, read as one."""
    text = (
        "Description | Mbean name | Normal value\n"
        "# of offline log directories | kafka.log:type=LogManager,name=OfflineLogDirectoryCount | 0\n"
        "# of under minIsr partitions (|ISR| < min.insync.replicas) | "
        "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount | 0"
    )
    units = build_units(text)
    assert _kinds(units) == ["row", "row"]
    assert units[1].subject == "# of under minIsr partitions (|ISR| < min.insync.replicas)"
    assert units[1].parts == tuple(text.split("\n")[::2])
    # shown as code, never as a Markdown heading
    assert render_unit(units[1], 1).startswith("`# of under minIsr partitions (|ISR| < min.insync.replicas)` (")


def test_a_lone_pipe_in_prose_is_not_a_table():
    text = "Filter the log with grep ERROR server.log | tail -5 to see the latest."
    assert _kinds(build_units(text)) == ["sentence"]


# ------------------------------------------------------------------------------------------ rendering


def test_render_sentence_puts_keys_in_code_and_the_marker_at_the_end():
    (unit,) = build_units("Raise max.poll.interval.ms when processing is slow.")
    assert render_unit(unit, 2) == "Raise `max.poll.interval.ms` when processing is slow. [2]"


@pytest.mark.parametrize(
    ("sentence", "rendered"),
    [
        # "`num.acks`=0" split what the user would copy
        (
            "This happens when the clients use num.acks=0, or set linger.ms to 5.",
            "This happens when the clients use `num.acks=0`, or set `linger.ms` to 5. [1]",
        ),
        # "'`enable.auto.commit=false'`" took the sentence's closing quote into the span, the opening one not
        (
            "Set 'enable.auto.commit=false' and commit manually, or set client.id=\"etl-1\" first.",
            "Set '`enable.auto.commit=false`' and commit manually, or set `client.id=\"etl-1\"` first. [1]",
        ),
        # a list value stays whole, and the sentence's own comma stays out
        (
            "Set ssl.enabled.protocols=TLSv1.2,TLSv1.3 on every listener, and keep linger.ms=5, too.",
            "Set `ssl.enabled.protocols=TLSv1.2,TLSv1.3` on every listener, and keep `linger.ms=5`, too. [1]",
        ),
        # a dotted name that goes on after a colon is part of something longer
        (
            "Mbean name: kafka.connect:type=connector-task-metrics, see offset.flush.timeout.ms.",
            "Mbean name: kafka.connect:type=connector-task-metrics, see `offset.flush.timeout.ms`. [1]",
        ),
        # inline code the source marks stays whole
        (
            "Bump it by running `bin/kafka-features.sh upgrade --metadata 3.9` once linger.ms is set.",
            "Bump it by running `bin/kafka-features.sh upgrade --metadata 3.9` once `linger.ms` is set. [1]",
        ),
    ],
)
def test_render_puts_a_key_with_the_value_the_text_gives_it_in_one_code_span(sentence, rendered):
    (unit,) = build_units(sentence)
    assert render_unit(unit, 1) == rendered


def test_render_list():
    (unit,) = build_units("Kafka supports the following SASL mechanisms:\n- GSSAPI (Kerberos)\n  - PLAIN")
    assert render_unit(unit, 1) == "Kafka supports the following SASL mechanisms: [1]\n- GSSAPI (Kerberos)\n  - PLAIN"


def test_a_code_block_inside_a_list_item_stays_verbatim_and_a_cut_one_is_closed():
    """A list cut for size can end inside an item's code block: its open fence would make the rest of the
    answer code, and the code's keys must not get inline-code backticks."""
    code = 'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n    username="alice";'
    lead, item = "Configuring Kafka Clients:", "- Configure the JAAS property for each client, for example:"
    unit = EvidenceUnit("list", (lead, f"{item}\n```\n{code}"))
    assert render_unit(unit, 1).split("\n") == [
        "Configuring Kafka Clients: [1]",
        "- Configure the JAAS property for each client, for example:",
        "  ```",
        "  sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\",
        '      username="alice";',
        "  ```",
    ]
    closed = EvidenceUnit("list", (lead, f"{item}\n  ```\n  {code}\n  ```\n- Then restart the client."))
    rendered = render_unit(closed, 1)
    assert rendered.count("```") == 2 and rendered.endswith("- Then restart the client.")


def test_pieces_of_a_list_cut_inside_an_items_code_block_join_with_the_block_closed():
    lead = "SASL configuration for Kafka brokers:"
    first = "- Set the inter-broker protocol:\n```\nsecurity.inter.broker.protocol=SASL_SSL"
    second = "- Select one or more mechanisms to enable in the broker."
    pieces = [EvidenceUnit("list", (lead, first), position=0), EvidenceUnit("list", (lead, second), position=1)]
    assert render_shared_lead(pieces, 2).split("\n") == [
        "SASL configuration for Kafka brokers: [2]",
        "- Set the inter-broker protocol:",
        "  ```",
        "  security.inter.broker.protocol=SASL_SSL",
        "  ```",
        "- Select one or more mechanisms to enable in the broker.",
    ]


def test_pieces_of_a_code_block_with_one_left_out_between_them_show_where():
    """The Streams handler's imports and its registration, pieces 0 and 2 of one block, were joined as if the
    handler's body (piece 1) were not there: code a reader would copy as whole."""
    lines = [f'settings.put("key.number.{n:02d}", value);' for n in range(45)]
    text = "To ignore records that are too large, implement a handler like this:\n\n```\n" + "\n".join(lines) + "\n```"
    pieces = [u for u in build_units(text) if u.kind == "code"]
    assert [u.code_piece for u in pieces] == [0, 1, 2]
    first, middle, last = pieces
    rendered = render_shared_lead([first, last], 1).split("\n")
    assert rendered[rendered.index(first.parts[-1].split("\n")[-1]) + 1] == ELISION
    assert rendered[rendered.index(ELISION) + 1] == last.parts[-1].split("\n")[0]
    assert ELISION not in render_shared_lead(pieces, 1).split("\n")  # all three: the block whole
    assert ELISION not in render_shared_lead([first, middle], 1).split("\n")


def test_render_code_with_and_without_lead_in():
    (led,) = build_units("To add configs:\n\n```\n$ bin/kafka-configs.sh --alter --add-config x=y\n```")
    assert render_unit(led, 3) == "To add configs: [3]\n```\n$ bin/kafka-configs.sh --alter --add-config x=y\n```"
    (bare,) = build_units("```\nuses ``` inside\n```")
    assert render_unit(bare, 4) == "````\nuses ``` inside\n````\n[4]"


def test_render_setting():
    """Name, description, type, default and valid values; the reference's importance rating takes no room."""
    first, second = [u for u in build_units(SETTINGS, heading="acks") if u.kind == "setting"]
    assert "Importance: | low" in first.parts[-1]
    assert render_unit(first, 1) == (
        "`acks`: The number of acknowledgments the producer requires. This controls durability. "
        "(Type: string · Default: all · Valid Values: [all, -1, 0, 1]) [1]"
    )
    assert render_unit(second, 2).startswith("`retries`: Setting a value greater than zero")


def test_render_row_with_and_without_header():
    units = build_units(ERRORS)
    assert render_unit(units[1], 5) == (
        "`INVALID_RECORD_STATE` (Code: 121 · Retriable: False): The record state is invalid. "
        "The acknowledgement of delivery could not be completed. [5]"
    )
    assert render_unit(units[2], 6) == "`NONE` (Code: 0 · Retriable: False) [6]"
    bare = build_units("\n".join(ERRORS.split("\n")[2:]))
    assert render_unit(bare[0], 1).startswith("`INVALID_RECORD_STATE` (121 · False): The record state")


def test_a_rows_first_cell_is_code_when_it_is_a_name_and_plain_when_it_is_words():
    text = (
        "Step | Directions for Reverting\n"
        "Provisioning the KRaft controller quorum | Deprovision the KRaft controller quorum.\n"
        "UNKNOWN_MEMBER_ID (25) | The coordinator is not aware of this member."
    )
    words, name = [render_unit(u, 1) for u in build_units(text) if u.kind == "row"]
    assert words == (
        "Provisioning the KRaft controller quorum: Deprovision the KRaft controller quorum. [1]"
    )  # fmt: skip
    assert name == "`UNKNOWN_MEMBER_ID (25)`: The coordinator is not aware of this member. [1]"


RAFT_METRICS = (
    "These metrics are reported on both Controllers and Brokers in a KRaft Cluster\n"
    "Metric/Attribute name | Description | Mbean name\n"
    "Current State | The current state of this member. | kafka.server:type=raft-metrics,name=current-state\n"
    "Current Leader | The current quorum leader's id. | kafka.server:type=raft-metrics,name=current-leader"
)


def test_rows_of_one_table_are_shown_under_its_lead_in_once_in_text_order():
    state, leader = [u for u in build_units(RAFT_METRICS) if u.kind == "row"]
    assert (
        lead_in(state)
        == lead_in(leader)
        == "These metrics are reported on both Controllers and Brokers in a KRaft Cluster"
    )
    assert render_shared_lead([leader, state], 3).split("\n") == [
        "These metrics are reported on both Controllers and Brokers in a KRaft Cluster [3]",
        "Current State: The current state of this member. · Mbean name: "
        "kafka.server:type=raft-metrics,name=current-state",
        "Current Leader: The current quorum leader's id. · Mbean name: "
        "kafka.server:type=raft-metrics,name=current-leader",
    ]
    assert lead_in(build_units(ERRORS)[1]) == ""  # a row under its header alone has no lead-in


def test_a_row_whose_chunk_began_below_the_header_is_shown_with_the_column_names():
    header = ERRORS.split("\n")[0]
    bare = build_units("\n".join(ERRORS.split("\n")[2:]))
    shown = with_table_header(bare[0], header)
    assert render_unit(shown, 1).startswith("`INVALID_RECORD_STATE` (Code: 121 · Retriable: False): The record")
    assert shown.parts == (header, bare[0].parts[0])  # shown with the header; the answer still quotes the row
    assert with_table_header(bare[0], "Name | Value") is bare[0]  # another table's header: other columns
    with_header = build_units(ERRORS)[1]
    assert with_table_header(with_header, header) is with_header  # it has its own already


@pytest.mark.parametrize(
    ("text", "start"),
    [
        (f"Errors the broker returns:\n{ERRORS}", (ERRORS.split("\n")[0], True)),  # the header, after prose
        ("\n".join(ERRORS.split("\n")[1:]), (ERRORS.split("\n")[1], False)),  # all rows: the header is earlier
        (f"{ERRORS}\n\nThe table ends here.", ("", False)),  # the chunk ends after the table
    ],
)
def test_the_table_a_chunk_ends_inside_and_where_it_starts(text, start):
    assert table_start(text) == start


ACL_TABLE = (
    "Protocol (API key) | Operation | Resource | Note\n"
    "PRODUCE (0) | Write | TransactionalId | A transactional producer needs this.\n"
    "GET_TELEMETRY_SUBSCRIPTIONS (71) | | | No authorization check is performed for this request.\n"
    "CONSUMER_GROUP_DESCRIBE (69) | Read | Group |"
)


def test_a_table_with_empty_cells_keeps_its_header_and_column_names():
    """Empty cells (`| | |`) and an empty last note make rows of one table look of different widths: the
    header (a label may end in a parenthesis) still names every row's columns, in its chunk and below it."""
    units = build_units(f"Each operation is checked on a resource.\n\n{ACL_TABLE}")
    rows = [render_unit(u, 1) for u in units if u.kind == "row"]
    assert rows == [
        "`PRODUCE (0)` (Operation: Write · Resource: TransactionalId): A transactional producer needs this. [1]",
        "`GET_TELEMETRY_SUBSCRIPTIONS (71)`: No authorization check is performed for this request. [1]",
        "`CONSUMER_GROUP_DESCRIBE (69)` (Operation: Read · Resource: Group) [1]",
    ]
    # A chunk that ends inside this table started it at its header, not at a row of another width.
    assert table_start(f"Operations on resources:\n\n{ACL_TABLE}") == (ACL_TABLE.split("\n")[0], True)
    below = build_units("\n".join(ACL_TABLE.split("\n")[2:]))
    header = ACL_TABLE.split("\n")[0]
    assert render_unit(with_table_header(below[-1], header), 1) == rows[-1]


# ------------------------------------------------------------------------------------------ real corpora


def _chunks(path: Path):
    return chunk_document(load_document(path.read_bytes(), path.name), 900, 150)


def _corpus_files() -> list[Path]:
    pages = [KAFKA_DOCS / page for page in DOC_PAGES if (KAFKA_DOCS / page).exists()]
    return sorted(SEEDS.glob("*.txt")) + pages


@pytest.mark.parametrize("path", _corpus_files(), ids=lambda p: p.name)
def test_every_part_of_every_unit_is_verbatim_and_in_order(path):
    total = 0
    for chunk in _chunks(path):
        units = build_units(chunk.text, chunk.section_path[-1])
        total += len(units)
        starts = []
        for unit in units:
            assert unit.parts and all(unit.parts), unit
            cursor = 0
            for part in unit.parts:  # each part in the text, after the one before it
                found = chunk.text.find(part, cursor)
                assert found >= 0, (chunk.section_path, part)
                cursor = found
            starts.append(chunk.text.find(unit.parts[0]))
            assert render_unit(unit, 1)
        assert [u.position for u in units] == list(range(len(units)))
        assert unit_texts(chunk.text, chunk.section_path) == [u.matched_text for u in units]
    assert total > 0


def test_kafka_docs_producer_config_settings_carry_their_key():
    path = KAFKA_DOCS / "generated/producer_config.html"
    if not path.exists():
        pytest.skip("the Kafka docs corpus is not on this machine")
    settings = {
        u.subject: u
        for chunk in _chunks(path)
        for u in build_units(chunk.text, chunk.section_path[-1])
        if u.kind == "setting"
    }
    assert "Default: | 33554432" in settings["buffer.memory"].text
    assert "Default: | all" in settings["acks"].text
    assert "Kafka supports" not in settings["acks"].text


def test_kafka_docs_security_keeps_the_sasl_list_with_its_lead_in():
    path = KAFKA_DOCS / "security.html"
    if not path.exists():
        pytest.skip("the Kafka docs corpus is not on this machine")
    lists = [u for c in _chunks(path) for u in build_units(c.text, c.section_path[-1]) if u.kind == "list"]
    sasl = [u for u in lists if u.parts[0] == "Kafka supports the following SASL mechanisms:"]
    assert sasl and all("GSSAPI" in u.parts[1] for u in sasl)


def test_seed_diagnostic_commands_are_one_code_unit():
    path = next(SEEDS.glob("000_*.txt"))
    chunk = next(c for c in _chunks(path) if "kafka-share-groups.sh" in c.text)
    code = [u for u in build_units(chunk.text, chunk.section_path[-1]) if u.kind == "code"]
    assert len(code) == 1
    assert code[0].text.startswith(
        "# Describe share group state and members\n"
        "kafka-share-groups.sh --bootstrap-server localhost:9092 --describe --group <share-group-id>"
    )


def test_a_setting_is_embedded_with_the_key_its_heading_gives_it():
    """A chunk that starts with a setting's description names the key only in its section path."""
    text = "The number of acknowledgments the producer requires.\n\nType: | string\nDefault: | all\nImportance: | low"
    (unit,) = [u for u in build_units(text, "acks") if u.kind == "setting"]
    assert unit.matched_text.startswith("acks: ")
    assert "acks" not in unit.text  # quoted verbatim: the key is added to what is matched, not to the quote
    assert unit_texts(text, ("Producer config", "acks")) == [u.matched_text for u in build_units(text, "acks")]


def test_a_setting_and_the_list_its_description_introduces_share_a_lead_in():
    listed = EvidenceUnit(
        "list", ("What to do when there is no offset:", "- earliest: reset\n- latest: reset"), position=0
    )
    setting = EvidenceUnit(
        "setting", ("What to do when there is no offset:", "Default: | latest"), "auto.offset.reset", position=1
    )
    assert lead_in(listed) == lead_in(setting) == "What to do when there is no offset:"
    assert lead_in(EvidenceUnit("sentence", ("Plain prose.",))) == ""
    assert render_shared_lead([setting, listed], 2) == (
        "`auto.offset.reset`: What to do when there is no offset: (Default: latest) [2]\n"
        "- earliest: reset\n- latest: reset"
    )


def test_two_settings_with_one_description_are_both_shown_whole():
    first = EvidenceUnit(
        "setting", ("The password of the store.", "Default: | null"), "ssl.truststore.password", position=0
    )
    second = EvidenceUnit(
        "setting", ("The password of the store.", "Default: | null"), "ssl.keystore.password", position=1
    )
    shown = render_shared_lead([second, first], 1)
    assert shown.split("\n") == [
        "`ssl.truststore.password`: The password of the store. (Default: null) [1]",
        "`ssl.keystore.password`: The password of the store. (Default: null) [1]",
    ]


@pytest.mark.parametrize(
    ("rows", "default", "mention"),
    [
        ("Type: | int\nDefault: | 8\nImportance: | high", "8", "`num.io.threads` (default 8) [3]"),
        ("Type: | string\nDefault: | null", "null", "`num.io.threads` (no default) [3]"),
        ('Type: | list\nDefault: | ""', '""', '`num.io.threads` (default "") [3]'),
        ("Type: | int\nImportance: | high", None, "`num.io.threads` [3]"),  # no default row: nothing said of one
    ],
)
def test_a_setting_is_mentioned_by_its_name_and_the_default_its_entry_gives(rows, default, mention):
    unit = EvidenceUnit("setting", ("The number of threads.", rows), "num.io.threads")
    assert setting_default(unit) == default
    assert render_setting_mention(unit, 3) == mention
    assert setting_default(EvidenceUnit("sentence", ("Default: | 8",))) is None


@pytest.mark.parametrize(
    ("thing", "sentence", "defined"),
    [
        (("ISR",), 'The leader keeps track of the set of "in sync" replicas, which is known as the ISR.', True),
        (("KTable",), "A KTable is an abstraction of a changelog stream.", True),
        (("log", "compaction"), "Log compaction is a mechanism to give finer-grained per-record retention.", True),
        (("tombstones",), "Such a record is sometimes referred to as a tombstone.", True),
        (("quotas",), "A quota is a byte-rate threshold per client group.", True),
        # a sentence about it, not one saying what it is
        (("offset",), "In other cases the offset is less clear.", False),
        (("ISR",), "A replica that falls behind is removed from the ISR.", False),
        (("state", "store"), "Kafka Streams provides so-called state stores, which can be used to query data.", True),
        # the name of something the thing has ("the state store's changelog"), not the thing
        (
            ("state", "store"),
            "This topic is sometimes referred to as the state store’s associated changelog topic.",
            False,
        ),
        # a glossary's entry: the name, a dash or colon, and what it is
        (("event", "time"), "Event time - The point in time when an event or data record occurred.", True),
        (("processor", "API"), "Processor API: A low-level API that lets you add and connect processors.", True),
        (("event", "time"), "Event time: see below.", False),
        # a word formed from the thing's is another thing
        (("partition",), "Semantic partitioning means using some key to assign messages to partitions.", False),
        (("partitions",), "A partition is an ordered, immutable sequence of records.", True),
        # an appositive with a clause of what it does
        (
            ("mirrormaker",),
            "Administrators can set up such data flows with Kafka's MirrorMaker (version 2), a tool to replicate "
            "data between different Kafka environments in a streaming manner.",
            True,
        ),
        (("acks",), "Producers set acks, a setting that controls durability.", True),
        # a clause after a comma that is no appositive
        (("partition",), "For each partition, a leader is elected among the replicas.", False),
    ],
)
def test_a_sentence_that_says_what_a_thing_is_defines_it(thing, sentence, defined):
    assert defines(EvidenceUnit("sentence", (sentence,)), thing) is defined


def test_only_a_sentence_or_a_list_item_defines():
    assert not defines(EvidenceUnit("row", ("A KTable is an abstraction | x",)), ("KTable",))
    lead_in = "Common notions of time in streams are:"
    item = "- Processing time - The point in time when the record happens to be processed."
    assert defines(EvidenceUnit("list", (lead_in, item)), ("processing", "time"))
    assert not defines(EvidenceUnit("list", (lead_in, item)), ("event", "time"))


def test_a_text_ending_with_the_block_the_next_chunk_opens_with_is_read_without_it():
    block = "```\nThe inter-broker throttle limit was set to 50000000 B/s"
    earlier = f"Run the script.\n\nWhen you execute this script you will see the throttle engage:\n\n{block}\n```"
    assert before_closing_block(earlier, block).rstrip().endswith("you will see the throttle engage:")
    assert before_closing_block(earlier, "```\nsomething else") == earlier  # another block: kept whole
    assert before_closing_block("No block at the end.", block) == "No block at the end."
    assert before_closing_block(earlier, "") == earlier


def test_a_sentence_ending_in_a_comma_stops_mid_sentence():
    units = build_units(
        "If you want to use static membership,\n- Upgrade the brokers.\n- Set the id.", "Static membership"
    )
    assert [stops_mid_sentence(u) for u in units] == [True, False, False]


def test_the_end_of_a_fenced_block_a_chunk_begins_inside_is_where_its_content_ends():
    text = "  --shift-by <Long>  shift offsets\n--to-latest  reset to latest\n```\n\nAfter the block."
    assert text[: continued_block_end(text)] == "  --shift-by <Long>  shift offsets\n--to-latest  reset to latest"
    assert continued_block_end("--to-latest  reset to latest") == len("--to-latest  reset to latest")  # runs on


@pytest.mark.parametrize(
    ("row", "bare"),
    [
        ("NONE | 0 | False |", True),
        ("3 | A | | |", True),
        ("UNKNOWN_SERVER_ERROR | -1 | False | The server experienced an unexpected error.", False),
        ("Produce | 0", False),  # no cell missing: the row maps a name to its number
        ("Error rate | kafka.network:type=RequestMetrics,name=ErrorsPerSec |", False),
    ],
)
def test_a_row_with_an_empty_cell_and_only_bare_words_beside_it_states_nothing_but_its_key(row, bare):
    width = len(row_cells(row))
    header, other = (
        " | ".join(["Name", *["Value"] * (width - 1)]),
        " | ".join(["OTHER", *["Said in words"] * (width - 1)]),
    )
    units = build_units(f"{header}\n{row}\n{other}")
    assert is_bare_row(next(u for u in units if u.kind == "row" and u.parts[-1] == row)) is bare
