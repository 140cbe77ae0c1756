"""The fit and tuning scripts read only tuning-part questions, and the model files they write (and the
shipped ones) load with the features the code computes."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

import evals.fit_abstention as fit_abstention
import evals.fit_caution as fit_caution
import evals.fit_embedding as fit_embedding
import evals.fit_ranker as fit_ranker
import evals.held_out_tuning as held_out_tuning
import evals.tune_answers as tune_answers
import evals.tune_chunking as tune_chunking
import evals.tune_followup_context as tune_followup_context
import evals.tune_followups as tune_followups
import evals.tune_fusion as tune_fusion
import evals.tune_leaning as tune_leaning
import rag.service as service
from evals.golden import load_golden, part_of, select_part
from rag import Assistant, ConfigurationError, LinearModel, Settings
from rag.abstention import ABSTENTION_FEATURES, load_abstention
from rag.ranking import RANK_FEATURES, load_ranker

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "evals" / "golden.jsonl"
SEEDS = ROOT / "seeds"


def _key(question: str, history) -> tuple:
    return question, tuple(tuple(sorted(turn.items())) for turn in history)


@pytest.fixture(scope="module")
def golden():
    return load_golden(GOLDEN, SEEDS)


@pytest.fixture()
def inspected(monkeypatch) -> list[tuple]:
    """Every (question, history) the fit asks the assistant about."""
    seen: list[tuple] = []
    real = Assistant.inspect

    def spy(self, question, history=(), **kwargs):
        seen.append(_key(question, history))
        return real(self, question, history, **kwargs)

    monkeypatch.setattr(Assistant, "inspect", spy)
    return seen


def _only_tune(seen: list[tuple], golden, allowed_extra: set[tuple] = frozenset()) -> None:
    assert seen, "the fit asked nothing: the spy missed its way in"
    tune = {_key(i.question, i.history) for i in golden if i.part == "tune"}
    test_only = {_key(i.question, i.history) for i in golden if i.part == "test"} - tune
    assert test_only, "the seeds golden file has test-part questions"
    leaked = [key for key in seen if key in test_only]
    assert leaked == [], f"the fit read test-part questions: {[q[:60] for q, _ in leaked]}"
    unknown = [key for key in seen if key not in tune and key not in allowed_extra]
    assert unknown == [], f"the fit read questions that are no tuning item: {[q[:60] for q, _ in unknown]}"


def test_the_abstention_threshold_procedure_is_judged_on_held_out_questions():
    """Separable questions: held out, every unanswerable one is declined and at most two answerable ones.
    Features that say nothing: thresholds set in-sample decline answerable questions held out."""
    rng = np.random.default_rng(0)
    labels = np.array([1] * 80 + [0] * 20)
    separable = np.where(labels[:, None] == 1, 3.0, -3.0) + rng.normal(0, 0.3, (100, 3))
    held_out = fit_abstention.cross_validated_procedure(separable, labels, 1.0, 0.0)
    assert held_out.recall == 1.0 and held_out.over <= 2 / 80

    noise = rng.normal(0, 1, (100, 3))
    held_out = fit_abstention.cross_validated_procedure(noise, labels, 1.0, 0.1)
    assert 0.0 <= held_out.recall <= 1.0 and held_out.over > 0.0


def test_the_held_out_over_abstention_of_the_worst_golden_file_is_reported_apart():
    """Two golden files: one whose answerable questions look like the unanswerable ones, one whose don't.
    The pooled figure averages the hard file's declines away; the worst file's figure keeps them."""
    rng = np.random.default_rng(1)
    labels = np.array(([1] * 40 + [0] * 10) * 2)
    sets = np.repeat([0, 1], 50)
    features = np.where(labels[:, None] == 1, 2.0, -2.0) + rng.normal(0, 0.3, (100, 2))
    hard = (sets == 1) & (labels == 1)
    features[hard] = rng.normal(0, 1.5, (hard.sum(), 2))
    held_out = fit_abstention.cross_validated_procedure(features, labels, 1.0, 0.05, sets)
    easy_file_over = 2 * held_out.over - held_out.worst_over  # both files have 40 answerable questions
    assert held_out.worst_over > 2 * easy_file_over and held_out.worst_over > held_out.over


def test_abstention_regularisation_is_judged_by_held_out_log_loss():
    """One decisive feature and four weak copies of it: strong regularisation spreads the weight over the
    copies and leaves the decisive rows' probabilities near the middle, which held-out log-loss sees, while
    the count of unanswerable questions declined at a threshold may not."""
    rng = np.random.default_rng(2)
    labels = np.array([1] * 120 + [0] * 30)
    decisive = np.where(labels == 1, 0.0, 1.0) * (rng.random(150) < 0.8)
    weak = decisive[:, None] * 0.3 + rng.normal(0, 0.5, (150, 4))
    features = np.column_stack([decisive, weak, rng.normal(0, 1, 150)])
    losses = {c: fit_abstention.cross_validated_log_loss(features, labels, c) for c in (0.003, 0.3)}
    assert losses[0.3] < losses[0.003]
    assert 0.0 < losses[0.3] < np.log(2)  # better than a coin, and a real loss


def _held_out(recall: float, over: float, worst_over: float | None = None) -> fit_abstention.HeldOut:
    return fit_abstention.HeldOut(recall, over, over if worst_over is None else worst_over)


def test_the_threshold_budget_keeps_every_golden_files_over_abstention_within_the_limit():
    # (held-out abstention recall, over-abstention) per budget, as the tuning parts gave them
    procedure = {0.0: _held_out(0.231, 0.005), 0.02: _held_out(0.692, 0.019), 0.03: _held_out(0.750, 0.032)}
    assert fit_abstention.choose_budget(procedure) == 0.02  # 0.03 balances better but declines 3.2%
    procedure[0.02] = _held_out(0.692, 0.019, worst_over=0.029)  # pooled within, one golden file not
    assert fit_abstention.choose_budget(procedure) == 0.0
    none_within = {0.01: _held_out(0.5, 0.04), 0.02: _held_out(0.6, 0.05)}
    assert fit_abstention.choose_budget(none_within) == 0.01  # the smallest
    tie = {0.01: _held_out(0.6, 0.01), 0.02: _held_out(0.61, 0.02)}
    assert fit_abstention.choose_budget(tie) == 0.01  # a tie goes to the smaller


def test_abstention_fit_reads_only_tuning_questions(seeds_index, golden, inspected, monkeypatch):
    def shipped_model_does_not_fit():  # as after a change to the features: the fit must not need it
        raise ConfigurationError("fitted on other features")

    monkeypatch.setattr(service, "load_abstention", shipped_model_does_not_fit)
    x, y, ids, names, sets = fit_abstention.collect([(GOLDEN, SEEDS, seeds_index)])
    _only_tune(inspected, golden)
    tune = select_part(golden, "tune")
    assert len(inspected) == len(tune)
    assert ids == [i.id for i in tune] and all(part_of(i) == "tune" for i in ids)
    assert names == ABSTENTION_FEATURES
    assert x.shape == (len(tune), len(ABSTENTION_FEATURES)) and np.isfinite(x).all()
    assert y.tolist() == [1 if i.answerable else 0 for i in tune]
    assert sets.tolist() == [0] * len(tune)


def _held_out_ids(fit: str, halves: tuple[Path, Path], seeds_index: Path, monkeypatch) -> list[str]:
    """The tuning ids whose features the abstention or the ranker fit reads, with `halves` as its half indexes."""
    if fit == "abstention":
        return fit_abstention.collect([(GOLDEN, SEEDS, seeds_index)], [halves])[2]
    monkeypatch.setattr(fit_ranker, "SYNTHETIC_PER_INDEX", 3)
    queries, _ = fit_ranker.collect([(GOLDEN, SEEDS, seeds_index)], half_indexes=[halves])
    return [q.id for q in queries if q.human]


@pytest.mark.parametrize("fit", ["abstention", "ranker"])
def test_features_of_each_question_come_from_the_index_whose_adapter_did_not_see_it(
    fit, seeds_index, golden, monkeypatch, tmp_path
):
    (tmp_path / "half-0").symlink_to(seeds_index, target_is_directory=True)
    (tmp_path / "half-1").symlink_to(seeds_index, target_is_directory=True)
    halves = (tmp_path / "half-0", tmp_path / "half-1")
    served: dict[tuple, Path] = {}
    real = Assistant.inspect

    def spy(self, question, history=(), **kwargs):
        served[_key(question, history)] = self.settings.index_dir
        return real(self, question, history, **kwargs)

    monkeypatch.setattr(Assistant, "inspect", spy)
    ids = _held_out_ids(fit, halves, seeds_index, monkeypatch)
    tune = {i.id: i for i in select_part(golden, "tune") if fit == "abstention" or i.answerable}
    assert ids == list(tune)
    index_of = {i: Path(served[_key(tune[i].question, tune[i].history)]) for i in ids}
    assert set(index_of.values()) == set(halves)  # both halves are used
    assert index_of == {i: halves[fit_embedding.half(i)] for i in ids}
    if fit == "ranker":  # the synthetic queries come from the set's own index
        tune_keys = {_key(t.question, t.history) for t in tune.values()}
        assert {Path(index) for key, index in served.items() if key not in tune_keys} == {seeds_index}


def test_ranker_fit_reads_only_tuning_questions_and_synthetic_queries(seeds_index, golden, inspected, monkeypatch):
    monkeypatch.setattr(fit_ranker, "SYNTHETIC_PER_INDEX", 15)
    queries, names = fit_ranker.collect([(GOLDEN, SEEDS, seeds_index)])
    human = [q for q in queries if q.human]
    synthetic = [q for q in queries if not q.human]
    assert names == RANK_FEATURES
    assert [q.id for q in human] == [i.id for i in select_part(golden, "tune") if i.answerable]
    assert all(part_of(q.id) == "tune" for q in human)
    assert 0 < len(synthetic) <= 15
    assert len(inspected) == len(human) + len(synthetic)
    stored = _synthetic_keys(seeds_index)
    _only_tune(inspected, golden, allowed_extra=stored)
    for query in queries:
        assert query.features.shape == (len(query.grades), len(RANK_FEATURES))
        assert np.isfinite(query.features).all()


def test_embedding_fit_reads_only_tuning_questions_and_synthetic_queries(seeds_index, golden, inspected):
    (corpus,) = fit_embedding.collect([(GOLDEN, SEEDS, seeds_index)])
    _only_tune(inspected, golden)
    tune = [i for i in select_part(golden, "tune") if i.answerable]
    assert {p.item_id for p in corpus.human} <= {i.id for i in tune} and len(corpus.human) >= len(tune) * 0.8
    assert all(part_of(p.item_id) == "tune" and p.passage in p.positives for p in corpus.human)
    assert {p.query for p in corpus.synthetic} == {q for q, _ in _synthetic_keys(seeds_index)}
    assert set(corpus.passages) >= {p.passage for p in corpus.human + corpus.synthetic}
    pairs = fit_embedding.training_pairs(corpus.human, corpus.synthetic)
    assert len(pairs) == fit_embedding.HUMAN_REPEAT * len(corpus.human) + len(corpus.synthetic) // 2


def _synthetic_keys(index: Path) -> set[tuple]:
    from rag.index_store import current_version, read_synthetic

    version = current_version(index)
    return {_key(q.query, ()) for q in read_synthetic(index / "versions" / version)}


def test_abstention_fit_writes_a_model_the_service_loads(seeds_index, golden, inspected, tmp_path, monkeypatch):
    # One shuffle and two budgets instead of five and eight: this test checks what the fit reads and writes.
    monkeypatch.setattr(fit_abstention, "REPEATS", 1)
    monkeypatch.setattr(fit_abstention, "BUDGETS", (0.0, 0.02))
    out, report = tmp_path / "abstention.json", tmp_path / "fit_abstention.md"
    argv = ["--set", str(GOLDEN), str(SEEDS), str(seeds_index), "--out", str(out), "--report", str(report)]
    assert fit_abstention.main(argv) == 0
    _only_tune(inspected, golden)
    model = load_abstention(out)
    assert model.features == ABSTENTION_FEATURES
    assert np.isfinite(model.weights).all() and np.isfinite(model.threshold)
    assert set(model.mode_thresholds) == set(fit_abstention.SINGLE_MODES)
    assert all(np.isfinite(t) for t in model.mode_thresholds.values())
    assert model.training["questions"] == len(select_part(golden, "tune"))
    assert model.training["cv"]["log_loss"] > 0.0
    text = report.read_text(encoding="utf-8")
    assert "tuning parts only" in text and "log-loss" in text


@pytest.fixture()
def small_ranker_grid(monkeypatch):
    """Two settings of the ranker's grid instead of nine: these tests check what the fits read and write."""
    for module in (fit_ranker, tune_fusion):
        monkeypatch.setattr(module, "L2_PENALTIES", (0.01, 0.1))
        monkeypatch.setattr(module, "SYNTHETIC_WEIGHTS", (0.1,))


def test_ranker_fit_writes_a_model_the_service_loads(
    seeds_index, golden, inspected, tmp_path, monkeypatch, small_ranker_grid
):
    monkeypatch.setattr(fit_ranker, "SYNTHETIC_PER_INDEX", 15)
    out, report = tmp_path / "ranker.json", tmp_path / "fit_ranker.md"
    argv = ["--set", str(GOLDEN), str(SEEDS), str(seeds_index), "--out", str(out), "--report", str(report)]
    assert fit_ranker.main(argv) == 0
    _only_tune(inspected, golden, allowed_extra=_synthetic_keys(seeds_index))
    model = load_ranker(out)
    assert model.features == RANK_FEATURES
    assert np.isfinite(model.weights).all()
    assert json.loads(out.read_text(encoding="utf-8"))["training"]["human_queries"] == len(
        [i for i in select_part(golden, "tune") if i.answerable]
    )


def test_the_listwise_loss_gradient_matches_finite_differences():
    rng = np.random.default_rng(3)
    lists = [(rng.normal(size=(n, 4)), np.arange(n) < 2, weight) for n, weight in ((6, 1.0), (9, 0.3), (3, 1.0))]
    weights = rng.normal(size=4)
    loss, gradient = fit_ranker.listwise_loss(weights, lists, 0.1)
    step = 1e-6
    numeric = [
        (
            fit_ranker.listwise_loss(weights + step * e, lists, 0.1)[0]
            - fit_ranker.listwise_loss(weights - step * e, lists, 0.1)[0]
        )
        / (2 * step)
        for e in np.eye(4)
    ]
    assert loss > 0
    np.testing.assert_allclose(gradient, numeric, rtol=1e-5, atol=1e-8)


def test_the_listwise_fit_weighs_each_question_alike_however_many_candidates_it_has():
    """Question A: its evidence wins on feature 0 among 39 easy candidates (feature 0 and 1 low); question B:
    on feature 1 against one hard candidate that is high on feature 0. Pairwise, A's 39 pairs outvote B's one
    and B is lost; listwise, each question counts once and a model that ranks both first exists, so it is found."""
    easy = np.column_stack([np.zeros(39), np.zeros(39)])
    a = fit_ranker.Query("g", "a", np.vstack([[1.0, 0.0], easy]), np.array([2] + [0] * 39), True)
    b = fit_ranker.Query("g", "b", np.array([[0.5, 1.0], [1.0, 0.0]]), np.array([2, 0]), True)
    names = ("x", "y")
    mean, scale = np.zeros(2), np.ones(2)
    model = fit_ranker.fit([a, b], names, (0.001, 0.1), mean, scale)
    assert fit_ranker.ranking_metrics([a, b], model)["hit@1"] == 1.0


def test_a_refit_replaces_the_shipped_ranker_only_when_its_cross_validated_figures_are_higher():
    shipped = {"hit@1": 0.542, "mrr@10": 0.661}
    assert not fit_ranker.adopted({"hit@1": 0.536, "mrr@10": 0.657}, shipped)  # the refit the test parts refuted
    assert not fit_ranker.adopted(dict(shipped), shipped)  # no better: keep what ships
    assert fit_ranker.adopted({"hit@1": 0.542, "mrr@10": 0.670}, shipped)
    assert fit_ranker.adopted({"hit@1": 0.400, "mrr@10": 0.500}, None)  # nothing shipped to compare with


@pytest.mark.parametrize("force", [False, True])
def test_a_ranker_fit_that_is_not_better_writes_nothing_unless_forced(
    seeds_index, golden, inspected, tmp_path, monkeypatch, small_ranker_grid, force
):
    monkeypatch.setattr(fit_ranker, "SYNTHETIC_PER_INDEX", 15)
    monkeypatch.setattr(fit_ranker, "adopted", lambda candidate, shipped: False)
    out, report = tmp_path / "ranker.json", tmp_path / "fit_ranker.md"
    shipped = (ROOT / "rag" / "ranker.json").read_text(encoding="utf-8")
    out.write_text(shipped, encoding="utf-8")
    argv = ["--set", str(GOLDEN), str(SEEDS), str(seeds_index), "--out", str(out), "--report", str(report)]
    assert fit_ranker.main(argv + (["--force"] if force else [])) == 0
    assert (out.read_text(encoding="utf-8") == shipped) is not force
    assert report.exists() is force
    if force:
        assert "The model this fit replaced, on the same questions: hit@1" in report.read_text(encoding="utf-8")


def test_fusion_tuning_judges_each_setting_by_the_ranker_on_tuning_questions(
    seeds_index, golden, inspected, tmp_path, monkeypatch, small_ranker_grid
):
    monkeypatch.setattr(fit_ranker, "SYNTHETIC_PER_INDEX", 5)
    monkeypatch.setattr(tune_fusion, "GRID", {"identifier_weight": (2.0, 8.0), "rrf_k": (20,)})
    fused: list[tuple[float, int]] = []
    real = Assistant.from_settings

    def spy(settings, *args, **kwargs):
        fused.append((settings.identifier_weight, settings.rrf_k))
        return real(settings, *args, **kwargs)

    monkeypatch.setattr(Assistant, "from_settings", staticmethod(spy))
    report = tmp_path / "tune_fusion.md"
    assert tune_fusion.main(["--set", str(GOLDEN), str(SEEDS), str(seeds_index), "--report", str(report)]) == 0
    assert fused == [(2.0, 20), (8.0, 20)]  # each setting's candidates are collected under it
    _only_tune(inspected, golden, allowed_extra=_synthetic_keys(seeds_index))
    text = report.read_text(encoding="utf-8")
    assert "| 2.0 | 20 |" in text and "| 8.0 | 20 |" in text and "Chosen: identifier_weight" in text


def test_fusion_tuning_changes_the_constants_only_for_a_gain_beyond_one_question():
    current = {"hit@1": 0.5, "mrr@10": 0.6, "queries": 200}
    one_more = {"hit@1": 0.505, "mrr@10": 0.62, "queries": 200}
    two_more = {"hit@1": 0.51, "mrr@10": 0.6, "queries": 200}
    assert tune_fusion.choose({(2.0, 20): current, (1.0, 20): dict(current)}, (2.0, 20)) == (2.0, 20)
    assert tune_fusion.choose({(2.0, 20): current, (4.0, 20): one_more}, (2.0, 20)) == (2.0, 20)
    assert tune_fusion.choose({(2.0, 20): current, (4.0, 60): two_more}, (2.0, 20)) == (4.0, 60)
    assert tune_fusion.choose({(2.0, 20): current, (4.0, 20): one_more}, (3.0, 20)) == (4.0, 20)  # off the grid


def test_shipped_models_load_with_the_features_the_service_computes(assistant):
    inspection = assistant.inspect("what does error code 121 mean?", k=5)
    ranker, abstention = load_ranker(), load_abstention()
    assert ranker.features == inspection.rank_features == RANK_FEATURES
    assert abstention.features == inspection.abstention_features == ABSTENTION_FEATURES
    assert all(len(features) == len(ranker.features) for _, features in inspection.candidates)
    assert len(inspection.abstention) == len(abstention.features)
    for name, path in (("ranker", ROOT / "rag" / "ranker.json"), ("abstention", ROOT / "rag" / "abstention.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        assert raw["name"] == name
        assert LinearModel.load(path, raw["features"]).features == (ranker if name == "ranker" else abstention).features


@pytest.fixture()
def asked(monkeypatch) -> list[tuple]:
    """Every (question, history) a tuning script asks the assistant, directly or through an eval run."""
    seen: list[tuple] = []

    def spying(real):
        def spy(self, question, history=(), **kwargs):
            seen.append(_key(question, history))
            return real(self, question, history, **kwargs)

        return spy

    for name in ("ask", "ask_and_search"):
        monkeypatch.setattr(Assistant, name, spying(getattr(Assistant, name)))
    return seen


def test_chunk_size_tuning_reads_only_tuning_questions(seeds_index, golden, asked, monkeypatch, tmp_path):
    monkeypatch.setattr(tune_answers, "GRID", {"max_units_fact": (2, 3)})
    monkeypatch.setattr(tune_answers, "ROUNDS", 1)
    built: list[int] = []
    monkeypatch.setattr(tune_chunking, "index_for", lambda corpus, prefix, size: built.append(size) or seeds_index)
    report = tmp_path / "tune_chunking.md"
    argv = ["--set", str(GOLDEN), str(SEEDS), str(tmp_path / "seeds"), "--sizes", "900", "--report", str(report)]
    assert tune_chunking.main(argv) == 0
    assert built == [900]
    _only_tune(asked, golden)
    text = report.read_text(encoding="utf-8")
    assert "tuning parts only" in text and "Chosen chunk size: 900" in text


def test_the_chosen_chunk_size_keeps_every_median_answer_concise():
    def row(quality: float, chars: float) -> dict[str, float]:
        return {"key_fact_recall": quality, "answerable_accuracy": quality, "answer_chars_p50": chars}

    table = {900: [row(0.7, 800), row(0.7, 880)], 1300: [row(0.9, 700), row(0.9, 950)], 1100: [row(0.8, 850)] * 2}
    assert tune_chunking.choose(table) == 1100


def _half_indexes(index: Path, tmp_path: Path) -> tuple[Path, Path]:
    """Two "half indexes" that are the same index: the routing is what is tested, not the figures."""
    for name in ("half-0", "half-1"):
        (tmp_path / name).symlink_to(index, target_is_directory=True)
    return tmp_path / "half-0", tmp_path / "half-1"


def _indexes_asked(monkeypatch, method: str) -> list[tuple[tuple, Path]]:
    """Every (question key, index folder) the assistant's `method` is called with from now on."""
    asked: list[tuple[tuple, Path]] = []
    real = getattr(Assistant, method)

    def spy(self, question, history=(), **kwargs):
        asked.append((_key(question, history), Path(self.settings.index_dir)))
        return real(self, question, history, **kwargs)

    monkeypatch.setattr(Assistant, method, spy)
    return asked


@pytest.mark.parametrize(
    ("recall", "precision", "chars", "top", "taken"),
    [
        (0.700, 0.60, 850, 0.690, True),  # more recall than a tie
        (0.691, 0.50, 850, 0.691, False),  # a tie, less precise
        (0.689, 0.70, 850, 0.690, True),  # a tie, more precise
        (0.689, 0.70, 850, 0.692, False),  # a tie with the best, but walks down from the best the search saw
        (0.750, 0.90, 880, 0.690, False),  # over the median limit
    ],
)
def test_answer_tuning_breaks_a_recall_tie_by_source_precision(recall, precision, chars, top, taken):
    best = tune_answers.Result(recall=0.690, precision=0.60, median_chars=850)
    trial = tune_answers.Result(recall=recall, precision=precision, median_chars=chars)
    assert tune_answers.better(trial, best, top) is taken


def test_answer_tuning_with_only_searches_those_settings_on_tuning_questions(
    seeds_index, golden, asked, monkeypatch, tmp_path
):
    monkeypatch.setattr(tune_answers, "GRID", {"max_units_fact": (2, 3), "answer_max_chars": (700, 900)})
    monkeypatch.setattr(tune_answers, "ROUNDS", 1)
    report = tmp_path / "tune_answers.md"
    argv = ["--set", str(GOLDEN), str(SEEDS), str(seeds_index), "--only", "answer_max_chars", "--report", str(report)]
    assert tune_answers.main(argv) == 0
    _only_tune(asked, golden)
    rows = [
        line.split("|")[2].strip()
        for line in report.read_text(encoding="utf-8").splitlines()
        if line.startswith("| 1 |")
    ]
    assert rows == ["answer_max_chars", "answer_max_chars"]
    assert "Chosen: {'answer_max_chars':" in report.read_text(encoding="utf-8")


def test_the_answer_tuning_check_searches_each_half_and_scores_its_choice_on_the_other(
    seeds_index, golden, asked, monkeypatch, tmp_path
):
    """A search that fits noise wins on the questions it searched and loses on others: the check runs it on
    each half of the tuning questions and scores its choice on the other half, beside the current settings."""
    monkeypatch.setattr(tune_answers, "GRID", {"max_units_fact": (2, 5)})
    searched: list[list[str]] = []
    real_tune = tune_answers.tune

    def spy(sets, only=(), rounds=None):
        searched.append(sorted(item.id for s in sets for _, items in s for item in items))
        return real_tune(sets, only, rounds)

    monkeypatch.setattr(tune_answers, "tune", spy)
    report = tmp_path / "check.md"
    argv = ["--set", str(GOLDEN), str(SEEDS), str(seeds_index), "--check", "--rounds", "1", "--report", str(report)]
    assert tune_answers.main(argv) == 0
    _only_tune(asked, golden)
    answerable = sorted(i.id for i in select_part(golden, "tune") if i.answerable)
    assert len(searched) == 2 and sorted(searched[0] + searched[1]) == answerable  # each half searched once
    assert {tune_answers.split_half(i) for i in searched[0]} == {0} and set(searched[0]).isdisjoint(searched[1])
    text = report.read_text(encoding="utf-8")
    assert "Settings searched, at their current values: {'max_units_fact': " in text
    rows = [line for line in text.splitlines() if line.startswith("| half ")]
    assert [row.split("|")[1].strip() for row in rows] == ["half 0", "half 1"]
    assert all(row.count("→") == 2 for row in rows)  # current → chosen, on the searched half and on the other


def test_answer_tuning_with_half_indexes_asks_each_question_of_the_half_index_that_did_not_see_it(
    seeds_index, golden, monkeypatch, tmp_path
):
    """A bound on a unit's cosine is chosen on cosines a new question gets, not the served adapter's in-sample ones."""
    halves = _half_indexes(seeds_index, tmp_path)
    monkeypatch.setattr(tune_answers, "GRID", {"unit_floor": (0.0,)})
    monkeypatch.setattr(tune_answers, "ROUNDS", 1)
    asked = _indexes_asked(monkeypatch, "ask")
    report = tmp_path / "tune_answers.md"
    argv = ["--set", str(GOLDEN), str(SEEDS), str(seeds_index), "--half-indexes", *map(str, halves)]
    assert tune_answers.main([*argv, "--report", str(report)]) == 0
    answerable = [i for i in select_part(golden, "tune") if i.answerable]
    expected = sorted((_key(i.question, i.history), halves[fit_embedding.half(i.id)]) for i in answerable)
    assert sorted(set(asked)) == sorted(set(expected)) and {index for _, index in asked} == set(halves)
    assert "held out from the embedding adapter" in report.read_text(encoding="utf-8")


def test_held_out_tuning_asks_each_tuning_question_of_the_half_index_that_did_not_see_it(
    seeds_index, golden, monkeypatch, tmp_path
):
    halves = _half_indexes(seeds_index, tmp_path)
    asked = _indexes_asked(monkeypatch, "ask_and_search")
    report = tmp_path / "held_out_tuning.md"
    argv = ["--set", str(GOLDEN), str(SEEDS), str(seeds_index), "--half-indexes", *map(str, halves)]
    assert held_out_tuning.main([*argv, "--report", str(report)]) == 0
    tune = select_part(golden, "tune")
    served = [(key, index) for key, index in asked if index == seeds_index]
    held = [(key, index) for key, index in asked if index != seeds_index]
    assert [key for key, _ in served] == [_key(i.question, i.history) for i in tune]  # no test-part question
    assert sorted(held) == sorted((_key(i.question, i.history), halves[fit_embedding.half(i.id)]) for i in tune)
    rows = [line for line in report.read_text(encoding="utf-8").splitlines() if line.startswith("| golden.jsonl")]
    assert len(rows) == 2 and "in-sample" in rows[0] and "held out" in rows[1]
    assert rows[0].split("|")[3:] == rows[1].split("|")[3:]  # the same index behind both: the same figures


def test_held_out_tuning_writes_outcomes_and_names_the_questions_that_changed_against_earlier_ones(
    seeds_index, golden, tmp_path, capsys
):
    halves = _half_indexes(seeds_index, tmp_path)
    argv = ["--set", str(GOLDEN), str(SEEDS), str(seeds_index), "--half-indexes", *map(str, halves)]
    argv += ["--held-out-only", "--report", str(tmp_path / "report.md")]
    before = tmp_path / "before.json"
    assert held_out_tuning.main([*argv, "--outcomes", str(before)]) == 0
    outcomes = json.loads(before.read_text(encoding="utf-8"))
    assert sorted(outcomes) == sorted(i.id for i in select_part(golden, "tune"))  # no test-part question
    rows = [line for line in (tmp_path / "report.md").read_text(encoding="utf-8").splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[1] for row in rows[1:]] == ["held out"]  # no in-sample row
    # an earlier run in which one passing answer failed and one answer had fewer facts
    passing = next(qid for qid, o in outcomes.items() if o["pass"] and o["key_fact_recall"] == 1.0)
    fewer = next(qid for qid, o in outcomes.items() if o["pass"] and o["key_fact_recall"] == 1.0 and qid != passing)
    earlier = outcomes | {
        passing: outcomes[passing] | {"pass": False},
        fewer: outcomes[fewer] | {"key_fact_recall": 0.5},
    }
    before.write_text(json.dumps(earlier), encoding="utf-8")
    capsys.readouterr()
    assert held_out_tuning.main([*argv, "--against", str(before)]) == 0
    printed = capsys.readouterr().out
    assert "now failing (0): -" in printed
    assert f"now passing (1): {passing}" in printed
    assert f"key facts changed (1): {fewer} 0.50 -> 1.00" in printed


def test_the_ranker_fit_collects_with_the_first_stage_when_the_shipped_model_has_other_features(tmp_path):
    """A feature added to the code makes the shipped model unloadable: its fit must still run to replace it
    (it failed with "re-run its fit script" before)."""
    assert fit_ranker.collecting_ranker() == load_ranker()
    stale = tmp_path / "ranker.json"
    old = RANK_FEATURES[:-1]
    stale.write_text(LinearModel("ranker", old, (0.0,) * len(old), (1.0,) * len(old), (1.0,) * len(old)).to_json())
    with pytest.raises(ConfigurationError):
        LinearModel.load(stale, RANK_FEATURES)
    model = fit_ranker.collecting_ranker(stale)
    features = np.random.default_rng(0).normal(size=(6, len(RANK_FEATURES)))
    assert np.allclose(model.scores(features), features[:, fit_ranker.FIRST_STAGE])


def test_follow_up_tuning_asks_tuning_follow_ups_after_the_assistants_own_answers(
    seeds_index, golden, monkeypatch, tmp_path
):
    """Each follow-up of the tuning part is asked after the assistant's own answers to its earlier turns (the
    golden file's assistant turns are written by hand and never repeat a passage); no test-part turn is read."""
    monkeypatch.setattr(tune_followups, "MIN_WORDS", (0, 12))
    monkeypatch.setattr(tune_followups, "MAX_GAPS", (0.1, 9.0))
    asked: list[tuple[str, tuple]] = []
    real = Assistant.ask

    def spy(self, question, history=(), **kwargs):
        asked.append((question, tuple(history)))
        return real(self, question, history, **kwargs)

    monkeypatch.setattr(Assistant, "ask", spy)
    report = tmp_path / "tune_followups.md"
    assert tune_followups.main(["--set", str(GOLDEN), str(SEEDS), str(seeds_index), "--report", str(report)]) == 0
    follow_ups = [i for i in select_part(golden, "tune") if i.answerable and i.history]
    turns = {i.question for i in follow_ups} | {
        t["content"] for i in follow_ups for t in i.history if t["role"] == "user"
    }
    assert asked and {question for question, _ in asked} <= turns
    written = {t["content"] for i in follow_ups for t in i.history if t["role"] == "assistant"}
    final = [history for question, history in asked if history and question in {i.question for i in follow_ups}]
    assert final and all(history[-1]["content"] not in written for history in final)  # the assistant's own answers
    text = report.read_text(encoding="utf-8")
    assert "tuning parts only" in text and text.count("\n| 12 |") == 2 and "| 0 (off) |" in text
    assert "Chosen: (" in text


def _asks_only_tuning_conversations(main, seeds_index, golden, monkeypatch, tmp_path) -> str:
    """Runs a tuning script's `main` over the seeds and checks that it asked every tuning question with a history,
    and only those and their earlier user turns; returns its report."""
    asked: list[str] = []
    real = Assistant.ask

    def spy(self, question, history=(), **kwargs):
        asked.append(question)
        return real(self, question, history, **kwargs)

    monkeypatch.setattr(Assistant, "ask", spy)
    report = tmp_path / "report.md"
    assert main(["--set", str(GOLDEN), str(SEEDS), str(seeds_index), "--report", str(report)]) == 0
    conversations = [i for i in select_part(golden, "tune") if i.history]
    turns = {i.question for i in conversations} | {
        t["content"] for i in conversations for t in i.history if t["role"] == "user"
    }
    assert {i.question for i in conversations} <= set(asked) <= turns
    return report.read_text(encoding="utf-8")


def test_leaning_tuning_asks_every_tuning_question_with_a_history_and_no_test_part_one(
    seeds_index, golden, monkeypatch, tmp_path
):
    """Answerable and unanswerable tuning questions asked in a conversation, each after the assistant's own
    answers to its earlier turns; no test-part question is asked."""
    monkeypatch.setattr(tune_leaning, "MAX_TERMS", (2,))
    monkeypatch.setattr(tune_leaning, "WEAK_DENSE", (0.45,))
    monkeypatch.setattr(tune_leaning, "LEAN_MARGIN", (1.0,))
    text = _asks_only_tuning_conversations(tune_leaning.main, seeds_index, golden, monkeypatch, tmp_path)
    assert "tuning parts only" in text and "| 0 (off) | 0.0 | inf | 0 |" in text
    assert "| 2 | 0.45 | inf |" in text
    assert re.search(r"^\| \d \| [\d.]+ \| 1\.0 \|", text, re.M)  # the margin, at the terms and cosine chosen
    assert "Chosen: (" in text


def test_follow_up_context_tuning_asks_only_tuning_questions_with_a_history_and_reports_each_count(
    seeds_index, golden, monkeypatch, tmp_path
):
    monkeypatch.setattr(tune_followup_context, "WORDS", (4,))
    text = _asks_only_tuning_conversations(tune_followup_context.main, seeds_index, golden, monkeypatch, tmp_path)
    current = Settings().followup_context_words
    assert "tuning parts only" in text and f"\n| {current} | 0 |" in text and "\n| 4 |" in text
    assert "\n| half 0 | " in text and "\n| half 1 | " in text  # each half's choice, scored on the other half
    assert "Chosen: (" in text


def test_follow_up_context_tuning_chooses_the_best_recall_then_the_most_declined_then_the_fewest_words():
    def result(recall: float, declined: int) -> tune_leaning.Result:
        return tune_leaning.Result(answers={}, recall=recall, declined=declined, unanswerable=3)

    choose = tune_followup_context.choose
    assert choose({4: result(0.5, 1), 8: result(0.6, 1), 12: result(0.6, 2)}) == 12
    assert choose({4: result(0.5, 1), 8: result(0.6, 2), 12: result(0.6, 2)}) == 8
    whole = tune_followup_context.combined([result(0.5, 1), result(0.8, 0)], [10, 30])
    assert whole.recall == pytest.approx(0.725) and whole.declined == 1 and whole.unanswerable == 6


def test_leaning_tuning_chooses_the_best_recall_then_the_most_declined_then_the_narrowest_rule():
    def result(recall: float, declined: int) -> tune_leaning.Result:
        return tune_leaning.Result(answers={}, recall=recall, declined=declined, unanswerable=3)

    choose = tune_leaning.choose
    off, inf = (0, 0.0, math.inf), math.inf
    assert choose({off: result(0.5, 1), (2, 0.45, inf): result(0.55, 1), (3, 0.45, inf): result(0.55, 2)}) == (
        3,
        0.45,
        inf,
    )
    assert choose({off: result(0.5, 1), (2, 0.45, inf): result(0.55, 1), (3, 0.4, inf): result(0.55, 1)}) == (
        2,
        0.45,
        inf,
    )
    assert choose({(2, 0.5, inf): result(0.55, 1), (2, 0.45, inf): result(0.55, 1)}) == (2, 0.45, inf)
    assert choose({(2, 0.45, 1.0): result(0.55, 1), (2, 0.45, inf): result(0.55, 1)}) == (2, 0.45, inf)
    assert choose({(2, 0.45, 1.0): result(0.55, 1), (2, 0.45, 2.0): result(0.55, 1)}) == (2, 0.45, 2.0)
    assert choose({(2, 0.45, 1.0): result(0.56, 1), (2, 0.45, inf): result(0.55, 1)}) == (2, 0.45, 1.0)


def test_follow_up_tuning_chooses_the_most_leads_with_a_key_fact_then_the_fewest_repeats_then_the_smallest_gap():
    def result(holds: int, repeats: int) -> tune_followups.Result:
        return tune_followups.Result(followups=60, lead_holds_fact=holds, lead_repeats=repeats, recall=0.5)

    choose = tune_followups.choose
    assert choose({(0, 9.0): result(12, 28), (12, 0.1): result(14, 25), (12, 9.0): result(14, 20)}) == (12, 9.0)
    assert choose({(8, 0.1): result(14, 20), (8, 0.3): result(14, 20), (5, 9.0): result(13, 15)}) == (8, 0.1)
    answer = "**What to do**\n\nSet `acks=all`. [1][2]\n\nThen restart. [1]"
    assert tune_followups.lead_block(answer) == "Set `acks=all`."


def test_the_caution_threshold_is_where_marked_failures_most_outnumber_marked_passes():
    def answered(*outcomes):
        return [fit_caution.Answered(str(n), "g", score, failed) for n, (score, failed) in enumerate(outcomes)]

    # failures at the bottom: the cut goes between the last failure of the run and the pass above it
    low_failures = answered(
        (-1.0, True), (-0.5, True), (0.0, False), (0.2, True), (0.4, True), (1.0, False), (2.0, False)
    )
    assert fit_caution.choose_threshold(low_failures) == pytest.approx(0.7)
    m = fit_caution.marked(low_failures, 0.7)
    assert (m.marked, m.failed_marked, m.failures, m.passes) == (5, 4, 4, 3)
    assert (m.precision, m.recall, m.passes_marked) == (0.8, 1.0, pytest.approx(1 / 3))
    # two cuts gain as much: the lower one, which marks fewer answers
    assert fit_caution.choose_threshold(answered((-1.0, True), (0.0, False), (1.0, True), (2.0, False))) == -0.5
    # a pass at the bottom, then as many failures as passes: no cut gains, so no caution
    assert fit_caution.choose_threshold(answered((-1.0, False), (0.0, True), (1.0, False), (2.0, True))) is None
    assert fit_caution.marked(low_failures, None).marked == 0


def test_the_caution_fit_asks_only_tuning_questions_and_writes_its_threshold_into_the_model(
    seeds_index, golden, inspected, asked, tmp_path, monkeypatch
):
    monkeypatch.setattr(fit_abstention, "REPEATS", 1)
    monkeypatch.setattr(fit_caution, "REPEATS", 1)
    halves = _half_indexes(seeds_index, tmp_path)
    out, report = tmp_path / "abstention.json", tmp_path / "fit_caution.md"
    shipped = load_abstention()
    out.write_text(shipped.to_json(), encoding="utf-8")
    argv = ["--set", str(GOLDEN), str(SEEDS), str(seeds_index), "--half-indexes", *map(str, halves)]
    assert fit_caution.main([*argv, "--out", str(out), "--report", str(report)]) == 0
    _only_tune(inspected, golden)
    _only_tune(asked, golden)
    model = load_abstention(out)
    assert (model.weights, model.threshold, model.mode_thresholds) == (
        shipped.weights,
        shipped.threshold,
        shipped.mode_thresholds,
    )
    figures = model.training["caution"]
    assert figures["answered"] > 0 and 0 <= figures["marked"] <= figures["answered"]
    assert (model.caution_threshold is None) == (figures["marked"] == 0)
    text = report.read_text(encoding="utf-8")
    assert "tuning parts only" in text and "Chosen caution threshold" in text and "| half 1 |" in text
