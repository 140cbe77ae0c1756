"""The OpenAI-compatible API over real HTTP: the app launched with `openai_api=True` on 127.0.0.1 and driven by
the official `openai` Python client, streamed and not, multi-turn, malformed requests and the UI login."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from rag import Answer, Settings
from tests.adapters.conftest import launched
from ui import openai_api, text_render

pytestmark = pytest.mark.slow

QUESTION = "What causes INVALID_RECORD_STATE (error code 121)?"
FOLLOW_UP = "How do I fix it?"
ERROR_PAGE = "000_0424dccc37dbf1fb.txt"
LOGIN = "oncall:s3cret-pass"


@pytest.fixture(scope="module")
def base_url(assistant: Any, settings: Settings) -> Iterator[str]:
    with launched(assistant, settings, openai_api=True) as url:
        yield url.rstrip("/") + "/v1"


@pytest.fixture(scope="module")
def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="not-needed", max_retries=0, timeout=60)


def ask(client: openai.OpenAI, messages: list[dict[str, str]]) -> Any:
    return client.chat.completions.create(model="kafka-rag", messages=messages)  # type: ignore[arg-type]


def streamed(client: openai.OpenAI, messages: list[dict[str, str]]) -> tuple[str, list[Any]]:
    chunks = list(client.chat.completions.create(model="kafka-rag", messages=messages, stream=True))  # type: ignore[arg-type]
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices), chunks


def test_models_lists_the_assistant(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["kafka-rag"]


def test_answer_keeps_its_markers_and_lists_the_sources(client: openai.OpenAI, assistant: Any) -> None:
    completion = ask(client, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}])
    expected = assistant.ask(QUESTION)
    content = completion.choices[0].message.content
    assert completion.choices[0].finish_reason == "stop" and completion.model == "kafka-rag"
    assert content == text_render.render_answer(expected)
    assert content.startswith(expected.text) and re.search(r"\[1\]", expected.text)
    sources = content.split(f"\n\n{text_render.SOURCES_HEADING}\n", 1)[1].splitlines()
    assert sources[0].startswith("- [1] ") and f"(`{ERROR_PAGE}`)" in sources[0]
    assert len(sources) == len(expected.citations)
    extra = completion.model_extra["kafka_rag"]
    assert [c["marker"] for c in extra["citations"]] == [c.marker for c in expected.citations]


def test_streamed_answer_equals_the_whole_one(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": QUESTION}]
    text, chunks = streamed(client, messages)
    assert text == ask(client, messages).choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert len({c.id for c in chunks}) == 1 and chunks[0].object == "chat.completion.chunk"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_follow_up_uses_the_history(client: openai.OpenAI, assistant: Any, stream: bool) -> None:
    first = ask(client, [{"role": "user", "content": QUESTION}]).choices[0].message.content
    history = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": first}]
    messages = [*history, {"role": "user", "content": FOLLOW_UP}]
    text = streamed(client, messages)[0] if stream else ask(client, messages).choices[0].message.content
    expected = assistant.ask(
        FOLLOW_UP, [history[0], {"role": "assistant", "content": text_render.strip_sources(first)}]
    )
    assert "INVALID_RECORD_STATE" in expected.query
    assert text == text_render.render_answer(expected)
    assert f"`{ERROR_PAGE}`" in text
    alone = ask(client, [{"role": "user", "content": FOLLOW_UP}]).model_extra["kafka_rag"]
    assert "INVALID_RECORD_STATE" not in alone["query"]


def test_content_parts_are_read_as_text(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model="kafka-rag", messages=[{"role": "user", "content": [{"type": "text", "text": QUESTION}]}]
    )
    assert f"`{ERROR_PAGE}`" in completion.choices[0].message.content


@pytest.mark.parametrize(
    ("messages", "param", "says"),
    [
        ([], "messages", "non-empty array"),
        ([{"role": "assistant", "content": "hi"}], "messages[0]", "last message must be the user's question"),
        ([{"role": "user", "content": "   "}], "messages[0]", "last message must be the user's question"),
        ([{"role": "wizard", "content": "hi"}], "messages[0]", "must be an object with a role"),
        ([{"role": "user", "content": 42}], "messages[0]", "must be a string or an array"),
    ],
)
def test_malformed_messages_get_a_400_with_an_openai_error(client: openai.OpenAI, messages, param, says) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        ask(client, messages)
    error = caught.value.body
    assert caught.value.status_code == 400
    assert error["type"] == "invalid_request_error" and error["param"] == param and says in error["message"]


def test_unknown_model_and_bad_json(client: openai.OpenAI, base_url: str) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": QUESTION}])
    assert caught.value.body["code"] == "model_not_found"
    response = httpx.post(f"{base_url}/chat/completions", content=b"{not json", timeout=30)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "The request body is not valid JSON"
    response = httpx.post(f"{base_url}/chat/completions", json=["a list"], timeout=30)
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"
    response = httpx.post(f"{base_url}/chat/completions", json={"model": "kafka-rag", "messages": [], "stream": "yes"})
    assert response.status_code == 400 and response.json()["error"]["param"] == "stream"


def test_the_ui_login_is_the_api_key(assistant: Any, settings: Settings) -> None:
    locked = dataclasses.replace(settings, ui_auth=LOGIN)
    with launched(assistant, locked, openai_api=True) as url:
        base = url.rstrip("/") + "/v1"
        with pytest.raises(openai.AuthenticationError) as caught:
            openai.OpenAI(base_url=base, api_key="oncall:wrong", max_retries=0).models.list()
        assert caught.value.body["code"] == "invalid_api_key"
        assert httpx.get(f"{base}/models").status_code == 401
        client = openai.OpenAI(base_url=base, api_key=LOGIN, max_retries=0, timeout=60)
        assert f"`{ERROR_PAGE}`" in ask(client, [{"role": "user", "content": QUESTION}]).choices[0].message.content
        basic = httpx.get(f"{base}/models", auth=tuple(LOGIN.split(":")))  # type: ignore[arg-type]
        assert basic.status_code == 200


def test_without_the_flag_there_is_no_api(assistant: Any, settings: Settings) -> None:
    with launched(assistant, settings) as url:
        assert httpx.post(url.rstrip("/") + "/v1/chat/completions", json={}).status_code in (404, 405)


def test_a_checked_llm_answer_that_differs_from_its_tokens_is_sent_after_them() -> None:
    answer = Answer(question="q", text="Checked [1].", citations=(), abstained=False, query="q")
    assert openai_api.closing_text("Checked [1].", answer) == ""
    assert openai_api.closing_text("Raw [7].", answer) == "\n\n---\n\nChecked against the sources:\n\nChecked [1]."
    assert openai_api.closing_text("Partial LLM tok\n\nChecked [1].", answer) == ""  # the fallback was streamed


def test_serve_offers_both_flags(capsys) -> None:
    from rag.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["serve", "--help"])  # in this process: the command's parser is the installed one's
    assert exited.value.code == 0
    help_text = capsys.readouterr().out
    assert "--openai-api" in help_text and "--mcp" in help_text


def test_an_llm_answer_streams_its_tokens_then_the_sources(assistant: Any, settings: Settings) -> None:
    """With the LLM answerer (a fake OpenAI-compatible endpoint on loopback), the model's tokens reach the client."""
    from tests.fake_llm_server import running_fake_llm

    top = assistant.search(QUESTION, k=5).passages[0]
    sentence = next(s for s in re.split(r"(?<=[.!?])\s+", top.text) if len(s.split()) >= 4).rstrip(".")
    with running_fake_llm(f"{sentence} [1].") as fake:
        llm = assistant.with_settings(answerer="llm", llm_base_url=fake.openai_url, llm_model="fake")
        with launched(llm, settings, openai_api=True) as url:
            client = openai.OpenAI(base_url=url.rstrip("/") + "/v1", api_key="unused", max_retries=0, timeout=60)
            text, chunks = streamed(client, [{"role": "user", "content": QUESTION}])
    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(deltas) > len(sentence.split()) // 2  # token by token, not one block
    assert text.startswith(f"{sentence} [1].\n\n{text_render.SOURCES_HEADING}\n- [1] ")
    assert f"(`{top.source_path}`)" in text and "Checked against the sources" not in text
