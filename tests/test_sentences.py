"""Sentence units: what the extractive answerer may quote, always verbatim from the chunk."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag.chunking import chunk_document
from rag.documents import load_document
from rag.sentences import MAX_UNIT_CHARS, MIN_UNIT_CHARS, split_units

SEEDS = Path(__file__).resolve().parents[1] / "seeds"


def test_prose_splits_at_sentence_ends_but_not_after_abbreviations():
    text = "Kafka is a log. It is also durable, e.g. it stores data on disk. Brokers replicate partitions!"
    assert split_units(text) == [
        "Kafka is a log.",
        "It is also durable, e.g. it stores data on disk.",
        "Brokers replicate partitions!",
    ]


def test_list_items_are_units_of_their_own():
    text = "Common causes:\n- the record lock expired before the ack\n- the ack was sent twice for one record"
    assert split_units(text) == [
        "Common causes:",
        "- the record lock expired before the ack",
        "- the ack was sent twice for one record",
    ]


def test_code_lines_split_and_a_comment_stays_with_its_command():
    text = (
        "Check the group first.\n\n"
        "```\n"
        "# Describe share group state and members\n"
        "kafka-share-groups.sh --bootstrap-server localhost:9092 --describe --group g1\n"
        "grep INVALID_RECORD_STATE /var/log/kafka/server.log\n"
        "```\n\n"
        "Then restart the consumer."
    )
    assert split_units(text) == [
        "Check the group first.",
        "# Describe share group state and members\n"
        "kafka-share-groups.sh --bootstrap-server localhost:9092 --describe --group g1",
        "grep INVALID_RECORD_STATE /var/log/kafka/server.log",
        "Then restart the consumer.",
    ]


def test_unfenced_comment_and_command_in_prose_stay_together():
    text = "# Look for share session events in logs\ngrep 'ShareFetch' /var/log/kafka/server.log | tail -50"
    assert split_units(text) == [text]


def test_a_repeated_comment_joins_only_the_command_under_it():
    text = "# create the topic\nkafka-topics.sh --create x\n# create the topic\nkafka-topics.sh --describe x"
    assert split_units(text) == [
        "# create the topic\nkafka-topics.sh --create x",
        "# create the topic\nkafka-topics.sh --describe x",
    ]


def test_short_fragments_are_dropped_and_long_ones_capped():
    long_sentence = "word " * 300
    units = split_units(f"Ok.\n\nYes!\n\n{long_sentence}")
    assert units == [long_sentence.strip()[:MAX_UNIT_CHARS]]
    assert all(len(u) >= MIN_UNIT_CHARS for u in units)


def test_empty_text_has_no_units():
    assert split_units("") == []
    assert split_units("   \n\n  ") == []


@pytest.mark.parametrize("path", sorted(SEEDS.glob("*.txt")), ids=lambda p: p.name[:3])
def test_every_unit_of_every_seed_chunk_is_a_substring_of_its_text(path):
    document = load_document(path.read_bytes(), path.name)
    total = 0
    for chunk in chunk_document(document, 900, 150):
        units = split_units(chunk.text)
        total += len(units)
        for unit in units:
            assert unit in chunk.text, (chunk.section_path, unit)
            assert unit == unit.strip()
        cursor = 0
        for unit in units:  # in text order
            found = chunk.text.find(unit, cursor)
            assert found >= cursor, (chunk.section_path, unit)
            cursor = found
    assert total > 0


def test_seed_000_diagnostic_commands_keep_comment_and_command_together():
    path = next(SEEDS.glob("000_*.txt"))
    chunks = chunk_document(load_document(path.read_bytes(), path.name), 900, 150)
    text = next(c.text for c in chunks if "kafka-share-groups.sh" in c.text)
    units = split_units(text)
    assert (
        "# Describe share group state and members\n"
        "kafka-share-groups.sh --bootstrap-server localhost:9092 --describe --group <share-group-id>"
    ) in units
