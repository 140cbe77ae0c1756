"""Settings: `KAFKA_RAG_*` variables parsed and checked at once, CLI-style overrides applied on top."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rag import ConfigurationError, Settings
from rag.settings import DEFAULT_MODEL


def test_defaults_without_environment():
    settings = Settings.from_env({})
    assert settings == Settings()
    assert settings.model == DEFAULT_MODEL
    assert settings.index_dir == Path("index")
    assert settings.retrieval_mode == "hybrid"
    assert settings.answerer == "extractive"
    assert settings.embed_backend == "onnx"


def test_environment_variables_are_parsed_by_type():
    settings = Settings.from_env(
        {
            "KAFKA_RAG_TOP_K": "7",
            "KAFKA_RAG_INDEX_DIR": "/srv/kafka-rag/index",
            "KAFKA_RAG_SOURCES": "docs,seeds,,extra",
            "KAFKA_RAG_DENSE_WEIGHT": "0.5",
            "KAFKA_RAG_RETRIEVAL_MODE": "bm25",
            "KAFKA_RAG_CHUNK_SIZE": "600",
            "KAFKA_RAG_CHUNK_OVERLAP": "100",
            "KAFKA_RAG_LLM_MODEL": "llama3",
            "KAFKA_RAG_EMBED_BACKEND": "onnx-int8",
            "KAFKA_RAG_MODEL_CACHE_DIR": "/var/cache/kafka-rag",
        }
    )
    assert settings.top_k == 7
    assert settings.index_dir == Path("/srv/kafka-rag/index")
    assert settings.sources == ("docs", "seeds", "extra")
    assert settings.dense_weight == 0.5
    assert settings.retrieval_mode == "bm25"
    assert (settings.chunk_size, settings.chunk_overlap) == (600, 100)
    assert settings.llm_model == "llama3"
    assert (settings.embed_backend, settings.model_cache_dir) == ("onnx-int8", Path("/var/cache/kafka-rag"))


def test_variables_without_the_prefix_are_ignored():
    assert Settings.from_env({"TOP_K": "9", "KAFKA_TOP_K": "9", "kafka_rag_top_k": "9"}).top_k == Settings().top_k


def test_overrides_win_over_the_environment_and_none_means_unset():
    settings = Settings.from_env({"KAFKA_RAG_TOP_K": "7", "KAFKA_RAG_MODEL": "env-model"}, top_k=3, model=None)
    assert settings.top_k == 3
    assert settings.model == "env-model"


def test_from_env_reads_os_environ_by_default(monkeypatch):
    monkeypatch.setenv("KAFKA_RAG_TOP_K", "11")
    monkeypatch.setenv("KAFKA_RAG_ANSWERER", "llm")
    settings = Settings.from_env()
    assert (settings.top_k, settings.answerer) == (11, "llm")


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"KAFKA_RAG_TOP_K": "five"}, "KAFKA_RAG_TOP_K='five' is not a valid int"),
        ({"KAFKA_RAG_TOP_K": "2.5"}, "KAFKA_RAG_TOP_K='2.5' is not a valid int"),
        ({"KAFKA_RAG_DENSE_WEIGHT": "heavy"}, "KAFKA_RAG_DENSE_WEIGHT='heavy' is not a valid float"),
        ({"KAFKA_RAG_TOP_K": "0"}, "top_k must be between 1 and 50, got 0"),
        ({"KAFKA_RAG_FOLLOWUP_CONTEXT_WORDS": "-1"}, "followup_context_words must be 0 or more, got -1"),
        ({"KAFKA_RAG_RETRIEVAL_MODE": "semantic"}, "retrieval_mode must be one of dense, bm25, hybrid, got 'semantic'"),
        ({"KAFKA_RAG_ANSWERER": "gpt"}, "answerer must be one of extractive, llm, got 'gpt'"),
        ({"KAFKA_RAG_EMBED_BACKEND": "gpu"}, "embed_backend must be one of onnx, onnx-int8, torch, got 'gpu'"),
        ({"KAFKA_RAG_LLM_PROVIDER": "azure"}, "llm_provider must be one of openai, ollama, got 'azure'"),
        ({"KAFKA_RAG_CHUNK_SIZE": "50"}, "chunk_size must be at least 100 characters, got 50"),
        (
            {"KAFKA_RAG_CHUNK_SIZE": "300", "KAFKA_RAG_CHUNK_OVERLAP": "300"},
            "chunk_overlap must be between 0 and chunk_size (300), got 300",
        ),
        (
            {"KAFKA_RAG_CHUNK_OVERLAP": "-1"},
            f"chunk_overlap must be between 0 and chunk_size ({Settings.chunk_size}), got -1",
        ),
    ],
)
def test_invalid_values_raise_configuration_error_with_the_message(environ, message):
    with pytest.raises(ConfigurationError) as caught:
        Settings.from_env(environ)
    assert str(caught.value) == message


def test_invalid_override_is_checked_too():
    with pytest.raises(ConfigurationError, match=r"^top_k must be between 1 and 50, got -2$"):
        Settings.from_env({}, top_k=-2)


def test_settings_are_frozen_and_replace_rechecks():
    settings = Settings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.top_k = 3  # type: ignore[misc]
    assert dataclasses.replace(settings, top_k=2).top_k == 2
    with pytest.raises(ConfigurationError, match="retrieval_mode must be one of"):
        dataclasses.replace(settings, retrieval_mode="fuzzy")


def test_every_field_has_an_environment_variable():
    """Each field round-trips through its `KAFKA_RAG_<FIELD>` variable (nothing is settable only in code)."""
    custom = Settings(
        index_dir=Path("i2"), sources=("a", "b"), top_k=9, rrf_k=33, dense_weight=0.25, ui_auth="u:p", llm_timeout_s=2.5
    )
    environ = {}
    for field in dataclasses.fields(Settings):
        value = getattr(custom, field.name)
        environ[f"KAFKA_RAG_{field.name.upper()}"] = ",".join(value) if isinstance(value, tuple) else str(value)
    assert Settings.from_env(environ) == custom
