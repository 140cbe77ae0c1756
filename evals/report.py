"""Rendering an eval run for people: `report.md` tables and a self-contained `report.html` with plots.

Both reports render the same tables: overall per retrieval mode and part of the tune/test split (all,
tune, test), per tag, per document and per question. The HTML adds matplotlib PNGs inlined as base64
so the file can be mailed or archived alone.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evals.golden import PARTS
from evals.metrics import RANK_DEPTH, QuestionScore, hit, summarise

MAIN_METRICS = (
    "questions",
    "hit@1",
    "hit@3",
    "hit@5",
    "hit@10",
    "mrr@10",
    "ndcg@10",
    "key_fact_recall",
    "citation_precision",
    "source_precision",
    "abstention_recall",
    "over_abstention",
    "answerable_accuracy",
    "p50_ms",
    "p95_ms",
    "avg_context_chars",
    "answer_chars_p50",
)
DOC_METRICS = ("doc_hit@1", "doc_hit@3", "doc_hit@5", "doc_hit@10", "doc_mrr@10")
FOLLOWUP_METRICS = ("followup_hit@5", "followup_raw_hit@5", "followup_mrr@10", "followup_raw_mrr@10")
GROUP_METRICS = (
    "hit@5",
    "mrr@10",
    "key_fact_recall",
    "answerable_accuracy",
    "abstention_recall",
    "over_abstention",
)
ANSWER_PREVIEW = 240  # characters of an answer shown in the Markdown per-question table


@dataclass(frozen=True)
class Table:
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def fmt(value: Any, name: str = "") -> str:
    """Numbers as people read them: rates to 3 places, milliseconds to 1, sizes whole, missing as '–'."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if name.endswith("_ms"):
            return f"{value:.1f}"
        if "_chars" in name:
            return f"{value:.0f}"
        return f"{value:.3f}"
    return str(value)


def build_tables(
    doc: Mapping[str, Any], scores: Mapping[str, Sequence[QuestionScore]], rows: Sequence[Mapping[str, Any]]
) -> list[Table]:
    """All report tables; `scores` is keyed by mode in run order, `rows` are the primary mode's questions."""
    modes = list(scores)
    blocks = modes_of(doc)
    by_mode = {mode: blocks[mode] for mode in modes}
    primary = scores[modes[0]]
    tables = [
        _metric_table("Overall", MAIN_METRICS, by_mode),
        _metric_table("Document-level retrieval", DOC_METRICS, by_mode),
        _metric_table("Follow-ups: system rewrite vs raw question", FOLLOWUP_METRICS, by_mode),
        _group_table(f"Per tag ({modes[0]})", "tag", _groups(primary, lambda s: s.tags)),
        _group_table(f"Per document ({modes[0]})", "document", _groups(primary, lambda s: s.sources)),
        _question_table(f"Per question ({modes[0]})", rows),
    ]
    return tables


def modes_of(doc: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Every mode's metrics block in a metrics.json, the flat primary one included."""
    return {doc["mode"]: doc, **doc.get("by_mode", {})}


def part_columns(by_mode: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """'<mode> all', '<mode> tune', '<mode> test' -> metrics, for every mode in order."""
    columns: dict[str, Mapping[str, Any]] = {}
    for mode, block in by_mode.items():
        columns[f"{mode} all"] = block
        for part in PARTS:
            columns[f"{mode} {part}"] = block.get("parts", {}).get(part, {})
    return columns


def _metric_table(title: str, names: Sequence[str], by_mode: Mapping[str, Mapping[str, Any]]) -> Table:
    columns = part_columns(by_mode)
    rows = tuple((name, *(fmt(m.get(name), name) for m in columns.values())) for name in names)
    return Table(title, ("metric", *columns), rows)


def _groups(
    scores: Sequence[QuestionScore], keys: Callable[[QuestionScore], Sequence[str]]
) -> dict[str, list[QuestionScore]]:
    groups: dict[str, list[QuestionScore]] = {}
    for score in scores:
        for key in keys(score):
            groups.setdefault(key, []).append(score)
    return dict(sorted(groups.items()))


def _group_table(title: str, label: str, groups: Mapping[str, Sequence[QuestionScore]]) -> Table:
    rows = []
    for key, members in groups.items():
        m = summarise(members)
        passed = sum(s.passed for s in members)
        rows.append(
            (
                key,
                str(len(members)),
                f"{passed}/{len(members)}",
                *(fmt(m[name], name) for name in GROUP_METRICS),
            )
        )
    return Table(title, (label, "n", "passed", *GROUP_METRICS), tuple(rows))


def _question_table(title: str, rows: Sequence[Mapping[str, Any]]) -> Table:
    out = []
    for r in rows:
        citations = " ".join(f"[{c['marker']}] {c['source_path']}{'' if c['ok'] else ' ✗'}" for c in r["citations"])
        out.append(
            (
                r["id"],
                r["part"],
                fmt(r["pass"]),
                r["question"],
                fmt(r["rank"]),
                fmt(r["raw_rank"]),
                fmt(r["abstained"]),
                "; ".join(r["facts_found"]),
                "; ".join(r["facts_missed"]),
                citations,
                fmt(r["latency_ms"], "latency_ms"),
                r["answer"],
            )
        )
    headers = (
        "id",
        "part",
        "pass",
        "question",
        "rank",
        "raw rank",
        "abstained",
        "facts found",
        "facts missed",
        "citations",
        "ms",
        "answer",
    )
    return Table(title, headers, tuple(out))


def markdown_report(doc: Mapping[str, Any], tables: Sequence[Table]) -> str:
    """`report.md`: a header naming what was scored, then every table."""
    parts = [f"# Eval run {doc['config']['started_at']}", "", *_header_lines(doc), ""]
    for table in tables:
        parts += [f"## {table.title}", "", _md_row(table.headers), _md_row(["---"] * len(table.headers))]
        parts += [_md_row(_preview(table, row)) for row in table.rows]
        parts.append("")
    return "\n".join(parts)


def _header_lines(doc: Mapping[str, Any]) -> list[str]:
    config, index, model = doc["config"], doc["index"], doc["model"]
    parts = doc.get("parts", {})
    sizes = "".join(f", {parts[p]['questions']} {p}" for p in PARTS if p in parts)
    return [
        f"- golden: {', '.join(config['golden'])} ({doc['questions']} questions{sizes})",
        f"- index: {config['index_dir']} version {index.get('version', '?')} ({index.get('documents', '?')} "
        f"documents, {index.get('chunks', '?')} chunks, {index.get('index_type', '?')})",
        f"- embedding model: {model['embedding']}; answerer: {model['answerer']}"
        + (f" ({model['llm']})" if model.get("llm") else ""),
        f"- retrieval: {', '.join(config['retrieval'])}; top_k for answers: {config['k']}",
    ]


def _preview(table: Table, row: Sequence[str]) -> list[str]:
    """Long answers are cut in Markdown; the HTML report and per_question.jsonl keep them whole."""
    if table.headers[-1] != "answer" or len(row[-1]) <= ANSWER_PREVIEW:
        return list(row)
    return [*row[:-1], row[-1][:ANSWER_PREVIEW].rstrip() + " …"]


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def html_report(doc: Mapping[str, Any], tables: Sequence[Table], scores: Mapping[str, Sequence[QuestionScore]]) -> str:
    """`report.html`: self-contained; every question and answer text is escaped."""
    title = html.escape(f"Eval run {doc['config']['started_at']}")
    body = [f"<h1>{title}</h1>", "<ul>"]
    body += [f"<li>{html.escape(line[2:])}</li>" for line in _header_lines(doc)]
    body.append("</ul>")
    for caption, png in plots(scores):
        body.append(
            f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{png}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )
    for table in tables:
        body.append(f"<h2>{html.escape(table.title)}</h2><table><thead><tr>")
        body += [f"<th>{html.escape(h)}</th>" for h in table.headers]
        body.append("</tr></thead><tbody>")
        for row in table.rows:
            cells = "".join(f"<td>{html.escape(cell)}</td>" for cell in row)
            body.append(f"<tr>{cells}</tr>")
        body.append("</tbody></table>")
    return _PAGE.format(title=title, body="\n".join(body))


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin-bottom: 2em; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }}
th {{ background: #f3f3f3; }}
td {{ max-width: 40em; white-space: pre-wrap; }}
figure {{ display: inline-block; margin: 0 1em 1em 0; }}
</style></head>
<body>
{body}
</body></html>
"""


def plots(scores: Mapping[str, Sequence[QuestionScore]]) -> list[tuple[str, str]]:
    """(caption, base64 PNG) for the hit@k curves, the latency histogram and the per-tag bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = []
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ks = range(1, RANK_DEPTH + 1)
    for mode, mode_scores in scores.items():
        answerable = [s for s in mode_scores if s.answerable] or list(mode_scores)
        ax.plot(
            ks,
            [sum(hit(s.rank, k) for s in answerable) / len(answerable) for k in ks],
            marker="o",
            label=mode,
        )
    ax.set(xlabel="k", ylabel="hit@k", ylim=(0, 1.02), title="Evidence in the top k")
    ax.legend()
    figures.append(("hit@k per retrieval mode", _png(fig, plt)))

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.hist([[s.latency_ms for s in v] for v in scores.values()], bins=20, label=list(scores))
    ax.set(xlabel="ms per ask", ylabel="questions", title="Answer latency")
    ax.legend()
    figures.append(("latency of ask", _png(fig, plt)))

    primary, primary_scores = next(iter(scores.items()))
    groups = _groups(primary_scores, lambda s: s.tags)
    fig, ax = plt.subplots(figsize=(max(5, 0.45 * len(groups)), 3.5))
    positions = range(len(groups))
    passed = [sum(s.passed for s in g) / len(g) for g in groups.values()]
    hit5 = [summarise(g)["hit@5"] for g in groups.values()]
    ax.bar([p - 0.2 for p in positions], passed, width=0.4, label="passed")
    ax.bar(
        [p + 0.2 for p in positions],
        [float("nan") if h is None else h for h in hit5],
        width=0.4,
        label="hit@5",
    )
    ax.set_xticks(list(positions), [f"{t} ({len(g)})" for t, g in groups.items()], rotation=60, ha="right")
    ax.set(ylim=(0, 1.02), title=f"Per tag ({primary})")
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.02), ncols=2, frameon=False)
    figures.append((f"per-tag pass rate and hit@5 ({primary})", _png(fig, plt)))
    return figures


def _png(fig: Any, plt: Any) -> str:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")
