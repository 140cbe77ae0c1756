"""The Slack bot end to end: signed Slack requests over real HTTP to the bot served by uvicorn on
127.0.0.1, the real assistant on the seeds index, and a fake Slack Web API (tests/adapters/fake_slack.py)
receiving what the bot posts. Socket Mode is driven through `app.dispatch` with socket-mode requests.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import hmac
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from slack_bolt import BoltRequest

from rag.errors import ConfigurationError, GenerationError
from rag.feedback import read_feedback
from tests.conftest import free_port
from ui.slack_app import build_app, http_app, read_credentials, run, web_client
from ui.slack_render import (
    ABSTAIN_TEXT,
    APOLOGY_TEXT,
    FEEDBACK_ACTIONS,
    FEEDBACK_BLOCK_ID,
    PLACEHOLDER_TEXT,
    THANKS_TEXT,
)

from .conftest import HOSTILE_NAME, HOSTILE_QUESTION
from .fake_slack import APP_ID, BOT_ID, BOT_TOKEN, BOT_USER_ID, TEAM_ID, FakeSlack

pytestmark = pytest.mark.slow

KAFKA_RAG = Path(sys.executable).with_name("kafka-rag")

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CHANNEL = "C0KAFKA01"
USER = "U0ALICE01"
QUESTION = "What is the difference between an idempotent producer and a transactional producer?"
FOLLOW_UP = "Which one gives exactly-once across partitions?"
SENTINEL = "C0SENTINEL"
OFF_TOPIC = "How do I bake sourdough bread with a cast iron pot?"


class RecordingAssistant:
    """The real assistant, keeping each call's question, history and answer for the assertions."""

    def __init__(self, assistant: Any) -> None:
        self._assistant = assistant
        self.calls: list[tuple[str, list[dict[str, str]], Any]] = []
        self.fail_with: Exception | None = None

    def ask(self, question, history=()):
        if self.fail_with is not None:
            error, self.fail_with = self.fail_with, None
            raise error
        answer = self._assistant.ask(question, history)
        self.calls.append((question, [dict(turn) for turn in history], answer))
        return answer


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def asker(assistant) -> RecordingAssistant:
    return RecordingAssistant(assistant)


@pytest.fixture
def bot_settings(settings, tmp_path):
    return dataclasses.replace(settings, feedback_path=tmp_path / "feedback.jsonl")


def make_app(slack: FakeSlack, asker: RecordingAssistant, bot_settings):
    return build_app(asker, bot_settings, client=web_client(BOT_TOKEN, base_url=slack.url), signing_secret=SECRET)


@pytest.fixture
def app(slack, asker, bot_settings):
    return make_app(slack, asker, bot_settings)


@contextmanager
def serving(app) -> Iterator[str]:
    """Serve the HTTP Events app with uvicorn on a free loopback port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(http_app(app), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture
def url(app) -> Iterator[str]:
    with serving(app) as base:
        yield base


# --- Slack's side of the wire ------------------------------------------------------------------


def sign(body: bytes, timestamp: str, secret: str = SECRET) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def post(
    url: str,
    body: bytes,
    *,
    content_type: str = "application/json",
    timestamp: int | None = None,
    signature: str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    """POST like Slack does: X-Slack-Request-Timestamp and the v0 signature over the exact bytes."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    request = urllib.request.Request(
        url + "/slack/events",
        data=body,
        method="POST",
        headers={
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": signature or sign(body, stamp),
            **(headers or {}),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def envelope(event: dict[str, Any], event_id: str | None = None) -> dict[str, Any]:
    return {
        "token": "verification-token-unused",
        "team_id": TEAM_ID,
        "api_app_id": APP_ID,
        "event": event,
        "type": "event_callback",
        "event_id": event_id or f"Ev{time.monotonic_ns()}",
        "event_time": int(time.time()),
        "event_context": "4-eyJldCI6ImFwcF9tZW50aW9uIn0",
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": TEAM_ID,
                "user_id": BOT_USER_ID,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
    }


def mention(
    slack: FakeSlack, text: str, *, channel: str = CHANNEL, thread_ts: str | None = None, user: str = USER
) -> dict[str, Any]:
    """The user posts `<@bot> text` (it lands in the fake's channel); returns the app_mention envelope."""
    raw = f"<@{BOT_USER_ID}> {text}"
    ts = slack.add_message(channel, raw, user=user, thread_ts=thread_ts)
    event = {
        "type": "app_mention",
        "user": user,
        "text": raw,
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        "team": TEAM_ID,
        "client_msg_id": f"m-{ts}",
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return envelope(event)


def direct_message(slack: FakeSlack, text: str, **extra: Any) -> dict[str, Any]:
    channel = "D0ALICE01"
    ts = slack.add_message(channel, text, user=extra.get("user", USER), bot_id=extra.get("bot_id"))
    event = {
        "type": "message",
        "channel_type": "im",
        "user": USER,
        "text": text,
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        "team": TEAM_ID,
        **extra,
    }
    return envelope(event)


def as_json(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()


def button_click(slack: FakeSlack, channel: str, message_ts: str, rating: str) -> bytes:
    """The form body Slack posts when someone clicks 👍/👎 under the answer message."""
    message = slack.message(channel, message_ts)
    actions = next(b for b in message["blocks"] if b["type"] == "actions")
    button = next(e for e in actions["elements"] if e["action_id"] == FEEDBACK_ACTIONS[rating])
    payload = {
        "type": "block_actions",
        "user": {"id": USER, "username": "alice", "name": "alice", "team_id": TEAM_ID},
        "api_app_id": APP_ID,
        "token": "verification-token-unused",
        "container": {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel,
            "is_ephemeral": False,
            "thread_ts": message.get("thread_ts"),
        },
        "trigger_id": "1234.5678.abcd",
        "team": {"id": TEAM_ID, "domain": "fake"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel, "name": "kafka-help"},
        "message": message,
        "state": {"values": {}},
        "response_url": "https://hooks.slack.com/actions/T0000001/1/abcd",
        "actions": [{**button, "block_id": FEEDBACK_BLOCK_ID, "action_ts": str(time.time())}],
    }
    return ("payload=" + urllib.parse.quote(json.dumps(payload))).encode()


def answered(slack: FakeSlack, count: int = 1) -> list:
    """Wait until `count` answers (chat.update calls that succeeded) have been delivered."""
    deadline = time.monotonic() + 120
    while True:
        done = [c for c in slack.wait_for("chat.update", count, timeout=120) if c.response.get("ok")]
        if len(done) >= count:
            return done
        assert time.monotonic() < deadline
        time.sleep(0.05)


def settle(slack: FakeSlack, deliver: Callable[[dict[str, Any]], int]) -> None:
    """Prove a quiet period: a mention delivered now in another channel is answered, so whatever was
    dispatched before it has started (and posted its placeholder) by then."""
    assert deliver(mention(slack, QUESTION, channel=SENTINEL)) == 200
    deadline = time.monotonic() + 120
    while not any(c.params["channel"] == SENTINEL and c.response.get("ok") for c in slack.calls("chat.update")):
        assert time.monotonic() < deadline, "the sentinel mention was not answered"
        time.sleep(0.05)


def over_http(url: str) -> Callable[[dict[str, Any]], int]:
    return lambda body: post(url, as_json(body))[0]


def placeholders(slack: FakeSlack, channel: str = CHANNEL) -> list:
    return [c for c in slack.calls("chat.postMessage") if c.params["channel"] == channel and c.status == 200]


# --- HTTP Events mode ----------------------------------------------------------------------------


def test_a_mention_is_answered_in_its_thread_with_sources_and_buttons(slack, url, asker):
    body = mention(slack, QUESTION)
    root = body["event"]["ts"]

    status, _ = post(url, as_json(body))
    assert status == 200

    update = answered(slack)[0]
    first = slack.calls("chat.postMessage")[0]
    assert first.params["thread_ts"] == root and first.params["text"] == PLACEHOLDER_TEXT
    assert first.params["unfurl_links"] is False and first.params["unfurl_media"] is False
    assert update.params["ts"] == first.response["ts"]
    question, history, answer = asker.calls[0]
    assert (question, history) == (QUESTION, [])
    assert not answer.abstained and answer.citations
    blocks = update.params["blocks"]
    kinds = [b["type"] for b in blocks]
    assert kinds[0] == "section" and kinds[-1] == "actions"
    contexts = [e["text"] for b in blocks if b["type"] == "context" for e in b["elements"]]
    assert "*Sources*" in contexts
    first_source = answer.citations[0].passage
    assert any(f"[{answer.citations[0].marker}] {first_source.heading}" in text for text in contexts)
    assert [e["action_id"] for e in blocks[-1]["elements"]] == list(FEEDBACK_ACTIONS.values())
    assert update.params["text"] and "**" not in update.params["text"]
    bot_message = slack.thread(CHANNEL, root)[-1]
    assert bot_message["thread_ts"] == root and bot_message["blocks"] == blocks


def test_a_mention_inside_a_thread_is_answered_in_that_thread(slack, url):
    root = slack.add_message(CHANNEL, "our producers see duplicates", user="U0BOB0001")
    body = mention(slack, QUESTION, thread_ts=root)

    assert post(url, as_json(body))[0] == 200

    answered(slack)
    assert slack.calls("chat.postMessage")[0].params["thread_ts"] == root != body["event"]["ts"]


def test_a_direct_message_is_answered_in_its_thread(slack, url, asker):
    body = direct_message(slack, QUESTION)

    assert post(url, as_json(body))[0] == 200

    answered(slack)
    placeholder = slack.calls("chat.postMessage")[0].params
    assert placeholder["channel"] == "D0ALICE01" and placeholder["thread_ts"] == body["event"]["ts"]
    assert asker.calls[0][0] == QUESTION


def test_an_off_topic_question_says_the_knowledge_base_does_not_cover_it(slack, url, asker):
    assert post(url, as_json(mention(slack, OFF_TOPIC)))[0] == 200

    update = answered(slack)[0]
    assert asker.calls[0][2].abstained
    assert update.params["blocks"][0]["text"]["text"].startswith(ABSTAIN_TEXT)
    assert update.params["text"].startswith(ABSTAIN_TEXT)


@pytest.mark.parametrize("forgery", ["signature", "stale", "other secret", "tampered body"])
def test_unverified_requests_are_refused_and_nothing_is_posted(slack, url, asker, forgery):
    body = as_json(mention(slack, QUESTION))
    now = int(time.time())
    if forgery == "signature":
        status, _ = post(url, body, signature="v0=" + "0" * 64)
    elif forgery == "stale":
        status, _ = post(url, body, timestamp=now - 6 * 60)
    elif forgery == "other secret":
        status, _ = post(url, body, signature=sign(body, str(now), secret="not-the-secret"))
    else:
        status, _ = post(
            url,
            body.replace(b"idempotent", b"transactional", 1),
            signature=sign(body, str(now)),
            timestamp=now,
        )
    assert status == 401

    settle(slack, over_http(url))
    assert placeholders(slack) == []
    assert [q for q, _, _ in asker.calls] == [QUESTION]  # the sentinel only


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Slack-Request-Timestamp": "not-a-number"},
        {"X-Slack-Request-Timestamp": ""},
        {"X-Slack-Request-Timestamp": "1e9"},
        {"X-Slack-Request-Timestamp": "-5"},
        {"X-Slack-Request-Timestamp": "9" * 40},
        {"X-Slack-Signature": "v1=abc"},
        {"X-Slack-Signature": ""},
        {"X-Slack-Signature": "v0=" + "g" * 64},
    ],
    ids=["words", "empty", "float", "negative", "huge", "other-scheme", "no-signature", "not-hex"],
)
def test_malformed_signature_headers_are_401_without_a_traceback(slack, url, asker, caplog, headers):
    caplog.set_level(logging.INFO)
    body = as_json(mention(slack, QUESTION))
    status, _ = post(url, body, headers=headers)
    assert status == 401
    assert not [r for r in caplog.records if r.exc_info], "a malformed header must not log a traceback"
    settle(slack, over_http(url))
    assert placeholders(slack) == []


def test_a_retried_delivery_is_not_answered_twice(slack, url, asker):
    body = as_json(mention(slack, QUESTION))
    assert post(url, body)[0] == 200
    answered(slack)

    status, _ = post(url, body, headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})

    assert status == 200
    settle(slack, over_http(url))
    assert len(placeholders(slack)) == 1
    assert len(asker.calls) == 2  # the original and the sentinel


def test_a_retry_that_arrives_first_is_dropped_too(slack, url, asker):
    status, _ = post(url, as_json(mention(slack, QUESTION)), headers={"X-Slack-Retry-Num": "2"})

    assert status == 200
    settle(slack, over_http(url))
    assert placeholders(slack) == []


def test_a_duplicate_event_id_is_not_answered_twice(slack, url, asker):
    body = as_json(mention(slack, QUESTION))
    assert post(url, body)[0] == 200
    assert post(url, body)[0] == 200  # another delivery of the same event id, without a retry header

    settle(slack, over_http(url))
    answered(slack, 2)
    assert len(placeholders(slack)) == 1
    assert len(asker.calls) == 2  # the original and the sentinel


@pytest.mark.parametrize(
    "extra",
    [
        {"bot_id": "B0OTHER01"},  # another bot
        {"bot_id": BOT_ID, "user": BOT_USER_ID},  # the bot's own message
        {"subtype": "message_changed"},  # an edit (e.g. our own chat.update)
        {"subtype": "message_deleted"},
    ],
)
def test_bot_messages_edits_and_deletions_are_ignored(slack, url, asker, extra):
    status, _ = post(url, as_json(direct_message(slack, QUESTION, **extra)))

    assert status == 200
    settle(slack, over_http(url))
    assert placeholders(slack, "D0ALICE01") == []


def test_a_follow_up_in_the_thread_uses_the_thread_as_history(slack, url, asker):
    first = mention(slack, QUESTION)
    root = first["event"]["ts"]
    assert post(url, as_json(first))[0] == 200
    answered(slack)

    assert post(url, as_json(mention(slack, FOLLOW_UP, thread_ts=root)))[0] == 200

    update = answered(slack, 2)[1]
    first_answer = asker.calls[0][2]
    question, history, answer = asker.calls[1]
    assert question == FOLLOW_UP
    assert history == [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": first_answer.text},
    ]
    assert answer.query != FOLLOW_UP  # the follow-up was rewritten with the thread's context
    assert slack.calls("conversations.replies") == []  # the thread was in memory
    assert update.params["ts"] == placeholders(slack)[1].response["ts"]
    assert placeholders(slack)[1].params["thread_ts"] == root


def test_after_a_restart_the_thread_history_is_read_once_from_slack(slack, asker, bot_settings):
    root = slack.add_message(CHANNEL, f"<@{BOT_USER_ID}> {QUESTION}", user=USER)
    earlier = "An idempotent producer &lt;guarantees&gt; no duplicates [1]."
    slack.add_message(CHANNEL, earlier, user=BOT_USER_ID, bot_id=BOT_ID, thread_ts=root)
    slack.add_message(CHANNEL, "thanks! one more thing", user="U0BOB0001", thread_ts=root)

    with serving(make_app(slack, asker, bot_settings)) as url:  # a new process: nothing in memory
        assert post(url, as_json(mention(slack, FOLLOW_UP, thread_ts=root)))[0] == 200
        answered(slack)
        assert post(url, as_json(mention(slack, "And what about retries?", thread_ts=root)))[0] == 200
        answered(slack, 2)

    replies = slack.calls("conversations.replies")
    assert len(replies) == 1 and replies[0].params.items() >= {"channel": CHANNEL, "ts": root}.items()
    assert asker.calls[0][1] == [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": "An idempotent producer <guarantees> no duplicates [1]."},
        {"role": "user", "content": "thanks! one more thing"},
    ]
    assert asker.calls[1][1][:3] == asker.calls[0][1]
    assert asker.calls[1][1][3:] == [
        {"role": "user", "content": FOLLOW_UP},
        {"role": "assistant", "content": asker.calls[0][2].text},
    ]


def test_a_vote_is_recorded_with_its_thread_and_thanked_privately(slack, url, asker, bot_settings):
    body = mention(slack, QUESTION)
    root = body["event"]["ts"]
    assert post(url, as_json(body))[0] == 200
    answer_ts = answered(slack)[0].params["ts"]

    status, _ = post(
        url, button_click(slack, CHANNEL, answer_ts, "down"), content_type="application/x-www-form-urlencoded"
    )

    assert status == 200
    thanks = slack.wait_for("chat.postEphemeral")[0].params
    assert thanks.items() >= {"channel": CHANNEL, "user": USER, "thread_ts": root, "text": THANKS_TEXT}.items()
    [record] = list(read_feedback(bot_settings.feedback_path))
    answer = asker.calls[0][2]
    assert record["rating"] == "down" and record["source"] == "slack"
    assert (record["channel"], record["thread_ts"], record["message_ts"], record["user"]) == (
        CHANNEL,
        root,
        answer_ts,
        USER,
    )
    assert record["question"] == QUESTION and record["answer"] == answer.text
    assert [c["chunk_id"] for c in record["citations"]] == [c.passage.chunk_id for c in answer.citations]
    assert "recovered" not in record


def test_a_vote_on_an_answer_from_before_a_restart_is_still_recorded(slack, asker, bot_settings):
    with serving(make_app(slack, asker, bot_settings)) as url:
        body = mention(slack, QUESTION)
        assert post(url, as_json(body))[0] == 200
        answer_ts = answered(slack)[0].params["ts"]
    with serving(make_app(slack, asker, bot_settings)) as url:  # the answer is no longer in memory
        click = button_click(slack, CHANNEL, answer_ts, "up")
        assert post(url, click, content_type="application/x-www-form-urlencoded")[0] == 200
        slack.wait_for("chat.postEphemeral")

    [record] = list(read_feedback(bot_settings.feedback_path))
    assert record["rating"] == "up" and record["recovered"] is True
    assert record["question"] == QUESTION and record["thread_ts"] == body["event"]["ts"]
    assert record["answer"].split()[:5] == asker.calls[0][2].text.replace("**", "").split()[:5]


def test_a_vote_that_cannot_be_saved_says_so_privately(slack, url, bot_settings):
    assert post(url, as_json(mention(slack, QUESTION)))[0] == 200
    answer_ts = answered(slack)[0].params["ts"]
    bot_settings.feedback_path.unlink(missing_ok=True)
    bot_settings.feedback_path.mkdir()  # the file became unwritable after start-up

    click = button_click(slack, CHANNEL, answer_ts, "up")
    assert post(url, click, content_type="application/x-www-form-urlencoded")[0] == 200

    assert slack.wait_for("chat.postEphemeral")[0].params["text"].startswith("Sorry, your feedback could not be saved")


def test_a_mention_without_a_question_gets_a_hint(slack, url, asker):
    body = mention(slack, "")

    assert post(url, as_json(body))[0] == 200

    hint = slack.wait_for("chat.postMessage")[0].params
    assert hint["thread_ts"] == body["event"]["ts"] and hint["text"].startswith("Ask me a question about Kafka")
    settle(slack, over_http(url))
    assert [q for q, _, _ in asker.calls] == [QUESTION]  # only the sentinel was answered


def test_a_rate_limited_call_is_retried_after_retry_after_and_delivered(slack, url):
    slack.fail_next("chat.postMessage", status=429, retry_after=1)

    started = time.monotonic()
    assert post(url, as_json(mention(slack, QUESTION)))[0] == 200
    answered(slack)

    posts = slack.calls("chat.postMessage")
    assert [c.status for c in posts] == [429, 200]
    assert posts[0].params == posts[1].params
    assert time.monotonic() - started >= 1.0  # it waited for Retry-After
    assert slack.thread(CHANNEL, posts[1].params["thread_ts"])[-1]["blocks"]


def test_a_failed_slack_call_leaves_an_apology_in_the_thread(slack, url):
    slack.fail_next("chat.update", error="internal_error")
    body = mention(slack, QUESTION)

    assert post(url, as_json(body))[0] == 200

    updates = slack.wait_for("chat.update", 2)
    assert updates[0].response == {"ok": False, "error": "internal_error"}
    assert slack.thread(CHANNEL, body["event"]["ts"])[-1]["text"] == APOLOGY_TEXT


def test_an_answering_error_is_shown_with_its_message(slack, url, asker):
    asker.fail_with = GenerationError("The LLM endpoint timed out after 30 s: check KAFKA_RAG_LLM_BASE_URL")
    body = mention(slack, QUESTION)

    assert post(url, as_json(body))[0] == 200

    slack.wait_for("chat.update")
    reply = slack.thread(CHANNEL, body["event"]["ts"])[-1]["text"]
    assert reply.startswith(":warning: Sorry") and "check KAFKA_RAG_LLM_BASE_URL" in reply


def test_slack_url_verification_and_health_check(url):
    status, body = post(url, as_json({"token": "x", "challenge": "c4ll3nge", "type": "url_verification"}))
    assert status == 200 and json.loads(body) == {"challenge": "c4ll3nge"}
    with urllib.request.urlopen(url + "/healthz", timeout=10) as response:
        assert json.loads(response.read()) == {"ok": True}


def test_tokens_and_the_signing_secret_never_reach_the_logs(slack, url, caplog):
    caplog.set_level(logging.DEBUG)
    body = mention(slack, QUESTION)
    assert post(url, as_json(body))[0] == 200
    answer_ts = answered(slack)[0].params["ts"]
    post(url, button_click(slack, CHANNEL, answer_ts, "up"), content_type="application/x-www-form-urlencoded")
    slack.wait_for("chat.postEphemeral")
    post(url, as_json(body), signature="v0=" + "0" * 64)

    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "Sending a request" in logged  # slack_sdk did log its requests at DEBUG
    assert BOT_TOKEN not in logged and SECRET not in logged


# --- Socket Mode ---------------------------------------------------------------------------------


def test_socket_mode_requests_reach_the_same_handlers(slack, app, asker, bot_settings):
    body = mention(slack, QUESTION)

    response = app.dispatch(BoltRequest(body=body, mode="socket_mode"))

    assert response.status == 200
    answer_ts = answered(slack)[0].params["ts"]
    assert slack.calls("chat.postMessage")[0].params["thread_ts"] == body["event"]["ts"]
    retried = app.dispatch(
        BoltRequest(body=mention(slack, QUESTION), mode="socket_mode", headers={"x-slack-retry-num": ["1"]})
    )
    assert retried.status == 200
    click = json.loads(urllib.parse.unquote(button_click(slack, CHANNEL, answer_ts, "up").decode()[len("payload=") :]))
    assert app.dispatch(BoltRequest(body=click, mode="socket_mode")).status == 200
    slack.wait_for("chat.postEphemeral")
    assert [r["rating"] for r in read_feedback(bot_settings.feedback_path)] == ["up"]
    settle(slack, lambda body: app.dispatch(BoltRequest(body=body, mode="socket_mode")).status)
    assert len(placeholders(slack)) == 1  # the retried delivery was not answered


# --- start-up ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "http", "named"),
    [
        ({}, True, "SLACK_BOT_TOKEN"),
        ({"SLACK_BOT_TOKEN": "xoxb-11111"}, True, "SLACK_SIGNING_SECRET"),
        ({"SLACK_BOT_TOKEN": "xoxb-11111", "SLACK_SIGNING_SECRET": "s3cr3t-value"}, False, "SLACK_APP_TOKEN"),
        ({"SLACK_BOT_TOKEN": "xoxp-user-token"}, False, "SLACK_BOT_TOKEN is not a bot token"),
        (
            {"SLACK_BOT_TOKEN": "xoxb-11111", "SLACK_APP_TOKEN": "xoxb-22222"},
            False,
            "SLACK_APP_TOKEN is not an app-level",
        ),
    ],
)
def test_a_missing_or_wrong_token_is_a_clear_error_naming_it(environ, http, named):
    with pytest.raises(ConfigurationError, match=named) as info:
        read_credentials(environ, http=http)
    assert "\n" not in str(info.value)
    for secret in environ.values():
        assert secret not in str(info.value)


def test_credentials_are_read_for_each_mode_and_hidden_from_repr():
    http = read_credentials({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s3cr3t"}, http=True)
    socket_mode = read_credentials({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}, http=False)
    assert (http.bot_token, http.signing_secret) == ("xoxb-1", "s3cr3t")
    assert socket_mode.app_token == "xapp-1"
    assert "xoxb-1" not in repr(http) and "s3cr3t" not in repr(http) and "xapp-1" not in repr(socket_mode)


def test_run_fails_before_loading_anything_when_a_token_is_missing(monkeypatch):
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    with pytest.raises(ConfigurationError, match="SLACK_APP_TOKEN is not set.*--http"):
        run(argparse.Namespace(http=False, host="127.0.0.1", port=0, index=None))


def test_a_rejected_bot_token_is_a_start_up_error(slack, asker, bot_settings):
    client = web_client("xoxb-revoked", base_url=slack.url)
    with pytest.raises(ConfigurationError, match="Slack rejected SLACK_BOT_TOKEN"):
        build_app(asker, bot_settings, client=client, signing_secret=SECRET)
    assert slack.calls("auth.test")[0].response == {"ok": False, "error": "invalid_auth"}


def test_kafka_rag_slack_http_serves_signed_events_end_to_end(slack, settings, tmp_path):
    """`kafka-rag slack --http` in its own process, against the fake Slack API."""
    port = free_port()
    env = {
        **os.environ,
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": slack.url,
        "KAFKA_RAG_FEEDBACK_PATH": str(tmp_path / "feedback.jsonl"),
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("SLACK_APP_TOKEN", None)
    process = subprocess.Popen(
        [str(KAFKA_RAG), "slack", "--http", "--port", str(port), "--index", str(settings.index_dir)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert process.poll() is None, process.communicate()[0]
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, "kafka-rag slack --http did not start"
                time.sleep(0.25)
        body = mention(slack, QUESTION)
        assert post(url, as_json(body))[0] == 200
        update = answered(slack)[0]
        assert slack.calls("chat.postMessage")[0].params["thread_ts"] == body["event"]["ts"]
        assert any(b["type"] == "actions" for b in update.params["blocks"])
        assert post(url, as_json(body), signature="v0=" + "0" * 64)[0] == 401
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0]
    assert process.returncode in (0, -signal.SIGTERM), output  # uvicorn re-raises SIGTERM after shutting down
    assert "Application shutdown complete" in output
    assert f"Answered in {CHANNEL}" in output
    assert BOT_TOKEN not in output and SECRET not in output


@pytest.mark.parametrize(("args", "named"), [([], "SLACK_APP_TOKEN"), (["--http"], "SLACK_SIGNING_SECRET")])
def test_kafka_rag_slack_without_its_tokens_exits_2_with_one_line(args, named):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    env["SLACK_BOT_TOKEN"] = BOT_TOKEN
    result = subprocess.run([str(KAFKA_RAG), "slack", *args], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith(f"kafka-rag: {named} is not set") and result.stderr.count("\n") == 1
    assert BOT_TOKEN not in result.stderr and result.stdout == ""


def test_a_hostile_document_is_shown_as_text_not_markup(slack, hostile_assistant, hostile_settings, tmp_path):
    """The web UI's hostile document (HTML and a javascript: link) answered through Slack."""
    bot_settings = dataclasses.replace(hostile_settings, feedback_path=tmp_path / "feedback.jsonl")
    asker = RecordingAssistant(hostile_assistant)
    with serving(make_app(slack, asker, bot_settings)) as url:
        assert post(url, as_json(mention(slack, HOSTILE_QUESTION)))[0] == 200
        update = answered(slack)[0]

    answer = asker.calls[0][2]
    assert any(c.passage.source_path.endswith(HOSTILE_NAME) for c in answer.citations)
    shown = [
        text
        for block in update.params["blocks"]
        for text in (
            [block["text"]["text"]]
            if block["type"] == "section"
            else [e["text"] for e in block.get("elements", ()) if isinstance(e.get("text"), str)]
        )
    ]
    for text in shown:
        for control in re.findall(r"<([^<>]*)>", text):
            assert control.startswith(("http://", "https://")), control
        assert "javascript:" not in "".join(re.findall(r"<[^<>]*>", text))
    assert any("&lt;" in text for text in shown)  # the document's tags were quoted, escaped
