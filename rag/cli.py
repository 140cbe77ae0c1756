"""`kafka-rag`: the command line. Each subcommand loads settings once, applies its flags, and calls
the library; adapters with their own flags (serve, slack, eval) register through `add_arguments`/`run`.

Exit codes: 0 ok, 1 a gate or check failed, 2 bad input, configuration or a damaged index (one line on
stderr), 3 another ingest holds the index's writer lock, 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from rag.errors import IndexLockedError, KafkaRagError, QuestionError, SourceNotFoundError
from rag.settings import RETRIEVAL_MODES, Settings

SAMPLE_QUESTION = "What does error code 121 INVALID_RECORD_STATE mean?"
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_ADAPTERS = {"serve": "ui.web_command", "slack": "ui.slack_app", "eval": "evals.runner"}
_ADAPTER_HELP = {
    "serve": "start the chat web UI (Gradio) on the published index",
    "slack": "run the Slack bot (Socket Mode, or HTTP events with --http)",
    "eval": "score an index against a golden Q&A set",
}


def main(argv: Sequence[str] | None = None) -> int:
    # Set before huggingface_hub is imported (it reads this once): a missing model never hangs on the network.
    os.environ.setdefault("HF_HUB_OFFLINE", os.environ.get("KAFKA_RAG_HF_OFFLINE", "1"))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no weight-loading progress bar on every command
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = _parser(argv)
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except IndexLockedError as exc:
        print(f"kafka-rag: {exc}", file=sys.stderr)
        return 3
    except KafkaRagError as exc:
        print(f"kafka-rag: {exc}", file=sys.stderr)
        return 2
    except BaseException as exc:
        if not _interrupted(exc):
            raise
        print("kafka-rag: interrupted", file=sys.stderr)
        return 130


def _interrupted(exc: BaseException | None) -> bool:
    """Ctrl-C, or an error raised while a Ctrl-C unwound (py4j fails once Spark cancelled its jobs)."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, KeyboardInterrupt):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def _parser(argv: Sequence[str] | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafka-rag", description="Troubleshooting assistant for Apache Kafka")
    commands = parser.add_subparsers(dest="command", required=True)

    ingest = commands.add_parser("ingest", help="build and publish an index from documents with Spark")
    ingest.add_argument("sources", nargs="*", metavar="SOURCE", help="folders or files (default: seeds/)")
    ingest.add_argument("--index", type=Path, help="index directory (default: KAFKA_RAG_INDEX_DIR or index/)")
    ingest.add_argument("--master", help="Spark master URL (default: local[*]; e.g. spark://host:7077)")
    ingest.add_argument("--model", help="embedding model name or local path")
    ingest.add_argument("--no-spark", action="store_true", help="embed in this process instead of on Spark")
    ingest.add_argument("--quiet", action="store_true", help="print nothing but errors")
    ingest.add_argument("--verbose", action="store_true", help="also show Spark's and the JVM's own log output")
    ingest.add_argument("--json", action="store_true", help="print a machine-readable summary")
    ingest.add_argument("--sample", action="store_true", help="then show the best passages for a sample question")
    ingest.add_argument("--wait", action="store_true", help="wait for another ingest into --index to finish")
    ingest.set_defaults(handler=_ingest)

    index = commands.add_parser("index", help="list the index's versions, or roll back to an earlier one")
    index_commands = index.add_subparsers(dest="index_command", required=True)
    listing = index_commands.add_parser("list", help="versions with sizes and counts; * marks the serving one")
    listing.add_argument("--index", type=Path, help="index directory (default: KAFKA_RAG_INDEX_DIR or index/)")
    listing.add_argument("--json", action="store_true", help="print the versions as JSON")
    listing.set_defaults(handler=_index_list)
    back = index_commands.add_parser("rollback", help="serve an earlier complete version (default: the previous)")
    back.add_argument("version", nargs="?", help="the version to serve (see 'kafka-rag index list')")
    back.add_argument("--index", type=Path, help="index directory (default: KAFKA_RAG_INDEX_DIR or index/)")
    back.add_argument("--wait", action="store_true", help="wait for a running ingest to finish")
    back.set_defaults(handler=_index_rollback)

    for name in ("ask", "chat"):
        command = commands.add_parser(name, help="answer one question" if name == "ask" else "interactive chat")
        if name == "ask":
            command.add_argument("question", nargs="?", help="the question; read from stdin when omitted or '-'")
            command.add_argument("--json", action="store_true", help="print the Answer as JSON")
        command.add_argument("--index", type=Path, help="index directory (default: KAFKA_RAG_INDEX_DIR or index/)")
        command.add_argument("--llm", action="store_true", help="answer with the configured LLM (KAFKA_RAG_LLM_*)")
        command.add_argument("--retrieval", choices=RETRIEVAL_MODES)
        command.add_argument("--top-k", type=int)
        command.set_defaults(handler=_ask if name == "ask" else _chat)

    feedback = commands.add_parser("feedback", help="work with collected thumbs up/down")
    feedback_commands = feedback.add_subparsers(dest="feedback_command", required=True)
    export = feedback_commands.add_parser("export", help="thumbs-down answers as draft golden-set lines")
    export.add_argument("--feedback", type=Path, help="feedback JSONL (default: KAFKA_RAG_FEEDBACK_PATH)")
    export.add_argument("--out", type=Path, help="write here instead of stdout")
    export.set_defaults(handler=_feedback_export)

    # Adapters are imported only when their command is used, so `ingest` never pays for Gradio or Slack.
    wanted = next((a for a in (argv if argv is not None else sys.argv[1:]) if not a.startswith("-")), None)
    for name, module in _ADAPTERS.items():
        command = commands.add_parser(name, help=_ADAPTER_HELP[name])
        if name == wanted:
            adapter = importlib.import_module(module)
            adapter.add_arguments(command)
            command.set_defaults(handler=adapter.run)
    return parser


def _ingest(args: argparse.Namespace) -> int:
    from rag.index_store import read_manifest, summarize
    from rag.ingest import IngestConfig, run_ingest
    from rag.progress import console_progress

    settings = Settings.from_env(index_dir=args.index, model=args.model, spark_master=args.master)
    sources = args.sources or list(settings.sources)
    missing = [s for s in sources if not Path(s).exists()]
    if missing:
        raise SourceNotFoundError(f"Source path {missing[0]} does not exist: pass a folder or file of documents")
    config = IngestConfig.from_settings(settings)
    with console_progress(quiet=args.quiet or args.json) as progress:
        if args.no_spark:
            report = run_ingest(
                sources,
                settings.index_dir,
                config,
                flat_index_max=settings.flat_index_max,
                progress=progress,
                wait=args.wait,
                keep_versions=settings.keep_versions,
            )
        else:
            from rag.spark_job import spark_engine

            progress(f"spark: starting {settings.spark_master}")
            with spark_engine(settings.spark_master, settings.arrow_batch_size, verbose=args.verbose) as spark:
                report = run_ingest(
                    sources,
                    settings.index_dir,
                    config,
                    engine=spark,
                    flat_index_max=settings.flat_index_max,
                    progress=progress,
                    wait=args.wait,
                    keep_versions=settings.keep_versions,
                )
    if args.json:
        _print_json(report.to_dict())
    elif not args.quiet:
        summary = summarize(read_manifest(settings.index_dir) or {})
        print(
            f"Index {summary['version']} in {settings.index_dir}/: {summary['documents']} documents, "
            f"{summary['chunks']} chunks ({report.embedded} embedded, {report.reused} reused, "
            f"{report.duplicates} duplicate texts), "
            f"{summary['index_type']} index, model {summary['model']} ({summary['backend']}), {report.seconds:.1f}s"
        )
        for skip in report.skipped:
            print(f"  skipped {skip['source_path']}: {skip['reason']}")
    if args.sample:
        _print_sample(settings)
    return 0


def _print_sample(settings: Settings) -> None:
    from rag.service import Assistant

    result = Assistant.from_settings(settings).search(SAMPLE_QUESTION, k=3)
    print(f"\nBest passages for: {SAMPLE_QUESTION}")
    for rank, passage in enumerate(result.passages, start=1):
        print(f"  {rank}. {passage.heading} ({passage.source_path}, score {passage.score:.3f})")
        print(f"     {' '.join(passage.text.split())[:160]}…")


def _assistant(args: argparse.Namespace):
    from rag.service import Assistant

    settings = Settings.from_env(
        index_dir=args.index, answerer="llm" if args.llm else None, retrieval_mode=args.retrieval, top_k=args.top_k
    )
    return Assistant.from_settings(settings)


def _ask(args: argparse.Namespace) -> int:
    question = args.question
    if question in (None, "-"):
        stream = getattr(sys.stdin, "buffer", None)  # bytes, so undecodable input cannot crash the read
        question = stream.read().decode("utf-8", errors="replace") if stream else sys.stdin.read()
    else:  # an argument that is not UTF-8 arrives with surrogate escapes: make them replacement characters
        question = question.encode("utf-8", "surrogateescape").decode("utf-8", errors="replace")
    if not question.strip():  # refuse before spending seconds on loading the model
        raise QuestionError("The question is empty: type a question or paste an error message")
    from rag.service import check_question

    check_question(question, (), 1)  # the length now; --top-k is checked by Settings
    assistant = _assistant(args)
    answer = assistant.ask(question)
    if args.json:
        _print_json(answer.to_dict())
    else:
        print(render_answer(answer))
    return 0


def _print_json(data: object) -> None:
    """JSON on stdout as UTF-8 whatever the locale; text that is not valid Unicode becomes U+FFFD."""
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    stream = getattr(sys.stdout, "buffer", None)
    if stream is None:
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    stream.write(text.encode("utf-8", errors="replace"))
    stream.flush()


def _index_list(args: argparse.Namespace) -> int:
    from rag.errors import IndexNotFoundError
    from rag.versions import list_versions

    index_dir = Settings.from_env(index_dir=args.index).index_dir
    versions = list_versions(index_dir)
    if args.json:
        _print_json([v.to_dict() for v in versions])
        return 0
    if not versions:
        raise IndexNotFoundError(f"No index at {index_dir}/: run 'kafka-rag ingest' first")
    print(f"Versions in {index_dir}/ (* serving, h held by a running server):")
    for v in versions:
        mark = ("*" if v.serving else " ") + ("h" if v.held else " ")
        state = f"  DAMAGED: {v.problem}" if v.problem else ""
        print(
            f"{mark} {v.name}  {v.size_bytes / 1_048_576:8.1f} MiB  {v.documents:6d} documents  "
            f"{v.chunks:7d} chunks  built {v.built_at or '?'}{state}"
        )
    return 0


def _index_rollback(args: argparse.Namespace) -> int:
    from rag.versions import rollback

    index_dir = Settings.from_env(index_dir=args.index).index_dir
    version = rollback(index_dir, args.version, wait=args.wait)
    print(f"{index_dir}/ now serves version {version}; running servers switch to it within seconds")
    return 0


def _chat(args: argparse.Namespace) -> int:
    assistant = _assistant(args)
    history: list[dict[str, str]] = []
    print("kafka-rag chat: ask about Kafka errors and configuration. Empty line or Ctrl-D to quit.")
    while True:
        try:
            question = input("\nyou> ").strip()
        except EOFError:
            print()
            return 0
        if not question:
            return 0
        try:
            answer = assistant.ask(question, history)
        except KafkaRagError as exc:
            print(f"kafka-rag: {exc}")
            continue
        print("\n" + render_answer(answer))
        history += [{"role": "user", "content": question}, {"role": "assistant", "content": answer.text}]


def render_answer(answer) -> str:
    """Terminal rendering: the answer, its notes, then the numbered sources."""
    lines = [terminal_text(answer.text)]
    lines += [f"\nNote: {note}" for note in answer.notes]
    if answer.citations:
        lines.append("\nSources:")
        lines += [f"  [{c.marker}] {c.passage.heading} ({c.passage.source_path})" for c in answer.citations]
    if answer.related:
        lines.append("\nPossibly related:")
        lines += [f"  - {p.heading} ({p.source_path})" for p in answer.related]
    return "\n".join(lines)


def terminal_text(markdown: str) -> str:
    """Answer Markdown for a terminal: fenced blocks lose their fences and are indented four spaces."""
    lines: list[str] = []
    fence: str | None = None
    for line in markdown.split("\n"):
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
        elif fence is not None and match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
            fence = None
        elif fence is not None:
            lines.append(f"    {line}" if line.strip() else "")
        else:
            lines.append(line)
    return "\n".join(lines)


def _feedback_export(args: argparse.Namespace) -> int:
    from rag.feedback import export_thumbs_down

    path = args.feedback or Settings.from_env().feedback_path
    if not path.exists():
        raise SourceNotFoundError(f"No feedback file at {path}: nothing has been rated yet")
    lines = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in export_thumbs_down(path))
    if args.out:
        args.out.write_text(lines, encoding="utf-8")
        print(f"Wrote {lines.count(chr(10))} draft golden lines to {args.out} (marked unreviewed)", file=sys.stderr)
    else:
        sys.stdout.write(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
