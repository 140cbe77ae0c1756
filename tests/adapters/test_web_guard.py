"""What the web server refuses, over real HTTP: password guessing (429 with back-off), uploads, oversized
bodies, oversized questions and out-of-range top_k, and that none of it logs a traceback."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from rag import Settings
from tests.adapters.conftest import SpyAssistant, launched
from ui import guard

pytestmark = pytest.mark.slow

QUESTION = "What causes INVALID_RECORD_STATE (error code 121)?"


@pytest.fixture(scope="module")
def spy(assistant: Any) -> SpyAssistant:
    return SpyAssistant(assistant)


@pytest.fixture(scope="module")
def web_settings(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return dataclasses.replace(settings, feedback_path=tmp_path_factory.mktemp("guard") / "feedback.jsonl")


def _login(url: str, password: str) -> httpx.Response:
    return httpx.post(url.rstrip("/") + "/login", data={"username": "kafka", "password": password}, timeout=10)


def test_login_backs_off_after_five_wrong_passwords(spy, web_settings, monkeypatch):
    monkeypatch.setattr(guard, "BACKOFF_S", 3.0)
    with launched(spy, dataclasses.replace(web_settings, ui_auth="kafka:s3cret")) as url:
        assert [_login(url, f"guess{n}").status_code for n in range(5)] == [400] * 5
        refused = _login(url, "s3cret")  # the right password is refused too while the back-off runs
        assert refused.status_code == 429
        assert 1 <= int(refused.headers["retry-after"]) <= 4
        assert "Too many failed logins" in refused.json()["detail"]
        burst = [_login(url, f"more{n}") for n in range(10)]  # a burst gets nowhere and does not count
        assert [r.status_code for r in burst] == [429] * 10
        time.sleep(int(burst[-1].headers["retry-after"]))
        assert _login(url, "wrong again").status_code == 400
        second = _login(url, "s3cret")
        assert second.status_code == 429 and 4 <= int(second.headers["retry-after"]) <= 7  # doubled
        time.sleep(int(second.headers["retry-after"]))
        assert _login(url, "s3cret").status_code == 200
        assert _login(url, "typo").status_code == 400  # a success cleared the count


def test_uploads_are_refused_with_and_without_login(spy, web_settings):
    for auth in ("", "kafka:s3cret"):
        with launched(spy, dataclasses.replace(web_settings, ui_auth=auth)) as url:
            for path in ("/gradio_api/upload", "/upload"):
                response = httpx.post(
                    url.rstrip("/") + path, files={"files": ("big.bin", b"\0" * 2_000_000)}, timeout=20
                )
                assert response.status_code in (403, 413), (auth, path, response.status_code)
                small = httpx.post(url.rstrip("/") + path, files={"files": ("a.txt", b"hello")}, timeout=10)
                assert small.status_code == 403 and "Uploads are disabled" in small.json()["detail"]


def test_an_oversized_request_body_is_413_before_gradio_reads_it(spy, web_settings):
    with launched(spy, web_settings) as url:
        body = b'{"data": ["' + b"x" * (guard.MAX_BODY_BYTES + 1) + b'", []]}'
        response = httpx.post(
            url.rstrip("/") + "/gradio_api/call/ask",
            content=body,
            headers={"content-type": "application/json"},
            timeout=20,
        )
    assert response.status_code == 413


def test_questions_over_the_cap_and_top_k_out_of_range_get_clear_errors_not_tracebacks(spy, web_settings, capfd):
    with launched(spy, web_settings) as url:
        client = Client(url, verbose=False)
        with pytest.raises(AppError, match="over the limit of 250,000"):
            client.predict("x " * 130_000, [], api_name="/ask")
        for top_k in (0, -3, 51, 100_000):
            with pytest.raises(AppError, match="top_k must be a whole number from 1 to 50"):
                client.predict(QUESTION, [], top_k, api_name="/ask")
        with pytest.raises(AppError, match="Type a question first"):
            client.predict("", [], api_name="/ask")
        answer = client.predict(QUESTION, [], 50, api_name="/ask")
    assert answer["citations"]
    assert "Traceback" not in capfd.readouterr().err
