"""The Gradio chat web UI (`kafka-rag serve`), the face of `make run`.

The assistant (index + embedding model) is loaded once by `serve` and shared by every session;
`build_app` only wires it into Blocks. Each turn's clean question, history and `Answer` live in a
per-session `gr.State`, so follow-ups send the assistant the real conversation (not the rendered
Markdown) and a like/dislike click stores exactly the answer it was given for. The multi-turn JSON endpoint
is `/ask` (question + history → `Answer.to_dict()`); the chat and feedback events are private.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gradio as gr
from starlette.middleware import Middleware

from rag import (
    ANSWERERS,
    RETRIEVAL_MODES,
    Answer,
    Assistant,
    ConfigurationError,
    KafkaRagError,
    Settings,
    append_feedback,
    check_writable,
    feedback_record,
)
from ui import mcp_tools, render
from ui.api_auth import ApiAuthMiddleware
from ui.guard import guard_middleware
from ui.openai_api import routes as openai_routes

log = logging.getLogger(__name__)

TITLE = "Kafka troubleshooting assistant"
INTRO = (
    "Ask about a Kafka error or paste a log line. Answers quote the indexed documents with "
    '<span class="cite">[n]</span> markers; open **Sources** under an answer to check each one, '
    "and rate answers with the like and dislike buttons under them."
)
EXAMPLE_QUESTIONS = (
    "What causes INVALID_RECORD_STATE (error code 121) and how do I fix it?",
    "What is the difference between an idempotent producer and a transactional producer?",
    "How do I fix InvalidCommitOffsetSyncException when committing offsets?",
    "How does exactly-once semantics work in Kafka Streams?",
    "What does KIP-467 add to ProduceResponse error messages?",
)
EMPTY_HINT = "Type a question first, for example: “What causes INVALID_RECORD_STATE?”"
ERROR_TEXT = "Sorry, something went wrong while answering. It has been logged; please try again."
THANKS_TEXT = "Thanks for your feedback!"
SEARCHING_TITLE = "Searching the index…"
QUEUE_MAX_SIZE = 256  # requests waiting beyond the concurrency limit; more are refused, not buffered
MAX_TOP_K = 20
SYSTEM_FONTS = ("ui-sans-serif", "system-ui", "sans-serif")  # the default theme fetches Google fonts
SYSTEM_MONO_FONTS = ("ui-monospace", "SFMono-Regular", "monospace")
CSS = """
#chat .cite { font-weight: 600; color: var(--color-accent); cursor: help; white-space: nowrap; }
#chat mark { background: #fff3a3; color: inherit; padding: 0 1px; border-radius: 2px; }
#index-status { font-size: var(--text-sm); color: var(--body-text-color-subdued); text-align: center; }
"""


@dataclass(frozen=True)
class Turn:
    """One answered question and where its messages sit in the chat (for mapping like/dislike clicks)."""

    question: str
    history: tuple[Mapping[str, str], ...]
    answer: Answer
    first_message: int
    last_message: int
    retrieval: str
    top_k: int


def user_error(message: str) -> gr.Error:
    """An error the API caller made: shown to them, logged on one line at most, never with a traceback."""
    return gr.Error(message, print_exception=False)


def flatten_history(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """API history → `[{role, content}]` strings; accepts Gradio 6 content blocks or plain strings."""
    history = []
    for number, message in enumerate(messages, start=1):
        role = message.get("role") if isinstance(message, Mapping) else None
        if role not in ("user", "assistant"):
            raise user_error(f"history[{number}]: role must be 'user' or 'assistant', got {role!r}")
        if (message.get("metadata") or {}).get("title"):
            continue  # a sources/thought message, not something anyone said
        content = message.get("content", "")
        if isinstance(content, list):
            content = " ".join(block.get("text", "") for block in content if isinstance(block, Mapping))
        if not isinstance(content, str):
            raise user_error(f"history[{number}]: content must be text")
        history.append({"role": role, "content": content})
    return history


def conversation(turns: Sequence[Turn]) -> list[dict[str, str]]:
    """The clean history a follow-up is asked with."""
    history: list[dict[str, str]] = []
    for turn in turns:
        history.append({"role": "user", "content": turn.question})
        history.append({"role": "assistant", "content": turn.answer.text})
    return history


class ChatHandlers:
    """The event handlers, bound to one shared assistant and the feedback file."""

    def __init__(self, assistant: Assistant, settings: Settings) -> None:
        self.assistant = assistant
        self.settings = settings

    def respond(
        self,
        message: str,
        chat: list[dict[str, Any]],
        turns: list[Turn],
        top_k: float,
        retrieval: str,
        answerer: str,
    ) -> Iterator[tuple[list[dict[str, Any]], list[Turn], str]]:
        """Stream one answer into the chat; yields (chat, turns, textbox value)."""
        question = (message or "").strip()
        if not question:
            gr.Info(EMPTY_HINT)
            yield chat, turns, message
            return
        chat = [*chat, {"role": "user", "content": render.render_user(question)}]
        first = len(chat)
        pending = {
            "role": "assistant",
            "content": "",
            "metadata": {"title": SEARCHING_TITLE, "status": "pending"},
        }
        yield [*chat, pending], turns, ""
        history = conversation(turns)
        text = ""
        try:
            for part in self.assistant.stream(
                question, history, top_k=int(top_k), retrieval=retrieval, answerer=answerer
            ):
                if isinstance(part, Answer):
                    answer = part
                    break
                text += part
                yield (
                    [*chat, {"role": "assistant", "content": render.render_answer_text(text, {})}],
                    turns,
                    "",
                )
            else:
                raise RuntimeError("Assistant.stream ended without a final Answer")
        except KafkaRagError as exc:
            log.warning("question failed: %s", exc)
            yield [*chat, {"role": "assistant", "content": render.render_error(str(exc))}], turns, ""
            return
        except Exception:
            log.exception("assistant failed on a web question")
            yield [*chat, {"role": "assistant", "content": render.render_error(ERROR_TEXT)}], turns, ""
            return
        chat = [*chat, *answer_messages(answer)]
        turn = Turn(question, tuple(history), answer, first, len(chat) - 1, retrieval, int(top_k))
        yield chat, [*turns, turn], ""

    def vote(self, turns: list[Turn], comment: str, data: gr.LikeData) -> str:
        """Append a like/dislike of the clicked answer to the feedback file; returns the cleared comment box."""
        if data.liked not in (True, False):
            return comment  # an un-click: nothing to record
        index = data.index[0] if isinstance(data.index, (list, tuple)) else data.index
        turn = next((t for t in turns if t.first_message <= index <= t.last_message), None)
        if turn is None:
            gr.Warning("That message is not an answer; rate the answer itself.")
            return comment
        record = feedback_record(
            turn.answer,
            rating="up" if data.liked else "down",
            history=turn.history,
            comment=(comment or "").strip(),
            source="web",
            extra={"retrieval": turn.retrieval, "top_k": turn.top_k},
        )
        try:
            append_feedback(self.settings.feedback_path, record)
        except OSError:
            log.exception("could not append feedback to %s", self.settings.feedback_path)
            gr.Warning(f"Could not save your feedback to {self.settings.feedback_path}; it has been logged.")
            return comment
        gr.Info(THANKS_TEXT)
        return ""

    def ask(
        self,
        question: str,
        history: list[dict[str, Any]] | None = None,
        top_k: int | None = None,
        retrieval: str | None = None,
        answerer: str | None = None,
    ) -> dict[str, Any]:
        """Answer `question` after `history` ([{role, content}], oldest first); returns the Answer as JSON."""
        if not (question or "").strip():
            raise user_error(EMPTY_HINT)
        turns = flatten_history(history or [])
        try:
            answer = self.assistant.ask(question, turns, top_k=top_k, retrieval=retrieval, answerer=answerer)
        except KafkaRagError as exc:
            log.warning("API question refused: %s", exc)
            raise user_error(str(exc)) from exc
        except Exception as exc:
            log.exception("assistant failed on an API question")
            raise gr.Error(ERROR_TEXT) from exc
        return answer.to_dict()


def answer_messages(answer: Answer) -> list[dict[str, Any]]:
    """The answer bubble, then a collapsed sources (or possibly-related) message under it."""
    messages: list[dict[str, Any]] = [{"role": "assistant", "content": render.render_answer(answer)}]
    if answer.citations:
        messages.append(
            {
                "role": "assistant",
                "content": render.render_sources(answer.citations),
                "metadata": {"title": render.sources_title(answer), "status": "done"},
            }
        )
    if answer.related:
        messages.append(
            {
                "role": "assistant",
                "content": render.render_related(answer.related),
                "metadata": {"title": render.related_title(answer), "status": "done"},
            }
        )
    return messages


def build_app(assistant: Assistant, settings: Settings, *, mcp: bool = False) -> gr.Blocks:
    """The chat UI around an already-loaded assistant; launch it with `launch_options(settings)`.

    With `mcp`, the MCP tools (`ui.mcp_tools`) are API endpoints too; launch with `interface_options` then.
    """
    handlers = ChatHandlers(assistant, settings)

    def status() -> str:  # read on every page load: the server follows new index versions
        return render.render_status(assistant.status, retrieval=settings.retrieval_mode, answerer=settings.answerer)

    with gr.Blocks(title=TITLE, analytics_enabled=False) as app:
        gr.Markdown(f"## {TITLE}\n{INTRO}")
        turns = gr.State([])
        chatbot = gr.Chatbot(
            elem_id="chat",
            label="Chat",
            height=560,
            latex_delimiters=[],
            sanitize_html=True,
            allow_tags=False,
            buttons=["copy"],
            placeholder="Answers cite the indexed Kafka documents. Try an example question below.",
        )
        with gr.Row(equal_height=True):
            textbox = gr.Textbox(
                elem_id="question",
                show_label=False,
                placeholder="Ask about a Kafka error, or paste a stack trace…",
                lines=1,
                max_lines=10,
                scale=8,
                autofocus=True,
            )
            send = gr.Button("Ask", variant="primary", scale=1, elem_id="send")
        comment = gr.Textbox(
            elem_id="feedback-comment",
            label="Feedback comment (optional)",
            placeholder="What was wrong or missing? Sent with your next like or dislike.",
            lines=1,
        )
        gr.Examples([[q] for q in EXAMPLE_QUESTIONS], inputs=[textbox], label="Example questions")
        new_chat = gr.Button("New conversation", size="sm", variant="secondary")
        with gr.Accordion("Settings", open=False):
            top_k = gr.Slider(
                1, MAX_TOP_K, value=min(settings.top_k, MAX_TOP_K), step=1, label="Passages retrieved (top-k)"
            )
            retrieval = gr.Radio(list(RETRIEVAL_MODES), value=settings.retrieval_mode, label="Retrieval mode")
            answerer = gr.Radio(
                list(ANSWERERS),
                value=settings.answerer,
                label="Answerer",
                info="extractive works offline; llm needs KAFKA_RAG_LLM_MODEL and an endpoint",
            )
        footer = gr.Markdown(status(), elem_id="index-status")

        ask_inputs = [textbox, chatbot, turns, top_k, retrieval, answerer]
        for trigger in (textbox.submit, send.click):
            trigger(handlers.respond, ask_inputs, [chatbot, turns, textbox], api_visibility="private")
        chatbot.like(handlers.vote, [turns, comment], [comment], api_visibility="private")
        new_chat.click(lambda: ([], []), None, [chatbot, turns], api_visibility="private")
        chatbot.clear(lambda: [], None, [turns], api_visibility="private")
        gr.api(handlers.ask, api_name="ask")
        app.load(status, None, footer, api_visibility="private")  # the version served now, on every page load
        if mcp:
            mcp_tools.add_tools(assistant)
    app.queue(default_concurrency_limit=settings.ui_concurrency, max_size=QUEUE_MAX_SIZE)
    return app


def parse_auth(value: str) -> tuple[str, str] | None:
    """`user:password` → the pair Gradio's login form checks; empty → no login."""
    if not value:
        return None
    user, sep, password = value.partition(":")
    if not (sep and user and password):
        raise ConfigurationError("KAFKA_RAG_UI_AUTH must be 'user:password' (or empty for no login)")
    return user, password


def launch_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for `Blocks.launch`, shared by `serve` and the tests."""
    return {
        "server_name": settings.ui_host,
        "server_port": settings.ui_port,
        "auth": parse_auth(settings.ui_auth),
        "auth_message": "Log in to the Kafka troubleshooting assistant" if settings.ui_auth else None,
        "theme": gr.themes.Soft(font=SYSTEM_FONTS, font_mono=SYSTEM_MONO_FONTS),
        "css": CSS,
        "footer_links": ["api"],
        "ssr_mode": False,
        "show_error": False,
        "state_session_capacity": settings.ui_sessions,
    }


def interface_options(assistant: Assistant, settings: Settings, *, mcp: bool, openai_api: bool) -> dict[str, Any]:
    """More `Blocks.launch` arguments: the MCP server, the OpenAI-compatible routes, the login for both, and
    the guard (login back-off, no uploads, capped bodies)."""
    routes = openai_routes(assistant, settings.ui_concurrency) if openai_api else []
    middleware = guard_middleware()
    if settings.ui_auth:
        middleware.append(Middleware(ApiAuthMiddleware, auth=settings.ui_auth))
    return {"mcp_server": mcp, "app_kwargs": {"routes": routes, "middleware": middleware}}


def serve(settings: Settings, *, mcp: bool = False, openai_api: bool = False) -> None:
    """Check the feedback file, load the index and model once, then serve until interrupted."""
    check_writable(settings.feedback_path)
    options = launch_options(settings)
    assistant = Assistant.from_settings(settings)
    assistant.follow_versions()  # a nightly ingest is answered from without a restart
    app = build_app(assistant, settings, mcp=mcp)
    if openai_api:
        print(f"* OpenAI-compatible API: http://{settings.ui_host}:{settings.ui_port}/v1 (model 'kafka-rag')")
    app.launch(**options, **interface_options(assistant, settings, mcp=mcp, openai_api=openai_api))
