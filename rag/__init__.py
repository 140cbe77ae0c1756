"""kafka-rag: a troubleshooting assistant for Apache Kafka.

The public API, the only names adapters (CLI, web UI, Slack, evals) import:
"""

from rag.chunking import extracted_text
from rag.errors import (
    ConfigurationError,
    EvalError,
    GenerationError,
    GoldenFileError,
    IndexMismatchError,
    IndexNotFoundError,
    IndexStoreError,
    IngestError,
    KafkaRagError,
    LoaderError,
    QuestionError,
)
from rag.feedback import append_feedback, check_writable, export_thumbs_down, feedback_record
from rag.ingest import IngestConfig, run_ingest
from rag.passages import Answer, Citation, IndexStatus, Passage, SearchResult
from rag.ranking import RANK_FEATURES, LinearModel, data_hash, model_paths
from rag.service import Assistant
from rag.settings import ANSWERERS, RETRIEVAL_MODES, Settings

__all__ = [
    "RANK_FEATURES",
    "ANSWERERS",
    "RETRIEVAL_MODES",
    "Answer",
    "Assistant",
    "Citation",
    "ConfigurationError",
    "EvalError",
    "GenerationError",
    "GoldenFileError",
    "IndexMismatchError",
    "IndexNotFoundError",
    "IndexStoreError",
    "IndexStatus",
    "IngestConfig",
    "IngestError",
    "KafkaRagError",
    "LinearModel",
    "LoaderError",
    "Passage",
    "QuestionError",
    "SearchResult",
    "Settings",
    "append_feedback",
    "check_writable",
    "data_hash",
    "export_thumbs_down",
    "extracted_text",
    "feedback_record",
    "model_paths",
    "run_ingest",
]
