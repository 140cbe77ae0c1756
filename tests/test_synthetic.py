"""Synthetic training queries from a chunk's structure, and their table stored with each index version."""

from __future__ import annotations

import pytest

from rag.synthetic import SyntheticQuery, synthetic_queries

KINDS = {"faq", "heading", "error-code", "error-name", "pasted-error", "config-default", "which-setting"}

SETTING = """The number of acknowledgments the producer requires the leader to have received before considering a \
request complete. This controls the durability of records that are sent.

Type: | string
Default: | all
Valid Values: | [all, -1, 0, 1]
Importance: | low"""

ERROR_ROW = (
    "INVALID_RECORD_STATE | 121 | False | The record state is invalid. "
    "The acknowledgement of delivery could not be completed."
)
ERROR_TABLE = f"""Error | Code | Retriable | Description
{ERROR_ROW}
UNKNOWN_TOPIC_OR_PARTITION | 3 | True | This server does not host this topic-partition."""


def _queries(section_path, text, chunk_id="c1") -> list[SyntheticQuery]:
    found = list(synthetic_queries(chunk_id, section_path, text))
    assert all(q.chunk_id == chunk_id and q.kind in KINDS for q in found)
    return found


def _by_kind(found: list[SyntheticQuery]) -> dict[str, list[str]]:
    kinds: dict[str, list[str]] = {}
    for q in found:
        kinds.setdefault(q.kind, []).append(q.query)
    return kinds


def test_config_setting_yields_its_default_and_which_setting_questions():
    kinds = _by_kind(_queries(("Producer Configs", "acks"), SETTING))
    assert kinds["config-default"] == ["what is the default value of acks?"]
    assert kinds["which-setting"] == [
        "which setting controls this: the number of acknowledgments the producer requires the leader to have "
        "received before considering a request complete"
    ]
    assert set(kinds) == {"config-default", "which-setting"}


def test_which_setting_question_never_names_the_setting():
    for query in _queries(("Producer Configs", "acks"), SETTING):
        if query.kind == "which-setting":
            assert "acks" not in query.query.split()


def test_which_setting_takes_one_sentence_when_it_ends_in_a_quote():
    text = (
        "Note that enabling idempotence requires this config value to be 'all'. If conflicting configurations "
        "are set and idempotence is not explicitly enabled, idempotence is disabled.\n\nType: | string\nDefault: | all"
    )
    kinds = _by_kind(_queries(("Producer Configs", "acks"), text))
    assert kinds["which-setting"] == [
        "which setting controls this: note that enabling idempotence requires this config value to be 'all'"
    ]


def test_a_multi_word_heading_over_a_default_row_is_not_a_setting():
    kinds = _by_kind(_queries(("Guide", "Producer settings"), SETTING))
    assert "config-default" not in kinds
    assert kinds["heading"] == ["how does producer settings work?"]


def test_error_table_rows_yield_code_and_pasted_error_questions():
    found = _queries(("Protocol", "Error Codes"), ERROR_TABLE)
    kinds = _by_kind(found)
    assert kinds["error-code"] == ["what does error code 121 mean?", "what does error code 3 mean?"]
    assert kinds["pasted-error"] == [
        "InvalidRecordStateException: The record state is invalid. The acknowledgement of delivery could not be "
        "completed.",
        "UnknownTopicOrPartitionException: This server does not host this topic-partition.",
    ]


def test_a_lone_error_row_under_a_document_title():
    kinds = _by_kind(_queries(("Kafka protocol guide",), ERROR_ROW))
    assert set(kinds) == {"error-code", "pasted-error"}
    assert kinds["error-code"] == ["what does error code 121 mean?"]


@pytest.mark.parametrize(
    "row",
    [
        "INVALID_RECORD_STATE | 121 | False | short",  # a description this short says nothing
        "acks | 121 | False | The record state is invalid, really.",  # not an error name
        "INVALID_RECORD_STATE | 12345 | False | The record state is invalid, really.",  # not a code
    ],
)
def test_rows_that_are_not_error_rows_yield_nothing(row):
    assert not [q for q in _queries(("Doc",), row) if q.kind in ("error-code", "pasted-error")]


def test_faq_heading_is_the_question():
    found = _queries(("FAQ", "Why does my consumer never get any data?"), "By default, when a consumer is started...")
    assert found == [SyntheticQuery("Why does my consumer never get any data?", "c1", "faq")]


def test_a_faq_heading_wins_over_a_default_row():
    kinds = _by_kind(_queries(("FAQ", "What is the default?"), SETTING))
    assert kinds == {"faq": ["What is the default?"]}


def test_other_headings_become_how_questions():
    found = _queries(("Design", "Log Compaction"), "Log compaction ensures that Kafka will always retain ...")
    assert found == [SyntheticQuery("how does log Compaction work?", "c1", "heading")]


@pytest.mark.parametrize("section_path", [(), ("Only a title",), ("Doc", "Single")])
def test_plain_text_under_a_title_or_one_word_heading_yields_nothing(section_path):
    assert _queries(section_path, "Some prose without structure.") == []


def test_queries_are_deterministic():
    assert _queries(("Protocol", "Error Codes"), ERROR_TABLE) == _queries(("Protocol", "Error Codes"), ERROR_TABLE)


@pytest.mark.slow
def test_the_index_stores_its_synthetic_queries(assistant):
    found = assistant.synthetic_queries()
    assert found, "the seeds index has FAQ headings and an error page"
    assert all(isinstance(q, SyntheticQuery) and q.kind in KINDS for q in found)
    chunk_ids = set(assistant._retriever.index.chunks.column("chunk_id").to_pylist())
    assert {q.chunk_id for q in found} <= chunk_ids
    assert {"faq", "heading"} <= {q.kind for q in found}
