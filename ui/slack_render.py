"""Answer → Slack message, and Slack message text → plain text; pure functions, no Slack calls.

Everything that comes from documents or the answerer is escaped (`&`, `<`, `>`) before this module
adds its own `<url|label>` links, so a document cannot ping `<!channel>` or forge a link label, and
every text object is sent with `verbatim: true` so Slack does not auto-parse `@here` or `#channel`.
Slack's limits are respected here: 3,000 characters per section, 50 blocks and 10 context elements
per message, and a total kept under the undocumented ~13k `msg_blocks_too_long` ceiling.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rag import Answer, Passage

SECTION_LIMIT = 3000  # characters in one section's text object
MAX_BLOCKS = 50
MAX_CONTEXT_ELEMENTS = 10
MAX_ANSWER_CHARS = 9_000  # answer text across all sections, when the sources leave room for it
TOTAL_TEXT_LIMIT = 12_000  # all text in the blocks; Slack answers msg_blocks_too_long near 13k
URL_LIMIT = 500  # longer document URLs are not linked (the source path is shown instead)
BUTTON_VALUE_LIMIT = 2000
FEEDBACK_BLOCK_ID = "kafka_rag_feedback"
FEEDBACK_ACTIONS = {"up": "feedback_up", "down": "feedback_down"}
HEADING_LIMIT = 150  # characters of a source label before it is cut with an ellipsis
NOTE_LIMIT = 300
MAX_SOURCES = 10

PLACEHOLDER_TEXT = ":hourglass_flowing_sand: Looking through the Kafka docs…"
ABSTAIN_TEXT = ":grey_question: The Kafka knowledge base does not cover this question."
APOLOGY_TEXT = ":warning: Sorry, something went wrong while answering. Please try again in a moment."
THANKS_TEXT = "Thanks for your feedback!"
EMPTY_QUESTION_TEXT = "Ask me a question about Kafka, e.g. _why does my consumer group keep rebalancing?_"
SHORTENED_NOTE = "_(answer shortened to fit in Slack)_"

_PLACEHOLDER = re.compile("[\ue000-\ue002]")  # private-use characters this module uses as token slots
_SLOT = re.compile("\ue000(\\d+)\ue001")
_INLINE_TOKEN = re.compile(
    r"(?P<code>`[^`\n]+`)"
    r"|(?P<link>!?\[(?P<label>[^\]\n]+)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\))"
    r"|<(?P<auto>(?:https?://|mailto:)[^>\s|]+)>"
    r"|(?<!<)(?P<bare>https?://[^\s<>|`\"']+)"
)
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)")
_ITALIC = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_QUOTE = re.compile(r"^\s{0,3}>\s?")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_BACKTICK_RUN = re.compile(r"`{3,}")
_URL_SCHEMES = ("http://", "https://", "mailto:")
_TRAILING_PUNCTUATION = ".,;:!?)"


def escape(text: str) -> str:
    """Slack's three control characters, so text is shown as written and never parsed as markup."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def link(url: str, label: str) -> str:
    """`<url|label>` for http(s)/mailto URLs; anything else is shown as plain escaped text."""
    if not url.lower().startswith(_URL_SCHEMES):
        return escape(label)
    safe_url = url.replace("&", "&amp;").replace("<", "%3C").replace(">", "%3E").replace("|", "%7C")
    safe_url = safe_url.replace(" ", "%20")
    return f"<{safe_url}|{escape(label)}>" if label else f"<{safe_url}>"


def to_mrkdwn(markdown: str) -> str:
    """Convert the answerer's Markdown to Slack mrkdwn, escaping all text that is not our own markup."""
    lines_out: list[str] = []
    fence: str | None = None
    for line in _PLACEHOLDER.sub("", markdown).split("\n"):
        opener = _FENCE.match(line)
        if fence is not None:
            if opener and opener.group(1)[0] == fence[0] and len(opener.group(1)) >= len(fence):
                fence = None
                lines_out.append("```")
            else:  # Slack has only ``` fences: a run of backticks inside would end the block, so it is broken up
                lines_out.append(_BACKTICK_RUN.sub(lambda m: "\u200b".join(m.group(0)), escape(line)))
        elif opener:
            fence = opener.group(1)
            lines_out.append("```")
        else:
            lines_out.append(_convert_line(line))
    if fence is not None:
        lines_out.append("```")
    return "\n".join(lines_out)


def _convert_line(line: str) -> str:
    if _RULE.match(line):
        return "──────────"
    prefix = ""
    quote = _QUOTE.match(line)
    if quote:
        prefix, line = "> ", line[quote.end() :]  # a literal `>` at line start is mrkdwn's quote
    heading = _HEADING.match(line)
    if heading:
        inner = _BOLD.sub(lambda m: m.group(1) or m.group(2), heading.group(1))
        return prefix + "*" + _convert_inline(inner, emphasis=False) + "*"
    bullet = _BULLET.match(line)
    if bullet:
        prefix += bullet.group(1) + "• "
        line = line[bullet.end() :]
    return prefix + _convert_inline(line, emphasis=True)


def _convert_inline(text: str, *, emphasis: bool) -> str:
    tokens: list[str] = []

    def slot(rendered: str) -> str:
        tokens.append(rendered)
        return f"\ue000{len(tokens) - 1}\ue001"

    def token(match: re.Match[str]) -> str:
        if match.group("code"):
            return slot(escape(match.group("code")))
        if match.group("link"):
            return slot(link(match.group("target"), match.group("label")))
        if match.group("auto"):
            return slot(link(match.group("auto"), ""))
        url = match.group("bare")
        trail = ""
        while url and url[-1] in _TRAILING_PUNCTUATION:
            url, trail = url[:-1], url[-1] + trail
        return slot(link(url, "")) + trail

    text = escape(_INLINE_TOKEN.sub(token, text))
    if emphasis:
        text = _BOLD.sub(lambda m: "\ue002" + (m.group(1) or m.group(2)) + "\ue002", text)
        text = _ITALIC.sub(r"_\1_", text)
        text = _STRIKE.sub(r"~\1~", text)
        text = text.replace("\ue002", "*")
    return _SLOT.sub(lambda m: tokens[int(m.group(1))], text)


def plain_text(markdown: str) -> str:
    """Markdown without markup, escaped: the message's notification and fallback text."""
    text = _PLACEHOLDER.sub("", markdown)
    text = re.sub(r"!?\[([^\]\n]+)\]\(([^)\s]+)\)", r"\1", text)
    text = _BOLD.sub(lambda m: m.group(1) or m.group(2), text)
    text = re.sub(r"(?m)^\s{0,3}#{1,6}\s+", "", text)
    text = re.sub(r"(?m)^\s*(```|~~~).*$\n?", "", text)
    return escape(text.strip())


def split_mrkdwn(text: str, limit: int = SECTION_LIMIT) -> list[str]:
    """Cut text into pieces of at most `limit` characters at paragraph, line or word boundaries.

    Never cuts inside a `<…>` link or an `&…;` entity, and closes and reopens a code fence that a
    cut falls inside, so each piece renders on its own.
    """
    if limit < 16:
        raise ValueError(f"limit must be at least 16 characters, got {limit}")
    pieces: list[str] = []
    rest = text.strip("\n")
    reopen = ""
    while rest:
        rest = reopen + rest
        reopen = ""
        if len(rest) <= limit:
            pieces.append(rest)
            break
        budget = limit - len("\n```")
        cut = _cut_point(rest, budget)
        piece, rest = rest[:cut].rstrip(), rest[cut:].lstrip(" \n")
        if piece.count("```") % 2:
            piece += "\n```"
            reopen = "```\n"
        pieces.append(piece)
    return [piece for piece in pieces if piece.strip()]


def _cut_point(text: str, budget: int) -> int:
    floor = budget // 2  # pieces are never shorter than this, so 9,000 characters stay a few sections
    window = text[: budget + 1]
    for separator in ("\n\n", "\n", " "):
        at = window.rfind(separator, floor)
        if at > 0:
            return _outside_markup(text, at, floor)
    return _outside_markup(text, budget, floor)


def _outside_markup(text: str, cut: int, floor: int) -> int:
    """Move a cut back out of a `<…>` link or an `&…;` entity, unless that leaves less than `floor`."""
    opened = text.rfind("<", 0, cut)
    if opened > text.rfind(">", 0, cut) and opened >= floor:
        cut = opened
    amp = text.rfind("&", max(floor, cut - 6), cut)
    if amp >= floor and ";" not in text[amp:cut]:
        cut = amp
    return cut


def source_label(marker: int | None, passage: Passage) -> str:
    """`[n] title › section`, bold and linked when the document has a URL, else with its path."""
    heading = _cut(passage.heading, HEADING_LIMIT)
    label = f"[{marker}] {heading}" if marker is not None else heading
    if passage.url.lower().startswith(_URL_SCHEMES) and len(passage.url) <= URL_LIMIT:
        return f"*{link(passage.url, label)}*"
    return f"*{escape(label)}* · `{escape(passage.source_path)}`"


def feedback_value(answer_id: str, question: str) -> str:
    """Button value: the answer id, plus the question so a vote survives a restart of the bot."""
    value = json.dumps({"answer": answer_id, "question": question}, ensure_ascii=False)
    while len(value) > BUTTON_VALUE_LIMIT:
        question = question[: len(question) * 9 // 10]
        value = json.dumps({"answer": answer_id, "question": question + "…"}, ensure_ascii=False)
    return value


def answer_blocks(answer: Answer, answer_id: str) -> list[dict[str, Any]]:
    """The answer as sections, then notes, sources and 👍/👎 buttons, within Slack's limits.

    An abstention is shown as this adapter's own "does not cover" line, with the related pages.

    Block budget: at most 1 notes block, 1 + 10 source blocks, 1 version block and 1 actions block, and the answer's
    9,000 characters split at no less than half a section each, which is well under 50 blocks. Text
    budget: the notes and sources are bounded, and the answer gets what they leave of 12,000.
    """
    tail = _tail_blocks(answer, answer_id)
    budget = min(MAX_ANSWER_CHARS, TOTAL_TEXT_LIMIT - _text_size(tail) - len(SHORTENED_NOTE))
    text = ABSTAIN_TEXT if answer.abstained or not answer.text.strip() else to_mrkdwn(answer.text)
    if len(text) > budget:
        sections = [*split_mrkdwn(split_mrkdwn(text, budget)[0]), SHORTENED_NOTE]
    else:
        sections = split_mrkdwn(text)
    return [_section(section) for section in sections] + tail


def _text_size(blocks: Sequence[Mapping[str, Any]]) -> int:
    return sum(
        len(element["text"]["text"] if element["type"] == "button" else element["text"])
        for block in blocks
        for element in block.get("elements", ())
    )


def _tail_blocks(answer: Answer, answer_id: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if answer.notes:
        notes = [f"_{escape(_cut(note, NOTE_LIMIT))}_" for note in answer.notes[:MAX_CONTEXT_ELEMENTS]]
        blocks.append(_context(notes))
    if answer.citations:
        blocks.append(_context(["*Sources*"]))
        blocks.extend(_context([source_label(c.marker, c.passage)]) for c in answer.citations[:MAX_SOURCES])
    elif answer.abstained and answer.related:
        blocks.append(_context(["*Possibly related*"]))
        blocks.extend(_context([source_label(None, p)]) for p in answer.related[:MAX_SOURCES])
    if answer.index_version:  # which published index answered: servers follow new versions as they land
        blocks.append(_context([f"index version {escape(answer.index_version)}"]))
    value = feedback_value(answer_id, answer.question)
    blocks.append(
        {
            "type": "actions",
            "block_id": FEEDBACK_BLOCK_ID,
            "elements": [
                _button(FEEDBACK_ACTIONS["up"], "👍 Helpful", value),
                _button(FEEDBACK_ACTIONS["down"], "👎 Not helpful", value),
            ],
        }
    )
    return blocks


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text, "verbatim": True}}


def _context(texts: Sequence[str]) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": t, "verbatim": True} for t in texts]}


def _button(action_id: str, label: str, value: str) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": label, "emoji": True},
        "value": value,
    }


def fallback_text(answer: Answer) -> str:
    """Plain text for notifications and clients that cannot show blocks."""
    if answer.abstained or not answer.text.strip():
        return ABSTAIN_TEXT
    return _cut(plain_text(answer.text), SECTION_LIMIT)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def error_text(message: str) -> str:
    """An apology that shows the project's own error message (which says how to fix it)."""
    return f":warning: Sorry, I could not answer: {escape(message)}"


_MENTION = re.compile(r"<@[UW][A-Z0-9]+(?:\|[^>]*)?>")
_SLACK_LINK = re.compile(r"<([^<>|]+)(?:\|([^<>]*))?>")


def text_from_slack(text: str) -> str:
    """A Slack message's text as the plain question: mentions stripped, links and entities undone."""
    text = _MENTION.sub("", text)

    def unlink(match: re.Match[str]) -> str:
        target, label = match.group(1), match.group(2)
        if target.startswith(("#", "!")):
            return label or ""
        return label or target

    text = _SLACK_LINK.sub(unlink, text)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return re.sub(r"[ \t]+", " ", text).strip()


def history_from_replies(
    messages: Sequence[Mapping[str, Any]], *, before_ts: str, bot_user_id: str, bot_id: str
) -> list[dict[str, str]]:
    """`conversations.replies` messages before `before_ts` as [{role, content}] turns for the assistant.

    The bot's own messages become assistant turns (placeholders and apologies are skipped); other
    bots' messages are left out; everyone else is the user.
    """
    turns: list[dict[str, str]] = []
    for message in messages:
        if _ts(message.get("ts", "0")) >= _ts(before_ts) or message.get("subtype") not in (
            None,
            "bot_message",
        ):
            continue
        text = message.get("text", "")
        is_self = message.get("user") == bot_user_id or (bot_id and message.get("bot_id") == bot_id)
        if is_self:
            if text and text not in (PLACEHOLDER_TEXT, APOLOGY_TEXT) and not text.startswith(":warning:"):
                turns.append({"role": "assistant", "content": text_from_slack(text)})
        elif not message.get("bot_id"):
            content = text_from_slack(text)
            if content:
                turns.append({"role": "user", "content": content})
    return turns


def _ts(ts: str) -> tuple[int, int]:
    seconds, _, micros = ts.partition(".")
    return int(seconds or 0), int(micros or 0)
