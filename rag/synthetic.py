"""Synthetic training queries from the corpus's own structure, made at ingest beside the chunks.

No generator model: a FAQ heading is a question already; other headings become "what is / how do
I" questions; a protocol-error-style table row (`NAME | code | …`) yields its code, its name and the
pasted exception a client would print; a setting with a definition table (`Default: | …`) yields
"what is the default of KEY" and "which setting controls …" from its description. The ranker's fit
(`evals/fit_ranker.py`) mixes them, down-weighted, with the human tuning questions; they are stored
with the index version so a fit always sees the corpus it ranks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

SYNTHETIC_VERSION = 1
_ERROR_ROW = re.compile(r"^([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+) \| (-?\d{1,4}) \| \w+ \| ([^|\n]{12,})$", re.M)
_DEFAULT_ROW = re.compile(r"^Default: \| ", re.M)
_FIRST_SENTENCE = re.compile(r"^(.{20,200}?[a-z0-9)'\"`])\.(?:\s|$)", re.S)


@dataclass(frozen=True)
class SyntheticQuery:
    query: str
    chunk_id: str  # the chunk that answers it
    kind: str  # faq | heading | error-code | error-name | pasted-error | config-default | which-setting


def synthetic_queries(chunk_id: str, section_path: Sequence[str], text: str) -> Iterator[SyntheticQuery]:
    """The queries one chunk answers by its structure alone."""
    heading = section_path[-1].strip() if len(section_path) > 1 else ""
    if heading.endswith("?"):
        yield SyntheticQuery(heading, chunk_id, "faq")
    elif heading and _DEFAULT_ROW.search(text) and " " not in heading:
        yield SyntheticQuery(f"what is the default value of {heading}?", chunk_id, "config-default")
        description = _FIRST_SENTENCE.match(text.strip())
        if description:
            what = description.group(1)
            yield SyntheticQuery(f"which setting controls this: {what[0].lower()}{what[1:]}", chunk_id, "which-setting")
    elif heading and len(heading.split()) >= 2:
        yield SyntheticQuery(f"how does {heading[0].lower()}{heading[1:]} work?", chunk_id, "heading")
    for match in _ERROR_ROW.finditer(text):
        name, code, meaning = match.groups()
        yield SyntheticQuery(f"what does error code {code} mean?", chunk_id, "error-code")
        exception = "".join(part.capitalize() for part in name.split("_")) + "Exception"
        yield SyntheticQuery(f"{exception}: {meaning.strip()}", chunk_id, "pasted-error")
