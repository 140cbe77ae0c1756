"""The LangChain pieces with real langchain-core objects over the real seeds index and model: the retriever
composed with runnables, and the answer chain's invoke, batch and stream (the fake chat model from langchain-core
where an LLM writes the answer)."""

from __future__ import annotations

import re

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough

from rag import Answer, QuestionError
from rag.langchain import AnswerChain, KafkaDocsRetriever, answer_chain, chain_input

pytestmark = pytest.mark.slow

QUESTION = "what does error code 121 mean"
ERROR_PAGE = "000_0424dccc37dbf1fb.txt"
MARKER = re.compile(r"\[(\d+)\]")


def test_retriever_returns_the_assistants_ranking_as_documents(assistant):
    expected = assistant.search(QUESTION, k=4).passages
    documents = KafkaDocsRetriever(assistant=assistant, k=4).invoke(QUESTION)
    assert all(isinstance(d, Document) for d in documents)
    assert [d.metadata["chunk_id"] for d in documents] == [p.chunk_id for p in expected]
    assert [d.metadata["rank"] for d in documents] == [1, 2, 3, 4]
    first = documents[0]
    assert first.page_content == expected[0].text and first.id == expected[0].chunk_id
    assert first.metadata["source_path"] == ERROR_PAGE
    assert first.metadata["title"] == "Kafka Error INVALID_RECORD_STATE"
    assert first.metadata["section_path"] == list(expected[0].section_path)
    assert first.metadata["score"] == pytest.approx(expected[0].score)


def test_retriever_composes_with_runnables(assistant):
    retriever = KafkaDocsRetriever(assistant=assistant, k=3, retrieval="bm25")

    def numbered(documents: list[Document]) -> str:
        return "\n".join(f"[{d.metadata['rank']}] {d.metadata['source_path']}" for d in documents)

    chain = RunnableParallel(context=retriever | RunnableLambda(numbered), question=RunnablePassthrough())
    result = chain.invoke(QUESTION)
    assert result["question"] == QUESTION
    assert result["context"].splitlines()[0] == f"[1] {ERROR_PAGE}"
    assert len(result["context"].splitlines()) == 3
    assert [len(docs) for docs in retriever.batch([QUESTION, "transaction.timeout.ms default"])] == [3, 3]


def test_retriever_refuses_a_bad_k(assistant):
    with pytest.raises(ValueError, match="greater than 0"):
        KafkaDocsRetriever(assistant=assistant, k=0)


def test_chain_invoke_answers_like_the_assistant(assistant):
    answer = answer_chain(assistant).invoke(QUESTION)
    assert isinstance(answer, Answer)
    assert answer.text == assistant.ask(QUESTION).text
    assert ERROR_PAGE in {c.passage.source_path for c in answer.citations}
    assert {int(n) for n in MARKER.findall(answer.text)} == {c.marker for c in answer.citations}


def test_chain_uses_history_for_a_follow_up(assistant):
    chain = answer_chain(assistant)
    history = [
        HumanMessage("my streams app gets ProducerFencedException when transaction.timeout.ms is hit"),
        AIMessage("The transaction timed out and the producer was fenced [1]."),
    ]
    follow_up = chain.invoke({"question": "and what's its default?", "history": history})
    assert "transaction.timeout.ms" in follow_up.query
    assert "The default `transaction.timeout.ms` is only 10s" in follow_up.text
    as_dicts = chain.invoke(
        {"question": "and what's its default?", "history": [{"role": m.type, "content": m.text} for m in history]}
    )
    assert as_dicts.text == follow_up.text


def test_chain_batch_and_pipe(assistant):
    chain = answer_chain(assistant, top_k=3)
    answers = chain.batch([QUESTION, "What is a good recipe for sourdough bread with a rye starter?"])
    assert [a.abstained for a in answers] == [False, True]
    texts = (chain | RunnableLambda(lambda answer: answer.text)).invoke(QUESTION)
    assert texts == answers[0].text


def test_chain_stream_yields_text_then_the_answer(assistant):
    events = list(answer_chain(assistant).stream(QUESTION))
    assert isinstance(events[-1], Answer)
    assert all(isinstance(e, str) for e in events[:-1]) and events[:-1]
    assert "".join(events[:-1]) == events[-1].text


def test_chain_with_a_langchain_chat_model_writes_the_answer(assistant):
    top = assistant.search(QUESTION, k=5).passages[0]
    sentence = next(s for s in re.split(r"(?<=[.!?])\s+", top.text) if len(s.split()) >= 4).rstrip(".")
    reply = f"{sentence} [1]."
    model = GenericFakeChatModel(messages=iter([reply]))
    chain = answer_chain(assistant, llm=model)
    events = list(chain.stream(QUESTION))
    answer = events[-1]
    assert isinstance(answer, Answer) and answer.answerer == "llm", answer.notes
    assert answer.text == reply
    assert answer.citations[0].passage.chunk_id == top.chunk_id
    assert "".join(e for e in events[:-1] if isinstance(e, str)) == reply  # the model's own tokens, streamed
    assert assistant.settings.answerer == "extractive"  # the shared assistant is not changed


def test_chain_input_forms_and_errors():
    assert chain_input("q") == ("q", [])
    assert chain_input({"question": "q", "history": [("human", "a"), ("ai", "b")]}) == (
        "q",
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
    )
    with pytest.raises(QuestionError, match="question string"):
        chain_input({"q": "no"})
    with pytest.raises(QuestionError, match=r"history\[1\]"):
        chain_input({"question": "q", "history": [{"role": "system", "content": "x"}]})


def test_chain_types_are_declared(assistant):
    chain = answer_chain(assistant)
    assert isinstance(chain, AnswerChain) and chain.OutputType is Answer
