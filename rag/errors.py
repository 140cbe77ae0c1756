"""One exception tree for the whole project; every message says how to fix the problem.

    KafkaRagError
    ├── ConfigurationError          bad setting, missing Java, missing token or key
    ├── IngestError
    │   ├── SourceNotFoundError     a source path that does not exist (CLI exit code 2)
    │   ├── LoaderError             one file cannot be read; the ingest skips it and reports why
    │   └── NoDocumentsError        nothing ingestible; the previous index stays in place
    ├── EmbeddingError
    │   └── ModelNotFoundError      the embedding model cannot be found locally or on a hub
    ├── IndexStoreError
    │   ├── IndexNotFoundError      no published index: run `kafka-rag ingest`
    │   ├── IndexMismatchError      the index was built with another embedding model
    │   └── IndexLockedError        another ingest holds the index's writer lock (CLI exit code 3)
    ├── QuestionError               an empty or unusable question: nothing is searched
    ├── RetrievalError
    ├── GenerationError             the LLM endpoint failed, timed out or answered nonsense
    └── EvalError
        └── GoldenFileError         a golden-set line is malformed (names file, line and field)

Errors from lower libraries are translated once, at the boundary, with `raise X(...) from exc`.
Adapters catch `KafkaRagError` and show its message; anything else is a bug and is logged with its trace.
"""

from __future__ import annotations


class KafkaRagError(Exception):
    """Base of every error this project raises on purpose."""


class ConfigurationError(KafkaRagError):
    pass


class IngestError(KafkaRagError):
    pass


class SourceNotFoundError(IngestError):
    pass


class LoaderError(IngestError):
    """One file could not be turned into a document; `reason` is the short text kept in the manifest."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class NoDocumentsError(IngestError):
    pass


class EmbeddingError(KafkaRagError):
    pass


class ModelNotFoundError(EmbeddingError):
    pass


class IndexStoreError(KafkaRagError):
    pass


class IndexNotFoundError(IndexStoreError):
    pass


class IndexMismatchError(IndexStoreError):
    pass


class IndexLockedError(IndexStoreError):
    pass


class QuestionError(KafkaRagError):
    pass


class RetrievalError(KafkaRagError):
    pass


class GenerationError(KafkaRagError):
    pass


class EvalError(KafkaRagError):
    pass


class GoldenFileError(EvalError):
    """A golden-set line is unusable; the message names the file, the line and the field."""

    def __init__(self, path: str, line: int, field: str, problem: str) -> None:
        super().__init__(f"{path}:{line}: field '{field}': {problem}")
        self.path = path
        self.line = line
        self.field = field
