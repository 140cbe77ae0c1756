"""The service's values: passages of one section merged into the one passage an answer cites."""

from __future__ import annotations

from rag.passages import Passage, merged


def _chunk(chunk_id: str, text: str, identifiers: tuple[str, ...] = ()) -> Passage:
    return Passage(
        chunk_id=chunk_id,
        doc_id="ops",
        title="Ops",
        section_path=("Ops", "Modifying topics"),
        source_path="ops.html",
        text=text,
        score=1.0,
        identifiers=identifiers,
    )


def test_the_text_chunking_repeats_is_said_once():
    first = _chunk("a", "To add partitions you can do this. Kafka does not support reducing partitions.")
    second = _chunk("b", "Kafka does not support reducing partitions. To add configs you can do that.")
    one = merged([first, second])
    assert one.text == (
        "To add partitions you can do this. Kafka does not support reducing partitions. To add configs you can do that."
    )
    assert (one.chunk_id, one.heading, one.source_path) == ("a", "Ops › Modifying topics", "ops.html")


def test_chunks_apart_are_joined_as_paragraphs_with_every_identifier():
    first = _chunk("a", "Set retention.ms on the topic.", ("retention.ms",))
    second = _chunk("b", "Remove it with --delete-config.", ("--delete-config", "retention.ms"))
    one = merged([first, second])
    assert one.text == "Set retention.ms on the topic.\n\nRemove it with --delete-config."
    assert one.identifiers == ("retention.ms", "--delete-config")


def test_a_short_coincidence_is_no_overlap():
    one = merged([_chunk("a", "It ends with the word topic."), _chunk("b", "topic. Then more.")])
    assert one.text == "It ends with the word topic.\n\ntopic. Then more."


def test_one_passage_is_itself():
    only = _chunk("a", "Alone.")
    assert merged([only]) == only
