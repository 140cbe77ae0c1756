"""Turning what a user typed into a query value, once: log reduction, follow-up rewriting, and where
each identifier sits.

Pasted logs and stack traces are mostly noise for retrieval (timestamps, thread names, hosts, stack
frames, hex ids); `reduce_to_signal` keeps the exception classes and messages, the `Caused by`
chain, config keys and error codes, plus any prose the user wrote around the paste. A follow-up
("and what's its default?") is rewritten deterministically into a standalone query by carrying the
subject of the earlier user turns; the LLM's rewrite replaces this when the LLM answerer is on.

`parse_query` classifies every line of the paste (prose, error line, command line, stack frame), so
an identifier the question is *about* (the exception in the error line, the key the user asks about)
is told apart from one that only sits in context (a tool in the command that raised it, a class in a
stack frame). Retrieval, ranking, answering and abstention all read this one value.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from rag.casing import corpus_cased
from rag.identifiers import error_names, extract_identifiers, phrase_names, run_together_names
from rag.lexical import MIN_SWAPPED_CHARS, slips, tokenize

MAX_SIGNAL_CHARS = 1200
# Content words of the last user turn a follow-up is searched with (`Settings.followup_context_words`); chosen by
# `evals/tune_followup_context.py --half-indexes ...` (evals/reports/tune_followup_context.md).
CONTEXT_WORDS = 8
INHERITED_WORDS = 3  # words a follow-up of a follow-up takes from what the one before leaned on
LEANED_ON_TURNS = 4  # ... read from the turns (two exchanges) before that one
MAX_PHRASES = 4000  # word runs looked up as error or CamelCase names, per question: a 200 KB paste stays cheap
MAX_LINE_CHARS = 500  # regexes see at most this much of one line: a 200 KB single-line paste stays linear
# A question whose prose has at least this share of its words capitalised is typed in capitals or as a title
# (`decased`); the tuning parts' questions reach 0.67 at most (`evals/tune_casing.py`, its report).
CAPITALISED_THROUGHOUT = 0.83
MIN_PROSE_WORDS = 2  # plain words of prose needed to tell how it is typed (`prose_capitalisation`)

_TIMESTAMP = re.compile(
    r"\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b"
)
_LEVEL = re.compile(r"\b(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\b")
_THREAD = re.compile(r"\[[^\]\n]{0,120}\]|\((?:[\w.-]*thread[\w.-]*|main)\)", re.I)
_HOST = re.compile(
    r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b|\b[\w-]+(?:\.[\w-]+)+:\d{2,5}\b|\b[\w-]+(?:\.[\w-]+){2,}/"
    r"|\b[\w-]+(?:\.[\w-]+)*\.(?:com|net|org|io|local|internal|cloud|corp|lan)\b(?!\.)"
)
_HEX = re.compile(r"\b(?:0x)?[0-9a-f]{12,}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_FRAME = re.compile(r"^\s*(?:at\s+[\w$.<>/]+\(.*\)|\.\.\.\s*\d+\s+more|~?\[[^\]]*\.jar[^\]]*\])\s*$")
# An exception class (not the bare word "Error" of a log message) and its message.
_EXCEPTION_LINE = re.compile(r"(?:Caused by:\s*)?(?:[\w$]+\.)*[\w$]*[A-Za-z](?:Exception|Error)\b(?::\s*.*)?")
# A log level where a log line writes it: first on the line, after its timestamp, thread or bracket, or before a
# bracket, colon or dash. Not a level named in the user's sentence ("set the log level to WARN only for …").
_LEVEL_IN_LOG = r"""(?:^\s*[\["'`]?|[\])|]\s*|\d\s+)(?:ERROR|WARN|INFO)\b|\b(?:ERROR|WARN|INFO)\b(?=\s*[\[:]|\s+-\s)"""
_LOG_SHAPE = re.compile(
    rf"^\s*at\s+[\w$.]+\(|Caused by:|{_LEVEL_IN_LOG}|\d{{4}}-\d{{2}}-\d{{2}}[T ]\d{{2}}:\d{{2}}", re.M
)

# A log level that opens a pasted line ("ERROR Could not …", "[WARN] …"), or the label the JVM and many tools print
# before a message ("Error: Could not find or load main class …"): the line's template, not its subject. Kept, it
# matched the protocol error table's heading ("Error Codes") better than anything the message says.
_OPENING_LEVEL = re.compile(rf"^\s*(?:[\[\"'`]?{_LEVEL.pattern}\]?:?|(?:Error|Warning):)[ \t]+", re.M)

_SIGNAL_LINE = re.compile(r"\b(?:ERROR|FATAL|WARN|WARNING|Caused by)\b|[\w$]+(?:Exception|Error)\b")

_ANAPHORA = re.compile(
    r"\b(it|its|it's|that|this|these|those|they|them|their|there|same|such|one|he|his|him|she|her|hers)\b", re.I
)
_POSSESSIVE = re.compile(r"\b(?:its|their)\b", re.I)  # "and what's its default?": a property of the earlier subject
_FOLLOWUP_START = re.compile(r"^\s*(and|also|what about|how about|so|then|but|ok|okay)\b", re.I)
# Words that relate the question to what came before without pointing at it: "… instead of everything?",
# "what else …?", "how do I do the manual commit safely then?", "… for consumers too?".
_CONTINUES = re.compile(r"\b(?:instead|else|otherwise|anymore)\b|\b(?:then|too|either|as well)\W*$", re.I)


# Where an identifier sits in what the user typed; the first two are what the question is about. A follow-up's
# identifiers carried from the earlier turns sit in the `conversation`: context, like a command line's.
FOCUS_PLACES = ("question", "error")
CONTEXT_PLACES = ("command", "frame")

_COMMAND_LINE = re.compile(
    r"^\s*(?:[$>#%]\s+|(?:\./|bin/|/\S+/)?[\w.-]+\.(?:sh|bat|cmd)\b|(?:sudo\s+)?(?:curl|docker|kubectl|java)\s)"
)
_FLAGS = re.compile(r"(?:^|\s)--?[a-z][\w-]*")
_PROGRAM_BEFORE = re.compile(r"(?:[\w.-]+\.(?:sh|bat|cmd)|\b[a-z]+(?:-[a-z]+)+)\s*$")  # `kafka-topics.sh`, `kafka-acls`
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_PROSE_AROUND = re.compile(r"\b[A-Za-z]{2,}\b(?:\W+\b[A-Za-z]{2,}\b){3}")  # four words in a row
# The value a command line gives a flag: `--group billing`, `--topic=invoices`.
_FLAG_VALUE = re.compile(r"(?:^|\s)--?[a-z][\w-]*(?:=|\s+)(?!-)([^\s'\"]+)")
# A name the user quotes in their own words, one word in '…' or "…": their topic, group or host
# ("Topic 'some_topic' shows up as 'cluster1.some_topic'"), not a word the corpus should know.
_QUOTED_NAME = re.compile(r"(?<![\w'\"])['\"]([^'\"\s]{2,80})['\"](?![\w'\"])")
# A name the user gives after saying it is one, shaped like a name (a dot, hyphen, underscore or digit in it):
# "topics named primary.orders", "a group called billing-v2"; not "named after".
_NAME_WORD = r"[A-Za-z0-9][\w.-]{0,79}[A-Za-z0-9]"  # a topic, group or host name: `orders`, `billing-v2`
_NAMED = re.compile(rf"\b(?:named|called)\s+[`'\"]?({_NAME_WORD})", re.I)
_NAME_SHAPE = re.compile(r"[._\-0-9]")
# A word and the name after it, quoted or not: "lag on group fraud-scorer", "topic `customer-state`".
_WORD_THEN_NAME = re.compile(rf"\b([A-Za-z]+)(?=\s+[`'\"]?({_NAME_WORD}))")
MAX_NAMED_AFTER = 200  # word pairs kept per question
# A setting line of the user's pasted configuration and what it is set to: `clusters = DC1, DC2`, `group.id: billing`.
_SETTING_LINE = re.compile(r"^\s*[\w.-]{1,200}\s*(?:=|:(?=\s))\s*(\S.*)$")
# A value that names something of theirs: one word, no dots (a class name or a host is no alias), not a number.
_VALUE_NAME = re.compile(r"^[A-Za-z][\w-]{1,79}$")
_VALUE_SEPARATORS = re.compile(r"[\s,]+")
# A message the user quotes or pastes: several words in "…", '…' or `…`, or what follows a colon on an
# error line ("…Exception: The coordinator is not aware of this member.", "Offset commit failed on partition
# p-0: The coordinator is loading and hence can't process requests.").
_QUOTED_MESSAGE = re.compile(r"\"([^\"\n]{12,300})\"|`([^`\n]{12,300})`|(?<!\w)'([^'\n]{12,300})'(?!\w)")
_MESSAGE_AFTER = re.compile(r":\s+(?=\S)")
MAX_MESSAGE_CHARS = 300
MAX_MESSAGES = 8  # a paste's first messages: its error and what caused it, not every line of a long log
MAX_ERROR_LINES = 8  # of a paste, read with the asking sentences (`Query.asking_tokens`)
MIN_MESSAGE_WORDS = 4  # "Not authorized" or a quoted key is no message
_ERROR_MARK = re.compile(r"\b(?:ERROR|FATAL|WARN|WARNING|Caused by)\b|[\w$]+(?:Exception|Error)\b")
# An error's name as the protocol spells it (`NOT_ENOUGH_REPLICAS`), or any other word so spelt: a security
# protocol (`SASL_SSL`), an environment variable (`KAFKA_CFG_MAX_CONNECTIONS_PER_IP`), an enum constant.
_UPPER_SNAKE = re.compile(r"\b[A-Z][A-Z0-9]+(?:_[A-Z0-9]+)+\b")
_ERROR_CALL = re.compile(rf"{_ERROR_MARK.pattern}|{_UPPER_SNAKE.pattern}")
# A word that marks a line a tool printed into the user's code block as an error: "Error: Assignments can only be
# reset if the group … is inactive", "Error completing leader election (PREFERRED) for partition …".
_ERROR_WORD = re.compile(r"\b(?:error|exception|fatal|failed)\b|[a-z](?:Exception|Error)\b", re.I)
# The last sentence of a line, when it asks: "… failed: INVALID_RECORD_STATE. what did my consumer do wrong?"
_ASKING_TAIL = re.compile(r"(?:(?<=[.!])|\s--)\s+(?P<ask>(?:[^.!?\n]|\.(?=\S))+\?)\s*$")
_PROMPT = re.compile(r"^\s*[$>#%]\s")  # a shell's prompt: what follows it is pasted as run
_TOKEN = re.compile(r"\S+")
_OPTION = re.compile(r"--?[A-Za-z]")
_PLAIN_WORD = re.compile(r"[a-z]+")
# Four words of letters in a row, the first in lower case: prose, which no command line holds.
_OWN_WORDS = re.compile(r"(?<![-\w./=:@$`'\"])[a-z]+(?:[ \t]+[A-Za-z]+){3}\b(?![-./=:@_\w])")
# A printed error rather than a sentence about one: "SomeException: message", "ERROR_NAME: …", "Error: …",
# and an error object as a client prints it: `KafkaError{code=INVALID_REQUIRED_ACKS,val=21,…}` (librdkafka's).
_ERROR_MESSAGE = re.compile(r"^\s*(?:[\w$]+\.)*(?:[\w$]*(?:Exception|Error)|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\b\s*[:({]")
# Where a printed error may start inside a line: its exception class, qualified or not, or its error name.
_PRINTED_ERROR = re.compile(r"(?<![\w$.])(?:[\w$]+\.)*[\w$]*(?:Exception|Error)\b|\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
# A request for a fix or a reported fault. "keep" reports one only as "keeps failing" / "keep on growing":
# "how long does Kafka keep a tombstone" asks for a fact; "handle" only as what the user is to do ("how do I
# handle …", "the best way to handle …"): "how many partitions can a broker handle?" asks for a fact.
_FIX_REQUEST = re.compile(
    r"\b(?:fix|resolve|solve|avoid|prevent|stop|get rid|workaround|recover|(?:to|i|we|you) handle|deal with|why|wrong|"
    r"broken|stuck|keeps?(?: on)? \w+ing|cannot|can't|unable|won't|doesn't|not working)\b",
    re.I,
)
# A failure the user reports ("the task failed", "producer failing with …"). A question that asks how to do
# something reports none by naming what failed ("how to restart failed tasks automatically"), nor does any
# question by "a failed …" / "the failed …".
_FAILURE = re.compile(r"\b(?<!\ba )(?<!\bthe )fail\w*", re.I)
_HOW_TO = re.compile(
    r"\bhow (?:do|can|could|should|would|shall) (?:i|we|you|one)\b|\bhow to\b"
    r"|\bis there (?:a|an|any) (?:way|command|tool|script|option|setting|config\w*)\b"
    r"|\bwhat(?:'?s| is) the (?:command|way)\b",
    re.I,
)
_CHECK_REQUEST = re.compile(r"\b(?:check|diagnose|debug|monitor|tell whether|find out|inspect|verify)\b", re.I)
# A sentence of the user's own that asks for something to be made rather than for what the passages say:
# "write me a Go consumer …", "Translate this into Japanese …", "can you summarize this for …", "give me a
# Python script that …", "tell me a joke", "translate the … into German". ("Give me an example of …" asks for what
# the docs show.)
_POLITE_OPENING = r"(?:(?:can|could|would|will) you\s+|please\s+)?"
_MAKING_VERBS = ("write", "generate", "translate", "summarize", "summarise", "draft", "compose")
_TASK_REQUEST = re.compile(
    rf"^{_POLITE_OPENING}(?:"
    rf"(?:{'|'.join(_MAKING_VERBS)})\s+(?:me|us|this|that|these|it|a|an)\b"
    r"|translate\s+(?:the|my|our|your)\b"  # a translation is a task whatever it takes ("summarize the …" may not be)
    r"|(?:give|tell|make)\s+(?:me|us)\s+(?:a|an|the|some)\s+(?:[\w-]+\s+){0,3}?"
    r"(?:script|program|snippet|code|joke|poem|story|song)s?\b)",
    re.I,
)
_SENTENCE_START = re.compile(r"(?:^|(?<=[.!?:])\s+|\n+)\s*")
# A greeting or aside of a few words before what a sentence says ("hi team, write me …", "quick one - in
# confluent-kafka-python, …"): what follows it starts the sentence too.
_FEW_WORDS = r"[A-Za-z]+(?:\s+[A-Za-z]+){0,2}"  # one to three words: a greeting, an aside or a label
_LEAD_IN = re.compile(rf"{_FEW_WORDS}\s*(?:,|!|\s[-–—])\s+")


@dataclass(frozen=True)
class QueryIdentifier:
    name: str  # as `extract_identifiers` spells it (lower-cased, `code:121`)
    place: str  # question | error | command | frame | conversation

    @property
    def focus(self) -> bool:
        return self.place in FOCUS_PLACES


@dataclass(frozen=True)
class Query:
    """A question parsed once; every later stage reads this and never re-parses the question."""

    question: str  # what the user typed
    text: str  # the retrieval text: reduced to its signal, follow-ups made standalone, command lines dropped
    tokens: tuple[str, ...]  # `tokenize(text)`
    identifiers: tuple[QueryIdentifier, ...]  # of the question and, for a follow-up, of the subject carried over
    trimmed: bool
    # task (asks for something written or translated) | troubleshoot (reports an error or asks for a fix) |
    # check | fact
    intent: str
    names: tuple[str, ...] = ()  # name-like words of the user's own question (products, APIs, features)
    # The error names the question's exception classes stand for, where each sits; retrieval adds to
    # `identifiers` the ones its corpus carries.
    error_names: tuple[QueryIdentifier, ...] = ()
    # Runs of words spelt as error names (`phrase_names`), of the error lines and the messages the user quotes
    # (placed as an error line) and of the user's own lines ("Received unknown topic or partition error in
    # fetch", "why is the leader not available?"): retrieval adds those its corpus carries as an error's name,
    # whole ("Broker: Unknown topic or partition" is `UNKNOWN_TOPIC_OR_PARTITION`).
    error_phrases: tuple[QueryIdentifier, ...] = ()
    # Runs of words of the user's own lines written as one word (`run_together_names`): retrieval adds to the
    # question's names those its corpus writes as one CamelCase name ("which metric shows under replicated
    # partitions?" is about `UnderReplicatedPartitions`).
    run_together: tuple[str, ...] = ()
    opening_names: tuple[str, ...] = ()  # capitalised first words of its sentences: names only if the corpus lacks them
    # Words the user's pasted command lines give as flag values, and one-word names they quote in their own
    # words (their group, topic, host): their own resources, never a sign that the corpus lacks the topic.
    own_terms: frozenset[str] = frozenset()
    # The messages the user quotes or pastes, as `message_words` spells them: a reference row that says
    # the same words ("The coordinator is not aware of this member.") is the one they ask about.
    messages: tuple[str, ...] = ()
    # Each word of the user's own lines with the name after it ("group fraud-scorer"): retrieval counts the
    # name among `own_terms` when the corpus's commands take the word as an option (`--group`).
    named_after: tuple[tuple[str, str], ...] = ()
    # The separate questions of a question that asks several ("Which setting is this, and is there a metric
    # that shows it?"), each with words enough to be searched alone; empty when it asks one thing, and for a
    # follow-up, whose asks lean on the conversation.
    asks: tuple[str, ...] = ()
    # The identifiers the asking sentences name, not as a setting the user gives a value (`asked_identifiers`).
    asked: frozenset[str] = frozenset()
    # The name-like words of the asking sentences (`asked_names`), but those the user calls theirs ("our Datadog
    # feed"): a product the corpus never mentions there ("Can I set X in a custom MSK configuration?") is what the
    # user asks about.
    asked_names: tuple[str, ...] = ()
    # The names of two or more words the asking sentences use ("Event Hubs", "Topic Operator", `asked_phrases`):
    # a product whose every word the corpus knows may still be one it never mentions.
    asked_phrases: tuple[tuple[str, ...], ...] = ()
    # The words of the label the question opens with, as an issue title names its subject ("KafkaJS 2.2:
    # …", "In Go with sarama, …"): retrieval counts those the corpus never uses, which says the subject is not in it.
    label: tuple[str, ...] = ()
    # The words of a bracketed tag the question opens with ("[prod] …"): a ticket's tag is as often where or how
    # urgent ("prod", "urgent", "staging") as what about, so only its words no vocabulary holds (a product's name:
    # "[Strimzi]") tell a subject.
    tag: tuple[str, ...] = ()
    # The words of the thing a question asks to have defined, when that is all it asks ("what is the ISR?",
    # "what are quotas?", "what does log compaction mean?"; `defined_thing`): the passage sentence that says what
    # it is answers it.
    defined: tuple[str, ...] = ()
    # The words of each of two things a question compares ("KStream vs KTable?", `compared_things`): the sentence
    # that says what each is answers it, the first thing's leading; `defined` is the first thing.
    compared: tuple[tuple[str, ...], ...] = ()
    # The identifiers the user's own lines give a value (`retention.ms=3600000`, `"tasks.max": "4"`).
    valued: frozenset[str] = frozenset()
    # The user's own lines ask how to do something ("how do I …", "how to …", "is there a command that …"):
    # what to do answers it, more than what the thing is.
    how_to: bool = False
    # For a follow-up, the words of the conversation's last answer as `told_words` spells them, spaced at both
    # ends: what the user has just been told (a follow-up asks for something new).
    told: str = ""
    # The tokens of the asking sentences, when the user's own words hold others too (what they have, what
    # they saw): a name only those others give is context, not what is asked. Empty for a follow-up and a
    # question that is all asking.
    asking_tokens: tuple[str, ...] = ()
    # Each name of the user's that retrieval read as the corpus's (a misspelt key), with that name.
    read_as: tuple[tuple[str, str], ...] = ()
    # Asked in a conversation and searched with its subject (`is_followup`, or `parse_query`'s `leaning`).
    followup: bool = False
    # Asked in a conversation, it asks what a thing is that no earlier turn named (`switches_subject`): a new
    # subject, searched alone however well the conversation's passages score.
    new_subject: bool = False
    # The tokens of the user's asking sentences that nothing they pasted holds (`_asking_words`): what they ask
    # about in their own words. Empty for a follow-up and for a bare paste.
    asking_words: tuple[str, ...] = ()
    # The fields a pasted output labels (`producerId: 9003`, `"state": "RUNNING"`) that the user's own sentences do
    # not name, as tokens: what the tool printed around what the user asks about, context as a command line is.
    pasted_fields: frozenset[str] = frozenset()

    @property
    def focus_identifiers(self) -> frozenset[str]:
        return frozenset(i.name for i in self.identifiers if i.focus)

    @property
    def embedded_text(self) -> str:
        """What the embedding model reads: `text`, closed by the "?" a chat message typed without one leaves off
        (`with_question_mark`). The model's vector moves with the mark: unpunctuated, "what does
        ProducerFencedException actually mean for a transactional producer" lost both key facts."""
        return with_question_mark(self.text)

    @property
    def context_identifiers(self) -> frozenset[str]:
        return frozenset(i.name for i in self.identifiers if not i.focus) - self.focus_identifiers

    @property
    def setup_identifiers(self) -> frozenset[str]:
        """What the user says they have, not what they ask: the settings they give a value that no asking
        sentence names ("We run with processing.guarantee=exactly_once_v2. How often does Streams commit?")."""
        return self.valued - self.asked


def line_place(line: str) -> str:
    """Where a line of a paste sits: a stack frame, a command line, an error/log line, or the user's prose."""
    if _FRAME.match(line):
        return "frame"
    head = line[:MAX_LINE_CHARS]
    # A sentence that quotes a command in backticks ("Is it `kafka-get-offsets.sh --topic x --time -1`?")
    # asks about that command: only its words outside the quotes decide whether it is a command line.
    words = _INLINE_CODE.sub(" ", head) if _PROSE_AROUND.search(_INLINE_CODE.sub(" ", head)) else head
    flags = list(_FLAGS.finditer(words))
    # Flags after a sentence's opening words name options in it ("Command must include exactly one action:
    # --generate, --execute, …", "it errors out, complaining that --delete-config can't be combined with …"),
    # unless a program comes right before them: the sentence runs a command ("… but kafka-topics.sh --create
    # and kafka-acls --add hung").
    before = words[: flags[0].start()] if flags else ""
    # So does a sentence that names options amid words of its own ("I put --throttle on verify thinking that
    # keeps the limit in place … where does --throttle belong?"); a tool's help text opens with its option.
    opens_as_prose = not _PROGRAM_BEFORE.search(before) and (
        bool(_PROSE_AROUND.search(before)) or (bool(before.strip()) and bool(_OWN_WORDS.search(words)))
    )
    if _COMMAND_LINE.match(head) or (len(flags) >= 2 and not _ERROR_CALL.search(head) and not opens_as_prose):
        return "command"
    if _is_log_line(head) and not quotes_log(head):
        return "error"
    return "question"  # the user's own words, even when they name an error


def _is_log_line(text: str) -> bool:
    return bool(_LOG_SHAPE.search(text) or _ERROR_MESSAGE.match(text))


def quotes_log(line: str) -> bool:
    """The user's own sentence quoting a log line ("kcat keeps printing "% ERROR: Local: Broker transport
    failure", what flag fixes it?"): the log's marks sit only inside the quotes, and the words around them are
    prose. It reports a fault as a pasted log line does, and asks as the user's sentences do."""
    unquoted = _QUOTED_MESSAGE.sub(" ", _INLINE_CODE.sub(" ", line[:MAX_LINE_CHARS]))
    return _is_log_line(line[:MAX_LINE_CHARS]) and not _is_log_line(unquoted) and bool(_PROSE_AROUND.search(unquoted))


def parse_query(
    question: str,
    history: Sequence[Mapping[str, str]] = (),
    max_chars: int = MAX_SIGNAL_CHARS,
    rewrite: Callable[[str, Sequence[Mapping[str, str]]], str | None] | None = None,
    leaning: bool = False,
    context_words: int = CONTEXT_WORDS,
    spelling: Callable[[str], str | None] | None = None,
    error_name: Callable[[str], bool] | None = None,
) -> Query:
    """The query value for `question`: the one place a question is reduced, rewritten and classified.
    `rewrite` restates a follow-up whole (the LLM's); when it returns None, the follow-up is rewritten here.
    With `leaning`, a question asked in a conversation is read as a follow-up whatever its words. With
    `spelling`, the corpus's spelling of a word (`Retriever.corpus_spelling`), the names typed in lower case are
    read in the corpus's case (`corpus_cased`). With `error_name`, whether the corpus names an error so (a
    lower-cased name: `Retriever.names_an_error`), a word spelt like an error's name reports one only when it
    is one."""
    text = users_words(question)
    if spelling is not None:
        text = corpus_cased(text, spelling)
    label = opening_label(text)
    # A bracketed tag ("[prod] …", "[EKS] …") labels the question as a ticket's does: its words are the tag's
    # alone (`Query.tag`), neither searched nor read as the question's own words. The question under it may
    # open with a label of its own ("[prod] ksqlDB: …").
    tag = _BRACKET_TAG.match(text) if label else None
    tag_words: tuple[str, ...] = ()
    if tag and text[tag.end() :].strip():
        text = text[tag.end() :]
        tag_words, label = label, opening_label(text)
    places: dict[str, str] = {}
    error_places: dict[str, str] = {}
    prose_lines: list[str] = []  # the user's words and error lines: what the question is about
    own_words: list[str] = []
    own_terms: set[str] = set()
    valued: set[str] = set()
    named_after: list[tuple[str, str]] = []
    messages: list[str] = []
    phrases: dict[str, str] = {}
    context_lines = 0
    pasted_error = False  # a line placed as an error or log line: the user reports a fault
    error_lines: list[str] = []
    placed: list[tuple[str, str]] = []
    for line, fenced in _lines_and_fences(text):
        place = line_place(line)
        if fenced and place == "question" and _ERROR_WORD.search(line[:MAX_LINE_CHARS]):
            place = "error"  # what a tool printed into the user's code block: "Error: Assignments can only …"
        placed.append((line[:MAX_LINE_CHARS], place))
        pasted_error = pasted_error or place == "error" or (place == "question" and quotes_log(line))
        if place == "error" and len(error_lines) < MAX_ERROR_LINES:
            error_lines.append(line[:MAX_LINE_CHARS])
        if place in CONTEXT_PLACES:
            context_lines += 1
        else:
            prose_lines.append(line)
        if len(messages) < MAX_MESSAGES:
            messages.extend(_messages(line[:MAX_LINE_CHARS], place))
        if fenced and place == "question" and (setting := _SETTING_LINE.match(line[:MAX_LINE_CHARS])):
            # What the user's own configuration sets is theirs: "clusters = DC1, DC2" names their clusters.
            values = _VALUE_SEPARATORS.split(setting.group(1))
            own_terms.update(t for value in values if _VALUE_NAME.match(value) for t in tokenize(value))
        if place == "question":
            own_words.append(line)
            own_terms.update(t for value in _QUOTED_NAME.findall(line[:MAX_LINE_CHARS]) for t in tokenize(value))
            valued.update(i for key in _GIVEN_VALUE.findall(line[:MAX_LINE_CHARS]) for i in extract_identifiers(key))
            own_terms.update(
                t
                for value in _NAMED.findall(line[:MAX_LINE_CHARS])
                if _NAME_SHAPE.search(value)
                for t in tokenize(value)
            )
            if len(named_after) < MAX_NAMED_AFTER:
                pairs = ((word.lower(), name) for word, name in _WORD_THEN_NAME.findall(line[:MAX_LINE_CHARS]))
                named_after.extend(itertools.islice(pairs, MAX_NAMED_AFTER - len(named_after)))
        elif place == "command":
            own_terms.update(t for value in _FLAG_VALUE.findall(line[:MAX_LINE_CHARS]) for t in tokenize(value))
        for name in extract_identifiers(line[:MAX_LINE_CHARS]):
            # An identifier the user names in prose or an error line is what the question is about,
            # even when the command line repeats it.
            if name not in places or (place in FOCUS_PLACES and places[name] not in FOCUS_PLACES):
                places[name] = place
        for name in error_names(line[:MAX_LINE_CHARS]):
            if name not in error_places or (place in FOCUS_PLACES and error_places[name] not in FOCUS_PLACES):
                error_places[name] = place
        # An error line's words, or a message the user quotes: "Broker: Leader not available" names an error.
        worded = [line] if place == "error" else _quoted(line[:MAX_LINE_CHARS]) if place == "question" else []
        for part in worded if len(phrases) < MAX_PHRASES else ():
            for name in phrase_names(part[:MAX_LINE_CHARS], MAX_PHRASES - len(phrases)):
                phrases[name] = "error"  # also when the user's words named it on an earlier line
        for name in phrase_names(line[:MAX_LINE_CHARS], MAX_PHRASES - len(phrases)) if place == "question" else ():
            phrases.setdefault(name, "question")  # the user names the error in their words: what they ask about
    # A question that is one statement quoting no message is itself a message pasted bare, as a client printed
    # it ("The coordinator is not available.").
    if not messages and not context_lines and len(prose_lines) == 1 and "?" not in prose_lines[0]:
        bare = message_words(prose_lines[0][:MAX_MESSAGE_CHARS])
        if len(bare.split()) >= MIN_MESSAGE_WORDS:
            messages.append(bare)
    # A command line or stack frame is context for the error it raised: searched only when nothing else is there.
    searched = "\n".join(prose_lines) if prose_lines and context_lines else text
    if _misused_command(placed):
        # What the tool printed names one of its options: the command is what went wrong, its tool and the
        # settings it passes are what the question is about ("zookeeper is not a recognized option").
        command_names = [name for name, place in places.items() if place == "command"]
        places.update(dict.fromkeys(command_names, "error"))
        if searched != text:
            searched = "\n".join([searched, *command_names])
    reduced = reduce_to_signal(searched, max_chars)
    retrieval_text = reduced.text
    if history:
        restated = rewrite(retrieval_text, history) if rewrite is not None else None
        # `rewrite_followup` appends the earlier turns' subject as context: the follow-up may ask about another
        # thing ("and without exactly-once?"). It is what the follow-up is about when the follow-up asks for
        # something of it ("and what's its default?"), and in a given rewrite (the LLM's), which restates the
        # question whole.
        carried = "question" if restated is not None or _POSSESSIVE.search(question) else "conversation"
        retrieval_text = (
            restated if restated is not None else rewrite_followup(retrieval_text, history, leaning, context_words)
        )
        for name in extract_identifiers(retrieval_text):
            places.setdefault(name, carried)
    identifiers = tuple(QueryIdentifier(name, place) for name, place in places.items())
    # The tag's names are names the question uses ("[Redpanda Console] …"), as a colon label's are; its opening
    # bracket keeps its first word from reading as a sentence's capitalised first word.
    tagged = [tag.group(0).rstrip()[:-1]] if tag else []
    names, openers = _names("\n".join([*tagged, *own_words]))
    # A follow-up's asks and what it asks to have defined lean on the conversation: none are read from it alone.
    followup = bool(history) and (leaning or is_followup(question, history))
    how_to = any(_HOW_TO.search(line[:MAX_LINE_CHARS]) for line in own_words)
    compared = () if followup else compared_things(text)
    return Query(
        question=question,
        text=retrieval_text,
        tokens=tuple(tokenize(retrieval_text)),
        identifiers=identifiers,
        trimmed=reduced.trimmed or bool(context_lines and prose_lines),
        intent=_intent(text, identifiers, own_words, pasted_error, how_to, error_name),
        names=tuple(dict.fromkeys(names)),
        opening_names=tuple(dict.fromkeys(openers)),
        error_names=tuple(QueryIdentifier(n, p) for n, p in error_places.items() if n not in places),
        error_phrases=tuple(QueryIdentifier(n, p) for n, p in phrases.items() if n not in places),
        run_together=tuple(
            itertools.islice(
                dict.fromkeys(n for line in own_words for n in run_together_names(line[:MAX_LINE_CHARS], MAX_PHRASES)),
                MAX_PHRASES,
            )
        ),
        own_terms=frozenset(own_terms),
        messages=tuple(dict.fromkeys(messages))[:MAX_MESSAGES],
        named_after=tuple(dict.fromkeys(named_after)),
        asks=() if followup else question_asks(text),
        asked=asked_identifiers(text),
        asked_names=asked_names(text),
        asked_phrases=asked_phrases(text),
        valued=frozenset(valued),
        label=label,
        tag=tag_words,
        defined=() if followup else next(iter(compared), ()) or defined_thing(text),
        compared=compared,
        how_to=how_to,
        told=_last_answer_words(history) if followup else "",
        asking_tokens=() if followup else _asking_tokens(text, error_lines),
        followup=followup,
        asking_words=() if followup else _asking_words(text),
        pasted_fields=pasted_fields(text),
        new_subject=switches_subject(text, history),
    )


def told_words(text: str) -> str:
    """`text`'s words, lower-cased and single-spaced: a sentence reads the same whatever markup an answer gave it
    (backticks, a `·`-separated line of labels, citation markers)."""
    return " ".join(_WORDS.findall(text.lower()))


def _last_answer_words(history: Sequence[Mapping[str, str]]) -> str:
    answer = _last_answer(history)
    return f" {told_words(answer)} " if answer.strip() else ""


def _last_answer(history: Sequence[Mapping[str, str]]) -> str:
    return next((t.get("content", "") for t in reversed(history) if t.get("role") == "assistant"), "")


_WORDS = re.compile(r"\w+")


# A question that only asks what something is: "what is the ISR?", "what's (whats) a tombstone?", "what exactly are
# quotas?", "what does log compaction mean?", "what does ISR stand for (in Kafka)?", "define preferred replica",
# "can you explain what a tombstone is?", "what is the meaning of ISR?".
# Before the ask: "so", "ok", or a greeting or label of a few words ("hey,", "quick one:", "Hi all -").
_DISCOURSE_WORD = r"(?:so|and|ok|okay)\b"
_ASK_LEAD_IN = rf"(?:{_DISCOURSE_WORD}[,\s]*|{_FEW_WORDS}\s*(?:[,:!]|\s[-–—])\s*)?"
_DEFINITION_ASK = re.compile(
    rf"^\s*{_ASK_LEAD_IN}(?:what(?:'?s|(?:\s+exactly)?\s+(?:is|are))|define|explain|what\s+is\s+meant\s+by)\s+"
    r"(?P<thing>[\w\s-]{2,60}?)\s*[?.!]*\s*$"
    rf"|^\s*{_ASK_LEAD_IN}what\s+(?:does|do)\s+(?P<meant>[\w\s-]{{2,60}}?)\s+(?:mean|stand\s+for)(?:\s+in\s+[\w-]+(?:\s+[\w-]+)?)?\s*[?.!]*\s*$"
    rf"|^\s*{_ASK_LEAD_IN}(?:(?:can|could)\s+(?:you|someone)\s+|please\s+)?(?:explain|tell\s+me)\s+what\s+"
    r"(?P<told>[\w\s-]{2,60}?)\s+(?:is|are)\s*[?.!]*\s*$",
    re.I,
)
# "interactive queries - what are they?", "KTable: what's that?": the label is the thing asked about.
_LABELLED_DEFINITION = re.compile(
    rf"^\s*(?!{_DISCOURSE_WORD})(?P<label>[\w\s-]{{2,60}}?)\s*(?:[,:]|\s[-–—])\s*"
    r"what(?:'?s|\s+is|\s+are)\s+(?:it|that|this|they|these|those)\s*[?.!]*\s*$",
    re.I,
)
# "the meaning of ISR" is the ISR; "a partition exactly" is a partition.
_MEANING_OF = re.compile(r"^(?:the\s+)?meaning\s+of\s+", re.I)
_EXACTLY = re.compile(r"\s+exactly$", re.I)
_LEADING_ARTICLE = re.compile(r"^(?:an?|the)\s+", re.I)
_POINTING_WORD = re.compile(r"\b(?:it|its|this|that|these|those|they|them|their)\b", re.I)
_QUESTION_WORD = re.compile(r"^(?:how|why|when|where|what|which|who|whether|if)\b", re.I)  # "explain how …"
MAX_DEFINED_WORDS = 4
# What a definition question says around the thing: its use ("what is log compaction for?", "… used for") and
# where it lives ("what is a standby replica in Streams?", "… in KRaft").
_ASKED_AROUND = re.compile(
    r"(?<=\w)\s+(?:(?:used|good|needed)\s+)?for$|(?<=\w)\s+in\s+(?:the\s+)?[\w-]+(?:\s+[\w-]+)?$", re.I
)

# A question that compares two things asks what each is: "KStream vs KTable?", "what's the difference between a
# broker and a controller?", "event time versus processing time, whats the difference?", "KStream and KTable -
# what's the difference?". What follows the second thing is the question's own ("… for a lookup table", "… in
# streams").
_COMPARISON = re.compile(
    rf"^\s*{_ASK_LEAD_IN}(?:(?:what(?:'?s|\s+is|\s+are)\s+)?(?:the\s+)?(?:\w+\s+)?differences?\s+between\s+"
    r"(?P<first>[\w\s-]{2,60}?)\s+and\s+(?P<second>[\w\s-]{2,80}?)"
    r"|(?P<one>[\w\s-]{2,60}?)\s+(?:vs\.?|versus|compared\s+(?:to|with))\s+(?P<other>[\w\s-]{2,80}?))"
    r"\s*(?:[?,;:.!]|\s[-–—]\s|$)"
    r"|^\s*(?P<either>[\w\s-]{2,60}?)\s+and\s+(?P<or>[\w\s-]{2,60}?)\s*(?:[,:]|\s[-–—])\s*"
    r"what(?:'?s|\s+is|\s+are)\s+the\s+(?:\w+\s+)?differences?\b",
    re.I,
)
_COMPARED_PAIRS = (("first", "second"), ("one", "other"), ("either", "or"))
_COMPARISON_TAIL = re.compile(r"\s+(?:for|in|when|if|on|with|to)\b.*$", re.I)


def defined_thing(text: str) -> tuple[str, ...]:
    """The words of what a one-line question asks to have defined (`_DEFINITION_ASK`; the label before "what is
    it?", `_LABELLED_DEFINITION`), its article and "the meaning of" left out; empty when it asks more ("explain how
    …"), names an identifier (whose reference entry answers it), points back ("what is it?") or runs past
    `MAX_DEFINED_WORDS` words (a question, not a name)."""
    match = _DEFINITION_ASK.match(text) if "\n" not in text.strip() else None
    if match is None:
        return ()
    labelled = _LABELLED_DEFINITION.match(text)
    asked = labelled.group("label") if labelled else _asked_thing(match)
    return _thing_words(_EXACTLY.sub("", _MEANING_OF.sub("", asked.strip())))


def compared_things(text: str) -> tuple[tuple[str, ...], ...]:
    """The words of each of two things a one-line question compares (`_COMPARISON`), as `defined_thing` reads a
    thing; one word before a thing of several shares its last words ("tumbling vs hopping windows" compares
    tumbling windows and hopping windows). Empty unless both read as things: not identifiers ("acks=1 vs acks=all"
    names the settings whose entries answer it), nor a question or more than `MAX_DEFINED_WORDS` words."""
    match = _COMPARISON.match(text) if "\n" not in text.strip() else None
    if match is None:
        return ()
    first, second = next((match[a], match[b]) for a, b in _COMPARED_PAIRS if match[a])
    sides = [_thing_words(first), _thing_words(_COMPARISON_TAIL.sub("", second))]
    if len(sides[0]) == 1 and len(sides[1]) > 1:
        sides[0] = (sides[0][0], *sides[1][1:])
    return tuple(sides) if all(sides) else ()


def _thing_words(asked: str) -> tuple[str, ...]:
    """The words of a thing asked about, its article and what is said around it left out (`_ASKED_AROUND`); empty
    when it is no name of a thing: longer than `MAX_DEFINED_WORDS`, pointing back, a question or an identifier."""
    thing = _ASKED_AROUND.sub("", _LEADING_ARTICLE.sub("", asked.strip()))
    words = tuple(thing.split())
    if (
        not words
        or len(words) > MAX_DEFINED_WORDS
        or _POINTING_WORD.search(thing)
        or _QUESTION_WORD.match(thing)
        or extract_identifiers(thing)
        or not tokenize(thing)
    ):
        return ()
    return words


def names_its_subject(text: str, max_terms: int) -> bool:
    """Whether the question says what it is about: it has more than `max_terms` search terms, names an
    identifier, or asks what a thing is ("what's a ktable?", "what is static membership?"). A fragment ("how
    often?", "any prerequisites?", "default value?") may not, nor may a question about "the" thing ("what's
    the default?": of what was just discussed)."""
    return len(tokenize(text)) > max_terms or bool(extract_identifiers(text)) or _asks_what_a_thing_is(text)


def _asks_what_a_thing_is(text: str) -> bool:
    """ "what's a ktable?", not "what's the default?" (of what was just discussed)."""
    match = _DEFINITION_ASK.match(text) if defined_thing(text) else None
    return match is not None and not _DEFINITE_ARTICLE.match(_MEANING_OF.sub("", _asked_thing(match)))


def _asked_thing(match: re.Match[str]) -> str:
    return match.group("thing") or match.group("meant") or match.group("told")


_DEFINITE_ARTICLE = re.compile(r"the\s", re.I)


# "Product 1.2: …", "[Product] …" or "In Product, …" (up to four words) on the question's first line; a pasted
# error's "Exception: …" is no label.
_LABEL = re.compile(
    r"^\s*(?:\[([^\]\n]{1,60})\](?:\s|$)|([A-Za-z][\w .()/+-]{0,60}?):(?:\s|$)"
    r"|(?:In|With|Using)\s+(?:the\s+)?([A-Za-z][\w.()/+-]{0,40}(?:\s[\w.()/+-]{1,40}){0,3}),\s)"
)
MAX_LABEL_WORDS = 6  # longer, it is a sentence ("when I restart the broker it says: …"), not a label
_BRACKET_TAG = re.compile(r"^\s*\[[^\]\n]{1,60}\]\s+")


def opening_label(text: str) -> tuple[str, ...]:
    """The words of the label the question opens with, when its first line is the user's own words; after a
    greeting of a few words too ("hi team, Spring Boot with spring-kafka: …", `_LEAD_IN`)."""
    first = text.lstrip().split("\n", 1)[0]
    lead_in = _LEAD_IN.match(first)
    match = _LABEL.match(first[:MAX_LINE_CHARS]) or (lead_in and _LABEL.match(first[lead_in.end() : MAX_LINE_CHARS]))
    if not match or line_place(first) != "question":
        return ()
    words = tuple(w for w in re.split(r"[\s/]+", next(g for g in match.groups() if g)) if w)
    return words if len(words) <= MAX_LABEL_WORDS else ()


# Where a question's sentence asks a further thing: a comma, "and", "or", "but" or ";" before a question word.
_ASK_OPENER = r"(?:what|which|how|where|when|why|who|is|are|does|do|did|can|could|should|will|would|was|were|has|have)"
_NEXT_ASK = re.compile(rf"(?:,\s*(?:and|or|but)\s+|,\s+|\s+(?:and|or|but)\s+|;\s*)(?={_ASK_OPENER}\b)", re.I)
_ASKS = re.compile(rf"(?:(?:and|or|but|so|also|then)\s+)?{_ASK_OPENER}\b", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# "what's its default" leans on the ask before it, and its answer sits beside that one's. Tuning parts: 2 gives
# the same answers with more searches, 4 docs key-fact recall 0.642 -> 0.639 (evals/reports/quality_history.md).
MIN_ASK_TERMS = 3
MAX_ASKS = 3
MAX_ASK_CHARS = 2000  # of the user's own lines


def question_asks(text: str) -> tuple[str, ...]:
    """The questions the user's own sentences ask (those ending in "?", split where a question word starts
    a further ask), when they ask more than one: each is searched alone, so the answer can hold one unit for
    each. Pasted logs, commands, stack frames and fenced blocks are no asks. An ask too short to be searched
    alone that opens its sentence is searched with the user's statement before it, which says what it is
    about: "User:ledger-writer already has WRITE on the topic. Which ACL is missing, and …?"."""
    sentences = _own_sentences(text)
    flags = _ask_flags(sentences)
    asking: list[str] = []
    for number, sentence in enumerate(sentences):
        if not flags[number]:
            continue
        # "Topic orders keeps growing, why is that?" asks one thing
        pieces = [piece for piece in (p.strip(" ?.!") for p in _NEXT_ASK.split(sentence)) if _ASKS.match(piece)]
        before = sentences[number - 1] if number and not flags[number - 1] else ""
        if pieces and before and len(tokenize(pieces[0])) < MIN_ASK_TERMS:
            pieces[0] = f"{before} {pieces[0]}"
        asking += pieces
    asks = [p for p in asking if len(tokenize(p)) >= MIN_ASK_TERMS]
    return tuple(asks[:MAX_ASKS]) if len(asking) > 1 else ()


def asked_identifiers(text: str) -> frozenset[str]:
    """The identifiers the user's asking sentences name (`_asking_sentences`), other than as a setting given a
    value (`_GIVEN_VALUE`): "should I raise fetch.min.bytes or fetch.max.wait.ms?" asks about both, where
    "(retention.ms=604800000)" in a sentence before it says what the user has set."""
    return frozenset(extract_identifiers(_GIVEN_VALUE.sub(" ", _unquoted(" ".join(_asking_sentences(text))))))


def asked_names(text: str) -> tuple[str, ...]:
    """The name-like words of the user's asking sentences, their capitalised first words included (retrieval
    counts those only when the corpus never uses them, as it does for `Query.opening_names`). A name the user
    calls theirs anywhere in their own words is their stack, not what they ask about: "Which producer metrics
    in our Datadog feed …?", "… on these RHEL boxes?" (against "in a custom MSK configuration")."""
    asking = _unquoted("\n".join(_asking_sentences(text)))
    names, openers = _names(asking)
    names += [code for code in _CODE_NAME.findall(asking) if not extract_identifiers(code)]
    programs, fields = _pasted_commands(text)
    names = [program for name in names for program in fields.get(name, (name,))]
    # A program the user asks about by name ("why does kcat say …?"), but one an identifier pattern spells
    # (`kafka-topics.sh`: among the identifiers).
    names += [p for p in programs if _mentions(asking, p) and not extract_identifiers(p)]
    owned = frozenset().union(*map(_owned_names, _own_sentences(text)))
    return tuple(name for name in dict.fromkeys(names + openers) if name not in owned)


def _unquoted(text: str) -> str:
    """`text` without the messages it quotes in quotation marks (`_QUOTED_MESSAGE`, of `MIN_MESSAGE_WORDS` words or
    more): what "Fetch position FetchPosition{offset=1234, …} is out of range" names is the log's, not what the
    user asks about by name, as a pasted error line's names are not. A command quoted as code (`kafka-log-dirs.sh
    --describe …`) is what they ask about."""

    def message(match: re.Match[str]) -> str:
        quoted = not match.group(0).startswith("`") and len(_WORDS.findall(match.group(0))) >= MIN_MESSAGE_WORDS
        return " · " if quoted else match.group(0)

    return _QUOTED_MESSAGE.sub(message, text)


@functools.lru_cache(maxsize=4)
def _pasted_commands(text: str) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """The programs of the command lines the user pastes (`kcat` of `$ kcat -b … -L`), each once, and for each
    field a pasted output labels (`isControl: true`, `"state": "FAILED"`) the program of the command line above
    it, or none when no command line printed it. A field of a tool's output is that tool's subject: whether the
    docs cover it is whether they cover the tool, whatever the field's spelling (`kafka-dump-log.sh` prints
    `isControl`, the docs write `isControlBatch`). Cached: a question reads them for its asked names and its
    pasted fields. Read only, never changed."""
    programs: dict[str, None] = {}
    fields: dict[str, tuple[str, ...]] = {}
    program = ""
    for line, fenced in _lines_and_fences(text):
        place = line_place(line)
        if place == "command":
            program = _program(line)
            programs.setdefault(program)
        elif fenced or place != "question":
            for field in _FIELD_LABEL.findall(line[:MAX_LINE_CHARS]):
                fields.setdefault(field, (program,) if program else ())
    return tuple(p for p in programs if p), fields


def pasted_fields(text: str) -> frozenset[str]:
    """`Query.pasted_fields`: the tokens of the fields a pasted output labels that the user's own sentences do
    not name."""
    own = "\n".join(_own_sentences(text))
    return frozenset(
        token for field in _pasted_commands(text)[1] if not _mentions(own, field) for token in tokenize(field)[:1]
    )


def _program(command_line: str) -> str:
    match = _PROGRAM.match(command_line)
    return match.group(1) if match else ""


def _mentions(text: str, word: str) -> bool:
    return bool(re.search(rf"(?<![\w.-]){re.escape(word)}(?![\w-])", text, re.IGNORECASE))


# A command line's program: its first word after the prompt and `sudo`, without its directory.
_PROGRAM = re.compile(r"\s*(?:[$>#%]\s+)?(?:sudo\s+)?(?:[\w.~-]*/)*([A-Za-z][\w.-]*)")
# A field an output labels: the name before its `:` or `=`, quoted or not (`isControl: true`, `"state": …`).
_FIELD_LABEL = re.compile(r"(?<![\w.-])[\"']?([A-Za-z][\w-]*)[\"']?\s*[:=](?![:=/])")


# A name written as code in backticks: a field, option or member of some API (`max_ack_pending`,
# `config.Consumer.Group.Rebalance.GroupStrategies`, `logCreator`).
_CODE_NAME = re.compile(r"`([A-Za-z][A-Za-z0-9]*(?:[._][A-Za-z0-9]+)+|[a-z]+[A-Z][A-Za-z0-9]*)(?:\(\))?`")


def asked_phrases(text: str) -> tuple[tuple[str, ...], ...]:
    """The runs of two or more name-like words (`_NAME`, one space apart) in the user's asking sentences: "Which
    REST Proxy property …?", "… through the Topic Operator?", "Event Hubs Premium: …?". A capitalised stopword
    ("Which", "The") is left out, a run's first word when it is a participle ("… says Shrinking ISR …"), and so
    are words quoted as code or as a message (`"Shrinking ISR from 1,2,3 to 1"` is a log line's) and runs the
    user calls theirs."""
    runs: list[tuple[str, ...]] = []
    for asking in _asking_sentences(text):
        for sentence in _NAME_SENTENCE.split(_QUOTED_MESSAGE.sub(" · ", _INLINE_CODE.sub(" · ", asking))):
            run: list[re.Match[str]] = []
            # A capitalised stopword is grammar, and no part of a name: "Which REST Proxy property …?", a
            # message pasted without its colon ("RecordTooLargeException The message is … bytes").
            names = [m if tokenize(m.group(0)) else None for m in _NAME.finditer(sentence)]
            for match in [*names, None]:
                if match is not None and run and sentence[run[-1].end() : match.start()] == " ":
                    run.append(match)
                    continue
                if run and _PARTICIPLE.fullmatch(run[0].group(0)):
                    run = run[1:]  # "… says Shrinking ISR": a participle opens a clause, not a name
                if len(run) >= 2 and not _owned(sentence[: run[0].start()]):
                    runs.append(tuple(m.group(0) for m in run))
                run = [match] if match is not None else []
    return tuple(dict.fromkeys(runs))


# Up to two words between a possessive or demonstrative and the name it calls the user's: "our legacy PHP consumers".
_OWNER_BEFORE = re.compile(r"\b(?:our|my|these|those|this)\s+(?:[\w.()/+-]+\s+){0,2}$", re.I)
# A first person saying what they use, in the order of a statement: "We use Debezium", "I'm running a Quarkus app"
# (the word before the pronoun, if any, is checked apart: "Can we run ksqlDB …?" asks about ksqlDB).
_USER_BEFORE = re.compile(r"(?:^|\b([\w']+)\s+)(?:we|i)(?:'re|'m)?\s+[a-z]+\s+(?:(?:a|an|the)\s+)?$", re.I)
OWNER_LOOKBACK_CHARS = 60


def _owned_names(sentence: str) -> frozenset[str]:
    """The names that `_OWNER_BEFORE` or `_USER_BEFORE` mark as the user's own in `sentence`."""
    return frozenset(match.group(0) for match in _NAME.finditer(sentence) if _owned(sentence[: match.start()]))


def _owned(before: str) -> bool:
    """Whether the words just `before` a name call it the user's."""
    near = before[-OWNER_LOOKBACK_CHARS:]
    if len(before) > OWNER_LOOKBACK_CHARS:  # a word cut by the window is no word: "flavour" is not "our"
        near = near.partition(" ")[2]
    if _OWNER_BEFORE.search(near):
        return True
    user = _USER_BEFORE.search(near)
    return user is not None and not (user.group(1) and _ASKS.fullmatch(user.group(1)))


def _asking_tokens(text: str, error_lines: Sequence[str]) -> tuple[str, ...]:
    """`Query.asking_tokens`: of the asking sentences and the error lines the user pastes (what they report);
    empty when every own sentence asks."""
    asking = _asking_sentences(text)
    if len(asking) == len(_own_sentences(text)):
        return ()
    return tuple(tokenize(" ".join([*asking, *error_lines])))


def _asking_words(text: str) -> tuple[str, ...]:
    """`Query.asking_words`: the tokens of the asking sentences that no pasted line holds. A field the pasted
    output labels is the tool's ("what's the isControl flag …?" after `kafka-dump-log.sh` printed `isControl:
    false`), a name in the user's log is theirs."""
    pasted = {
        token
        for line, fenced in _lines_and_fences(text)
        if fenced or line_place(line) != "question"
        for token in tokenize(line[:MAX_LINE_CHARS])
    }
    return tuple(token for token in tokenize(" ".join(_asking_sentences(text))) if token not in pasted)


# A question word that opens a message, not a question: "Could not find a 'KafkaClient' entry …", "Can't connect".
_NEGATED = re.compile(r"\s*(?:not\b|n't\b|'t\b)", re.I)


def with_question_mark(text: str) -> str:
    """`text` with a "?" after its last sentence when that sentence opens with a question word (not negated:
    "Could not find …" is a message) and ends with no punctuation of its own; else `text` as it is."""
    body = text.rstrip()
    last = _SENTENCE_END.split(body.rpartition("\n")[2])[-1].lstrip()
    opening = _ASKS.match(last)
    if not body or body[-1] in ".?!:;)`'\"" or opening is None or _NEGATED.match(last, opening.end()):
        return text
    return f"{body}?"


def _asking_sentences(text: str) -> list[str]:
    """The user's own sentences that ask (`_ask_flags`), else their last one."""
    sentences = _own_sentences(text)
    return [s for s, asks in zip(sentences, _ask_flags(sentences), strict=True) if asks] or list(sentences[-1:])


def _ask_flags(sentences: Sequence[str]) -> list[bool]:
    """Whether each sentence asks: it ends in "?"; or, when the user writes no question mark at all (as chat
    messages often go), it opens with a question word ("which setting decides the name", "can a consumer fetch
    from its own zone")."""
    marked = [sentence.rstrip().endswith("?") for sentence in sentences]
    return marked if any(marked) else [bool(_ASKS.match(sentence.lstrip())) for sentence in sentences]


# A key given a value: `key=value` (properties, a command's --config), `"key": "value"` (JSON), `key: value` (YAML).
# Matched from a word's start only and without backtracking into it, so a long run of word characters costs
# linear time.
_GIVEN_VALUE = re.compile(r"""(?<![\w.-])["']?([\w.-]++)["']?\s*(?:=|:(?=[ \t]))\s*["']?[^\s"',]++""")


def _misused_command(placed: Sequence[tuple[str, str]]) -> bool:
    """Whether what a pasted command printed, or an error line, names one of the command's options: a long
    flag (`--execute option is missing`), an option as joptsimple quotes it (`Missing required argument
    "[election-type]"`), or, at the start of its message, a flag of the command spelt bare ("zookeeper is not a
    recognized option" after `kafka-topics.sh --zookeeper …`). A message that names its command's option is
    about how the command was run, not about the cluster it ran against."""
    commands = [line for line, place in placed if place == "command"]
    if not commands:
        return False
    flags = {flag.lstrip("-") for line in commands for flag in _LONG_FLAGS.findall(line)}
    after_command = False
    for line, place in placed:
        printed = [line] if place == "error" or (after_command and place == "question") else []
        if place == "command":
            printed += _quoted(line)
        for message in printed:
            if _NAMED_OPTION.search(message):
                return True
            if any(_names_flag(start, flags) for start in _MESSAGE_START.findall(message)):
                return True
        after_command = place == "command"
    return False


_LONG_FLAGS = re.compile(r"(?<![\w-])--[a-z][\w-]*")
_NAMED_OPTION = re.compile(rf"{_LONG_FLAGS.pattern}|\"\[[a-z][\w-]*\]\"")  # a flag, or joptsimple's "[name]"
# The first word of a message: the line's, or the one after a colon ("…Exception: zookeeper is not …").
_MESSAGE_START = re.compile(r"(?:^|:\s+)([A-Za-z][\w-]*)(?=\s)")


def _names_flag(word: str, flags: set[str]) -> bool:
    """Whether a message's first word is one of `flags` spelt bare: as typed (`zookeeper`), or as the corpus
    writes the name (`ZooKeeper`, `corpus_cased`); not capitalised as any sentence's first word is ("Topic t not
    present in metadata" after `--topic t`), nor in capitals as a column heading is (`GROUP  TOPIC  PARTITION`
    in the output of `kafka-consumer-groups.sh --describe --group g`)."""
    return word.lower() in flags and (word.islower() or (not word.isupper() and word != word.capitalize()))


# A plain word of prose as a name or a title writes it (`Consumer`, `CONSUMER`), and any such word: not a key,
# path, host, code span or a word with digits or an underscore (`NOT_ENOUGH_REPLICAS`, `KIP-500` keep their case).
_CAPITALS_WORD = re.compile(r"(?<![\w.\-/@$`'\"])[A-Z]{2,}(?![\w\-/@$`'\"]|\.\w)")
_TITLE_CASED_WORD = re.compile(r"(?<![\w.\-/@$`'\"])[A-Z][a-z]+(?![\w\-/@$`'\"]|\.\w)")
SHOUTED = 0.5  # of the prose's words in capitals: typed with caps lock on, not capitalised as a title
_PROSE_WORD = re.compile(r"(?<![\w.\-/@$`'\"])[A-Za-z]{2,}(?![\w\-/@$`'\"]|\.\w)")


def prose_capitalisation(text: str, capitals: bool = False) -> float | None:
    """The share of the plain words of the user's prose (outside code blocks, pasted lines and code spans) that
    begin with a capital (with `capitals`: that are in capitals throughout); None when the prose has fewer than
    `MIN_PROSE_WORDS` such words: one word says nothing of how the prose is typed ("what's a KTable?" has one, a
    name)."""
    words = [
        word
        for line, fenced in _lines_and_fences(text)
        if not fenced and line_place(line[:MAX_LINE_CHARS]) == "question"
        for word in _PROSE_WORD.findall(_INLINE_CODE.sub(" ", line[:MAX_LINE_CHARS]))
    ]
    capitalised = (word.isupper() if capitals else word[0].isupper() for word in words)
    return sum(capitalised) / len(words) if len(words) >= MIN_PROSE_WORDS else None


# A salutation: a few words on a line of their own, closed by a comma or "!" ("Hi team,", "Thanks,", "Best
# regards,"). Closing the question, it may be followed by a short signature: the writer's name and role.
_SALUTATION = re.compile(r"^\s*[A-Za-z][\w'’-]*(?:\s+[A-Za-z][\w'’-]*){0,3}\s*[,!]\s*$")
SIGNATURE_LINES = 3  # lines after a closing salutation, at most,
SIGNATURE_WORDS = 6  # of this many words at most, with no question, code or identifier: a name, a role, a team


def users_words(question: str) -> str:
    """What the user typed as the parse reads it: printable, without a reply's quote marks, a letter's greeting and
    sign-off or a chat's opening greeting, in the case of its prose (`decased`)."""
    return decased(without_greeting(without_salutations(without_quote_marks(_printable(question)))))


# A chat message's opening greeting: a greeting word and up to two more ("hi team", "hey Priya", "good morning
# all"), set off from what follows by a comma, "!", a dash or a colon.
_GREETING = re.compile(
    r"^\s*(?:hi|hey|hello|hiya|howdy|greetings|good\s+(?:morning|afternoon|evening)|morning)\b"
    r"(?:\s+[A-Za-z][\w'-]*){0,2}\s*(?:[,!:]+|\s[-–—])\s*(?=\S)",
    re.I,
)


def without_greeting(text: str) -> str:
    """`text` without the greeting its first line opens with ("hi team, how do I …?"): its words say nothing of
    what is asked, and searched as terms they lead to passages that happen to hold "team"."""
    return _GREETING.sub("", text, count=1)


# A reply's quote marks (e-mail, Markdown, Slack): one or more ">" opening a line, each followed by a space or
# the line's end; not a shell prompt's single ">" before a command, which stays one after the marks go.
_QUOTE_MARKS = re.compile(r"^[ \t]*>(?:[ \t]?>)*(?:[ \t]|$)", re.M)


def without_quote_marks(text: str) -> str:
    """`text` with the quote marks that open its lines outside code blocks taken away: a colleague's question
    forwarded as "> why does my consumer keep rebalancing?" read as a command line (a prompt's ">"), and its words
    as no question at all. A quoted command ("> bin/kafka-topics.sh --list") is still one without them."""
    if ">" not in text:
        return text
    lines = text.split("\n")
    fence: bool | None = None  # inside a code block: whether its opening line was quoted
    for number, line in enumerate(lines):
        bare = _QUOTE_MARKS.sub("", line, count=1)
        quoted = bare != line
        if fence is None or fence:  # outside a code block, or in one the reply quotes whole
            lines[number] = bare
        if bare.lstrip().startswith("```") and (fence is None or quoted == fence):
            fence = quoted if fence is None else None
    return "\n".join(lines)


def without_salutations(text: str) -> str:
    """`text` without a greeting on its first line and a sign-off at its end, each set apart as a letter's are:
    the greeting by a blank line after it, the sign-off (a salutation line, then at most `SIGNATURE_LINES` short
    lines) by a blank line or a finished sentence before it. Neither says what the question is about, and the
    writer's name, read as a product the corpus lacks, had the question declined ("…?\n\nThanks,\nPriya
    Raghunathan"). A question that is nothing else keeps them."""
    lines = text.split("\n")
    filled = [number for number, line in enumerate(lines) if line.strip()]
    dropped: set[int] = set()
    for place, start in enumerate(filled[-SIGNATURE_LINES - 1 :], start=max(0, len(filled) - SIGNATURE_LINES - 1)):
        before = filled[place - 1] if place else None
        set_apart = before is not None and (before < start - 1 or lines[before].rstrip().endswith((".", "?", "!")))
        signature = [lines[n] for n in filled[place + 1 :]]
        if set_apart and _SALUTATION.match(lines[start]) and all(_signature_line(line) for line in signature):
            dropped.update(filled[place:])
            break
    if len(filled) > 1 and filled[1] > filled[0] + 1 and _SALUTATION.match(lines[filled[0]]):
        dropped.add(filled[0])
    if not dropped or len(dropped) == len(filled):
        return text
    return "\n".join(line for number, line in enumerate(lines) if number not in dropped)


def _signature_line(line: str) -> bool:
    return (
        len(line.split()) <= SIGNATURE_WORDS and "?" not in line and "`" not in line and not extract_identifiers(line)
    )


def decased(text: str) -> str:
    """`text` with the plain words of its prose in lower case when that prose is capitalised throughout
    (`CAPITALISED_THROUGHOUT`: typed in capitals, or every word capitalised as in a title), except the words in
    the other case, which mark names. The common capitals mark none: "Why Did My Consumer Lag Spike" read as the
    error name WHY_DID_MY_CONSUMER_LAG_SPIKE, and "YESTERDAY" as a product the corpus lacks, so the question was
    declined that is answered in lower case. Code blocks, pasted lines, code spans and identifiers keep their
    case."""
    share = prose_capitalisation(text)
    if share is None or share < CAPITALISED_THROUGHOUT:
        return text
    # Each way of typing marks names with the other case: capitalised as a title, the words in capitals are names
    # (MSK, IAM); typed in capitals, the words in title case are, typed with shift on purpose ("Amazon", "Strimzi").
    shouted = (prose_capitalisation(text, capitals=True) or 0.0) >= SHOUTED
    cased = _CAPITALS_WORD if shouted else _TITLE_CASED_WORD
    lines: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line_place(line[:MAX_LINE_CHARS]) == "question":
            line = _outside_code_spans(line, lambda part: cased.sub(lambda m: m.group(0).lower(), part))
        lines.append(line)
    return "\n".join(lines)


def _outside_code_spans(line: str, change: Callable[[str], str]) -> str:
    """`line` with `change` applied to its text between code spans (`…`), the spans as they were."""
    parts: list[str] = []
    end = 0
    for span in _INLINE_CODE.finditer(line):
        parts += [change(line[end : span.start()]), span.group(0)]
        end = span.end()
    return "".join([*parts, change(line[end:])])


def _lines_and_fences(text: str) -> Iterator[tuple[str, bool]]:
    """The non-blank lines of what the user typed (its first 400 KB), each with whether it sits inside a
    ``` code block; the fence lines themselves are left out. A command line that goes on to the error it
    raised ("kafka-topics.sh --create fails with InvalidReplicationFactorException: Replication factor: 3 …")
    is two lines: the command, context, and the printed error, what the question is about. So is the user's
    label of the error they paste after it ("SSL handshake failed: javax.net.ssl.SSLHandshakeException: No
    subject alternative names …"): their words, and the error, whose class the docs may never name. So is a
    command line that goes on in the user's words, and an error line that ends in their question ("…
    failed: INVALID_RECORD_STATE. what did my consumer do wrong?")."""
    fenced = False
    for line in text[:400_000].split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif line.strip():
            yield from ((part, fenced) for part in _line_parts(line))


def _line_parts(line: str) -> tuple[str, ...]:
    head = line[:MAX_LINE_CHARS]
    command = _COMMAND_LINE.match(head)
    place = line_place(head)
    if command or place == "question":
        for match in _PRINTED_ERROR.finditer(head, 1):
            if not _ERROR_MESSAGE.match(head[match.start() :]):
                continue
            if command or _labels(head[: match.start()]):
                return line[: match.start()], line[match.start() :]
            break  # the user's sentence names or quotes its error ("… raises `KafkaException: KafkaError{…}`. What …?")
    if command and not _PROMPT.match(head) and (words := _words_after_options(head, command.end())) is not None:
        return line[:words], line[words:]
    if place == "error" and (asking := _ASKING_TAIL.search(head)):
        return line[: asking.start("ask")], line[asking.start("ask") :]
    return (line,)


def _words_after_options(line: str, start: int) -> int | None:
    """Where the user's own words begin on a line that opens with a program and its options, not a prompt: at
    a lower-case word, after nothing but options and their values, that opens four words of letters in a row
    ("kafka-acls.sh --add fails with SecurityDisabledException on a fresh cluster"), or at the first word that
    is neither an option nor its value when it is a plain lower-case word and such a run follows ("java clients
    using SASL/OAUTHBEARER … gets invalid_client from the token endpoint"). A command line holds no such run;
    what a tool printed after it opens in capitals ("Option … can't be used with option …") and stays with the
    command, and so does a subcommand ("kafka-storage.sh format -t …")."""
    expects_value = False
    for token in _TOKEN.finditer(line, start):
        if _OPTION.match(token.group()):
            expects_value = "=" not in token.group()
        elif _OWN_WORDS.match(line, token.start()):
            return token.start()
        elif expects_value:
            expects_value = False
        else:
            return (
                token.start() if _PLAIN_WORD.fullmatch(token.group()) and _OWN_WORDS.search(line, token.end()) else None
            )
    return None


def _labels(words: str) -> bool:
    """The user's words end as a label of the error that follows them ("SSL handshake failed: "), not inside
    the inline code that quotes it."""
    return bool(_LABEL_END.search(words)) and words.count("`") % 2 == 0


_LABEL_END = re.compile(r":\s*$")


@functools.lru_cache(maxsize=4)
def _own_sentences(text: str) -> tuple[str, ...]:
    """The sentences of the user's own lines: not pasted logs, commands, stack frames or fenced blocks. A paste
    ends the sentence before it ("Load-testing an SQS connector:" + log + "Which setting is that?" are two).
    Cached: parsing one question reads them for its asks, its asked identifiers and names, and their owners."""
    runs: list[list[str]] = [[]]  # the user's consecutive lines, one run between two pastes
    for line, fenced in _lines_and_fences(text):
        if not fenced and line_place(line) == "question":
            runs[-1].append(line[:MAX_LINE_CHARS])
        elif runs[-1]:
            runs.append([])
    own = "\n".join(" ".join(run) for run in runs if run)[:MAX_ASK_CHARS]
    return tuple(s for run in own.split("\n") for s in _SENTENCE_END.split(run) if s.strip())


def message_words(text: str) -> str:
    """`text` as its lower-cased words joined by single spaces: how messages are compared."""
    return " ".join(re.findall(r"\w+", text.lower()))


def says_message(description: str, message: str) -> bool:
    """A table row's description and a message the user pasted or quoted (`message_words`) say the same:
    one holds the other whole, and both are long enough to tell a message by."""
    words = message_words(description)
    long_enough = min(len(words.split()), len(message.split())) >= MIN_MESSAGE_WORDS
    return long_enough and (words in message or message in words)


def shared_run(description: str, message: str) -> int:
    """The length, in words, of the longest run of words that a table row's description and a message share."""
    ours, theirs = message_words(description).split(), message.split()
    best = 0
    previous = [0] * (len(theirs) + 1)
    for word in ours:
        current = [0] * (len(theirs) + 1)
        for j, other in enumerate(theirs, start=1):
            if word == other:
                current[j] = previous[j - 1] + 1
                best = max(best, current[j])
        previous = current
    return best


def extra_terms(description: str, message: str) -> int | None:
    """How many terms (`tokenize`: no stop words) a table row's description holds beyond a message's, when it
    holds every one of the message's but its numbers, the values it was printed with; None when it misses
    one, or the message has fewer than `MIN_MESSAGE_WORDS` terms, too few to tell a message by."""
    terms = {t for t in tokenize(message) if not t.isdigit()}
    described = set(tokenize(description))
    if len(terms) < MIN_MESSAGE_WORDS or not terms <= described:
        return None
    return len(described - terms)


def _quoted(line: str) -> list[str]:
    """What `line` quotes, long enough to be a message."""
    return [next(g for g in m.groups() if g) for m in _QUOTED_MESSAGE.finditer(line)]


def _messages(line: str, place: str) -> list[str]:
    """The messages a line quotes (in the user's words) or prints (an error line), as `message_words`: what
    the user quotes, and what follows each colon in it or in the line ("…Exception: Broker: The consumer group
    is actively subscribed to the topic"). The user's own line counts too: a client's log message is often
    pasted without its level and logger ("Offset commit failed on partition events-0 at offset 42: The
    coordinator is not aware of this member.")."""
    quoted = _quoted(line) if place == "question" else []
    printed = [line] if place in ("error", "question") else []
    found = quoted + [
        text[m.end() : m.end() + MAX_MESSAGE_CHARS] for text in quoted + printed for m in _MESSAGE_AFTER.finditer(text)
    ]
    return [words for words in map(message_words, found) if len(words.split()) >= MIN_MESSAGE_WORDS]


# A name as people write one: capitalised inside the sentence, CamelCase (also with a lower-case
# start, as products and methods are spelled), or an acronym with letters.
_NAME = re.compile(
    r"(?<![\w.-])(?:[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*|[a-z]+[A-Z][A-Za-z0-9]*|[A-Z]{2,}[a-z]*[0-9]*|[A-Z][a-z]+[0-9]*"
    r"|[A-Z][0-9]+)(?![\w-]|\.[\w-])"  # a dot after one only ends its sentence ("… with KMinion.")
)
# An artifact or package id: three or more lower-case parts joined by hyphens (a library, a chart, an
# image). Parts of three letters or more: English compounds link theirs with "by", "to", "of".
_ARTIFACT = re.compile(r"(?<![\w./-])[a-z][a-z0-9]{2,}(?:-[a-z][a-z0-9]{2,}){2,}(?![\w/-]|\.\w)")
# The program of a command quoted inline: `tool sub-command ...`.
_QUOTED_PROGRAM = re.compile(r"`([a-z][\w-]*)\s+[^`\n]+`")


_NAME_SENTENCE = re.compile(r"(?<=[.!?:])\s+|\n+")  # where a sentence, or a label's colon, ends
_PARTICIPLE = re.compile(r"[A-Z][a-z]+(?:ing|ed)")


def _names(text: str) -> tuple[list[str], list[str]]:
    """Name-like words, and separately each sentence's capitalised first word: capitalised for grammar
    or a name, which only the corpus can tell (retrieval counts it when the corpus never uses it)."""
    names: list[str] = []
    openers: list[str] = []
    for sentence in _NAME_SENTENCE.split(text):
        for match in _NAME.finditer(sentence):
            opens = match.start() == len(sentence) - len(sentence.lstrip()) and match.group(0).istitle()
            (openers if opens else names).append(match.group(0))
    names += _ARTIFACT.findall(text) + _QUOTED_PROGRAM.findall(text)
    return names, openers


def _intent(
    text: str,
    identifiers: Sequence[QueryIdentifier],
    own_lines: Sequence[str],
    pasted_error: bool,
    how_to: bool,
    error_name: Callable[[str], bool] | None,
) -> str:
    """Task when a sentence of the user's own asks for something to be written, generated, translated or
    summarised (no passage answers that, whatever it is about); troubleshoot when the user reports an
    error (`pasted_error`: an error or log line is among what they pasted; or they name an error: with
    `error_name`, a word spelt like an error's name counts only when the corpus names an error so, not
    `SASL_SSL` or an environment variable) or asks for a fix; check when they ask how to inspect."""
    if any(_asks_for_work(line[start : start + 80]) for line in own_lines for start in _sentence_starts(line)):
        return "task"
    head = text[:2000]
    reports_error = (
        pasted_error
        or any(i.place == "error" for i in identifiers)
        or bool(_ERROR_MARK.search(head))
        or _holds_an_error_name(head, error_name)
    )
    if reports_error or _FIX_REQUEST.search(head) or (not how_to and _FAILURE.search(head)):
        return "troubleshoot"
    if _CHECK_REQUEST.search(head):
        return "check"
    return "fact"


def _holds_an_error_name(text: str, error_name: Callable[[str], bool] | None) -> bool:
    """`text` holds a word spelt like an error's name that is one (`error_name`, the corpus's say); without the
    corpus to ask, any such word."""
    if error_name is None:
        return bool(_UPPER_SNAKE.search(text))
    return any(error_name(word.lower()) for word in _UPPER_SNAKE.findall(text))


def _asks_for_work(sentence: str) -> bool:
    """`_TASK_REQUEST`, with its making verb typed with one slip too ("wrtie me a poem", "transalte this")."""
    if _TASK_REQUEST.match(sentence):
        return True
    opening = _TYPED_VERB.match(sentence)
    if not opening or len(opening["verb"]) < MIN_SWAPPED_CHARS or opening["verb"].lower() in _MAKING_VERBS:
        return False
    meant = slips(opening["verb"].lower())
    verb = next((verb for verb in _MAKING_VERBS if verb in meant), None)
    return verb is not None and bool(_TASK_REQUEST.match(opening[1] + verb + sentence[opening.end() :]))


_TYPED_VERB = re.compile(rf"({_POLITE_OPENING})(?P<verb>[A-Za-z]+)", re.I)


def _sentence_starts(line: str) -> Iterator[int]:
    """Where the sentences of `line` start (its first `MAX_LINE_CHARS`), and where each starts again after a lead-in
    (`_LEAD_IN`)."""
    head = line[:MAX_LINE_CHARS]
    for match in _SENTENCE_START.finditer(head):
        yield match.end()
        if lead_in := _LEAD_IN.match(head, match.end()):
            yield lead_in.end()


@dataclass(frozen=True)
class ReducedQuery:
    text: str
    trimmed: bool  # the input was a log paste or too long, and was reduced to its signal


def looks_like_log(text: str) -> bool:
    return len(_LOG_SHAPE.findall(text)) >= 2


def reduce_to_signal(text: str, max_chars: int) -> ReducedQuery:
    """Keep what identifies the problem; drop what identifies this particular occurrence."""
    text = _printable(text)
    if not looks_like_log(text) and len(text) <= max_chars:
        return ReducedQuery(" ".join(_OPENING_LEVEL.sub("", text).split()), trimmed=False)
    kept: list[str] = []
    seen: set[str] = set()
    lines = text[:400_000].split("\n")  # a 200 KB paste is scanned once, linearly
    if any(_SIGNAL_LINE.search(line[:MAX_LINE_CHARS]) for line in lines):
        # Heartbeats and INFO chatter drown the one line that matters: keep errors, exceptions and prose.
        lines = [
            line
            for line in lines
            if _SIGNAL_LINE.search(line[:MAX_LINE_CHARS]) or not _LOG_SHAPE.search(line[:MAX_LINE_CHARS])
        ]
    for raw_line in lines:
        if _FRAME.match(raw_line):
            continue
        line = raw_line[:MAX_LINE_CHARS]
        line = _HEX.sub(" ", _HOST.sub(" ", _THREAD.sub(" ", _LEVEL.sub(" ", _TIMESTAMP.sub(" ", line)))))
        line = " ".join(line.split()).strip(" -:|")
        if "Exception" in line or "Error" in line:
            exception = _EXCEPTION_LINE.search(line[:MAX_LINE_CHARS])
            if exception:
                line = exception.group(0).replace("Caused by:", "").strip()
        if len(line) < 4 or line.lower() in seen:
            continue
        seen.add(line.lower())
        kept.append(line[:300])
    limit = MAX_SIGNAL_CHARS if looks_like_log(text) else max(max_chars, MAX_SIGNAL_CHARS)
    return ReducedQuery(" ".join(kept)[:limit].strip(), trimmed=True)


_STRAIGHT_QUOTES = str.maketrans("\u2018\u2019\u201c\u201d", "''\"\"")


def _printable(text: str) -> str:
    """Binary junk and control characters become spaces; any script's letters stay. Curly quotes, as phones and
    word processors type them ("what’s", “Leader not available”), are straight ones: the parse reads those."""
    return "".join(ch if ch.isprintable() or ch in "\n\t" else " " for ch in text).translate(_STRAIGHT_QUOTES)


def is_followup(question: str, history: Sequence[Mapping[str, str]]) -> bool:
    """In a conversation, a question leans on the earlier turns when it points back to them ("how do I fix
    it?", "what's its default?"), opens as a follow-up ("and for consumers?", "what about Streams?"), goes on
    from them ("… instead of everything?", "how long is data kept locally then?"), or has no subject of its
    own ("ok", "why?"). One that names what it asks about (a word of its own, an identifier)
    stands alone, however short: users keep one chat open and switch subjects ("how long are tombstones kept?"
    after turning compaction on)."""
    if not any(turn.get("role") == "user" for turn in history):
        return False
    points_back = _ANAPHORA.search(question) is not None
    if extract_identifiers(question) and not points_back:
        return False
    continues = bool(_FOLLOWUP_START.match(question) or _CONTINUES.search(question))
    return points_back or continues or not any(len(t) > 3 for t in tokenize(question))


def continues_with_own_subject(question: str, history: Sequence[Mapping[str, str]], max_terms: int) -> bool:
    """Whether a follow-up (`is_followup`) only goes on from the conversation, by how it opens or ends ("and how
    do I make each poll return fewer records?", "… instead?"), with no word pointing back and a subject of its
    own (`names_its_subject`): what it asks may be another subject, so it is worth searching alone too."""
    return (
        is_followup(question, history)
        and _ANAPHORA.search(question) is None
        and names_its_subject(users_words(question), max_terms)
    )


def points_back_to_nothing(question: str, history: Sequence[Mapping[str, str]], max_terms: int) -> bool:
    """Whether a question points back ("how do I fix it?", "what does this mean?", "which of them?") with no
    subject of its own (`names_its_subject`) and no earlier turn of the user's to point to: nothing says what it
    is about, and any passage found for its few words would be a guess."""
    if any(turn.get("role") == "user" for turn in history):
        return False
    text = users_words(question)
    pointing = _POINTING_WORD.search(text)
    return (
        pointing is not None
        and not names_its_subject(text, max_terms)
        and not _defined_before(text[: pointing.start()])
    )


def _defined_before(text: str) -> bool:
    """Whether a clause of `text`, the question up to its pointing word, asks what a thing is: "what is a rebalance
    and how do I avoid it?" points to the rebalance it has just named."""
    return any(defined_thing(clause) for clause in _CLAUSE_BREAK.split(text))


_CLAUSE_BREAK = re.compile(r"\s+(?:and|but|or)\s+|[,;:]\s*", re.I)


def switches_subject(text: str, history: Sequence[Mapping[str, str]]) -> bool:
    """Whether a question asked in a conversation (`text`, as `users_words` reads it) asks what a thing is
    (`defined_thing`) that no earlier turn mentions: "what's a ktable?" after listing ACLs is a new subject,
    however well the ACL passages score when searched with the conversation's."""
    if not history or not _asks_what_a_thing_is(text):
        return False
    said = {t for turn in history for t in tokenize(turn.get("content", ""))}
    return not said.intersection(tokenize(" ".join(defined_thing(text))))


def rewrite_followup(
    question: str, history: Sequence[Mapping[str, str]], leaning: bool = False, context_words: int = CONTEXT_WORDS
) -> str:
    """Standalone query for a follow-up (`is_followup`; any question asked in a conversation with `leaning`):
    the question plus the subject of the earlier user turns: their identifiers and the first `context_words`
    content words of the last one."""
    if not (leaning and history) and not is_followup(question, history):
        return question
    user_turns = [turn.get("content", "") for turn in history if turn.get("role") == "user"]
    last_answer = _last_answer(history)
    subject_identifiers: list[str] = []
    for turn in reversed(user_turns[-2:]):
        for identifier in extract_identifiers(turn):
            if identifier not in subject_identifiers:
                subject_identifiers.append(identifier)
    for identifier in extract_identifiers(_lead_source_text(last_answer))[:3]:
        if identifier not in subject_identifiers:
            subject_identifiers.append(identifier)
    previous = reduce_to_signal(_standalone_last_turn(history, context_words), MAX_SIGNAL_CHARS).text
    subject = " ".join(dict.fromkeys([*subject_identifiers[:6], *_content_words(previous)[:context_words]]))
    return f"{question} ({subject})" if subject else question


def _standalone_last_turn(history: Sequence[Mapping[str, str]], context_words: int) -> str:
    """The last user turn as it may have been searched: a follow-up of a follow-up leans on what the one before
    leaned on ("how do I enable SASL/SCRAM?", "how do I create the users?", "and delete one?" is about SCRAM users).
    That one is read as leaning whatever its words, as the service may have searched it (`leaning`): "we're
    migrating from zookeeper to kraft", "what's the first step?", "can we roll back halfway?" is about the
    migration, though "first step" names a subject of its own."""
    last = next((n for n in range(len(history) - 1, -1, -1) if history[n].get("role") == "user"), None)
    if last is None:
        return ""
    turn = history[last].get("content", "")
    # Read back over the two exchanges before it at most: a long chain of follow-ups stays a short recursion.
    leaned_on = rewrite_followup(turn, history[max(0, last - LEANED_ON_TURNS) : last], True, context_words)
    leaned_on = leaned_on.removeprefix(turn)
    # Its own words first, then the few that name what it leaned on: the earlier story would crowd them out.
    return " ".join([turn, *_content_words(leaned_on)[:INHERITED_WORDS]])


_FIRST_SOURCE = re.compile(r"\[1\]")


def _lead_source_text(answer: str) -> str:
    """What an answer leads with, the first block it cites [1]: its subject, where the blocks after it,
    even from the same source, mention other things ("… see KIP-429" under a lead about rebalancing). An
    answer without markers counts as a whole."""
    blocks = [block for block in re.split(r"\n\s*\n", answer) if block.strip()]
    return next((block for block in blocks if _FIRST_SOURCE.search(block)), answer)


def _content_words(text: str) -> list[str]:
    return [w for w in re.findall(r"[A-Za-z][\w.\-]*", text) if len(w) > 3 and w.lower() not in _GENERIC]


_GENERIC = frozenset(
    [
        "what",
        "does",
        "mean",
        "when",
        "with",
        "that",
        "this",
        "have",
        "from",
        "there",
        "their",
        "about",
        "which",
        "should",
        "would",
        "could",
        "happen",
        "happens",
        "happening",
        "doing",
        "getting",
        "keep",
        "keeps",
        "mine",
    ]
)
