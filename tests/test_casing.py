"""Names typed in lower case, read in the corpus's spelling."""

from __future__ import annotations

import pytest

from rag.casing import MAX_LOOKED_UP, class_name_parts, corpus_cased

CORPUS = {
    "producerfencedexception": "ProducerFencedException",
    "isrshrinkspersec": "IsrShrinksPerSec",
    "invalid_record_state": "INVALID_RECORD_STATE",
    "consumer": "Consumer",  # a sentence's first word, or a name: one capital says neither
    "read_committed": "read_committed",  # a value the corpus writes in lower case
    "replicamanager": "ReplicaManager",
}


def spelling(word: str) -> str | None:
    return CORPUS.get(word)


@pytest.mark.parametrize(
    ("typed", "read"),
    [
        ("getting producerfencedexception on commit", "getting ProducerFencedException on commit"),
        ("isrshrinkspersec keeps climbing", "IsrShrinksPerSec keeps climbing"),
        ("what is invalid_record_state?", "what is INVALID_RECORD_STATE?"),
        (
            "kafka.server:type=replicamanager,name=isrshrinkspersec",
            "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec",
        ),
        (
            "org.apache.kafka.common.errors.producerfencedexception: x",
            "org.apache.kafka.common.errors.ProducerFencedException: x",
        ),
    ],
)
def test_a_lower_case_name_is_written_as_the_corpus_writes_it(typed, read):
    assert corpus_cased(typed, spelling) == read


@pytest.mark.parametrize(
    "typed",
    [
        "why is my consumer slow",  # capitalised once in the corpus: no name
        "isolation.level=read_committed",  # the corpus writes it in lower case
        "see /var/log/isrshrinkspersec and `isrshrinkspersec`",  # a path and code are the user's as typed
        "set replicamanager.isrshrinkspersec.enabled",  # parts of a dotted key
        "which IsrShrinksPerSec is it",  # already cased
    ],
)
def test_words_the_corpus_writes_in_lower_case_or_that_are_not_words_of_their_own_keep_their_case(typed):
    assert corpus_cased(typed, spelling) == typed


def test_an_exception_class_the_corpus_does_not_name_is_a_class_by_its_suffix():
    assert corpus_cased("streams dies with taskmigratedexception", spelling) == (
        "streams dies with TaskmigratedException"
    )
    assert corpus_cased("a serializationerror", spelling) == "a SerializationError"
    assert class_name_parts("recordtoolargeexception") == ("recordtoolarge", "exception")
    assert class_name_parts("exception") is None and class_name_parts("mirror") is None


def test_a_long_paste_looks_up_a_bounded_number_of_words():
    looked_up: list[str] = []

    def counting(word: str) -> str | None:
        looked_up.append(word)
        return None

    corpus_cased(" ".join(f"longword{n}" for n in range(MAX_LOOKED_UP * 3)), counting)
    assert len(looked_up) == MAX_LOOKED_UP
