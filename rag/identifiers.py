"""Exact identifiers in Kafka text: exception classes, error codes, config keys, KIP/JIRA ids, CLI tools.

The same extractor runs over chunks at ingest (the per-chunk `identifiers` field) and over questions
at query time, so an identifier matches when both sides spell it the same way, case aside.
Identifiers are returned lower-cased with a kind prefix only for numeric error codes (`code:121`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# The class name alone (a package prefix would be rescanned from every word boundary: quadratic).
_EXCEPTION = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Exception|Error))\b")
_UPPER_SNAKE = re.compile(r"\b[A-Z][A-Z0-9]+(?:_[A-Z0-9]+)+\b")
# "error code 6", "code: 6", "error codes 6 and 15", "codes 6, 15 or 27"
_ERROR_CODE = re.compile(r"\b(?:error[ _-]?)?codes?\s*[:=#]?\s*\(?(\d{1,4}(?:\s*(?:,|and|or|&)\s*\d{1,4}\b)*)\b", re.I)
_CODE_DEFINITION = re.compile(r"\b[A-Z][A-Z0-9_]+\((\d{1,4}),")  # INVALID_RECORD(83, "...")
_CODE_ROW = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+ \| (-?\d{1,4}) \|", re.M)  # a table row: NAME | 121 | ...
# Dot-separated parts; `_` and `-` only inside parts, so no two quantifiers compete (no backtracking blow-up).
# A sentence may end right after a key ("… set min.insync.replicas."): a dot counts only before more name.
_CONFIG_KEY = re.compile(r"(?<![\w.$/-])[a-z][a-z0-9_-]*(?:\.[a-z0-9_-]+)+(?![\w(/$]|\.[\w(/$])")
# Not a host: `kafka-1:9092`, `kafka-1.internal`; but a title: "KIP-467: Augment ProduceResponse …".
_TICKET = re.compile(r"\b(KIP|KAFKA)-(\d+)\b(?!-|:\d|\.\w)", re.I)
# A KIP as people also type it, "KIP 467" or "KIP467" (not "Kafka 4": a JIRA id is pasted, not typed).
_KIP_TYPED = re.compile(r"\bKIP ?(\d{2,})\b(?!-|:\d|\.\w)", re.I)
# With its script suffix (`bin/kafka-topics.sh`), or bare as a whole word that no path goes on from
# (`/var/kafka-logs/orders-0` is a directory) and no host name (`kafka-prod-03:9092`).
_CLI_TOOL = re.compile(
    r"\b((?:kafka|zookeeper|connect)-[a-z-]+[a-z])\.(?:sh|bat)\b"
    r"|(?<![\w.-])((?:kafka|zookeeper|connect)-[a-z-]+[a-z])(?![\w/-]|\.\w)"
)
_METHOD = re.compile(r"\b([a-z]+[A-Z][A-Za-z]+)\(\)")

# Dotted words that look like config keys but are file names, hosts, packages or abbreviations.
_NOT_CONFIG_SUFFIX = {
    "sh",
    "bat",
    "txt",
    "log",
    "html",
    "htm",
    "md",
    "json",
    "yml",
    "yaml",
    "xml",
    "jar",
    "java",
    "scala",
    "py",
    "com",
    "org",
    "net",
    "io",
    "properties",
    "sbt",
    "gz",
    "tgz",
    "zip",
    "conf",
    "cfg",
    "pdf",
    "png",
    "local",
    "pem",
    "jks",
    "crt",
    "p12",
}
# Template placeholders in the Kafka docs, not error codes.
_NOT_UPPER_SNAKE = {"scala_version", "kafka_version", "full_dot_version"}
_NOT_CONFIG_PREFIX = ("org.", "com.", "java.", "javax.", "io.", "kafka.common", "e.g", "i.e", "www.", "etc.")


def extract_identifiers(text: str) -> tuple[str, ...]:
    """Sorted unique identifiers found in `text`, lower-cased."""
    found: set[str] = set()
    found.update(m.group(1).lower() for m in _EXCEPTION.finditer(text))
    found.update(m.group(0).lower() for m in _UPPER_SNAKE.finditer(text) if m.group(0).lower() not in _NOT_UPPER_SNAKE)
    found.update(f"code:{int(code)}" for m in _ERROR_CODE.finditer(text) for code in re.findall(r"\d+", m.group(1)))
    found.update(f"code:{int(m.group(1))}" for m in _CODE_DEFINITION.finditer(text))
    found.update(f"code:{int(m.group(1))}" for m in _CODE_ROW.finditer(text))
    found.update(f"{m.group(1).lower()}-{m.group(2)}" for m in _TICKET.finditer(text))
    found.update(f"kip-{m.group(1)}" for m in _KIP_TYPED.finditer(text))
    found.update((m.group(1) or m.group(2)).lower() for m in _CLI_TOOL.finditer(text))
    found.update(m.group(1).lower() for m in _METHOD.finditer(text))
    found.update(key for key in (m.group(0).lower() for m in _CONFIG_KEY.finditer(text)) if _is_config_key(key))
    return tuple(sorted(found))


_WORD_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def error_names(text: str) -> tuple[str, ...]:
    """The error name each exception class in `text` stands for, by Kafka's naming convention
    (`NotEnoughReplicasException` is the protocol error `NOT_ENOUGH_REPLICAS`), lower-cased like
    `extract_identifiers`. Whether the corpus knows such a name is for retrieval to look up."""
    names = (
        _WORD_BOUNDARY.sub("_", re.sub(r"(?:Exception|Error)$", "", m.group(1))) for m in _EXCEPTION.finditer(text)
    )
    return tuple(sorted({name.lower() for name in names if "_" in name}))


def exception_names(identifiers: Iterable[str]) -> frozenset[str]:
    """The exception classes the error names among `identifiers` stand for, lower-cased as `extract_identifiers`
    gives them: `error_names` the other way round (`not_enough_replicas` is `notenoughreplicasexception`, and
    `…error` for the classes Kafka names so)."""
    return frozenset(
        f"{name.replace('_', '')}{suffix}" for name in identifiers if "_" in name for suffix in ("exception", "error")
    )


# What stands between spaces and punctuation: "Unknown", "in-sync", "read_committed".
_PHRASE_PIECE = re.compile(r"[^\W_]+(?:[\w-]*[^\W_])?")
_PLAIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
MAX_PHRASE_WORDS = 6  # the longest error name spelt as words: "Not enough replicas after append"
RUN_TOGETHER_WORDS = (3, 4, 5)  # `UnderReplicatedPartitions`, `RequestQueueTimeMs`, `UnderMinIsrPartitionCount`


def phrase_names(text: str, limit: int) -> tuple[str, ...]:
    """Every run of two to `MAX_PHRASE_WORDS` plain words of `text` spelt as an error name, lower-cased like
    `extract_identifiers` (at most `limit`): clients that print errors in words ("Broker: Unknown Producer
    Id") name `UNKNOWN_PRODUCER_ID`. Punctuation and other tokens (`in-sync`, `read_committed`) end a run.
    Which of them the corpus carries is for retrieval to look up."""
    names = (
        "_".join(run[start : start + size])
        for run in _word_runs(text)
        for start in range(len(run))
        for size in range(2, min(MAX_PHRASE_WORDS, len(run) - start) + 1)
    )
    return tuple(itertools.islice(dict.fromkeys(names), limit))


def run_together_names(text: str, limit: int) -> tuple[str, ...]:
    """Every run of `RUN_TOGETHER_WORDS` plain words of `text` written as one word, lower-cased (at most
    `limit`): "under replicated partitions" and "under-replicated partitions" are `underreplicatedpartitions`,
    which a corpus may write as one CamelCase name (`UnderReplicatedPartitions`, a broker metric). Which of
    them it does is for retrieval to look up; two words run together are mostly a plain compound ("key store")."""
    names = (
        "".join(run[start : start + size])
        for run in _word_runs(text.replace("-", " "))
        for size in RUN_TOGETHER_WORDS
        for start in range(len(run) - size + 1)
    )
    return tuple(itertools.islice(dict.fromkeys(names), limit))


def _word_runs(text: str) -> list[list[str]]:
    """The runs of plain words of `text`, lower-cased; punctuation and other tokens end a run."""
    runs: list[list[str]] = [[]]
    for segment in re.split(r"[^\w\s-]", text):
        for piece in _PHRASE_PIECE.findall(segment):
            if _PLAIN_WORD.fullmatch(piece):
                runs[-1].append(piece.lower())
            elif runs[-1]:
                runs.append([])
        runs.append([])
    return [run for run in runs if run]


def _is_config_key(candidate: str) -> bool:
    parts = candidate.split(".")
    if parts[-1] in _NOT_CONFIG_SUFFIX or candidate.startswith(_NOT_CONFIG_PREFIX):
        return False
    if any(not part or part.isdigit() or part[0] in "_-" or part[-1] in "_-" for part in parts):
        return False
    # Abbreviations have a one-letter part ("e.g", "p.m"). A plain two-part word may still be a package or
    # a variable (`kafka.streams`, `this.context`): whether a question's one names a key is for retrieval
    # to look up in the corpus (`is_plain_two_part`).
    return len(parts) >= 3 or all(len(part) > 1 for part in parts)


def is_plain_two_part(identifier: str) -> bool:
    """`buffer.memory`, `kafka.streams`: two dotted words, which only the corpus can tell a key or not."""
    parts = identifier.split(".")
    return len(parts) == 2 and not any("-" in part or "_" in part for part in parts)


_ROW_HEAD = re.compile(r"^[^|\n]{1,80} \| (?:[^|\n]{1,16} \|)?", re.M)


def defined_identifiers(section_path: Sequence[str], text: str) -> frozenset[str]:
    """Identifiers a chunk defines rather than mentions: in its heading path, or leading a table row
    (`INVALID_RECORD_STATE | 121 |` defines the error and its code)."""
    defined = set(extract_identifiers(" ".join(section_path)))
    for match in _ROW_HEAD.finditer(text):
        defined.update(extract_identifiers(match.group(0)))
    return frozenset(defined)


# A JMX object name, `kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`, with any keys after the
# name (`…,name=MaxLag,clientId=Replica`): the metric is its `name=`, owned by what comes before it.
_MBEAN = re.compile(r"(?<![\w.-])([a-z][\w.-]*:(?:[\w-]+=[^,\s]+,)*)name=([A-Za-z][\w-]*)(?:,[\w-]+=[^,\s]+)*")


@dataclass(frozen=True)
class MBean:
    """A metric's JMX name, lower-cased: `owner` is its domain and the keys before `name`
    (`kafka.server:type=replicafetchermanager,`), `name` the metric (`maxlag`). Two products may name a metric
    alike under different owners."""

    owner: str
    name: str


def mbeans_written(text: str) -> frozenset[MBean]:
    """Every MBean that `text` writes out."""
    return frozenset(MBean(m.group(1).lower(), m.group(2).lower()) for m in _MBEAN.finditer(text))


def metric_entries(text: str) -> frozenset[MBean]:
    """The MBeans whose entries `text`'s table rows are: a row with an MBean as one of its cells defines that
    metric, as a row leading with an error defines the error (`defined_identifiers`). The Kafka docs' metrics
    tables lead with a description ("# of under replicated partitions") and name the metric in the MBean cell."""
    return frozenset(
        MBean(match.group(1).lower(), match.group(2).lower())
        for line in text.split("\n")
        if " | " in line
        for cell in line.split(" | ")
        if (match := _MBEAN.fullmatch(cell.strip()))
    )


# A command-line option as the corpus's commands spell it: `--group billing`, `--topic=orders`.
_COMMAND_FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?![\w-])")


def command_flags(text: str) -> frozenset[str]:
    """The option names `text` uses on command lines, without their dashes (`group` for `--group`)."""
    return frozenset(_COMMAND_FLAG.findall(text))
