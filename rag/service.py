"""The one service API every adapter uses: `Assistant.from_settings(...)`, `ask`, `stream`, `search`.

(Contract first; the implementation lands in the following commits.)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from rag.passages import Answer, IndexStatus, SearchResult
from rag.settings import Settings

History = Sequence[Mapping[str, str]]  # [{"role": "user"|"assistant", "content": "..."}]


class Assistant:
    """Loads the published index and the embedding model once; thread-safe for concurrent callers."""

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> Assistant:
        raise NotImplementedError

    @property
    def status(self) -> IndexStatus:
        raise NotImplementedError

    def ask(
        self,
        question: str,
        history: History = (),
        *,
        top_k: int | None = None,
        retrieval: str | None = None,
        answerer: str | None = None,
    ) -> Answer:
        raise NotImplementedError

    def stream(
        self,
        question: str,
        history: History = (),
        *,
        top_k: int | None = None,
        retrieval: str | None = None,
        answerer: str | None = None,
    ) -> Iterator[str | Answer]:
        """Yield text deltas as they are produced, then exactly one final `Answer`."""
        raise NotImplementedError

    def search(
        self,
        question: str,
        history: History = (),
        *,
        k: int = 10,
        retrieval: str | None = None,
        rewrite: bool = True,
    ) -> SearchResult:
        """Ranked passages only; `rewrite=False` searches the raw question, ignoring history."""
        raise NotImplementedError
