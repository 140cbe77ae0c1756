"""A name typed in lower case, written as the corpus writes it.

The parse reads a class, a metric or an error by its capitals (`RecordTooLargeException`, `IsrShrinksPerSec`,
`NOT_ENOUGH_REPLICAS`); a user who types in lower case writes them without any ("getting
recordtoolargeexception on every send", "isrshrinkspersec keeps climbing"), and the question lost the passage
that defines the name it asks about. The corpus spells each name its own way, so before the question is parsed
each lower-case word that the corpus writes as a name, in CamelCase or in capitals with underscores, is written
that way. Which words those are is the corpus's to say (`Retriever.corpus_spelling`): no list of names here.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# A word typed in lower case on its own: not part of a key, path, host, flag or code (`retention.ms`, `--topic`);
# or the class that ends a package path (`org.apache.kafka.common.errors.unsupportedversionexception`).
_LOWER_WORD = re.compile(
    r"(?<![\w.$/@`'\"-])[a-z][a-z0-9]*(?:_[a-z0-9]+)*(?![\w$/@`'\"-]|\.\w)"
    r"|(?<=[a-z]\.)[a-z][a-z0-9]{3,}(?:exception|error)(?![\w$/@`'\"-]|\.\w)"
)
# A name's spellings: CamelCase of two humps and more (`IsrShrinksPerSec`, `ZooKeeper`), or capitals with
# underscores (`NOT_ENOUGH_REPLICAS`). A word capitalised once is a sentence's first word as often as a name.
_NAME_SPELLING = re.compile(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
# An exception class typed in lower case: `recordtoolargeexception`, `serializationerror`.
_CLASS_WORD = re.compile(r"([a-z][a-z0-9]{3,})(exception|error)")
MIN_NAME_CHARS = 8  # `SASL_SSL`, `ZooKeeper`: shorter lower-case words are everyday words
MAX_LOOKED_UP = 64  # distinct words looked up per question: a long paste stays cheap


def corpus_cased(text: str, spelling: Callable[[str], str | None]) -> str:
    """`text` with each lower-case word of `MIN_NAME_CHARS` and more that `spelling` (the corpus's spelling of a
    word, or None) writes as a name in that name's spelling; the first `MAX_LOOKED_UP` distinct words only.
    An exception class the corpus does not name is still a class, by Java's convention (`…Exception`,
    `…Error`): another product's, or one the corpus knows only by its error's name."""
    words = dict.fromkeys(m.group(0) for m in _LOWER_WORD.finditer(text) if len(m.group(0)) >= MIN_NAME_CHARS)
    names: dict[str, str] = {}
    for word in list(words)[:MAX_LOOKED_UP]:
        spelt = spelling(word)
        if spelt is not None and spelt.lower() == word and _NAME_SPELLING.fullmatch(spelt):
            names[word] = spelt
        elif parts := class_name_parts(word):
            names[word] = parts[0].capitalize() + parts[1].capitalize()
    if not names:
        return text
    return _LOWER_WORD.sub(lambda m: names.get(m.group(0), m.group(0)), text)


def class_name_parts(word: str) -> tuple[str, str] | None:
    """An exception class's name typed in lower case, as its stem and its suffix (`recordtoolarge`, `exception`)."""
    match = _CLASS_WORD.fullmatch(word)
    return (match.group(1), match.group(2)) if match else None
