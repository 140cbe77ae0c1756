"""LangChain-native pieces over the one service API, for teams that already compose LangChain chains and agents.

    from rag.langchain import KafkaDocsRetriever, answer_chain

    retriever = KafkaDocsRetriever(assistant=assistant, k=5)       # a BaseRetriever: invoke(str) → Documents
    chain = answer_chain(assistant)                                 # a Runnable: question (+ history) → Answer
    chain.invoke({"question": "How do I fix it?", "history": [...]})

Both wrap an already-loaded `Assistant`, so the retriever ranks exactly as the assistant does and the chain
answers exactly as `Assistant.ask` does (abstention, citations, follow-up rewriting). `answer_chain(assistant,
llm=chat_model)` answers with any LangChain chat model instead of the configured answerer. Only this module
knows LangChain; the values it returns are LangChain `Document`s and the project's own `Answer`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import ConfigDict, Field

from rag.errors import QuestionError
from rag.passages import Answer, Passage
from rag.service import Assistant

ChainInput = str | Mapping[str, Any]  # "question" or {"question": ..., "history": [...]}
_ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant"}


def passage_document(passage: Passage, rank: int) -> Document:
    """A passage as a LangChain `Document`: its text, where it comes from, and the assistant's ranking."""
    return Document(
        page_content=passage.text,
        id=passage.chunk_id,
        metadata={
            "title": passage.title,
            "section_path": list(passage.section_path),
            "heading": passage.heading,
            "source_path": passage.source_path,
            "url": passage.url,
            "chunk_id": passage.chunk_id,
            "doc_id": passage.doc_id,
            "score": passage.score,
            "rank": rank,
        },
    )


class KafkaDocsRetriever(BaseRetriever):
    """The knowledge base as a LangChain retriever: `invoke(question)` → the assistant's top `k` passages, best first.

    Each `Document` carries the passage text and, in `metadata`, title, section path, source path, url,
    chunk id, score and `rank` (1 = best) from the assistant's own ranking.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    assistant: Assistant
    k: int = Field(default=5, gt=0)
    retrieval: str | None = None  # dense | bm25 | hybrid; None uses the assistant's setting

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        result = self.assistant.search(query, k=self.k, retrieval=self.retrieval)
        return [passage_document(p, rank) for rank, p in enumerate(result.passages, start=1)]


class AnswerChain(Runnable[ChainInput, Answer]):
    """question (+ history) → `Answer`, as an LCEL runnable: `invoke`, `batch` and `stream` work as in any chain.

    Input is the question as a string, or `{"question": str, "history": [...]}` where history items are
    `{"role", "content"}` dicts, LangChain messages or `(role, content)` pairs, oldest first. `stream`
    yields the answer's text deltas as strings, then the final `Answer` (with its citations) last.
    """

    def __init__(self, assistant: Assistant, *, top_k: int | None = None, retrieval: str | None = None) -> None:
        self.assistant = assistant
        self.top_k = top_k
        self.retrieval = retrieval

    @property
    def InputType(self) -> type[ChainInput]:  # noqa: N802 (LangChain's name)
        return ChainInput  # type: ignore[return-value]

    @property
    def OutputType(self) -> type[Answer]:  # noqa: N802 (LangChain's name)
        return Answer

    def invoke(self, input: ChainInput, config: RunnableConfig | None = None, **kwargs: Any) -> Answer:  # noqa: A002
        return self._call_with_config(self._ask, input, config, run_type="chain")

    def stream(  # type: ignore[override]
        self,
        input: ChainInput,  # noqa: A002
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Iterator[str | Answer]:
        # Text deltas and then the Answer: the callbacks' run output is the last chunk, the Answer.
        yield from self._transform_stream_with_config(iter([input]), self._stream, config, run_type="chain")  # type: ignore[arg-type]

    def _ask(self, value: ChainInput) -> Answer:
        question, history = chain_input(value)
        return self.assistant.ask(question, history, top_k=self.top_k, retrieval=self.retrieval)

    def _stream(self, values: Iterator[ChainInput]) -> Iterator[str | Answer]:
        for value in values:
            question, history = chain_input(value)
            yield from self.assistant.stream(question, history, top_k=self.top_k, retrieval=self.retrieval)


def answer_chain(
    assistant: Assistant,
    *,
    llm: BaseChatModel | None = None,
    top_k: int | None = None,
    retrieval: str | None = None,
) -> AnswerChain:
    """The assistant as a runnable chain; with `llm`, that chat model writes the cited answer (checked as usual)."""
    return AnswerChain(
        assistant.with_chat_model(llm) if llm is not None else assistant, top_k=top_k, retrieval=retrieval
    )


def chain_input(value: ChainInput) -> tuple[str, list[dict[str, str]]]:
    """The chain's input → (question, history as `[{role, content}]`)."""
    if isinstance(value, str):
        return value, []
    if not isinstance(value, Mapping) or not isinstance(value.get("question"), str):
        raise QuestionError(
            f"The chain takes a question string or {{'question': str, 'history': [...]}}; got {type(value).__name__}"
        )
    return value["question"], [_turn(number, item) for number, item in enumerate(value.get("history") or (), 1)]


def _turn(number: int, item: Any) -> dict[str, str]:
    role: Any
    content: Any
    if isinstance(item, BaseMessage):
        role, content = item.type, item.text
    elif isinstance(item, Mapping):
        role, content = item.get("role"), item.get("content")
    elif isinstance(item, Sequence) and not isinstance(item, str) and len(item) == 2:
        role, content = item
    else:
        role, content = None, None
    if role not in _ROLES or not isinstance(content, str):
        raise QuestionError(
            f"history[{number}] must be a user or assistant turn with text content "
            "({'role': 'user', 'content': '...'}, a LangChain message, or ('user', '...'))"
        )
    return {"role": _ROLES[role], "content": content}
