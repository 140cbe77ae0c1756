"""The second stage: the learned linear model's file format and `rank` over a hand-made candidate pool."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rag.errors import ConfigurationError
from rag.passages import Passage
from rag.query import parse_query
from rag.ranking import RANK_FEATURES, RANKER_PATH, LinearModel, Ranked, load_ranker, model_paths, rank
from rag.retrieval import Candidate, CandidatePool, QueryEvidence


def make_candidate(
    chunk_id: str,
    *,
    section: tuple[str, ...] = ("Doc", "Section"),
    source: str = "doc.html",
    text: str | None = None,
    first_stage: float = 0.0,
    dense: float = 0.5,
    features: dict[str, float] | None = None,
    unit_scores: tuple[float, ...] = (),
    unit_vectors: np.ndarray | None = None,
    matched_terms: frozenset[str] = frozenset(),
    identifiers: tuple[str, ...] = (),
    defines_pasted_error: int = 0,
) -> Candidate:
    """A candidate built by hand: features default to 0 except those given by name."""
    values = {name: 0.0 for name in RANK_FEATURES} | {"dense": dense} | (features or {})
    passage = Passage(
        chunk_id=chunk_id,
        doc_id=source,
        title=section[0],
        section_path=section,
        source_path=source,
        text=text if text is not None else f"Some text about Kafka ({chunk_id}).",
        score=first_stage,
    )
    scores = np.asarray(unit_scores, dtype=np.float32)
    return Candidate(
        passage=passage,
        features=tuple(values[name] for name in RANK_FEATURES),
        first_stage=first_stage,
        dense=dense,
        unit_scores=scores,
        unit_vectors=unit_vectors if unit_vectors is not None else np.zeros((len(scores), 4), np.float32),
        matched_terms=matched_terms,
        identifiers=identifiers,
        defines_pasted_error=defines_pasted_error,
    )


def make_pool(
    candidates, question: str = "why is my consumer lagging?", mode: str = "hybrid", **evidence
) -> CandidatePool:
    query = parse_query(question)
    fields = {
        "term_weights": {t: 1.0 for t in query.tokens},
        "unknown_term_share": 0.0,
        "unknown_word_share": 0.0,
        "names": len(query.names),
        "unknown_names": (),
        "focus_identifiers": len(query.focus_identifiers),
        "unknown_focus_identifiers": 0,
        "unknown_label_share": 0.0,
        "unknown_asked_name_share": 0.0,
        "unknown_asked_identifier_share": 0.0,
        "unknown_asked_phrase_share": 0.0,
        "unknown_asked_foreign_share": 0.0,
    } | evidence
    return CandidatePool(query, mode, tuple(candidates), QueryEvidence(**fields), {})


def one_feature_model(name: str, weight: float = 1.0, **fields) -> LinearModel:
    """Scores = `weight` * feature `name` (mean 0, scale 1)."""
    size = len(RANK_FEATURES)
    weights = tuple(weight if f == name else 0.0 for f in RANK_FEATURES)
    return LinearModel("ranker", RANK_FEATURES, (0.0,) * size, (1.0,) * size, weights, **fields)


def _ids(ranked: Ranked) -> list[str]:
    return [c.passage.chunk_id for c in ranked.candidates]


# ------------------------------------------------------------------------------------------ LinearModel


def _write(path: Path, **overrides) -> Path:
    payload = json.loads(one_feature_model("bm25", 2.0, bias=0.5, threshold=0.1).to_json()) | overrides
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def test_model_file_round_trips(tmp_path):
    model = LinearModel(
        "ranker",
        RANK_FEATURES,
        tuple(float(i) for i in range(len(RANK_FEATURES))),
        (2.0,) * len(RANK_FEATURES),
        tuple(0.1 * i for i in range(len(RANK_FEATURES))),
        bias=-0.25,
        threshold=0.4,
        version=3,
        training={"data": "abc", "queries": 12},
    )
    path = tmp_path / "ranker.json"
    path.write_text(model.to_json(), encoding="utf-8")
    assert LinearModel.load(path, RANK_FEATURES) == model


def test_model_file_with_other_features_is_refused(tmp_path):
    path = _write(tmp_path / "ranker.json", features=[*RANK_FEATURES[:-1], "not_a_feature"])
    with pytest.raises(
        ConfigurationError, match=r"was fitted on features .* re-run its fit script \(evals/fit_\*\.py\)"
    ):
        LinearModel.load(path, RANK_FEATURES)


def test_model_file_with_reordered_features_is_refused(tmp_path):
    reordered = [RANK_FEATURES[1], RANK_FEATURES[0], *RANK_FEATURES[2:]]
    with pytest.raises(ConfigurationError, match="but the code computes"):
        LinearModel.load(_write(tmp_path / "ranker.json", features=reordered), RANK_FEATURES)


@pytest.mark.parametrize(
    "content",
    ["", "not json", "{}", '{"name": "ranker", "features": []}', '{"name": "r", "features": ["a"], "mean": ["x"]}'],
)
def test_unreadable_model_file_is_a_configuration_error(tmp_path, content):
    path = tmp_path / "ranker.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigurationError, match="Cannot read the model file .*: restore it from git"):
        LinearModel.load(path, RANK_FEATURES)


def test_missing_model_file_is_a_configuration_error(tmp_path):
    with pytest.raises(ConfigurationError, match="Cannot read the model file"):
        LinearModel.load(tmp_path / "absent.json", RANK_FEATURES)


def test_model_with_mismatched_counts_is_refused(tmp_path):
    with pytest.raises(ConfigurationError, match="malformed"):
        LinearModel("ranker", ("a", "b"), (0.0, 0.0), (1.0,), (1.0, 1.0))
    with pytest.raises(ConfigurationError, match="malformed"):
        LinearModel.load(_write(tmp_path / "ranker.json", weights=[1.0]), RANK_FEATURES)


def test_zero_scale_reads_as_one(tmp_path):
    model = LinearModel.load(_write(tmp_path / "ranker.json", scale=[0.0] * len(RANK_FEATURES)), RANK_FEATURES)
    assert model.scale == (1.0,) * len(RANK_FEATURES)


def test_scores_standardise_then_weigh():
    model = LinearModel("m", ("a", "b"), mean=(1.0, 2.0), scale=(2.0, 4.0), weights=(3.0, -1.0), bias=0.5)
    matrix = np.asarray([[1.0, 2.0], [3.0, 6.0], [5.0, -2.0]])
    expected = [0.5, 3.0 * 1.0 - 1.0 * 1.0 + 0.5, 3.0 * 2.0 - 1.0 * -1.0 + 0.5]
    assert model.scores(matrix).tolist() == pytest.approx(expected)


def test_scores_of_no_rows_is_empty():
    model = one_feature_model("dense")
    assert model.scores(np.zeros((0, len(RANK_FEATURES)))).shape == (0,)


def test_shipped_ranker_loads_with_the_features_the_code_computes():
    assert model_paths()["ranker"] == RANKER_PATH
    assert load_ranker().features == RANK_FEATURES


# ------------------------------------------------------------------------------------------ rank


def test_hybrid_orders_by_the_learned_score_not_the_first_stage():
    pool = make_pool(
        [
            make_candidate("a", section=("D", "1"), first_stage=0.9, features={"bm25": 0.1}),
            make_candidate("b", section=("D", "2"), first_stage=0.5, features={"bm25": 0.9}),
            make_candidate("c", section=("D", "3"), first_stage=0.1, features={"bm25": 0.5}),
        ]
    )
    ranked = rank(pool, k=3, max_per_section=4, model=one_feature_model("bm25", 2.0))
    assert _ids(ranked) == ["b", "c", "a"]
    assert ranked.scores == pytest.approx((1.8, 1.0, 0.2))
    assert [c.passage.score for c in ranked.candidates] == pytest.approx([1.8, 1.0, 0.2])
    assert ranked.pool is pool


@pytest.mark.parametrize("mode", ["dense", "bm25"])
def test_single_retriever_modes_keep_the_first_stage_order(mode):
    pool = make_pool(
        [
            make_candidate("a", section=("D", "1"), first_stage=0.2, features={"bm25": 0.9}),
            make_candidate("b", section=("D", "2"), first_stage=0.7, features={"bm25": 0.1}),
        ],
        mode=mode,
    )
    ranked = rank(pool, k=2, max_per_section=4, model=one_feature_model("bm25"))
    assert _ids(ranked) == ["b", "a"]
    assert [c.passage.score for c in ranked.candidates] == pytest.approx([0.7, 0.2])
    assert ranked.scores == pytest.approx((0.1, 0.9))  # the learned scores are still reported


@pytest.mark.parametrize("mode", ["hybrid", "dense"])
def test_the_best_chunk_defining_the_pasted_error_comes_first_in_hybrid_mode(mode):
    pool = make_pool(
        [
            make_candidate("tool", section=("D", "1"), first_stage=0.9, features={"bm25": 0.9}),
            make_candidate(
                "row-a", section=("D", "2"), first_stage=0.5, features={"bm25": 0.2}, defines_pasted_error=2
            ),
            make_candidate(
                "row-b", section=("D", "3"), first_stage=0.1, features={"bm25": 0.5}, defines_pasted_error=2
            ),
            make_candidate("other", section=("D", "4"), first_stage=0.3, features={"bm25": 0.7}),
        ],
        mode=mode,
    )
    ranked = rank(pool, k=4, max_per_section=4, model=one_feature_model("bm25"))
    expected = ["row-b", "tool", "other", "row-a"] if mode == "hybrid" else ["tool", "row-a", "other", "row-b"]
    assert _ids(ranked) == expected
    assert ranked.scores[0] == pytest.approx(0.5 if mode == "hybrid" else 0.9)  # scores stay the model's


def test_a_chunk_defining_an_error_the_paste_names_comes_before_one_defining_its_request_context():
    """`api=CREATE_TOPICS …PolicyViolationException`: the POLICY_VIOLATION row explains the error, the
    CREATE_TOPICS row of an ACL table only names the request that met it."""
    pool = make_pool(
        [
            make_candidate("acl", section=("D", "1"), features={"bm25": 0.9}, defines_pasted_error=1),
            make_candidate("tool", section=("D", "2"), features={"bm25": 0.7}),
            make_candidate("error-row", section=("D", "3"), features={"bm25": 0.1}, defines_pasted_error=2),
        ]
    )
    assert _ids(rank(pool, k=3, max_per_section=4, model=one_feature_model("bm25"))) == ["error-row", "acl", "tool"]


ERROR_TABLE = "\n".join(
    [
        "The following error codes are used:",
        "UNKNOWN_SERVER_ERROR | -1 | False | The server experienced an unexpected error.",
        "OFFSET_OUT_OF_RANGE | 1 | False | The requested offset is not within the range of offsets.",
        "CORRUPT_MESSAGE | 2 | True | This message has failed its CRC checksum.",
    ]
)
SERIALIZATION_PASTE = (
    "org.apache.kafka.common.errors.SerializationException: Size of data received by LongDeserializer is not 8"
)


@pytest.mark.parametrize(
    ("question", "table_defines", "expected"),
    [
        # a paste no chunk defines: the table's rows are other entries, the prose goes first
        (SERIALIZATION_PASTE, 0, ["prose", "table"]),
        # the table defines the paste's error: it stays where it ranks
        (SERIALIZATION_PASTE, 2, ["table", "prose"]),
        # no paste: the ranking stands
        ("which error codes are retriable?", 0, ["table", "prose"]),
    ],
)
def test_a_table_naming_nothing_of_a_paste_no_chunk_defines_goes_last(question, table_defines, expected):
    table = make_candidate(
        "table", section=("D", "1"), text=ERROR_TABLE, features={"bm25": 0.9}, defines_pasted_error=table_defines
    )
    pool = make_pool([table, make_candidate("prose", section=("D", "2"), features={"bm25": 0.1})], question=question)
    assert _ids(rank(pool, k=2, max_per_section=4, model=one_feature_model("bm25"))) == expected


def test_a_settings_label_rows_are_no_table_of_entries():
    """A setting's `Type: | int` lines have two cells: its chunk is the setting's entry, not a table of others."""
    lines = ["max.block.ms", "How long send() blocks.", "Type: | long", "Default: | 60000", "Valid Values: | [0,...]"]
    entry = "\n".join(lines)
    pool = make_pool(
        [
            make_candidate("entry", section=("D", "1"), text=entry, features={"bm25": 0.9}),
            make_candidate("prose", section=("D", "2"), features={"bm25": 0.1}),
        ],
        question=SERIALIZATION_PASTE,
    )
    assert _ids(rank(pool, k=2, max_per_section=4, model=one_feature_model("bm25"))) == ["entry", "prose"]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("what is the ISR?", ["replication", "metrics"]),
        ("how often does the ISR shrink?", ["metrics", "replication"]),  # asks more than what it is
    ],
)
def test_the_chunk_that_says_what_the_thing_asked_about_is_comes_first(question, expected):
    metrics = make_candidate(
        "metrics", section=("D", "1"), text="ISR shrink rate | IsrShrinksPerSec | 0", features={"bm25": 0.9}
    )
    replication = make_candidate(
        "replication",
        section=("D", "2"),
        text="Replicas fall behind. The leader tracks the in-sync replicas, which is known as the ISR.",
        features={"bm25": 0.1},
    )
    pool = make_pool([metrics, replication], question=question)
    assert _ids(rank(pool, k=2, max_per_section=4, model=one_feature_model("bm25"))) == expected


def test_ties_keep_the_pool_order():
    pool = make_pool([make_candidate(name, section=("D", name)) for name in "dcba"])
    assert _ids(rank(pool, k=4, max_per_section=4, model=one_feature_model("bm25"))) == list("dcba")


def test_k_cuts_the_list():
    pool = make_pool([make_candidate(str(i), section=("D", str(i)), features={"rrf": i}) for i in range(6)])
    ranked = rank(pool, k=2, max_per_section=4, model=one_feature_model("rrf"))
    assert _ids(ranked) == ["5", "4"]
    assert len(ranked.scores) == 2


def _three_in_one_section_and_one_other():
    same = ("Doc", "Same section")
    return make_pool(
        [
            make_candidate("s1", section=same, features={"rrf": 0.9}),
            make_candidate("s2", section=same, features={"rrf": 0.8}),
            make_candidate("s3", section=same, features={"rrf": 0.7}),
            make_candidate("o1", section=("Doc", "Other"), features={"rrf": 0.1}),
        ]
    )


def test_per_section_cap_makes_room_for_other_sections():
    pool = _three_in_one_section_and_one_other()
    ranked = rank(pool, k=3, max_per_section=2, model=one_feature_model("rrf"))
    assert _ids(ranked) == ["s1", "s2", "o1"]


def test_same_heading_in_another_file_is_another_section():
    pool = make_pool(
        [
            make_candidate("a1", source="a.html", section=("Doc", "S"), features={"rrf": 0.9}),
            make_candidate("a2", source="a.html", section=("Doc", "S"), features={"rrf": 0.8}),
            make_candidate("b1", source="b.html", section=("Doc", "S"), features={"rrf": 0.7}),
        ]
    )
    assert _ids(rank(pool, k=2, max_per_section=1, model=one_feature_model("rrf"))) == ["a1", "b1"]


def test_overflow_fills_a_short_list_in_score_order():
    pool = _three_in_one_section_and_one_other()
    ranked = rank(pool, k=4, max_per_section=1, model=one_feature_model("rrf"))
    assert _ids(ranked) == ["s1", "o1", "s2", "s3"]
    assert ranked.scores == pytest.approx((0.9, 0.1, 0.8, 0.7))


def test_a_passage_repeating_a_better_ones_text_goes_last():
    """The same setting's entry on the source, sink and MirrorMaker pages: one of them is enough up front."""
    same = "Maximum number of tasks to use for this connector.\n\nType: | int"
    pool = make_pool(
        [
            make_candidate("source", source="source.html", text=same, features={"rrf": 0.9}),
            make_candidate("sink", source="sink.html", text=same.replace("\n\n", " "), features={"rrf": 0.8}),
            make_candidate("enforce", source="source.html", section=("Doc", "E"), features={"rrf": 0.7}),
            make_candidate("other", source="other.html", features={"rrf": 0.1}),
        ]
    )
    assert _ids(rank(pool, k=4, max_per_section=4, model=one_feature_model("rrf"))) == [
        "source",
        "enforce",
        "other",
        "sink",
    ]
    assert _ids(rank(pool, k=3, max_per_section=1, model=one_feature_model("rrf"))) == ["source", "enforce", "other"]


def test_empty_pool_ranks_to_nothing():
    ranked = rank(make_pool([]), k=5, max_per_section=2, model=one_feature_model("rrf"))
    assert ranked.candidates == () and ranked.scores == ()


def test_rank_does_not_change_the_pool():
    pool = make_pool([make_candidate("a", first_stage=0.3, features={"rrf": 2.0})])
    rank(pool, k=1, max_per_section=1, model=one_feature_model("rrf"))
    assert pool.candidates[0].passage.score == 0.3


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("what is a KTable?", ["ktable", "other", "kstream"]),
        # a comparison: the chunk that says what each thing is, in the question's order
        ("KStream vs KTable?", ["kstream", "ktable", "other"]),
        ("KTable vs KStream?", ["ktable", "kstream", "other"]),
    ],
)
def test_the_chunks_that_say_what_the_asked_things_are_come_first(question, expected):
    pool = make_pool(
        [
            make_candidate(
                "other", section=("D", "1"), text="Both KStream and KTable support joins.", features={"bm25": 0.9}
            ),
            make_candidate(
                "kstream",
                section=("D", "2"),
                text="A KStream is an abstraction of a record stream.",
                features={"bm25": 0.1},
            ),
            make_candidate(
                "ktable",
                section=("D", "3"),
                text="A KTable is an abstraction of a changelog stream.",
                features={"bm25": 0.5},
            ),
        ],
        question=question,
    )
    assert _ids(rank(pool, k=3, max_per_section=4, model=one_feature_model("bm25"))) == expected
