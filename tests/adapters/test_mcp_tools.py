"""The MCP tools over real HTTP: the app launched with `mcp=True` on 127.0.0.1, driven by the official `mcp`
Python client over streamable HTTP (list the tools, call both, check the citations), with and without the login."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from rag import Settings
from tests.adapters.conftest import launched
from ui import text_render

pytestmark = pytest.mark.slow

QUESTION = "What causes INVALID_RECORD_STATE (error code 121)?"
ERROR_PAGE = "000_0424dccc37dbf1fb.txt"
OFF_TOPIC = "What is a good recipe for sourdough bread with a rye starter?"
LOGIN = "oncall:s3cret-pass"
TOOLS = ("search_kafka_docs", "ask_kafka_assistant")


@pytest.fixture(scope="module")
def mcp_url(assistant: Any, settings: Settings) -> Iterator[str]:
    with launched(assistant, settings, mcp=True) as url:
        yield url.rstrip("/") + "/gradio_api/mcp/"


def with_session(url: str, work: Any, headers: dict[str, str] | None = None) -> Any:
    """Run `work(session)` in an initialised MCP client session over streamable HTTP; returns its result."""

    async def main() -> Any:
        async with (
            httpx.AsyncClient(headers=headers or {}, timeout=60) as http,
            streamable_http_client(url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await work(session)

    return anyio.run(main)


def call(url: str, tool: str, arguments: dict[str, Any]) -> Any:
    async def work(session: ClientSession) -> Any:
        return await session.call_tool(tool, arguments)

    return with_session(url, work)


def text_of(result: Any) -> str:
    assert not result.isError, result
    return "\n".join(block.text for block in result.content if block.type == "text")


def test_tools_are_listed_with_typed_schemas_and_docstrings(mcp_url: str) -> None:
    async def work(session: ClientSession) -> Any:
        return await session.list_tools()

    everything = {tool.name for tool in with_session(mcp_url, work).tools}
    assert {"search_kafka_docs", "ask_kafka_assistant", "ask"} == everything  # `ask`: the JSON API, with history
    tools = {tool.name: tool for tool in with_session(mcp_url + "?tools=" + ",".join(TOOLS), work).tools}
    assert list(tools) == list(TOOLS)  # the URL the README gives MCP clients
    search, ask = tools["search_kafka_docs"], tools["ask_kafka_assistant"]
    assert search.description.startswith("Search the indexed Apache Kafka documentation")
    assert ask.description.startswith("Ask the Kafka troubleshooting assistant")
    properties = search.inputSchema["properties"]
    assert properties["query"]["type"] == "string" and "error message" in properties["query"]["description"]
    assert properties["k"]["type"] in ("integer", "number") and properties["k"].get("default") == 5
    assert search.inputSchema["required"] == ["query"]
    assert ask.inputSchema["properties"]["question"]["type"] == "string"
    assert ask.inputSchema["required"] == ["question"]


def test_search_returns_passages_with_citations(mcp_url: str, assistant: Any) -> None:
    text = text_of(call(mcp_url, "search_kafka_docs", {"query": "what does error code 121 mean", "k": 3}))
    passages = assistant.search("what does error code 121 mean", k=3).passages
    assert text == text_render.render_passages(passages)
    assert text.startswith("[1] Kafka Error INVALID_RECORD_STATE") and f"(`{ERROR_PAGE}`)" in text
    assert text.count("\n---\n") == 2 and "[3] " in text
    assert passages[0].text in text


def test_ask_returns_the_cited_answer(mcp_url: str, assistant: Any) -> None:
    text = text_of(call(mcp_url, "ask_kafka_assistant", {"question": QUESTION}))
    answer = assistant.ask(QUESTION)
    assert text == text_render.render_answer(answer)
    assert text.startswith(answer.text) and "[1]" in answer.text
    sources = text.split(f"\n\n{text_render.SOURCES_HEADING}\n", 1)[1].splitlines()
    assert [line.split("]", 1)[0] for line in sources] == [f"- [{c.marker}" for c in answer.citations]
    assert f"`{ERROR_PAGE}`" in sources[0]


def test_ask_says_when_the_docs_do_not_cover_it(mcp_url: str) -> None:
    text = text_of(call(mcp_url, "ask_kafka_assistant", {"question": OFF_TOPIC}))
    assert text.startswith("The knowledge base does not cover this.")
    assert text_render.SOURCES_HEADING not in text


def test_bad_arguments_are_a_tool_error(mcp_url: str) -> None:
    result = call(mcp_url, "search_kafka_docs", {"query": "error 121", "k": 500})
    assert result.isError
    assert "k must be between 1 and 20" in " ".join(block.text for block in result.content)


def test_without_the_flag_there_is_no_mcp_endpoint(assistant: Any, settings: Settings) -> None:
    with launched(assistant, settings) as url:
        response = httpx.get(url.rstrip("/") + "/gradio_api/mcp/", headers={"Accept": "text/event-stream"})
        info = httpx.get(url.rstrip("/") + "/gradio_api/info").json()
    assert response.status_code == 404 or "search_kafka_docs" not in response.text
    assert "/search_kafka_docs" not in info["named_endpoints"]


def test_the_ui_login_protects_the_mcp_endpoint(assistant: Any, settings: Settings) -> None:
    locked = dataclasses.replace(settings, ui_auth=LOGIN)
    with launched(assistant, locked, mcp=True) as url:
        endpoint = url.rstrip("/") + "/gradio_api/mcp/"
        refused = httpx.post(endpoint, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "invalid_api_key"
        wrong = httpx.post(endpoint, json={}, headers={"Authorization": "Bearer oncall:wrong"})
        assert wrong.status_code == 401

        async def work(session: ClientSession) -> Any:
            return await session.call_tool("search_kafka_docs", {"query": "error code 121", "k": 1})

        result = with_session(endpoint, work, headers={"Authorization": f"Bearer {LOGIN}"})
    assert ERROR_PAGE in text_of(result)
