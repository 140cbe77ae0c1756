"""MCP tools served by the Gradio app (`kafka-rag serve --mcp`), at `/gradio_api/mcp/` over streamable HTTP.

Gradio turns each public API endpoint into an MCP tool named after its function, with the function's
docstring (description, `Args:`) and type hints as the schema an MCP client shows its model. The two
tools here call the same service as the chat; they run outside the queue, straight in a worker thread,
so an agent's call does not loop back through Gradio's HTTP client.
"""

from __future__ import annotations

from collections.abc import Callable

import gradio as gr

from rag import Assistant, KafkaRagError
from ui import text_render

MAX_K = 20


def tools(assistant: Assistant) -> tuple[Callable[..., str], ...]:
    """The MCP tool functions bound to `assistant` (their names and docstrings are what clients see)."""

    def search_kafka_docs(query: str, k: int = 5) -> str:
        """Search the indexed Apache Kafka documentation and return the best passages with their citations.

        Use it to look up a Kafka error, exception, error code, configuration key or CLI tool, and quote
        the passages' text. Each passage starts with its number, `title › section`, the source file (and URL
        when known) and its ranking score.

        Args:
            query: what to look for: a question, an error message, an exception name or a config key.
            k: how many passages to return, best first (1 to 20).
        """
        if not 1 <= int(k) <= MAX_K:
            raise gr.Error(f"k must be between 1 and {MAX_K}, got {k}")
        try:
            result = assistant.search(query, k=int(k))
        except KafkaRagError as exc:
            raise gr.Error(str(exc)) from exc
        return text_render.render_passages(result.passages)

    def ask_kafka_assistant(question: str) -> str:
        """Ask the Kafka troubleshooting assistant; it answers only from the indexed Kafka documentation.

        The answer cites passages with [n] markers and ends with the list of sources (title › section, file,
        URL). When the documentation does not cover the question it says "The knowledge base does not cover
        this." and lists possibly related passages instead: do not present those as an answer. An answer with
        the note "Low confidence: …" matches the question only in part: say so if you use it.

        Args:
            question: a question about Apache Kafka, or a pasted error message or stack trace.
        """
        try:
            answer = assistant.ask(question)
        except KafkaRagError as exc:
            raise gr.Error(str(exc)) from exc
        return text_render.render_answer(answer)

    return search_kafka_docs, ask_kafka_assistant


def add_tools(assistant: Assistant) -> None:
    """Register the tools as API endpoints of the Blocks being built (call inside `with gr.Blocks()`)."""
    for tool in tools(assistant):
        gr.api(tool, api_name=tool.__name__, queue=False)
