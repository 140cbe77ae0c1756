"""The assistant with the LLM answerer on the real seeds index, against the local fake endpoint over HTTP."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from rag.llm import UNSUPPORTED_FLAG
from rag.passages import Answer
from rag.service import Assistant
from tests.fake_llm_server import FakeLLM, running_fake_llm

pytestmark = pytest.mark.slow

QUESTION = "What does error code 121 mean?"
REWRITTEN = "default value of transaction.timeout.ms"
INVENTED = "Upgrade every broker to the newest release."


def cite_first_passage(body: dict[str, Any]) -> str:
    """Answer like a well-behaved model: quote a sentence of passage 1 and cite it, plus an invented claim."""
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "standalone search query" in system:
        return REWRITTEN
    passage = re.search(r'<passage n="1">\nSource: [^\n]*\n(.*?)\n</passage>', user, re.S)
    assert passage, "the prompt lost its numbered passages"
    sentence = next(
        s.strip() for s in re.split(r"(?<=[.!?])\s+|\n", passage.group(1)) if len(s.split()) >= 6 and "[" not in s
    )
    return f"**Likely cause:** {sentence} [1]\n\n**What to do:**\n- {INVENTED} [7]"


def markers(text: str) -> set[int]:
    return {int(n) for n in re.findall(r"\[(\d+)\]", text)}


def squash(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLM]:
    with running_fake_llm(cite_first_passage) as fake:
        yield fake


@pytest.fixture(scope="module")
def llm_assistant(seeds_index, settings_factory, fake_llm: FakeLLM) -> Assistant:
    settings = settings_factory(
        seeds_index, answerer="llm", llm_base_url=fake_llm.openai_url, llm_model="fake", llm_timeout_s=1.0
    )
    return Assistant.from_settings(settings)


@pytest.fixture(autouse=True)
def well_behaved(fake_llm: FakeLLM) -> None:
    fake_llm.script(cite_first_passage)
    fake_llm.requests.clear()


def test_ask_answers_from_the_llm_with_checked_citations(llm_assistant: Assistant, fake_llm: FakeLLM) -> None:
    answer = llm_assistant.ask(QUESTION)

    assert answer.answerer == "llm" and not answer.abstained
    assert markers(answer.text) == {c.marker for c in answer.citations} == {1}
    cited = answer.citations[0]
    assert all(squash(quote).rstrip(".") in squash(cited.passage.text) for quote in cited.quotes)
    assert squash(cited.passage.text) in squash(fake_llm.chat_requests()[-1]["messages"][-1]["content"])
    assert f"{INVENTED} {UNSUPPORTED_FLAG}" in answer.text and "[7]" not in answer.text
    assert any("citation marker" in note for note in answer.notes)


def test_the_chunks_of_one_section_reach_the_model_as_one_passage(llm_assistant: Assistant, fake_llm: FakeLLM) -> None:
    """Four of the five passages ranked for this question are chunks of one section of the exactly-once guide:
    the model is given that section once, its text in the page's order, as the reader sees its sources."""
    answer = llm_assistant.ask("how do I fix ProducerFencedException in kafka streams?")

    prompt = fake_llm.chat_requests()[-1]["messages"][-1]["content"]
    sources = re.findall(r'<passage n="\d+">\nSource: ([^\n]*)\n', prompt)
    assert len(sources) >= 2 and len(set(sources)) == len(sources), sources
    assert answer.answerer == "llm" and [c.marker for c in answer.citations] == [1]


def test_stream_yields_deltas_then_the_answer(llm_assistant: Assistant) -> None:
    *deltas, answer = llm_assistant.stream(QUESTION)

    assert len(deltas) >= 5 and all(isinstance(d, str) for d in deltas)
    assert isinstance(answer, Answer) and answer.answerer == "llm"
    assert markers(answer.text) == {c.marker for c in answer.citations} == {1}


def test_a_follow_up_is_rewritten_by_the_llm(llm_assistant: Assistant, fake_llm: FakeLLM) -> None:
    history = [
        {"role": "user", "content": "My transactions keep aborting. Should I raise transaction.timeout.ms?"},
        {"role": "assistant", "content": "Yes, raise `transaction.timeout.ms` for long transactions [1]."},
    ]
    answer = llm_assistant.ask("and what's its default?", history)

    assert answer.query == REWRITTEN
    rewrite = next(b for b in fake_llm.chat_requests() if "standalone search query" in b["messages"][0]["content"])
    assert "Should I raise transaction.timeout.ms?" in rewrite["messages"][-1]["content"]


def test_a_failed_rewrite_reads_the_follow_up_as_the_extractive_path_does(
    llm_assistant: Assistant, fake_llm: FakeLLM
) -> None:
    """The follow-up asks about another thing than the earlier turn's setting: when the endpoint cannot restate
    it, the carried setting stays context, as without an LLM, instead of leading the answer."""
    history = [
        {"role": "user", "content": "How often does Kafka Streams commit with commit.interval.ms?"},
        {"role": "assistant", "content": "`commit.interval.ms` sets how often Streams commits [1]."},
    ]
    expected = llm_assistant.ask("and without exactly-once?", history, answerer="extractive")
    fake_llm.script(status=500)

    answer = llm_assistant.ask("and without exactly-once?", history)

    assert answer.answerer == "extractive" and answer.text == expected.text
    assert any("could not rewrite the follow-up" in note for note in answer.notes), answer.notes


def test_a_not_covered_reply_abstains(llm_assistant: Assistant, fake_llm: FakeLLM) -> None:
    fake_llm.script("The knowledge base does not cover this.")

    answer = llm_assistant.ask(QUESTION)

    assert answer.abstained and answer.citations == ()


@pytest.mark.parametrize(
    ("script", "said"),
    [
        ({"status": 500}, "HTTP 500"),
        ({"status": 503}, "HTTP 503"),
        ({"delay_s": 3.0}, "did not answer in time"),
        ({"malformed": True}, "could not be read"),
    ],
)
def test_endpoint_failures_fall_back_to_the_extractive_answer(
    llm_assistant: Assistant, fake_llm: FakeLLM, script: dict[str, Any], said: str
) -> None:
    expected = llm_assistant.ask(QUESTION, answerer="extractive")
    fake_llm.script(**script)

    answer = llm_assistant.ask(QUESTION)
    *_, streamed = llm_assistant.stream(QUESTION)

    for got in (answer, streamed):
        assert isinstance(got, Answer)
        assert got.answerer == "extractive" and got.text == expected.text
        assert [c.passage.chunk_id for c in got.citations] == [c.passage.chunk_id for c in expected.citations]
        assert any(said in note for note in got.notes), got.notes
        shown = got.text + "\n".join(got.notes)
        assert "Traceback" not in shown and "fake endpoint failure" not in shown


def test_an_answer_without_a_valid_citation_falls_back(llm_assistant: Assistant, fake_llm: FakeLLM) -> None:
    expected = llm_assistant.ask(QUESTION, answerer="extractive")
    fake_llm.script("Kafka stores every offset in ZooKeeper [9]. Brokers need 64 GB of heap [4].")

    answer = llm_assistant.ask(QUESTION)

    assert answer.answerer == "extractive" and answer.text == expected.text
    assert answer.notes and "ZooKeeper" not in answer.text
