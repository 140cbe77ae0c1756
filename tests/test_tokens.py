"""Late interaction's pieces on random data: the token basis and its int8 codes, and MaxSim over candidates' slices.

No model and no index: the stored tokens of a real index are in test_index_store.py and test_ingest.py,
the feature a real question gets in test_retrieval.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from rag.errors import IndexStoreError
from rag.tokens import (
    CODE_HEADROOM,
    CODE_LIMIT,
    MIN_SPAN,
    TOKEN_DIMENSIONS,
    TokenBasis,
    late_interaction,
    token_codes,
)


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
    assert basis.scales.shape == (kept,) and basis.scales.dtype == np.float32
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
    np.testing.assert_array_equal(loaded.scales, basis.scales)
    assert loaded.dimensions == 20 and loaded.components.dtype == loaded.scales.dtype == np.float32
    tokens = _unit_rows(np.random.default_rng(4), 5, 48)
    np.testing.assert_array_equal(loaded.project(tokens), basis.project(tokens))
    np.testing.assert_array_equal(loaded.codes(tokens), basis.codes(tokens))


@pytest.mark.parametrize("damage", ["missing", "truncated", "other-arrays", "no-scales"])
def test_a_damaged_basis_file_says_to_re_ingest(tmp_path, damage):
    path = tmp_path / "token_basis.npz"
    TokenBasis.fit(_unit_rows(np.random.default_rng(5), 50, 8)).save(path)
    if damage == "missing":
        path.unlink()
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:40])
    elif damage == "other-arrays":
        with path.open("wb") as handle:
            np.savez(handle, centre=np.zeros(8))
    else:  # written before tokens were stored as codes: a centre and directions, no spans
        with path.open("wb") as handle:
            np.savez(handle, mean=np.zeros(8, np.float32), components=np.eye(8, 4, dtype=np.float32))
    with pytest.raises(IndexStoreError, match=r"token_basis\.npz is unreadable .*re-run 'kafka-rag ingest'"):
        TokenBasis.load(path)


# ------------------------------------------------------------------------------------- int8 codes


def test_codes_are_one_signed_byte_per_direction_and_their_max_sim_is_the_float_one():
    """A question's `question` tokens times candidates' codes: the MaxSim of the projected tokens, within 0.01."""
    rng = np.random.default_rng(11)
    basis = TokenBasis.fit(_unit_rows(rng, 2000, 96), dimensions=32)
    counts = rng.integers(1, 30, size=40)
    tokens = _unit_rows(rng, int(counts.sum()), 96)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    question = _unit_rows(rng, 7, 96)

    codes = basis.codes(tokens)

    assert codes.dtype == np.int8 and codes.shape == (len(tokens), 32)
    assert np.abs(codes.astype(np.int64)).max() <= CODE_LIMIT
    assert token_codes(codes.tobytes(), 32).tolist() == codes.tolist()  # as they travel and are stored
    asked = basis.question(question)
    assert asked.dtype == np.float32 and asked.shape == (7, 32)
    coded = late_interaction(asked, codes.astype(np.float32), offsets)
    exact = late_interaction(basis.project(question), basis.project(tokens), offsets)
    np.testing.assert_allclose(coded, exact, atol=0.01)
    assert np.corrcoef(coded, exact)[0, 1] > 0.999


def test_a_directions_span_is_the_samples_largest_coordinate_with_headroom():
    """A coordinate 1.3x the sample's largest on its direction, as a later build's token may have, is not
    clipped at the sample's largest: its code gives it back within 10%."""
    rng = np.random.default_rng(12)
    sample = rng.standard_normal((500, 48)) * np.linspace(3.0, 0.5, 48)
    basis = TokenBasis.fit(sample.astype(np.float32), dimensions=16)
    peaks = np.abs(basis.project(sample)).max(axis=0)
    np.testing.assert_allclose(basis.scales, np.clip(CODE_HEADROOM * peaks, MIN_SPAN, 1.0), rtol=1e-5)
    direction = int(np.argmin(peaks))
    assert 1.3 * peaks[direction] < 0.8
    # A token whose projection is 1.3x the peak on that direction and the rest of its length on another
    other = (direction + 1) % basis.dimensions
    coordinates = np.zeros(basis.dimensions, np.float32)
    coordinates[direction] = 1.3 * peaks[direction]
    coordinates[other] = np.sqrt(1 - coordinates[direction] ** 2)
    token = basis.mean + basis.components @ coordinates
    np.testing.assert_allclose(basis.project(token)[0], coordinates, atol=1e-5)
    (code,) = basis.codes(token)
    assert abs(int(code[direction])) < CODE_LIMIT  # not clipped
    decoded = code[direction] * basis.scales[direction] / CODE_LIMIT
    assert decoded == pytest.approx(coordinates[direction], rel=0.1)


@pytest.mark.parametrize("samples", [1, 2, 3])
def test_a_tiny_samples_spans_are_at_least_the_minimum_and_its_codes_finite(samples):
    """Two or three tokens span fewer directions than they are given: those flat directions' spans are
    `MIN_SPAN`, not ~0, so other tokens' codes clip there rather than overflow."""
    rng = np.random.default_rng(samples)
    basis = TokenBasis.fit(_unit_rows(rng, samples, 24))
    assert basis.scales.shape == (basis.dimensions,) and np.all(basis.scales >= MIN_SPAN)
    assert np.all(basis.scales <= 1.0) and np.all(np.isfinite(basis.scales))
    tokens = _unit_rows(rng, 50, 24)
    codes = basis.codes(tokens)
    assert codes.dtype == np.int8 and np.abs(codes.astype(np.int64)).max() <= CODE_LIMIT
    assert np.all(np.isfinite(basis.question(tokens)))


@pytest.mark.parametrize("data", [None, b"", np.zeros((0, 24), np.int8).tobytes()], ids=["none", "empty", "no-tokens"])
def test_a_row_without_tokens_is_an_empty_matrix_of_the_dimension(data):
    empty = token_codes(data, 24)
    assert empty.shape == (0, 24) and empty.dtype == np.int8


def test_codes_of_another_width_are_refused():
    with pytest.raises(IndexStoreError, match="not whole tokens of 24 directions.*re-run 'kafka-rag ingest'"):
        token_codes(bytes(30), 24)


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
