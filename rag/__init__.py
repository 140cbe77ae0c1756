"""kafka-rag: a troubleshooting assistant for Apache Kafka.

The public API, the only names adapters (CLI, web UI, Slack, evals) import:
"""

from rag.abstention import load_abstention, unfitted_abstention
from rag.adapter import ADAPTER_FILE, chunk_model_texts
from rag.adapter_training import BATCH as ADAPTER_BATCH
from rag.adapter_training import LEARNING_RATE as ADAPTER_LEARNING_RATE
from rag.adapter_training import RANK as ADAPTER_RANK
from rag.adapter_training import TRAIN_TOKENS as ADAPTER_TRAIN_TOKENS
from rag.adapter_training import AdapterFit, cosine_ranks, model_with_adapter, train_adapter
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
from rag.query import CAPITALISED_THROUGHOUT, prose_capitalisation
from rag.ranking import RANK_FEATURES, LinearModel, data_hash, first_stage_ranker, model_paths
from rag.service import Assistant
from rag.settings import ANSWERERS, RETRIEVAL_MODES, Settings

__all__ = [
    "ADAPTER_BATCH",
    "ADAPTER_FILE",
    "ADAPTER_LEARNING_RATE",
    "ADAPTER_RANK",
    "ADAPTER_TRAIN_TOKENS",
    "CAPITALISED_THROUGHOUT",
    "RANK_FEATURES",
    "ANSWERERS",
    "RETRIEVAL_MODES",
    "AdapterFit",
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
    "chunk_model_texts",
    "cosine_ranks",
    "data_hash",
    "export_thumbs_down",
    "extracted_text",
    "feedback_record",
    "first_stage_ranker",
    "load_abstention",
    "model_paths",
    "model_with_adapter",
    "prose_capitalisation",
    "run_ingest",
    "train_adapter",
    "unfitted_abstention",
]
