"""The web UI in a real browser: Debian's Chromium driven headless by Playwright.

The app serves the seeds plus a hostile document (`<script>`, `<img onerror>`, a javascript: link),
so the same page checks both the everyday flow and that document text never runs as code.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rag import Settings
from tests.adapters.conftest import HOSTILE_QUESTION, launched
from ui import web

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
QUESTION = "What causes INVALID_RECORD_STATE (error code 121)?"
TIMEOUT_MS = 60_000  # the machine is shared; answers take well under a second when it is not


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: apt-get install chromium"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def feedback_settings(hostile_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return dataclasses.replace(hostile_settings, feedback_path=tmp_path_factory.mktemp("browser") / "fb.jsonl")


@pytest.fixture(scope="module")
def app_url(hostile_assistant: Any, feedback_settings: Settings) -> Iterator[str]:
    with launched(hostile_assistant, feedback_settings) as url:
        yield url


@pytest.fixture
def page(browser: Any, app_url: str) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 1400})
    page = context.new_page()
    page.dialogs = []  # any alert() or confirm() a document manages to run lands here
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(app_url)
    page.locator("#question textarea").wait_for(timeout=TIMEOUT_MS)
    yield page
    context.close()


def ask(page: Any, question: str) -> Any:
    """Type and submit a question; returns the locator of the newest answer bubble once it is final."""
    answers_before = page.locator("#chat .bot.message").count()
    page.locator("#question textarea").fill(question)
    page.locator("#question textarea").press("Enter")
    page.wait_for_function(
        """([before]) => {
            const bubbles = document.querySelectorAll('#chat .bot.message');
            return bubbles.length > before && !document.querySelector('#chat [aria-busy="true"]')
                && !document.querySelector('#chat .pending, #chat .generating');
        }""",
        arg=[answers_before],
        timeout=TIMEOUT_MS,
    )
    page.locator("#chat .cite, #chat .bot.message").last.wait_for(timeout=TIMEOUT_MS)
    return page.locator("#chat .bot.message").last


def wait_for_lines(path: Path, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if path.exists() and len(lines := path.read_text(encoding="utf-8").splitlines()) >= count:
            return [json.loads(line) for line in lines]
        time.sleep(0.1)
    raise AssertionError(f"{path} did not get {count} feedback line(s)")


def test_ask_check_sources_vote_and_follow_up(
    page: Any, hostile_assistant: Any, feedback_settings: Settings, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    expected = hostile_assistant.ask(QUESTION)
    quote = expected.citations[0].quotes[0]

    ask(page, QUESTION)
    chat = page.locator("#chat")
    expect(chat.locator(".cite").first).to_have_text("[1]", timeout=TIMEOUT_MS)
    expect(chat.locator(".cite").first).to_have_attribute("title", expected.citations[0].passage.heading)

    chat.get_by_text(re.compile(r"Sources \(\d+\)")).first.click()
    mark = chat.locator("mark").first
    expect(mark).to_be_in_viewport(timeout=TIMEOUT_MS)  # not just in the DOM: the accordion has opened
    assert " ".join(quote.split())[:40] in " ".join(mark.inner_text().split())
    expect(chat).to_contain_text(expected.citations[0].passage.source_path)
    page.screenshot(path=str(tmp_path / "chat-sources.png"), full_page=True)

    page.locator("#feedback-comment textarea").fill("It should mention share groups first")
    page.get_by_label("Dislike").first.click()
    (vote,) = wait_for_lines(feedback_settings.feedback_path, 1)
    assert (vote["rating"], vote["question"], vote["source"]) == ("down", QUESTION, "web")
    assert vote["comment"] == "It should mention share groups first"
    assert vote["answer"] == expected.text and vote["index_version"] == expected.index_version
    expect(page.get_by_text(web.THANKS_TEXT).first).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#feedback-comment textarea")).to_have_value("")

    follow_up = ask(page, "How do I fix it?")
    expect(follow_up).to_contain_text("[1]", timeout=TIMEOUT_MS)
    expect(chat.locator(".user.message")).to_have_count(2)
    page.get_by_label("Like").last.click()
    votes = wait_for_lines(feedback_settings.feedback_path, 2)
    assert votes[1]["rating"] == "up" and votes[1]["question"] == "How do I fix it?"
    assert votes[1]["history"][0] == {"role": "user", "content": QUESTION}
    page.screenshot(path=str(tmp_path / "chat-follow-up.png"), full_page=True)
    assert page.dialogs == []


def test_empty_message_gets_a_hint_and_no_answer(page: Any) -> None:
    from playwright.sync_api import expect

    page.locator("#send").click()
    expect(page.get_by_text(web.EMPTY_HINT).first).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#chat .message")).to_have_count(0)


def test_document_html_and_links_render_as_inert_text(page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    ask(page, f"{HOSTILE_QUESTION} <img src=x onerror=alert('question')>")
    chat = page.locator("#chat")
    expect(chat.locator(".cite").first).to_be_visible(timeout=TIMEOUT_MS)
    chat.get_by_text(re.compile(r"Sources \(\d+\)")).first.click()
    expect(chat.locator("mark").first).to_be_in_viewport(timeout=TIMEOUT_MS)
    expect(chat.get_by_text('BROKER_WIDGET_STALL <script>alert("title")</script>').first).to_be_visible()
    expect(chat).to_contain_text("<script>alert(1)</script>")
    expect(chat).to_contain_text("<img src=x onerror=alert(1)>")
    expect(chat).to_contain_text("[the widget runbook](javascript:alert(1))")
    expect(chat).to_contain_text("<img src=x onerror=alert('question')>")
    page.wait_for_timeout(500)  # give any injected handler the chance to fire
    assert chat.locator("script, img, iframe, object, embed").count() == 0
    assert page.locator('a[href^="javascript:"], [onerror], [onload], [onclick]').count() == 0
    assert page.dialogs == []
    page.screenshot(path=str(tmp_path / "hostile-document.png"), full_page=True)


SCREENSHOT = Path(__file__).resolve().parents[2] / "ui" / "screenshot.png"  # linked from the README
LINKED_QUESTION = "How do I fix InvalidCommitOffsetSyncException when committing offsets?"
LINKED_URL = "https://kafka.apache.org/documentation/#upgrade_340"  # the seed's own `official_doc_url`
COMMAND_QUESTION = "how do I check the share group state with kafka-share-groups.sh"


def test_commands_render_as_code_blocks(page: Any) -> None:
    from playwright.sync_api import expect

    ask(page, COMMAND_QUESTION)
    code = page.locator("#chat .bot.message pre code").first
    expect(code).to_contain_text("kafka-share-groups.sh --bootstrap-server localhost:9092", timeout=TIMEOUT_MS)
    expect(code).to_contain_text("grep 'INVALID_RECORD_STATE")
    assert "```" not in page.locator("#chat").inner_text()


def test_answer_with_its_sources_open_links_the_document_and_makes_the_readme_screenshot(page: Any) -> None:
    from playwright.sync_api import expect

    page.set_viewport_size({"width": 1100, "height": 900})
    ask(page, LINKED_QUESTION)
    chat = page.locator("#chat")
    chat.get_by_text(re.compile(r"^Sources \(\d+\)")).first.click()
    link = chat.locator(f'a[href="{LINKED_URL}"]').first
    expect(link).to_be_visible(timeout=TIMEOUT_MS)
    expect(link).to_have_text(LINKED_URL.split("://", 1)[1])
    labels = page.locator("body").inner_text()
    assert not re.search("[\U0001f000-\U0001faff\u2600-\u27bf]", labels), "a label needs an emoji font"
    link.scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOT), full_page=True)
    assert SCREENSHOT.stat().st_size > 20_000
