"""Late interaction's pieces on random data: the token basis, token bytes, and MaxSim over candidates' slices.

No model and no index: the stored tokens of a real index are in test_index_store.py and test_ingest.py,
the feature a real question gets in test_retrieval.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from rag.errors import IndexStoreError
from rag.tokens import TOKEN_DIMENSIONS, TokenBasis, late_interaction, token_bytes, token_matrix


def _unit_rows(rng: np.random.Generator, count: int, dimension: int) -> np.ndarray:
    rows = rng.standard_normal((count, dimension)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _max_sim(question: np.ndarray, candidate: np.ndarray) -> float:
    """MaxSim as ColBERT defines it, one candidate at a time: each question token's best dot product, averaged."""
    if len(question) == 0 or len(candidate) == 0:
        return 0.0
    return float(np.mean([max(float(q @ t) for t in candidate) for q in question]))


# ------------------------------------------------------------------------------------- the basis


@pytest.mark.parametrize(
    ("samples", "dimension", "kept"),
    [(500, 384, TOKEN_DIMENSIONS), (40, 384, 40), (300, 16, 16), (1, 16, 1), (0, 16, 1)],
    ids=["many-tokens", "few-tokens", "narrow-model", "one-token", "no-tokens"],
)
def test_the_basis_keeps_at_most_128_orthonormal_directions(samples, dimension, kept):
    sample = _unit_rows(np.random.default_rng(samples), samples, dimension) if samples else np.zeros((0, dimension))
    basis = TokenBasis.fit(sample)
    assert basis.dimensions == kept == min(TOKEN_DIMENSIONS, max(samples, 1), dimension)
    assert basis.components.shape == (dimension, kept) and basis.mean.shape == (dimension,)
    assert basis.components.dtype == basis.mean.dtype == np.float32
    np.testing.assert_allclose(basis.components.T @ basis.components, np.eye(kept), atol=1e-5)
    if samples:
        np.testing.assert_allclose(basis.mean, sample.mean(axis=0), atol=1e-6)


def test_the_basis_holds_the_directions_the_tokens_vary_along_first():
    """Tokens that vary along three directions of 32: the first three components span them."""
    rng = np.random.default_rng(1)
    directions = np.linalg.qr(rng.standard_normal((32, 3)))[0].astype(np.float32)
    sample = (rng.standard_normal((400, 3)) * [5.0, 3.0, 2.0]) @ directions.T + 0.01 * rng.standard_normal((400, 32))
    basis = TokenBasis.fit(sample.astype(np.float32), dimensions=8)
    assert basis.dimensions == 8
    spanned = basis.components[:, :3]
    # each true direction lies in the span of the first three components
    np.testing.assert_allclose(np.linalg.norm(spanned.T @ directions, axis=0), 1.0, atol=1e-3)


def test_projected_tokens_are_unit_length_and_keep_their_similarities_in_a_full_basis():
    rng = np.random.default_rng(2)
    sample = _unit_rows(rng, 200, 16)
    reduced, full = TokenBasis.fit(sample, dimensions=6), TokenBasis.fit(sample)
    tokens = _unit_rows(rng, 30, 16)
    projected = reduced.project(tokens)
    assert projected.shape == (30, 6) and projected.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(projected, axis=1), 1.0, atol=1e-5)
    assert reduced.project(tokens[0]).shape == (1, 6)  # one token alone is one row
    assert reduced.project(np.zeros((0, 16))).shape == (0, 6)
    # Keeping every direction is a rotation of the centred tokens: cosines between them are unchanged.
    centred = tokens - full.mean
    centred /= np.linalg.norm(centred, axis=1, keepdims=True)
    rotated = full.project(tokens)
    np.testing.assert_allclose(rotated @ rotated.T, centred @ centred.T, atol=1e-5)


def test_a_saved_basis_loads_equal(tmp_path):
    basis = TokenBasis.fit(_unit_rows(np.random.default_rng(3), 300, 48), dimensions=20)
    basis.save(tmp_path / "token_basis.npz")
    loaded = TokenBasis.load(tmp_path / "token_basis.npz")
    np.testing.assert_array_equal(loaded.mean, basis.mean)
    np.testing.assert_array_equal(loaded.components, basis.components)
    assert loaded.dimensions == 20 and loaded.components.dtype == np.float32
    tokens = _unit_rows(np.random.default_rng(4), 5, 48)
    np.testing.assert_array_equal(loaded.project(tokens), basis.project(tokens))


@pytest.mark.parametrize("damage", ["missing", "truncated", "other-arrays"])
def test_a_damaged_basis_file_says_to_re_ingest(tmp_path, damage):
    path = tmp_path / "token_basis.npz"
    TokenBasis.fit(_unit_rows(np.random.default_rng(5), 50, 8)).save(path)
    if damage == "missing":
        path.unlink()
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:40])
    else:
        with path.open("wb") as handle:
            np.savez(handle, centre=np.zeros(8))
    with pytest.raises(IndexStoreError, match=r"token_basis\.npz is unreadable .*re-run 'kafka-rag ingest'"):
        TokenBasis.load(path)


# ------------------------------------------------------------------------------------- token bytes


def test_token_bytes_come_back_as_float32_within_float16_rounding():
    tokens = _unit_rows(np.random.default_rng(6), 7, 24)
    data = token_bytes(tokens)
    assert isinstance(data, bytes) and len(data) == 7 * 24 * 2  # float16
    back = token_matrix(data, 24)
    assert back.shape == (7, 24) and back.dtype == np.float32
    np.testing.assert_allclose(back, tokens, rtol=1e-3, atol=1e-4)
    np.testing.assert_array_equal(back, tokens.astype(np.float16).astype(np.float32))
    assert token_bytes(back) == data  # float16 values survive a second trip exactly


@pytest.mark.parametrize("data", [None, b"", token_bytes(np.zeros((0, 24)))], ids=["none", "empty", "no-tokens"])
def test_a_row_without_tokens_is_an_empty_matrix_of_the_dimension(data):
    empty = token_matrix(data, 24)
    assert empty.shape == (0, 24) and empty.dtype == np.float32


# ------------------------------------------------------------------------------------- late interaction


def test_late_interaction_is_each_candidates_max_sim():
    """Candidates of 3, 0, 1, 5 and 0 tokens, in one array: each scores what it would alone; none is 0."""
    rng = np.random.default_rng(7)
    counts = [3, 0, 1, 5, 0]
    candidates = [_unit_rows(rng, count, 12) for count in counts]
    tokens = np.concatenate(candidates)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    question = _unit_rows(rng, 4, 12)

    scores = late_interaction(question, tokens, offsets)

    assert scores.shape == (5,) and scores.dtype == np.float32
    expected = [_max_sim(question, candidate) for candidate in candidates]
    np.testing.assert_allclose(scores, expected, atol=1e-6)
    assert scores[1] == scores[4] == 0.0
    assert all(score != 0.0 for score, count in zip(scores, counts, strict=True) if count)


def test_late_interaction_of_a_candidate_holding_the_questions_tokens_is_one():
    rng = np.random.default_rng(8)
    question = _unit_rows(rng, 3, 10)
    other = _unit_rows(rng, 4, 10)
    tokens = np.concatenate([other, question[::-1], other[:1]])  # the second candidate holds every question token
    offsets = np.array([0, 4, 8], dtype=np.int64)
    scores = late_interaction(question, tokens, offsets)
    assert scores[1] == pytest.approx(1.0, abs=1e-6) and scores[0] < scores[1]


def test_late_interaction_on_random_pools_equals_brute_force():
    rng = np.random.default_rng(9)
    for _ in range(20):
        counts = rng.integers(0, 6, size=rng.integers(1, 12))
        counts[-1] = 0  # the last candidate holds no tokens
        candidates = [_unit_rows(rng, int(count), 8) for count in counts]
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        question = _unit_rows(rng, int(rng.integers(1, 6)), 8)
        tokens = np.concatenate(candidates) if counts.sum() else np.zeros((0, 8), np.float32)
        scores = late_interaction(question, tokens, offsets)
        np.testing.assert_allclose(scores, [_max_sim(question, c) for c in candidates], atol=1e-6)


def test_late_interaction_without_question_tokens_or_candidate_tokens_is_zero():
    rng = np.random.default_rng(10)
    tokens = _unit_rows(rng, 6, 8)
    offsets = np.array([0, 2, 6], dtype=np.int64)
    assert late_interaction(np.zeros((0, 8), np.float32), tokens, offsets).tolist() == [0.0, 0.0]
    no_tokens = late_interaction(_unit_rows(rng, 3, 8), np.zeros((0, 8), np.float32), np.zeros(4, np.int64))
    assert no_tokens.tolist() == [0.0, 0.0, 0.0]
    assert late_interaction(_unit_rows(rng, 3, 8), np.zeros((0, 8), np.float32), np.zeros(1, np.int64)).shape == (0,)
