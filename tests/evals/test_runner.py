"""The eval runner end to end on the real seeds index: outputs, --json, the baseline gate, bad input."""

from __future__ import annotations

import copy
import dataclasses
import html
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evals.golden import PARTS, load_golden, part_of
from evals.runner import SETTINGS_RECORDED, answered_history, gate, main
from rag import Settings
from tests.conftest import BASELINE_KAFKA_DOCS, GOLDEN_KAFKA_DOCS, KAFKA_DOCS

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "evals" / "golden.jsonl"
SEEDS = ROOT / "seeds"
BASELINE = ROOT / "evals" / "baseline.json"
METRICS = (
    "hit@1",
    "hit@3",
    "hit@5",
    "hit@10",
    "mrr@10",
    "ndcg@10",
    "key_fact_recall",
    "citation_precision",
    "abstention_recall",
    "over_abstention",
    "answerable_accuracy",
    "p50_ms",
    "p95_ms",
)
EXTRA = (
    "avg_context_chars",
    "answer_chars_p50",
    "doc_hit@5",
    "doc_mrr@10",
    "followup_hit@5",
    "followup_raw_hit@5",
)

# Evidence and fact are real text of seed 000, but nothing in the question can find them: always fails.
HOPELESS = {
    "id": "x-hopeless",
    "question": "zzqx vvbn plorp wubba?",
    "answerable": True,
    "sources": ["000_0424dccc37dbf1fb.txt"],
    "evidence": ["Error code 121"],
    "facts": [["INVALID_RECORD_STATE"]],
    "tags": ["synthetic"],
}
MARKUP = {
    "id": "x-markup",
    "question": 'what does <script>alert("x")</script> & <b>bold</b> mean?',
    "answerable": False,
    "sources": [],
    "evidence": [],
    "facts": [],
    "tags": ["synthetic"],
}


def _subset_lines() -> list[str]:
    """A few of each kind from the real golden file, plus the two synthetic items above."""
    raw = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line.strip()]
    plain = [r for r in raw if r["answerable"] and not r.get("history")][:3]
    followups = [r for r in raw if r.get("history") and r["answerable"]][:2]
    unanswerable = [r for r in raw if not r["answerable"]][:2]
    return [json.dumps(r) for r in (*plain, *followups, *unanswerable, HOPELESS, MARKUP)]


@pytest.fixture(scope="module")
def subset(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("golden") / "subset.jsonl"
    path.write_text("\n".join(_subset_lines()) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def first_run(seeds_index, subset, tmp_path_factory) -> tuple[int, Path]:
    out = tmp_path_factory.mktemp("run1")
    code = main(
        [
            "--golden",
            str(subset),
            "--corpus",
            str(SEEDS),
            "--index",
            str(seeds_index),
            "--retrieval",
            "hybrid",
            "bm25",
            "--k",
            "5",
            "--out",
            str(out),
            "--export",
            "ragas",
            "langsmith",
        ]
    )
    return code, out


@pytest.mark.slow
def test_run_writes_metrics_with_every_name(first_run, subset):
    code, out = first_run
    assert code == 0
    doc = json.loads((out / "metrics.json").read_text())
    items = load_golden(subset)
    names = set(doc["by_mode"]["bm25"]) - {"mode", "parts", "per_question"}
    for block in (doc, doc["by_mode"]["bm25"]):
        for name in (*METRICS, *EXTRA):
            assert isinstance(block[name], float), name
        assert set(block["per_question"]) == {i.id for i in items}
        assert block["questions"] == len(items)
        assert block["followups"] == 2
        assert list(block["parts"]) == list(PARTS)
        for part, metrics in block["parts"].items():
            assert set(metrics) == names, part
            assert metrics["questions"] == sum(part_of(i.id) == part for i in items)
        assert {qid: o["part"] for qid, o in block["per_question"].items()} == {i.id: i.part for i in items}
    assert doc["mode"] == "hybrid" and doc["config"]["retrieval"] == ["hybrid", "bm25"]
    assert doc["index"]["chunks"] > 0 and doc["index"]["model"] == doc["model"]["embedding"]
    assert doc["per_question"]["x-hopeless"]["pass"] is False
    assert 0.0 <= doc["hit@5"] <= 1.0 and doc["p50_ms"] <= doc["p95_ms"]


@pytest.mark.slow
def test_jobs_deal_the_questions_to_processes_and_give_every_row_as_one_process_does(
    first_run, seeds_index, subset, tmp_path
):
    """`--jobs 2`: two spawned processes, each with its own assistant, ask alternate questions of every mode;
    the rows come back in the golden file's order with the same ranks, answers and grades."""
    out = tmp_path / "jobs"
    args = ["--golden", str(subset), "--corpus", str(SEEDS), "--index", str(seeds_index), "--k", "5"]
    assert main([*args, "--retrieval", "hybrid", "bm25", "--jobs", "2", "--out", str(out)]) == 0

    def rows(run: Path) -> list[dict]:
        lines = (run / "per_question.jsonl").read_text().splitlines()
        return [{k: v for k, v in json.loads(line).items() if k != "latency_ms"} for line in lines]

    assert rows(out) == rows(first_run[1])
    assert len(rows(out)) == 2 * len(load_golden(subset))


@pytest.mark.slow
def test_per_question_rows_cover_every_mode(first_run, subset):
    _, out = first_run
    rows = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    items = load_golden(subset)
    facts = {i.id: len(i.facts) for i in items}
    assert [r["id"] for r in rows] == [i.id for i in items] * 2
    assert [r["mode"] for r in rows] == ["hybrid"] * len(items) + ["bm25"] * len(items)
    for row in rows:
        for key in (
            "question",
            "part",
            "rank",
            "raw_rank",
            "answer",
            "facts_found",
            "facts_missed",
            "citations",
            "abstained",
            "latency_ms",
            "pass",
        ):
            assert key in row, key
        assert len(row["facts_found"]) + len(row["facts_missed"]) == facts[row["id"]]
        if not row["history_turns"]:
            assert row["raw_rank"] is None
        for citation in row["citations"]:
            assert set(citation) == {"marker", "source_path", "heading", "ok"}
    assert not any(r["pass"] for r in rows if r["id"] == "x-hopeless")


@pytest.mark.slow
def test_reports_render_tables_plots_and_escape_text(first_run):
    _, out = first_run
    md = (out / "report.md").read_text()
    for heading in (
        "## Overall",
        "## Per tag (hybrid)",
        "## Per document (hybrid)",
        "## Per question (hybrid)",
    ):
        assert heading in md
    assert "| hit@5 |" in md and "x-hopeless" in md
    assert "| metric | hybrid all | hybrid tune | hybrid test | bm25 all | bm25 tune | bm25 test |" in md
    assert "| answer_chars_p50 |" in md
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 3
    assert "<script>alert" not in page
    assert html.escape(MARKUP["question"]) in page


@pytest.mark.slow
def test_exports_hold_ragas_and_langsmith_fields(first_run, subset):
    _, out = first_run
    single = [json.loads(x) for x in (out / "ragas_single_turn.jsonl").read_text().splitlines()]
    multi = [json.loads(x) for x in (out / "ragas_multi_turn.jsonl").read_text().splitlines()]
    assert len(single) == len(load_golden(subset)) - 2 and len(multi) == 2
    for row in single:
        assert set(row) == {"user_input", "retrieved_contexts", "response", "reference", "reference_contexts"}
        assert 1 <= len(row["retrieved_contexts"]) <= 5 and isinstance(row["response"], str)
    for row in multi:
        assert [m["type"] for m in row["user_input"]][-2:] == ["human", "ai"]
    examples = [json.loads(x) for x in (out / "langsmith_examples.jsonl").read_text().splitlines()]
    assert {e["metadata"]["golden_id"] for e in examples} == {i.id for i in load_golden(subset)}
    for e in examples:
        assert set(e) == {"inputs", "outputs", "metadata"}
        assert set(e["inputs"]) == {"question", "history"}
        assert e["metadata"]["run"]["retrieval"] == "hybrid"


@pytest.mark.slow
def test_json_prints_metrics_and_own_baseline_passes(first_run, seeds_index, subset, tmp_path, capsys):
    _, out = first_run
    code = main(
        [
            "--golden",
            str(subset),
            "--corpus",
            str(SEEDS),
            "--index",
            str(seeds_index),
            "--retrieval",
            "hybrid",
            "bm25",
            "--out",
            str(tmp_path),
            "--json",
            "--baseline",
            str(out / "metrics.json"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    printed = json.loads(captured.out)
    assert printed == json.loads((tmp_path / "metrics.json").read_text())
    before = json.loads((out / "metrics.json").read_text())
    for name in ("hit@5", "mrr@10", "ndcg@10", "key_fact_recall", "abstention_recall"):
        assert printed[name] == before[name]
    assert "gate: passed" in captured.err


@pytest.mark.slow
def test_inflated_baseline_fails_and_lists_flipped_ids(first_run, seeds_index, subset, tmp_path, capsys):
    _, out = first_run
    inflated = json.loads((out / "metrics.json").read_text())
    failing = sorted(qid for qid, o in inflated["per_question"].items() if not o["pass"])
    assert "x-hopeless" in failing
    perfect = copy.deepcopy(inflated)
    perfect.update(
        {
            "hit@5": 1.0,
            "mrr@10": 1.0,
            "key_fact_recall": 1.0,
            "abstention_recall": 1.0,
            "over_abstention": 0.0,
        }
    )
    for outcome in perfect["per_question"].values():
        outcome["pass"] = True
    baseline = tmp_path / "inflated.json"
    baseline.write_text(json.dumps(perfect))
    code = main(
        [
            "--golden",
            str(subset),
            "--corpus",
            str(SEEDS),
            "--index",
            str(seeds_index),
            "--retrieval",
            "hybrid",
            "--out",
            str(tmp_path / "run"),
            "--baseline",
            str(baseline),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 1
    assert "REGRESSED" in printed and "gate: FAILED" in printed
    assert "hybrid test" in printed and "answer_chars_p50" in printed  # the summary shows both parts
    now_failing = next(line for line in printed.splitlines() if "now failing" in line)
    assert all(qid in now_failing for qid in failing)


@pytest.mark.slow
def test_baseline_from_before_the_split_still_gates_on_all_questions(first_run):
    """A metrics.json without `parts` (committed before the split) still works: the gate reads the flat figures."""
    _, out = first_run
    new = json.loads((out / "metrics.json").read_text())
    old = copy.deepcopy(new)
    for block in (old, *old["by_mode"].values()):
        del block["parts"]
        for outcome in block["per_question"].values():
            del outcome["part"]
    log = io.StringIO()
    assert gate(old, new, "old.json", log) == 0
    assert "predates the tune/test split" in log.getvalue() and "gate: passed" in log.getvalue()
    old["hit@5"] = new["hit@5"] + 0.5
    assert gate(old, new, "old.json", io.StringIO()) == 1


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_committed_baseline_gate_passes_on_seeds_index(seeds_index, tmp_path, capsys):
    """The CI regression gate: the full golden file must not fall behind evals/baseline.json."""
    _assert_gate_passes(GOLDEN, SEEDS, seeds_index, BASELINE, tmp_path, capsys)


def _assert_gate_passes(golden: Path, corpus: Path, index: Path, baseline: Path, out: Path, capsys) -> None:
    """An eval of `golden` on `index`, in the baseline's retrieval modes, must not regress against it."""
    assert baseline.exists(), f"{baseline.relative_to(ROOT)} is missing: generate it (see evals/runner.py)"
    modes = json.loads(baseline.read_text())["config"]["retrieval"]
    args = ["--golden", str(golden), "--corpus", str(corpus), "--index", str(index), "--retrieval", *modes]
    code = main([*args, "--out", str(out), "--baseline", str(baseline)])
    assert code == 0, capsys.readouterr().out


# Evidence copied from the extracted text of two HTML pages (the raw files hold markup between the words).
KAFKA_DOCS_ITEMS = [
    {
        "id": "kdt-graceful-shutdown",
        "question": "How do I shut down a Kafka broker gracefully so leadership moves off it first?",
        "answerable": True,
        "sources": ["ops.html"],
        "evidence": ["the controlled leadership migration requires using a special setting"],
        "facts": [["controlled.shutdown.enable"]],
        "tags": ["config"],
    },
    {
        "id": "kdt-offset-out-of-range",
        "question": "What does the OFFSET_OUT_OF_RANGE error mean and is it retriable?",
        "answerable": True,
        "sources": ["generated/protocol_errors.html"],
        "evidence": [
            "OFFSET_OUT_OF_RANGE | 1 | False | The requested offset is not within the range of offsets "
            "maintained by the server."
        ],
        "facts": [["not within the range of offsets"]],
        "tags": ["error-code"],
        "origin": "https://example.org/thread/offset-out-of-range",
    },
    {
        "id": "kdt-off-topic",
        "question": "How do I bake sourdough bread?",
        "answerable": False,
        "sources": [],
        "evidence": [],
        "facts": [],
        "tags": ["off-topic"],
    },
]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_eval_on_kafka_docs_with_relative_html_sources(kafka_docs_index, tmp_path, monkeypatch):
    """`kafka-rag eval --corpus ../shared/corpora/kafka-docs` from the repository root, sources under it."""
    golden = tmp_path / "golden_kafka_docs.jsonl"
    golden.write_text("".join(json.dumps(item) + "\n" for item in KAFKA_DOCS_ITEMS), encoding="utf-8")
    monkeypatch.chdir(ROOT)
    corpus = os.path.relpath(KAFKA_DOCS, ROOT)
    out = tmp_path / "run"
    args = ["--corpus", corpus, "--golden", str(golden), "--index", str(kafka_docs_index), "--out", str(out)]
    assert main(args) == 0
    doc = json.loads((out / "metrics.json").read_text())
    assert doc["questions"] == 3 and doc["config"]["corpus"] == corpus
    assert sum(part["questions"] for part in doc["parts"].values()) == 3
    assert doc["doc_hit@10"] > 0  # the relative sources match the index's source paths
    assert doc["per_question"]["kdt-off-topic"]["abstained"] is True
    rows = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    assert rows[1]["sources"] == ["generated/protocol_errors.html"] and rows[1]["part"] == part_of(rows[1]["id"])
    assert load_golden(golden)[1].origin == "https://example.org/thread/offset-out-of-range"


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_committed_baseline_gate_passes_on_kafka_docs_index(kafka_docs_build):
    """The CI regression gate on the Kafka docs: evals/golden_kafka_docs.jsonl must not fall behind
    evals/baseline_kafka_docs.json. The gate is the `kafka-rag eval` that the session starts as soon as its docs
    index is built (`tests/conftest.py`, `DocsIndexBuild`); the baseline is an eval run's metrics.json, made
    from the repository root:

        kafka-rag ingest ../shared/corpora/kafka-docs --index /tmp/kd-index
        kafka-rag eval --corpus ../shared/corpora/kafka-docs --golden evals/golden_kafka_docs.jsonl \\
            --index /tmp/kd-index --out /tmp/kd-run && cp /tmp/kd-run/metrics.json evals/baseline_kafka_docs.json
    """
    code, output = kafka_docs_build.gate_result()
    assert code == 0, output
    doc = json.loads((kafka_docs_build.gate_out / "metrics.json").read_text())
    assert doc["questions"] == len(load_golden(GOLDEN_KAFKA_DOCS)), "the gate asks every question of the file"
    assert doc["config"]["retrieval"] == json.loads(BASELINE_KAFKA_DOCS.read_text())["config"]["retrieval"]


def test_recorded_settings_are_settings_fields():
    """A renamed or removed setting fails here at once, not at the end of a long eval run."""
    assert set(SETTINGS_RECORDED) <= {field.name for field in dataclasses.fields(Settings)}


def test_malformed_golden_exits_2_naming_file_line_and_field(tmp_path):
    good, bad = _subset_lines()[0], json.dumps({"id": "b1", "question": "why?", "answerable": "yes"})
    golden = tmp_path / "bad.jsonl"
    golden.write_text(f"{good}\n{bad}\n", encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "evals.runner",
            "--golden",
            str(golden),
            "--corpus",
            str(SEEDS),
            "--index",
            str(tmp_path / "no-index"),
            "--out",
            str(tmp_path / "out"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {golden}:2: field 'answerable': missing or not true/false"
    assert not (tmp_path / "out").exists()


def test_evidence_missing_from_source_exits_2(tmp_path, capsys):
    item = {**HOPELESS, "evidence": ["this sentence is in no seed file"]}
    golden = tmp_path / "drift.jsonl"
    golden.write_text(json.dumps(item) + "\n", encoding="utf-8")
    assert main(["--golden", str(golden), "--corpus", str(SEEDS), "--out", str(tmp_path / "out")]) == 2
    assert f"{golden}:1: field 'evidence'" in capsys.readouterr().err


def test_duplicate_ids_across_golden_files_exit_2(tmp_path, capsys):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(json.dumps(HOPELESS) + "\n", encoding="utf-8")
    second.write_text(json.dumps(MARKUP) + "\n" + json.dumps(HOPELESS) + "\n", encoding="utf-8")
    assert main(["--golden", str(first), str(second), "--corpus", str(SEEDS), "--out", str(tmp_path / "o")]) == 2
    assert f"{second}:2: field 'id': id 'x-hopeless' is also used in {first}" in capsys.readouterr().err


def test_missing_index_exits_2_with_ingest_hint(subset, tmp_path, capsys):
    code = main(
        [
            "--golden",
            str(subset),
            "--corpus",
            str(SEEDS),
            "--index",
            str(tmp_path / "none"),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 2
    assert "kafka-rag ingest" in capsys.readouterr().err


@pytest.mark.slow
def test_index_built_with_another_model_exits_2_naming_it(seeds_index, subset, tmp_path, capsys):
    index = tmp_path / "index"
    shutil.copytree(seeds_index, index)
    manifest_path = index / "versions" / (index / "CURRENT").read_text().strip() / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["model"] = {**manifest["model"], "name": "acme/other-embedder", "fingerprint": "0" * 16}
    manifest_path.write_text(json.dumps(manifest))
    code = main(["--golden", str(subset), "--corpus", str(SEEDS), "--index", str(index), "--out", str(tmp_path / "o")])
    assert code == 2
    assert "built with embedding model 'acme/other-embedder'" in capsys.readouterr().err


@pytest.mark.slow
def test_peer_baseline_prints_peer_and_project_rows(seeds_index, subset, capsys):
    spec = importlib.util.spec_from_file_location("peer_baseline", ROOT / "benchmarks" / "peer_baseline.py")
    peer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer)
    assert peer.main(["--golden", str(subset), "--corpus", str(SEEDS), "--index", str(seeds_index)]) == 0
    printed = capsys.readouterr().out
    items = load_golden(subset)
    assert f"test part ({sum(i.part == 'test' for i in items)} questions):" in printed
    assert f"all ({len(items)} questions):" in printed
    tables = []  # the test part first, then all questions
    for block in (b for b in printed.split("\n\n") if b.startswith("| ")):
        table = [[cell.strip() for cell in line.strip("|").split("|")] for line in block.splitlines()]
        assert table[0][:3] == ["setup", "hit@1", "hit@5"]
        tables.append({row[0]: dict(zip(table[0], row, strict=True)) for row in table[2:]})
    assert len(tables) == 2
    for rows in tables:
        assert list(rows) == ["peer", "dense", "bm25", "hybrid"] and rows["peer"]["over_abstention"] == "0.000"
    assert tables[1]["peer"]["abstention_recall"] == "0.000"  # the peer never abstains


@pytest.mark.slow
def test_own_history_asks_follow_ups_after_the_assistants_own_answers(assistant, subset, tmp_path):
    """The golden assistant turn is replaced by what the assistant answers to the turn before it."""
    history = (
        {"role": "user", "content": "what does kafka error code 121 mean?"},
        {"role": "assistant", "content": "An ideal answer the assistant may never give."},
        {"role": "user", "content": "and is it retriable?"},
        {"role": "assistant", "content": "Another ideal answer."},
    )
    answered = answered_history(assistant, history, "hybrid", 5)
    first = assistant.ask(history[0]["content"], (), retrieval="hybrid", top_k=5).text
    second = assistant.ask(history[2]["content"], (history[0], answered[1]), retrieval="hybrid", top_k=5).text
    assert [t["role"] for t in answered] == ["user", "assistant", "user", "assistant"]
    assert answered[0] == history[0] and answered[2] == history[2]
    assert answered[1]["content"] == first != history[1]["content"]
    assert answered[3]["content"] == second
    assert answered_history(assistant, ({"role": "assistant", "content": "Hi."},), "hybrid", 5)[0]["content"] == "Hi."

    out = tmp_path / "own"
    code = main(
        ["--golden", str(subset), "--corpus", str(SEEDS), "--index", str(assistant.settings.index_dir)]
        + ["--own-history", "--out", str(out)]
    )
    assert code == 0
    assert json.loads((out / "metrics.json").read_text(encoding="utf-8"))["config"]["own_history"] is True
