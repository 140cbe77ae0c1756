"""The web UI over real HTTP: the app launched on a free port, driven with gradio_client."""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError, AuthenticationError

from rag import ConfigurationError, Settings
from tests.adapters.conftest import BOOM, SpyAssistant, launched
from tests.conftest import free_port
from ui import web

pytestmark = pytest.mark.slow

QUESTION = "What causes INVALID_RECORD_STATE (error code 121)?"
OFF_TOPIC = "What is a good recipe for sourdough bread with a rye starter?"


@pytest.fixture(scope="module")
def spy(assistant: Any) -> SpyAssistant:
    return SpyAssistant(assistant)


@pytest.fixture(scope="module")
def web_settings(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return dataclasses.replace(settings, feedback_path=tmp_path_factory.mktemp("web") / "feedback.jsonl")


@pytest.fixture(scope="module")
def client(spy: SpyAssistant, web_settings: Settings) -> Iterator[Client]:
    with launched(spy, web_settings) as url:
        yield Client(url, verbose=False)


def check_markers(answer: dict[str, Any]) -> None:
    markers = {int(n) for n in re.findall(r"\[(\d+)\]", answer["text"])}
    assert markers == {c["marker"] for c in answer["citations"]}


def test_ask_returns_the_answer_as_json_with_cited_passages(client: Client) -> None:
    answer = client.predict(QUESTION, [], api_name="/ask")
    assert not answer["abstained"]
    assert answer["citations"], answer
    check_markers(answer)
    assert answer["citations"][0]["source_path"] == "000_0424dccc37dbf1fb.txt"
    assert answer["citations"][0]["text"] and answer["citations"][0]["title"]
    assert answer["index_version"]


def test_follow_up_is_answered_in_the_context_of_the_history(client: Client) -> None:
    first = client.predict(QUESTION, [], api_name="/ask")
    history = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": first["text"]}]
    follow_up = client.predict("How do I fix it?", history, api_name="/ask")
    alone = client.predict("How do I fix it?", [], api_name="/ask")
    assert "INVALID_RECORD_STATE" in follow_up["query"]
    assert "INVALID_RECORD_STATE" not in alone["query"]
    assert not follow_up["abstained"]
    assert "000_0424dccc37dbf1fb.txt" in {c["source_path"] for c in follow_up["citations"]}
    check_markers(follow_up)


def test_history_in_gradio_message_format_is_accepted(client: Client) -> None:
    history = [
        {"role": "user", "content": [{"type": "text", "text": QUESTION}]},
        {"role": "assistant", "content": [{"type": "text", "text": "It is invalid [1]."}]},
        {"role": "assistant", "content": "…", "metadata": {"title": "Sources (1)"}},
    ]
    follow_up = client.predict("How do I fix it?", history, api_name="/ask")
    assert "INVALID_RECORD_STATE" in follow_up["query"]


def test_off_topic_question_abstains_plainly(client: Client) -> None:
    answer = client.predict(OFF_TOPIC, [], api_name="/ask")
    assert answer["abstained"]
    assert answer["citations"] == []
    assert "[1]" not in answer["text"]


def test_empty_question_gets_a_hint_and_never_reaches_the_assistant(client: Client, spy: SpyAssistant) -> None:
    asked = len(spy.questions)
    with pytest.raises(AppError, match="Type a question first"):
        client.predict("   \n ", [], api_name="/ask")
    assert len(spy.questions) == asked


def test_long_paste_is_answered_with_a_note(client: Client) -> None:
    log_lines = "\n".join(f"2024-05-01 12:00:{i % 60:02d} INFO [main] heartbeat ok seq={i}" for i in range(600))
    paste = f"{log_lines}\norg.apache.kafka.common.errors.InvalidCommitOffsetSyncException: Offset commit failed"
    answer = client.predict(paste, [], api_name="/ask")
    assert answer["notes"], answer
    assert len(answer["query"]) < len(paste)


def test_assistant_bug_is_a_short_error_and_the_next_question_works(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="ui.web"), pytest.raises(AppError) as raised:
        client.predict(f"{BOOM} why?", [], api_name="/ask")
    assert str(raised.value) == web.ERROR_TEXT
    assert any(r.exc_info and "simulated failure" in str(r.exc_info[1]) for r in caplog.records)
    assert not client.predict(QUESTION, [], api_name="/ask")["abstained"]


def test_only_the_ask_endpoint_is_public(client: Client) -> None:
    info = client.view_api(print_info=False, return_format="dict")
    assert set(info["named_endpoints"]) == {"/ask"}
    assert info["unnamed_endpoints"] == {}
    params = [p["parameter_name"] for p in info["named_endpoints"]["/ask"]["parameters"]]
    assert params[:2] == ["question", "history"]


def test_queue_concurrency_comes_from_settings(spy: SpyAssistant, web_settings: Settings) -> None:
    app = web.build_app(spy, dataclasses.replace(web_settings, ui_concurrency=3))
    assert app._queue.default_concurrency_limit == 3


def test_the_server_keeps_at_most_ui_sessions_conversations(spy: SpyAssistant, web_settings: Settings) -> None:
    """Each API client is a session whose state Gradio keeps; beyond `ui_sessions` the oldest are dropped, so a
    server answering many callers does not grow without bound (Gradio's own default keeps 10,000)."""
    settings = dataclasses.replace(web_settings, ui_host="127.0.0.1", ui_port=free_port(), ui_sessions=3)
    app = web.build_app(spy, settings)
    app.launch(**web.launch_options(settings), prevent_thread_lock=True, quiet=True)
    try:
        for _ in range(6):
            Client(app.local_url, verbose=False).predict(QUESTION, [], api_name="/ask")
        assert 1 <= len(app.state_holder.session_data) <= 3
    finally:
        app.close()


def test_basic_auth_from_settings(spy: SpyAssistant, web_settings: Settings) -> None:
    with launched(spy, dataclasses.replace(web_settings, ui_auth="kafka:s3cret")) as url:
        with pytest.raises(AuthenticationError, match="credentials were not provided"):
            Client(url, verbose=False)
        with pytest.raises(ValueError, match="Could not login"):  # Gradio answers 400 to a wrong password
            Client(url, auth=("kafka", "wrong"), verbose=False)
        answer = Client(url, auth=("kafka", "s3cret"), verbose=False).predict(QUESTION, [], api_name="/ask")
    assert answer["citations"]


def test_malformed_auth_setting_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="user:password"):
        web.parse_auth("no-colon")


# ------------------------------------------------------------------ chat handlers (the UI's private events)


def run_chat(handlers: web.ChatHandlers, message: str, chat: list, turns: list) -> list[tuple]:
    return list(handlers.respond(message, chat, turns, 5, "hybrid", "extractive"))


def test_chat_answer_is_followed_by_a_collapsed_sources_message(spy: SpyAssistant, web_settings: Settings) -> None:
    handlers = web.ChatHandlers(spy, web_settings)
    updates = run_chat(handlers, QUESTION, [], [])
    assert updates[0][0][-1]["metadata"]["status"] == "pending"  # the user sees progress at once
    assert updates[0][2] == ""  # the textbox is cleared
    chat, turns, _ = updates[-1]
    assert [m["role"] for m in chat] == ["user", "assistant", "assistant"]
    assert "[1]" in chat[1]["content"] and 'class="cite"' in chat[1]["content"]
    assert chat[2]["metadata"]["title"].startswith("Sources (")
    assert (turns[0].first_message, turns[0].last_message) == (1, 2)

    chat, turns, _ = run_chat(handlers, "How do I fix it?", chat, turns)[-1]
    assert len(turns) == 2 and turns[1].history[0]["content"] == QUESTION
    assert "INVALID_RECORD_STATE" in turns[1].answer.query
    assert turns[1].first_message == 4


def test_chat_ignores_an_empty_message(spy: SpyAssistant, web_settings: Settings) -> None:
    handlers = web.ChatHandlers(spy, web_settings)
    asked = len(spy.questions)
    assert run_chat(handlers, "  ", [], []) == [([], [], "  ")]
    assert len(spy.questions) == asked


def test_chat_shows_a_short_error_logs_the_trace_and_keeps_working(
    spy: SpyAssistant, web_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    handlers = web.ChatHandlers(spy, web_settings)
    with caplog.at_level(logging.ERROR, logger="ui.web"):
        chat, turns, _ = run_chat(handlers, f"{BOOM} please", [], [])[-1]
    assert chat[-1]["content"] == f"**Error:** {web.render.escape_markdown(web.ERROR_TEXT)}"
    assert turns == []
    assert any(r.exc_info for r in caplog.records)
    chat, turns, _ = run_chat(handlers, QUESTION, chat, turns)[-1]
    assert len(turns) == 1 and turns[0].first_message == 3


def quote_first_passage(body: dict[str, Any]) -> str:
    """A well-behaved model: one sentence of passage 1, cited."""
    user = body["messages"][-1]["content"]
    passage = re.search(r'<passage n="1">\nSource: [^\n]*\n(.*?)\n</passage>', user, re.S)
    assert passage, "the prompt lost its numbered passages"
    sentence = next(
        s.strip() for s in re.split(r"(?<=[.!?])\s+|\n", passage.group(1)) if len(s.split()) >= 6 and "[" not in s
    )
    return f"**Likely cause:** {sentence} [1]"


def test_chat_streams_the_llm_answer_as_it_arrives(seeds_index: Path, settings_factory: Any) -> None:
    from rag import Assistant
    from tests.fake_llm_server import running_fake_llm

    with running_fake_llm(quote_first_passage) as llm:
        settings = settings_factory(
            seeds_index, answerer="llm", llm_base_url=llm.openai_url, llm_model="fake", llm_timeout_s=10.0
        )
        handlers = web.ChatHandlers(Assistant.from_settings(settings), settings)
        updates = list(handlers.respond(QUESTION, [], [], 5, "hybrid", "llm"))
    partial = [chat[-1]["content"] for chat, _, _ in updates[1:-1]]
    assert len(partial) >= 3  # the text grew in several steps before the answer was final
    assert all(len(a) <= len(b) for a, b in itertools.pairwise(partial))
    chat, turns, _ = updates[-1]
    assert turns[0].answer.answerer == "llm"
    assert chat[1]["content"].startswith("<strong>Likely cause\\:</strong>") and 'class="cite"' in chat[1]["content"]
    assert chat[2]["metadata"]["title"] == "Sources (1)"


# ------------------------------------------------------------------------------------------- feedback


def like(index: int, liked: bool) -> gr.LikeData:
    return gr.LikeData(None, {"index": index, "value": "", "liked": liked})


def test_votes_are_written_with_question_history_answer_and_comment(
    spy: SpyAssistant, web_settings: Settings, tmp_path: Path
) -> None:
    settings = dataclasses.replace(web_settings, feedback_path=tmp_path / "fb.jsonl")
    handlers = web.ChatHandlers(spy, settings)
    chat, turns, _ = run_chat(handlers, QUESTION, [], [])[-1]
    chat, turns, _ = run_chat(handlers, "How do I fix it?", chat, turns)[-1]
    assert handlers.vote(turns, "  wrong fix  ", like(turns[1].last_message, False)) == ""
    assert handlers.vote(turns, "", like(turns[0].first_message, True)) == ""
    with pytest.warns(UserWarning, match="not an answer"):
        assert handlers.vote(turns, "kept", like(0, True)) == "kept"  # a user message is not an answer
    down, up = [json.loads(line) for line in settings.feedback_path.read_text().splitlines()]
    assert (down["rating"], down["comment"], down["question"]) == ("down", "wrong fix", "How do I fix it?")
    assert down["history"] == [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": turns[0].answer.text},
    ]
    assert down["answer"] == turns[1].answer.text and down["citations"]
    assert down["index_version"] == turns[1].answer.index_version != ""
    assert (up["rating"], up["question"], up["history"]) == ("up", QUESTION, [])


def test_concurrent_votes_never_interleave_lines(spy: SpyAssistant, web_settings: Settings, tmp_path: Path) -> None:
    settings = dataclasses.replace(web_settings, feedback_path=tmp_path / "fb.jsonl")
    handlers = web.ChatHandlers(spy, settings)
    _, turns, _ = run_chat(handlers, QUESTION, [], [])[-1]
    comments = {f"{thread}-{n}-" + "x" * 70_000 for thread in range(8) for n in range(10)}
    barrier = threading.Barrier(8)

    def click(thread: int) -> None:
        barrier.wait()
        for n in range(10):
            handlers.vote(turns, f"{thread}-{n}-" + "x" * 70_000, like(turns[0].first_message, n % 2 == 0))

    threads = [threading.Thread(target=click, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lines = settings.feedback_path.read_text().splitlines()
    assert {json.loads(line)["comment"] for line in lines} == comments
    assert len(lines) == 80


def test_unwritable_feedback_path_is_reported_at_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rag.cli import main

    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("KAFKA_RAG_FEEDBACK_PATH", str(blocker / "feedback.jsonl"))
    # checked before the index is even looked at: this index does not exist either
    assert main(["serve", "--index", str(tmp_path / "no-index"), "--port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "feedback" in err.lower() and str(blocker) in err and "KAFKA_RAG_FEEDBACK_PATH" in err
