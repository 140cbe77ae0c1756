"""Cleaning: strip page chrome and boilerplate that is not content, without touching content.

Each rule is a named pattern for one kind of boilerplate seen in real sources (Confluence wiki
exports, vendor blogs, error-decoder pages), so a test can show each one going and the text around
it staying. Rules match whole lines; nothing is removed from the middle of a sentence.
"""

from __future__ import annotations

import re
import unicodedata

# One whole line each: banners, wiki chrome and calls to action that carry no Kafka content.
_BOILERPLATE_LINES: dict[str, re.Pattern[str]] = {
    "event banner": re.compile(r"^\W*We are giving away passes\b.*$", re.I),
    "wiki login notice": re.compile(r"^This Confluence has been LDAP enabled\b.*$", re.I),
    "wiki page navigation": re.compile(
        r"^(Skip to end of metadata|Go to start of metadata|Child pages|Attachments|Page history|"
        r"Jump to:?.*|Created by .*, last modified.*|No labels|\W*No labels)$",
        re.I,
    ),
    "wiki discussion notice": re.compile(
        r"^Please keep the discussion on the mailing list rather than commenting on the wiki\b.*$", re.I
    ),
    "wiki edit invitation": re.compile(r"^Please help us keep this FAQ up-to-date\b.*$", re.I),
    "vendor call to action": re.compile(
        r"^(Debugging Kafka errors\?.*|Have some additional questions\?|Join our Discord!?|See all posts|"
        r"Share this post|Subscribe to (our|the) newsletter.*|Sign up for .*newsletter.*)$",
        re.I,
    ),
}

# A wiki page ends with numbered user comments ("  1. Amazing project !!", "  2. Anonymous"): a final
# numbered list whose first item starts a comment thread. Everything from there to the end goes.
_COMMENT_THREAD = re.compile(
    r"\n[ \t]*1\.[ \t]+(?:Anonymous|[^\n]{0,40}!{2,}|[^\n]{0,60}(?:great|amazing|thanks|thank you)[^\n]*)\n"
    r"(?:.*\n?)*\Z",
    re.I,
)
# Page headings glued onto the previous line by a web export ("... | tail -50Related APIs").
_GLUED_HEADING = re.compile(r"(?<=[a-z0-9])(Related APIs|Related Errors|See also)$", re.M)
# Vendor footer glued onto the last content line ("... | tail -50Related APIs" stays; the CTA does not).
_INLINE_CTA = re.compile(r"Debugging Kafka errors\?.*$", re.I | re.M)


def clean_text(text: str) -> str:
    """Normalise Unicode and whitespace, drop boilerplate lines and a trailing wiki comment thread."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    text = text.replace("\u00a0", " ").replace("\ufeff", "")
    text = _COMMENT_THREAD.sub("\n", text)
    text = _INLINE_CTA.sub("", text)
    text = _GLUED_HEADING.sub(r"\n\1", text)
    kept = [line.rstrip() for line in text.split("\n") if not _is_boilerplate(line.strip())]
    return _collapse_blank_lines("\n".join(kept)).strip()


def boilerplate_kind(line: str) -> str | None:
    """Which boilerplate rule a line matches, if any (for tests and ingest diagnostics)."""
    for kind, pattern in _BOILERPLATE_LINES.items():
        if pattern.match(line):
            return kind
    return None


def _is_boilerplate(line: str) -> bool:
    return bool(line) and boilerplate_kind(line) is not None


def _collapse_blank_lines(text: str) -> str:
    return re.sub(r"\n[ \t]*\n(?:[ \t]*\n)+", "\n\n", text)
