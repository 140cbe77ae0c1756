"""Cleaning: each kind of boilerplate in the seeds goes, and the content next to it stays."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag.cleaning import boilerplate_kind, clean_text

SEEDS = Path(__file__).resolve().parents[1] / "seeds"


def _raw(prefix: str) -> str:
    return next(SEEDS.glob(f"{prefix}_*.txt")).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def cleaned() -> dict[str, str]:
    return {prefix: clean_text(_raw(prefix)) for prefix in ("000", "001", "002", "003")}


@pytest.mark.parametrize(
    ("prefix", "boilerplate", "neighbour"),
    [
        ("002", "We are giving away passes to Current 2024", "Enter the Matrix: A practical guide"),
        ("001", "This Confluence has been LDAP enabled", "KIP-467: Augment ProduceResponse error messaging"),
        ("001", "Skip to end of metadata", "Current state"),
        ("001", "Go to start of metadata", "Discussion thread: TBD"),
        ("001", "Child pages", "KIP-467: Augment ProduceResponse error messaging"),
        (
            "001",
            "Please keep the discussion on the mailing list",
            "Today when a ProduceRequest containing multiple partition data is received",
        ),
        ("003", "Please help us keep this FAQ up-to-date", "Exactly-Once Processing"),
        ("003", "Amazing project !!", "brokers will not need to be restarted."),
        ("003", "We (Liveperson) started working with it this year", "Admin tools (e.g., that create topics"),
        ("003", "I am trying to setup a kafka cluster and was wondering", "Operationalizing Zookeeper"),
        ("000", "Debugging Kafka errors? Conduktor Console", "This error can be returned by: ShareAcknowledge"),
        ("000", "Explore all errors in the Error Decoder", "The record state is invalid."),
        ("002", "Have some additional questions?", "Special thanks to Guozhang Wang"),
        ("002", "Join our Discord!", "Special thanks to Guozhang Wang"),
        ("002", "See all posts", "Apurva Mehta"),
    ],
)
def test_seed_boilerplate_goes_and_neighbouring_content_stays(cleaned, prefix, boilerplate, neighbour):
    assert boilerplate in _raw(prefix)  # the seed really has it
    assert boilerplate not in cleaned[prefix]
    assert neighbour in cleaned[prefix]


def test_wiki_comment_thread_is_cut_at_its_first_comment(cleaned):
    text = cleaned["003"]
    assert text.endswith(
        "If you take care to use the same IP address for a recovered Zookeeper instance as it had before it "
        "failed, brokers will not need to be restarted."
    )
    assert "Anonymous" not in text


def test_glued_related_apis_heading_gets_its_own_line(cleaned):
    raw = _raw("000")
    assert "| tail -50Related APIs" in raw
    glued = "/var/log/kafka/server.log | tail -50\nRelated APIs\nThis error can be returned by: ShareAcknowledge"
    assert glued in cleaned["000"]


def test_seed_content_is_not_lost(cleaned):
    """Every substantial content line of the prose seeds 000-002 survives cleaning (only boilerplate lines go)."""
    boilerplate_markers = (
        "giving away passes",
        "LDAP enabled",
        "Skip to end of metadata",
        "Go to start of metadata",
        "Child pages",
        "keep the discussion",
        "keep this FAQ",
        "Debugging Kafka errors",
        "additional questions",
        "Discord",
        "See all posts",
    )
    for prefix in ("000", "001", "002"):
        for line in _raw(prefix).splitlines():
            line = line.strip().replace("\u00a0", " ")
            if len(line) < 40 or any(marker in line for marker in boilerplate_markers):
                continue
            assert line.removesuffix("Related APIs") in cleaned[prefix], (prefix, line)


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        (
            "🎁 We are giving away passes to Current 2024 in Austin TX, Sep 17-18. Enter the giveaway here.",
            "event banner",
        ),
        (
            "This Confluence has been LDAP enabled, if you are an ASF Committer, please use your LDAP Credentials",
            "wiki login notice",
        ),
        ("Skip to end of metadata", "wiki page navigation"),
        ("Go to start of metadata", "wiki page navigation"),
        ("Child pages", "wiki page navigation"),
        (
            "Please keep the discussion on the mailing list rather than commenting on the wiki (wiki discussions get "
            "unwieldy fast).",
            "wiki discussion notice",
        ),
        (
            "Please help us keep this FAQ up-to-date. If there is an answer that you think can be improved",
            "wiki edit invitation",
        ),
        (
            "Debugging Kafka errors? Conduktor Console gives you real-time visibility into your cluster.",
            "vendor call to action",
        ),
        ("Join our Discord!", "vendor call to action"),
        ("The consumer rebalances when max.poll.interval.ms is exceeded.", None),
        ("Child pages are listed in the sidebar of the wiki.", None),
        ("Skip to end of metadata to read the proposal.", None),
    ],
)
def test_boilerplate_kind(line, kind):
    assert boilerplate_kind(line) == kind


def test_rules_match_whole_lines_only():
    text = "To navigate, users click Skip to end of metadata in the wiki header.\nChild pages\nReal content."
    assert clean_text(text) == "To navigate, users click Skip to end of metadata in the wiki header.\nReal content."


def test_whitespace_and_unicode_are_normalised():
    text = "\ufeffCafe\u0301 config\r\n\r\n\r\n\r\nlinger.ms\u00a0=\u00a05   \rdone"
    assert clean_text(text) == "Café config\n\nlinger.ms = 5\ndone"


def test_a_numbered_list_that_is_not_a_comment_thread_stays():
    text = "Steps to recover:\n\n  1. Stop the broker\n  2. Delete the lock file\n  3. Start it again"
    assert clean_text(text) == text
