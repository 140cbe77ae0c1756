"""Answer → Slack message rendering: mrkdwn conversion, escaping, Block Kit limits, fallback, history."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from rag.passages import Answer, Citation, Passage
from ui.slack_render import (
    ABSTAIN_TEXT,
    BUTTON_VALUE_LIMIT,
    FEEDBACK_ACTIONS,
    MAX_ANSWER_CHARS,
    MAX_BLOCKS,
    PLACEHOLDER_TEXT,
    SECTION_LIMIT,
    SHORTENED_NOTE,
    answer_blocks,
    escape,
    fallback_text,
    feedback_value,
    history_from_replies,
    link,
    source_label,
    split_mrkdwn,
    text_from_slack,
    to_mrkdwn,
)

from .fake_slack import check_message

HOSTILE = "Run <!channel> now, ask <@U999> and <!here|here>, then <http://evil.example|click here> & see <#C1>."


def passage(
    n: int = 1,
    *,
    title: str = "Consumer configs",
    section: str = "max.poll.interval.ms",
    url: str = "",
    text: str = "Some text.",
) -> Passage:
    return Passage(
        chunk_id=f"c{n}",
        doc_id=f"d{n}",
        title=title,
        section_path=(title, section),
        source_path=f"docs/doc{n}.md",
        text=text,
        score=0.5,
        url=url,
    )


def answer(
    text: str = "Raise `max.poll.interval.ms` [1].",
    *,
    citations: int = 1,
    url: str = "",
    abstained: bool = False,
    notes: tuple[str, ...] = (),
    related: tuple[Passage, ...] = (),
    question: str = "Why does my consumer keep rebalancing?",
) -> Answer:
    cites = tuple(Citation(marker=n, passage=passage(n, url=url)) for n in range(1, citations + 1))
    return Answer(
        question=question,
        text=text,
        citations=cites,
        abstained=abstained,
        query=question,
        related=related,
        notes=notes,
    )


def slack_controls(mrkdwn: str) -> list[str]:
    """Every `<…>` control sequence Slack would parse in this text."""
    return re.findall(r"<([^<>]*)>", mrkdwn)


def texts(blocks: list[dict]) -> list[str]:
    found = []
    for block in blocks:
        if block["type"] == "section":
            found.append(block["text"]["text"])
        elif block["type"] == "context":
            found.extend(e["text"] for e in block["elements"])
    return found


# --- escaping and conversion ---------------------------------------------------------------------


def test_escape_replaces_only_slacks_three_control_characters():
    assert escape("a & b < c > d \"e\" 'f'") == "a &amp; b &lt; c &gt; d \"e\" 'f'"
    assert escape("&amp;") == "&amp;amp;"  # shown literally as "&amp;", not decoded


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("**bold** and __bold__", "*bold* and *bold*"),
        ("*italic* and _italic_", "_italic_ and _italic_"),
        ("~~gone~~", "~gone~"),
        ("## Heading **with bold** ##", "*Heading with bold*"),
        ("- one\n* two\n+ three", "• one\n• two\n• three"),
        ("  - nested", "  • nested"),
        ("1. first", "1. first"),
        ("> quoted **x**", "> quoted *x*"),
        (
            "see [the docs](https://kafka.apache.org/documentation/)",
            "see <https://kafka.apache.org/documentation/|the docs>",
        ),
        ("![diagram](https://example.org/d.png)", "<https://example.org/d.png|diagram>"),
        ("<https://example.org/a>", "<https://example.org/a>"),
        ("See https://kafka.apache.org/docs.", "See <https://kafka.apache.org/docs>."),
        ("query https://x.org/?a=1&b=2, then", "query <https://x.org/?a=1&amp;b=2>, then"),
        ("`a < b && **c**`", "`a &lt; b &amp;&amp; **c**`"),
        ("markers stay [1] and [2][3]", "markers stay [1] and [2][3]"),
        (
            "the __consumer_offsets topic and __transaction_state",
            "the __consumer_offsets topic and __transaction_state",
        ),
        ("2 * 3 * 4", "2 * 3 * 4"),
        ("---", "──────────"),
        ("[relative](docs/x.md) and [js](javascript:void)", "relative and js"),
    ],
)
def test_markdown_converts_to_mrkdwn(markdown, mrkdwn):
    assert to_mrkdwn(markdown) == mrkdwn


def test_code_fences_drop_the_language_and_escape_but_do_not_format_their_content():
    markdown = "Set it:\n```properties\n**not bold** <!channel> a&b\n```\nDone **now**."
    assert to_mrkdwn(markdown) == "Set it:\n```\n**not bold** &lt;!channel&gt; a&amp;b\n```\nDone *now*."


def test_an_evidence_code_unit_stays_one_slack_code_block():
    markdown = "- Describe it: [1]\n  ````\n  bin/kafka-topics.sh --describe <t>\n  uses ``` inside\n  ````\n[2]"
    mrkdwn = to_mrkdwn(markdown)
    assert mrkdwn.split("\n") == [
        "• Describe it: [1]",
        "```",
        "  bin/kafka-topics.sh --describe &lt;t&gt;",
        "  uses `\u200b`\u200b` inside",
        "```",
        "[2]",
    ]
    assert mrkdwn.count("```") == 2


def test_an_unclosed_fence_is_closed():
    assert to_mrkdwn("```\ncode <x>").endswith("```\ncode &lt;x&gt;\n```")


def test_a_document_cannot_ping_the_channel_or_forge_a_link():
    out = to_mrkdwn(HOSTILE)
    assert "&lt;!channel&gt;" in out and "&lt;!here|here&gt;" in out and "&lt;@U999&gt;" in out
    assert "&lt;http://evil.example|click here&gt;" in out and "&lt;#C1&gt;" in out
    assert slack_controls(out) == []  # nothing Slack would parse as a mention, a channel or a link
    assert " &amp; see" in out


def test_only_markdown_links_become_links_and_their_urls_cannot_break_out():
    out = to_mrkdwn("[a](https://x.org/p?q=1|<!channel>) [b <!here>](https://y.org/)")
    assert slack_controls(out) == ["https://x.org/p?q=1%7C%3C!channel%3E|a", "https://y.org/|b &lt;!here&gt;"]


def test_link_refuses_schemes_other_than_http_and_mailto():
    assert link("javascript:alert(1)", "x <y>") == "x &lt;y&gt;"
    assert link("slack://channel?id=C1", "open") == "open"
    assert link("mailto:ops@example.org", "mail us") == "<mailto:ops@example.org|mail us>"
    assert link("https://a.org/x y", "") == "<https://a.org/x%20y>"


# --- splitting -------------------------------------------------------------------------------------


def paragraph(i: int) -> str:
    return f"Paragraph {i} explains *fetch.max.wait.ms* & friends with a <https://kafka.apache.org/p{i}|link>. " * 6


def test_long_text_splits_at_paragraphs_under_the_section_limit_and_loses_nothing():
    text = "\n\n".join(paragraph(i) for i in range(40))
    pieces = split_mrkdwn(text)
    assert len(pieces) > 1
    assert all(0 < len(p) <= SECTION_LIMIT for p in pieces)
    assert " ".join(pieces).split() == text.split()
    for piece in pieces:
        assert piece.count("<") == piece.count(">")  # no link cut in half
        assert not re.search(r"&[a-z]*$", piece)  # no entity cut in half


def test_a_cut_never_falls_inside_a_link_or_an_entity():
    text = ("x" * 2990) + " <https://kafka.apache.org/a-very-long-link|label> tail"
    first, second = split_mrkdwn(text)
    assert first == "x" * 2990 and second.startswith("<https://kafka.apache.org/")
    text = ("y " * 1497) + "a&amp;b&amp;c"
    for piece in split_mrkdwn(text, 3000):
        assert piece.count("&") == piece.count(";")


def test_a_cut_inside_a_code_block_closes_and_reopens_the_fence():
    code = "\n".join(f'props.put("key.{i}", "value");' for i in range(300))
    pieces = split_mrkdwn(f"Config:\n```\n{code}\n```\nDone.")
    assert len(pieces) > 1
    for piece in pieces:
        assert piece.count("```") % 2 == 0
        assert len(piece) <= SECTION_LIMIT


def test_a_word_longer_than_the_limit_is_hard_cut():
    pieces = split_mrkdwn("z" * 7000)
    assert [len(p) for p in pieces] == [2996, 2996, 1008]


def test_split_limit_must_leave_room_for_text():
    with pytest.raises(ValueError, match="at least 16"):
        split_mrkdwn("text", 8)


# --- blocks ----------------------------------------------------------------------------------------


def test_answer_layout_is_sections_then_sources_then_buttons():
    blocks = answer_blocks(answer(citations=2, url=""), "C1:1.2")
    assert [b["type"] for b in blocks] == ["section", "context", "context", "context", "actions"]
    assert blocks[0]["text"] == {
        "type": "mrkdwn",
        "text": "Raise `max.poll.interval.ms` [1].",
        "verbatim": True,
    }
    assert texts(blocks)[1] == "*Sources*"
    assert texts(blocks)[2] == "*[1] Consumer configs › max.poll.interval.ms* · `docs/doc1.md`"
    buttons = blocks[-1]["elements"]
    assert [b["action_id"] for b in buttons] == [FEEDBACK_ACTIONS["up"], FEEDBACK_ACTIONS["down"]]
    assert [b["text"]["text"] for b in buttons] == ["👍 Helpful", "👎 Not helpful"]
    assert json.loads(buttons[0]["value"]) == {
        "answer": "C1:1.2",
        "question": "Why does my consumer keep rebalancing?",
    }
    assert all(e["verbatim"] for b in blocks if b["type"] == "context" for e in b["elements"])
    assert check_message({"channel": "C1", "text": "x", "blocks": blocks}) is None


def test_sources_link_to_the_document_url_when_there_is_one():
    label = source_label(3, passage(url="https://kafka.apache.org/documentation/#consumerconfigs"))
    url = "https://kafka.apache.org/documentation/#consumerconfigs"
    assert label == f"*<{url}|[3] Consumer configs › max.poll.interval.ms>*"


def test_document_titles_are_escaped_in_sources():
    hostile = passage(title="Ops <!channel>", section="<http://evil|x>", url="https://ok.org/")
    label = source_label(1, hostile)
    assert slack_controls(label) == ["https://ok.org/|[1] Ops &lt;!channel&gt; › &lt;http://evil|x&gt;"]
    assert slack_controls(source_label(1, passage(title="<!here>"))) == []


def test_a_hostile_answer_renders_without_mentions_or_forged_links():
    blocks = answer_blocks(answer(HOSTILE, notes=("note <!channel>",)), "id")
    for text in texts(blocks):
        assert not any(c.startswith(("!", "@", "#")) for c in slack_controls(text)), text
        assert "<http://evil" not in text


def test_a_long_answer_is_split_and_shortened_within_slacks_limits():
    long_text = "\n\n".join(paragraph(i) for i in range(60))
    blocks = answer_blocks(answer(long_text, citations=3), "id")
    sections = [b["text"]["text"] for b in blocks if b["type"] == "section"]
    assert sections[-1] == SHORTENED_NOTE
    assert all(len(s) <= SECTION_LIMIT for s in sections)
    assert sum(len(s) for s in sections[:-1]) <= MAX_ANSWER_CHARS
    assert len(" ".join(sections)) > MAX_ANSWER_CHARS * 0.9  # shortened, not gutted
    assert check_message({"channel": "C1", "text": "x", "blocks": blocks}) is None


def test_block_and_element_limits_hold_for_many_sources_and_notes():
    many = answer(
        "Short [1].",
        citations=60,
        notes=tuple(f"note {i}" for i in range(30)),
        url="https://kafka.apache.org/" + "p" * 200,
    )
    blocks = answer_blocks(many, "id")
    assert len(blocks) <= MAX_BLOCKS
    assert all(len(b["elements"]) <= 10 for b in blocks if b["type"] == "context")
    assert check_message({"channel": "C1", "text": "x", "blocks": blocks}) is None


def test_worst_case_answer_stays_under_fifty_blocks_and_the_total_text_ceiling():
    links = " ".join(f"<https://kafka.apache.org/{'q' * 1400}{i}>" for i in range(40))
    many = answer(
        links,
        citations=60,
        notes=tuple("n" * 600 for _ in range(30)),
        url="https://kafka.apache.org/" + "p" * 470,
    )
    blocks = answer_blocks(many, "id")
    assert len(blocks) <= MAX_BLOCKS
    assert check_message({"channel": "C1", "text": "x", "blocks": blocks}) is None


def test_abstention_says_the_knowledge_base_does_not_cover_it_and_offers_related_pages():
    related = (passage(7, title="Broker configs", section="log.retention.hours"),)
    blocks = answer_blocks(answer("No passage answers this.", citations=0, abstained=True, related=related), "id")
    assert blocks[0]["text"]["text"] == ABSTAIN_TEXT
    assert "does not cover" in ABSTAIN_TEXT
    assert texts(blocks)[1:] == [
        "*Possibly related*",
        "*Broker configs › log.retention.hours* · `docs/doc7.md`",
    ]
    assert blocks[-1]["type"] == "actions"


def test_notes_are_shown_before_the_sources():
    blocks = answer_blocks(answer(notes=("Input trimmed to its error signal",)), "id")
    assert texts(blocks)[1] == "_Input trimmed to its error signal_"


def test_feedback_value_fits_the_button_limit_with_any_question():
    value = feedback_value("C123:1700000000.000100", '"quoted\\" ünïcode ' * 500)
    assert len(value) <= BUTTON_VALUE_LIMIT
    decoded = json.loads(value)
    assert decoded["answer"] == "C123:1700000000.000100" and decoded["question"].endswith("…")


def test_fallback_is_plain_escaped_text():
    text = fallback_text(answer("**Raise** it, see [docs](https://x.org) <!channel> [1]."))
    assert text == "Raise it, see docs &lt;!channel&gt; [1]."
    assert fallback_text(answer("Not covered.", abstained=True, citations=0)) == ABSTAIN_TEXT
    assert len(fallback_text(answer("word " * 2000))) <= SECTION_LIMIT


# --- Slack → plain text and history ----------------------------------------------------------------


def test_slack_text_becomes_the_plain_question():
    raw = "<@UBOT0001> why &lt;this&gt; &amp; that? see <https://a.org|the page> in <#C1|ops> <!here>"
    assert text_from_slack(raw) == "why <this> & that? see the page in ops"
    assert text_from_slack("<@UBOT0001|kafka-rag>   ") == ""


def test_thread_replies_become_history_turns():
    messages = [
        {"ts": "100.000001", "user": "U1", "text": "<@UBOT> why is my consumer lagging?"},
        {"ts": "100.000002", "user": "UBOT", "bot_id": "BBOT", "text": "Consumers lag when &lt;x&gt; [1]."},
        {"ts": "100.000003", "user": "UBOT", "bot_id": "BBOT", "text": PLACEHOLDER_TEXT},
        {"ts": "100.000004", "bot_id": "BOTHER", "text": "another bot's message"},
        {"ts": "100.000005", "user": "U2", "text": "me too", "subtype": "thread_broadcast"},
        {"ts": "100.000006", "user": "U2", "text": "<@UBOT> and how do I fix it?"},
        {"ts": "100.000007", "user": "U1", "text": "later message"},
    ]
    turns = history_from_replies(messages, before_ts="100.000006", bot_user_id="UBOT", bot_id="BBOT")
    assert turns == [
        {"role": "user", "content": "why is my consumer lagging?"},
        {"role": "assistant", "content": "Consumers lag when <x> [1]."},
    ]


# --- the app manifest ------------------------------------------------------------------------------


def test_the_manifest_asks_for_exactly_what_the_bot_uses():
    manifest = yaml.safe_load((Path(__file__).parents[2] / "ui" / "slack-manifest.yml").read_text())
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == {
        "app_mentions:read",
        "chat:write",
        "im:history",
        "channels:history",
        "groups:history",
    }
    settings = manifest["settings"]
    assert settings["event_subscriptions"]["bot_events"] == ["app_mention", "message.im"]
    assert settings["interactivity"]["is_enabled"] is True
    assert settings["socket_mode_enabled"] is True
    assert manifest["features"]["app_home"]["messages_tab_enabled"] is True  # DMs reach the bot
    assert manifest["features"]["bot_user"]["display_name"]


def test_the_answer_names_the_index_version_it_came_from():
    """Servers follow new index versions; the reader can see which one answered."""
    import dataclasses

    blocks = answer_blocks(dataclasses.replace(answer(), index_version="20261123T060000000000Z"), "C1:1.0")
    contexts = [e["text"] for b in blocks if b["type"] == "context" for e in b["elements"]]
    assert "index version 20261123T060000000000Z" in contexts
    assert blocks[-1]["type"] == "actions"  # the buttons stay last
    unversioned = answer_blocks(answer(), "C1:1.0")
    assert not any("index version" in e["text"] for b in unversioned if b["type"] == "context" for e in b["elements"])
