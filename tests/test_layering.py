"""The layering rule: adapters (ui/, evals/) use only `rag`'s public API, never LangChain, FAISS, Spark or the
model libraries, and never `rag` internals. benchmarks/ are exempt."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rag

REPO = Path(__file__).resolve().parents[1]
ADAPTER_DIRS = ("ui", "evals")
FORBIDDEN = ("langchain", "faiss", "pyspark", "bm25s", "sentence_transformers", "torch", "transformers")


def _adapter_modules() -> list[Path]:
    return sorted(p for d in ADAPTER_DIRS for p in (REPO / d).rglob("*.py"))


def _imports(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, absolute module, imported names) for every import in the file, nested ones included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, module] if module else base)
            found.append((node.lineno, module, tuple(alias.name for alias in node.names)))
    return found


def _violations(path: Path) -> list[str]:
    relative = path.relative_to(REPO).as_posix()
    problems = []
    for line, module, names in _imports(path):
        top = module.split(".")[0]
        if any(top == f or top.startswith(f"{f}_") for f in FORBIDDEN):  # langchain_core, langchain_openai, ...
            problems.append(f"{relative}:{line} imports {module}")
        elif top == "rag" and module != "rag":
            problems.append(f"{relative}:{line} imports rag internals: from {module} import {', '.join(names)}")
        elif module == "rag":
            private = [n for n in names if n not in rag.__all__]
            if private:
                problems.append(f"{relative}:{line} imports names rag does not export: {', '.join(private)}")
    return problems


def test_there_are_adapters_to_check():
    names = {p.relative_to(REPO).as_posix() for p in _adapter_modules()}
    assert {"ui/web.py", "ui/slack_app.py", "evals/runner.py"} <= names


@pytest.mark.parametrize("path", _adapter_modules(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_adapter_imports_only_the_public_api(path):
    assert _violations(path) == []


def test_the_checker_catches_violations(tmp_path, monkeypatch):
    """The rule is only worth something if it can fail: a planted bad adapter is reported line by line."""
    fake_repo = tmp_path
    (fake_repo / "ui").mkdir()
    bad = fake_repo / "ui" / "bad.py"
    bad.write_text(
        "import faiss\n"
        "from langchain_core.messages import HumanMessage\n"
        "from rag.retrieval import Retriever\n"
        "from rag import Assistant, _private\n"
        "def later():\n"
        "    import pyspark.sql\n"
        "from . import render\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(f"{__name__}.REPO", fake_repo)
    assert _violations(bad) == [
        "ui/bad.py:1 imports faiss",
        "ui/bad.py:2 imports langchain_core.messages",
        "ui/bad.py:3 imports rag internals: from rag.retrieval import Retriever",
        "ui/bad.py:4 imports names rag does not export: _private",
        "ui/bad.py:6 imports pyspark.sql",
    ]


def test_public_api_is_what_adapters_need():
    for name in (
        "Assistant",
        "Answer",
        "Citation",
        "Passage",
        "SearchResult",
        "IndexStatus",
        "Settings",
        "KafkaRagError",
        "QuestionError",
        "ConfigurationError",
        "append_feedback",
        "check_writable",
    ):
        assert name in rag.__all__
        assert hasattr(rag, name)
