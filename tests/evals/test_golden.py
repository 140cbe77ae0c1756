"""The golden set is valid against the seeds, big and varied enough, and bad lines are named precisely."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from evals.golden import PARTS, GoldenItem, load_golden, normalise, part_of, select_part
from rag.errors import GoldenFileError

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "evals" / "golden.jsonl"
SEEDS = ROOT / "seeds"
TAGS = {
    # topics
    "share-groups", "error-codes", "kip", "produce-errors", "eos", "streams", "transactions", "faq",
    "consumer", "offsets", "error-knowledge", "brokers", "design", "kraft", "metrics", "ops", "producer",
    "rebalance", "retries", "security", "topics", "upgrade", "validation", "zookeeper",
    # question kinds
    "error-code", "exception", "stack-trace", "log-line", "config", "default", "symptom", "how-to",
    "comparison", "follow-up", "unanswerable", "off-topic", "other-product", "not-covered",
    "pasted-error", "client-api", "cloud-service", "user-style", "which-setting", "non-english",
}  # fmt: skip


@pytest.fixture(scope="module")
def golden() -> list[GoldenItem]:
    return load_golden(GOLDEN, corpus_root=SEEDS)


def test_golden_file_is_valid_against_the_seeds(golden: list[GoldenItem]) -> None:
    assert len(golden) >= 80
    assert len({item.id for item in golden}) == len(golden)


def test_golden_set_has_follow_ups_and_unanswerables(golden: list[GoldenItem]) -> None:
    follow_ups = [item for item in golden if item.history]
    unanswerable = [item for item in golden if not item.answerable]
    assert len(follow_ups) >= 10
    assert all(item.history[-1]["role"] == "assistant" for item in follow_ups)
    assert len(unanswerable) >= 10
    assert {"off-topic", "other-product", "not-covered"} <= {t for item in unanswerable for t in item.tags}


def test_every_seed_document_is_covered_in_proportion(golden: list[GoldenItem]) -> None:
    per_source = Counter(source for item in golden for source in item.sources)
    seeds = sorted(p.name for p in SEEDS.iterdir() if p.is_file())
    assert set(per_source) == set(seeds)
    assert all(per_source[name] >= 8 for name in seeds)
    big = [name for name in seeds if (SEEDS / name).stat().st_size > 20_000]
    assert big and all(per_source[name] >= 25 for name in big)


def test_tags_come_from_the_vocabulary(golden: list[GoldenItem]) -> None:
    used = {t for item in golden for t in item.tags}
    assert used <= TAGS, f"unknown tags: {sorted(used - TAGS)}"
    assert all(item.tags for item in golden)


def test_loaded_item_has_tuples_not_lists(golden: list[GoldenItem]) -> None:
    item = next(item for item in golden if item.history)
    assert isinstance(item.history, tuple) and isinstance(item.facts, tuple)
    assert all(isinstance(group, tuple) for group in item.facts)
    with pytest.raises(AttributeError):
        item.question = "changed"  # type: ignore[misc]


def test_split_is_fixed_by_the_id_and_roughly_balanced(golden: list[GoldenItem]) -> None:
    ids = [f"item-{n:04d}" for n in range(2000)]
    parts = [part_of(item_id) for item_id in ids]
    assert set(parts) == set(PARTS)
    assert 0.45 < parts.count("tune") / len(parts) < 0.55
    assert parts == [part_of(item_id) for item_id in ids]  # deterministic
    # pinned values: the split must not move between runs, machines or Python versions (sha256, not hash())
    assert [part_of(i) for i in ("g001", "g002", "g003", "g004")] == ["tune", "tune", "test", "tune"]
    tune = select_part(golden, "tune")
    test = select_part(golden, "test")
    assert tune and test and len(tune) + len(test) == len(golden)
    assert all(part_of(item.id) == "tune" for item in tune)
    assert not {item.id for item in tune} & {item.id for item in golden if item.part == "test"}


def test_part_depends_only_on_the_id(golden: list[GoldenItem]) -> None:
    item = golden[0]
    changed = GoldenItem(item.id, "a different question", not item.answerable, (), (), (), tags=("other",))
    assert changed.part == item.part == part_of(item.id)
    with pytest.raises(ValueError, match="part must be one of tune, test"):
        select_part(golden, "train")


def test_normalise_lowercases_and_collapses_whitespace() -> None:
    expected = "set isolation.level to read_committed"
    assert normalise("  Set\tISOLATION.level\n\n to  read_committed ") == expected


# ---------------------------------------------------------------------------------------------- bad files

GOOD = {
    "id": "t1",
    "question": "why do I see duplicates downstream?",
    "answerable": True,
    "sources": ["doc.txt"],
    "evidence": ["the consumer did not use read_committed isolation"],
    "facts": [["read_committed"]],
    "tags": ["eos"],
}
DOC = "Duplicates appear when\nthe consumer did NOT use   read_committed\nisolation. Set isolation.level.\n"


def write_golden(tmp_path: Path, *lines: dict | str) -> Path:
    """A corpus with one document and a golden file of the given lines (dicts as JSON, strings verbatim)."""
    (tmp_path / "doc.txt").write_text(DOC, encoding="utf-8")
    path = tmp_path / "golden.jsonl"
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


def assert_names(error: GoldenFileError, path: Path, line: int, field: str) -> None:
    assert (error.path, error.line, error.field) == (str(path), line, field)
    assert f"{path}:{line}: field '{field}'" in str(error)


def test_good_file_loads_with_normalised_evidence(tmp_path: Path) -> None:
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    follow_up = {**GOOD, "id": "t2", "history": history}
    items = load_golden(write_golden(tmp_path, GOOD, "", follow_up), corpus_root=tmp_path)
    assert [item.id for item in items] == ["t1", "t2"]
    assert items[1].history == ({"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"})
    assert items[0].facts == (("read_committed",),)


def test_origin_is_optional_and_kept(tmp_path: Path) -> None:
    thread = "https://lists.apache.org/thread/abc123"
    items = load_golden(write_golden(tmp_path, {**GOOD, "origin": thread}, {**GOOD, "id": "t2"}), corpus_root=tmp_path)
    assert [item.origin for item in items] == [thread, ""]


def test_evidence_is_checked_against_the_extracted_html_text(tmp_path: Path) -> None:
    """Evidence copied from a page's visible text matches although the raw file has markup between the words."""
    (tmp_path / "guide.html").write_text(
        "<html><head><title>Consumer guide</title></head><body><h1>Consumer guide</h1><h2>Isolation</h2>"
        "<p>Duplicates appear when the consumer did <em>not</em> use <b>read_committed</b>\n isolation.</p>"
        "<table><tr><th>Name</th><th>Default</th></tr><tr><td>isolation.level</td><td>read_uncommitted</td></tr>"
        "</table></body></html>",
        encoding="utf-8",
    )
    item = {
        **GOOD,
        "sources": ["guide.html"],
        "evidence": ["the consumer did not use read_committed isolation"],
        "facts": [["isolation.level | read_uncommitted"], ["consumer guide"]],
    }
    path = tmp_path / "html.jsonl"
    path.write_text(json.dumps(item) + "\n" + json.dumps({**item, "id": "t2", "evidence": ["<b>read_committed</b>"]}))
    with pytest.raises(GoldenFileError, match="is not in guide.html") as caught:
        load_golden(path, corpus_root=tmp_path)
    assert_names(caught.value, path, 2, "evidence")  # line 1 passed: markup-free text, title included


def test_source_the_loaders_refuse_is_named(tmp_path: Path) -> None:
    (tmp_path / "blank.txt").write_text("   \n", encoding="utf-8")
    path = write_golden(tmp_path, {**GOOD, "sources": ["blank.txt"]})
    with pytest.raises(GoldenFileError, match="'blank.txt' cannot be loaded \\(empty file\\)") as caught:
        load_golden(path, corpus_root=tmp_path)
    assert_names(caught.value, path, 1, "sources")


def test_malformed_line_names_file_line_and_field(tmp_path: Path) -> None:
    path = write_golden(tmp_path, GOOD, '{"id": "t2", "question": ')
    with pytest.raises(GoldenFileError, match="not valid JSON") as caught:
        load_golden(path)
    assert_names(caught.value, path, 2, "json")


def test_missing_field_names_file_line_and_field(tmp_path: Path) -> None:
    broken = {k: v for k, v in GOOD.items() if k != "question"} | {"id": "t2"}
    path = write_golden(tmp_path, GOOD, broken)
    with pytest.raises(GoldenFileError, match="missing") as caught:
        load_golden(path)
    assert_names(caught.value, path, 2, "question")


def test_evidence_not_in_source_names_file_line_and_field(tmp_path: Path) -> None:
    path = write_golden(tmp_path, {**GOOD, "evidence": ["the consumer used read_uncommitted"]})
    with pytest.raises(GoldenFileError, match="is not in doc.txt") as caught:
        load_golden(path, corpus_root=tmp_path)
    assert_names(caught.value, path, 1, "evidence")
    assert load_golden(path)  # without a corpus the line itself is well formed


def test_duplicate_id_names_file_line_and_field(tmp_path: Path) -> None:
    path = write_golden(tmp_path, GOOD, {**GOOD, "question": "again?"})
    with pytest.raises(GoldenFileError, match="duplicate id 't1' \\(first used on line 1\\)") as caught:
        load_golden(path)
    assert_names(caught.value, path, 2, "id")


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        ({"answerable": "yes"}, "answerable", "not true/false"),
        ({"sources": "doc.txt"}, "sources", "list of non-empty strings"),
        ({"facts": ["read_committed"]}, "facts", "alias lists"),
        ({"facts": [[]]}, "facts", "alias lists"),
        ({"tags": [1]}, "tags", "list of non-empty strings"),
        ({"history": [{"role": "system", "content": "x"}]}, "history", "role of user or assistant"),
        ({"history": [{"role": "user"}]}, "history", "content"),
        ({"facts": []}, "facts", "answerable item needs"),
        ({"answerable": False}, "sources", "must leave it empty"),
        ({"sources": ["missing.txt"]}, "sources", "'missing.txt' is not a file"),
        ({"facts": [["read_uncommitted", "isolation level"]]}, "facts", "no alias of"),
    ],
)
def test_each_bad_field_is_named(tmp_path: Path, change: dict, field: str, problem: str) -> None:
    path = write_golden(tmp_path, GOOD, {**GOOD, "id": "t2", **change})
    with pytest.raises(GoldenFileError, match=problem) as caught:
        load_golden(path, corpus_root=tmp_path)
    assert_names(caught.value, path, 2, field)


def test_non_object_line_and_missing_file_are_refused(tmp_path: Path) -> None:
    path = write_golden(tmp_path, "[1, 2]")
    with pytest.raises(GoldenFileError, match="one JSON object per line"):
        load_golden(path)
    with pytest.raises(GoldenFileError, match="cannot read it") as caught:
        load_golden(tmp_path / "nope.jsonl")
    assert caught.value.field == "file"
