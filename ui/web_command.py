"""`kafka-rag serve`: its flags, registered without importing Gradio (seconds of imports), so `--help` and a
mistyped flag answer at once; `run` imports the web UI."""

from __future__ import annotations

import argparse
from pathlib import Path

from rag import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--index", type=Path, default=None, help="index directory (default: KAFKA_RAG_INDEX_DIR or index/)"
    )
    parser.add_argument("--host", default=None, help="address to bind (default: KAFKA_RAG_UI_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="port (default: KAFKA_RAG_UI_PORT or 7860)")
    parser.add_argument("--mcp", action="store_true", help="serve MCP tools at /gradio_api/mcp/ (streamable HTTP)")
    parser.add_argument(
        "--openai-api", action="store_true", help="serve an OpenAI-compatible chat API at /v1/chat/completions"
    )


def run(args: argparse.Namespace) -> int:
    """`kafka-rag serve`; set-up errors propagate to the CLI, which prints one line and exits 2."""
    from ui.web import serve

    settings = Settings.from_env(index_dir=args.index, ui_host=args.host, ui_port=args.port)
    serve(settings, mcp=args.mcp, openai_api=args.openai_api)
    return 0
