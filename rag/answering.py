"""The offline answerer: quote the evidence units of the ranked passages that answer the question,
each cited, or abstain.

It reads only what the earlier stages hand it (the parsed query and the ranked candidates with
their unit similarities) and builds each passage's evidence units (`rag.units`): a list stays with
its lead-in, a code block stays whole, a reference-table row keeps its name and default. The answer
leads with the best unit of the best-ranked passage; units of lower passages follow only when they
add something, and near-duplicates are dropped. A unit beside one already chosen is raised (the
sentence after "check whether X" says how), one that only repeats the user's pasted command or log
lines is lowered, and a title line, which states nothing, is never quoted. A list cut into pieces
for size is completed first when the rest fits, and shows as one list under its lead-in. A question
that asks for a fact gets the fact in one or two units; the "what it means / what to do / how to
check" layout is kept for questions that report an error or ask for a fix. Deterministic for the
same index and question.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rag.identifiers import exception_names, extract_identifiers, mbeans_written, metric_entries
from rag.lexical import tokenize
from rag.passages import NOT_COVERED, Citation, Passage, merged
from rag.query import Query, told_words
from rag.ranking import Ranked
from rag.retrieval import Candidate, metric_tokens
from rag.settings import Settings
from rag.units import (
    EvidenceUnit,
    build_units,
    continued_block_end,
    defines,
    ends_in_key_values,
    has_no_default,
    is_bare_row,
    is_lead_in_sentence,
    is_log,
    is_runnable,
    is_title,
    lead_in,
    leading_block_end,
    opens_with_command,
    points_ahead,
    refers_elsewhere,
    render_list_items,
    render_setting_mention,
    render_shared_lead,
    render_unit,
    row_cells,
    setting_default,
    stops_mid_sentence,
    with_block_lead_in,
    with_table_header,
)


@dataclass(frozen=True)
class AnswerShape:
    """How many units an answer takes and which qualify; from `Settings`, chosen by `evals/tune_answers.py`."""

    max_units_fact: int
    max_units_troubleshoot: int
    relative_cutoff: float  # units scoring this far below the lead one are left out
    min_novelty: float  # a following unit must bring at least this share of new content words
    overlap_weight: float  # weight of the question's terms in a unit, next to its cosine
    identifier_weight: float  # a unit that names an identifier the question is about
    rank_weight: float  # prior for units of higher-ranked passages
    neighbour_weight: float  # for a unit next to one already chosen in the same passage
    new_passage_weight: float  # for a unit of a passage the answer quotes nothing of yet
    # against a unit naming what the user's pasted command or stack frame names and nothing asked, or an
    # exception the pasted error is not
    echo_weight: float
    echo_share: float  # ... or a code unit with this share of its words in the question (the user's own log lines)
    action_weight: float  # for a unit that says what to do, when the question asks how to do something
    max_chars: int  # stop adding units past this many characters
    ask_min: float  # the best unit for one of several asks is held when it scores this much for that ask
    floor: float  # cosine a unit needs to be chosen for its own sake, not only beside a chosen one
    told_min_words: int  # a follow-up is not led by a sentence this long that the last answer showed (0: off)
    told_max_gap: float  # ... when a unit it did not show scores within this much of it
    related_max: int  # setting entries the answer does not quote, named with their defaults after it
    related_depth: int  # ... from this many first passages
    related_max_chars: int  # ... in an answer that stays within this many characters with them

    @classmethod
    def from_settings(cls, settings: Settings) -> AnswerShape:
        return cls(
            max_units_fact=settings.max_units_fact,
            max_units_troubleshoot=settings.max_units_troubleshoot,
            relative_cutoff=settings.unit_relative_cutoff,
            min_novelty=settings.unit_min_novelty,
            overlap_weight=settings.unit_overlap_weight,
            identifier_weight=settings.unit_identifier_weight,
            rank_weight=settings.unit_rank_weight,
            neighbour_weight=settings.unit_neighbour_weight,
            new_passage_weight=settings.unit_new_passage_weight,
            echo_weight=settings.unit_echo_weight,
            echo_share=settings.unit_echo_share,
            action_weight=settings.unit_action_weight,
            max_chars=settings.answer_max_chars,
            ask_min=settings.unit_ask_min,
            floor=settings.unit_floor,
            told_min_words=settings.unit_told_min_words,
            told_max_gap=settings.unit_told_max_gap,
            related_max=settings.related_settings_max,
            related_depth=settings.related_settings_depth,
            related_max_chars=settings.related_settings_max_chars,
        )


@dataclass(frozen=True)
class Draft:
    text: str
    citations: tuple[Citation, ...]
    abstained: bool
    related: tuple[Passage, ...] = ()


@dataclass(frozen=True)
class _Scored:
    candidate_index: int
    unit: EvidenceUnit
    vector: np.ndarray
    score: float
    terms: frozenset[str]
    bucket: str
    entry: int = -1  # the position of the setting entry this unit belongs to in its passage, its own when it is one
    size: int = 0  # characters the unit takes in the rendered answer: its words, names, labels, marker, blank line
    faint: bool = False  # below `AnswerShape.floor`, naming nothing the question is about, not what a how-to asks to do


HEADINGS_CHARS = 60  # the troubleshooting layout's part headings: the two longest take 52 with their blank lines
NEAR_DUPLICATE = 0.9  # cosine above which two units say the same thing
MAX_LEANING_BACK = 2  # sentences a leaning sentence brings before it, one leaning on the next
MAX_DEFAULT_HOPS = 2  # settings followed for where a setting with no default of its own takes it from
NAMED_LEAD_PASSAGES = 5  # the entry of a setting or error the question names may lead from this deep
NAMESAKE_PASSAGES = 5  # the lead's namesake on the page the question names may take its place from this deep
HOW_TO_CODE_PASSAGES = 3  # a how-to answer shows the best config line or command of this many first passages
_HEADINGS = (("cause", "**What it means / likely cause**"), ("do", "**What to do**"), ("check", "**How to check**"))
# Imperative openings and advice phrasings in plain English: the "what to do" part of an answer. The imperative
# may follow a clause of purpose or condition ("To report errors …, set …", "If you want to …, set …").
_IMPERATIVE = (
    r"(?:Set|Use|Ensure|Make sure|Increase|Decrease|Reduce|Raise|Lower|Upgrade|Restart|Add|"
    r"Configure|Enable|Disable|Avoid|Review|Try|Consider|Switch|Turn|Call|Provide|Remove|Delete|Tune|Change|"
    r"Replace|Wait|Retry|Handle)\b"
)
_DO = re.compile(
    rf"^(?:- )?(?:\d+\)\s*)?(?:(?:To|If|When|Once|In order to)\b[^.;:]{{0,160}},\s*(?:then\s+)?)?{_IMPERATIVE}"
    r"|\byou (?:can|should|need to|must|have to)\b|\bworkaround\b|\bto (?:fix|avoid|resolve)\b",
    re.I,
)
_CHECK_WORDS = r"(?:check|verify|monitor|look for|describe|inspect)"
_CHECK = re.compile(rf"\b(?:{_CHECK_WORDS}|metrics?)\b", re.I)  # in a code block: a command that shows state
# In prose the words must say to check: an imperative ("Check …", "To see it, inspect …"), advice ("you can
# verify …", "how to describe …"), a tool's option (`--verify`), or a metrics group's name
# (`type=consumer-fetch-manager-metrics`). "Describe authorization", "the main reason for this check", "cannot
# verify", "metrics reporting" only mention them and belong under what it means.
_CHECK_ADVICE = re.compile(
    rf"^(?:- )?(?:(?:To|If|When|Once|In order to)\b[^.;:]{{0,160}},\s*(?:then\s+)?)?{_CHECK_WORDS}\b"
    rf"|\b(?:you|we)\b[^.;:]{{0,40}}\b{_CHECK_WORDS}\b|\bto {_CHECK_WORDS}\b|(?<![\w-])--{_CHECK_WORDS}\b"
    r"|\w-metrics\b",
    re.I,
)
# Doing what the sentence before says: "Failure to do so could …", "Doing this …".
_DOING_SO = r"^(?:[A-Z]\w*(?: \w+){0,3} (?:do|doing)|Doing) (?:so|this|that)\b"
# Openings that lean on the sentence before ("However, …", "This means …", "Therefore, …"); not the "It" of
# "It is important to …", "It is not uncommon for …", which stands for what follows.
_LEANS_BACK = re.compile(
    r"^(?:However|Therefore|Thus|Hence|Otherwise|Instead|Similarly|Additionally|Furthermore|Moreover|Also|So|"
    r"Consequently|Alternatively|Nevertheless|Likewise|Besides|Then|Finally|As a result|In addition|In other words|"
    r"On the other hand|For (?:example|instance)(?=,)|If (?:so|not)\b|"
    r"If (?:this|that) is the case|In (?:this|that|such a|either) case|For (?:this|that) reason|"
    r"(?:This|That|These|Those|It|They|Such)(?! (?:is|are) (?:a|an|the) )"
    r"(?!(?<=It) (?:is|was) (?:\w+ ){1,3}(?:to|that|for)\b))\b"
    # ... or after a short opening phrase: "In short, this determines …", "In practice, they …"
    r"|^[A-Z]\w*(?: \w+){0,2}, (?:this|that|these|those|it|they|such)\b(?! (?:is|are) (?:a|an|the) )"
    # ... or an opening phrase that ends on what the sentence before says: "Because of this, …", "Despite that, …"
    r"|^[A-Z]\w*(?: \w+){0,2} (?:this|that|these|those|it|them),"
    # ... or doing what the sentence before says
    rf"|{_DOING_SO}",
)
# Of those, the openings whose sentence says the opposite, or something else, when read alone: a contrast ("Instead,
# the consumer stops sending heartbeats" holds only for the static members the sentence before names), a case of
# the sentence before ("If not, …", "In that case, …"), or doing what it says ("Failure to do so …").
_DEPENDS_ON_BEFORE = re.compile(
    r"^(?:However|Otherwise|Instead|Alternatively|Nevertheless|On the other hand|If (?:so|not)\b|"
    r"If (?:this|that) is the case|In (?:this|that|such a|either) case)"
    rf"|{_DOING_SO}",
)
# "… within the max time set by this configuration": a thing named with "this", "these", "those" or "such" that
# the sentence before names too ("… is controlled through the `replica.lag.time.max.ms` configuration.") is that one.
_DEMONSTRATIVE = re.compile(r"\b(?:this|these|those|such(?: an?)?)\s+([a-z][a-z-]{2,})\b", re.I)
_WORD = re.compile(r"[a-z][a-z-]+")
_LONG_FLAG = re.compile(r"(?<!\S)--[a-z][\w-]+")
_QUOTED_KEY = re.compile(r"`[a-z][\w-]*(?:\.[\w-]+)+`")  # a setting's key as code: `ssl.principal.mapping.rules`
_CLASS_NAME = re.compile(r"^(?:[a-z]\w*\.)+[A-Z]\w*(?:\$\w+)?$")  # a package path and a class


def abstain(ranked: Ranked, related: int = 3) -> Draft:
    """The answer "not covered", with the `related` best-ranked sections as possibly related (`section_passages`)."""
    passages = section_passages(ranked.candidates)[:related]
    note = " The closest passages are listed as possibly related." if passages else ""
    return Draft(text=NOT_COVERED + note, citations=(), abstained=True, related=passages)


def extract_answer(ranked: Ranked, shape: AnswerShape, asks: Sequence[Ranked] = ()) -> Draft:
    """The units that answer the question, led by the best one of the best-ranked passage, cited with [n].
    `asks` are the question's asks searched and ranked alone (`Query.asks`): each one's best unit follows the
    lead."""
    query = ranked.pool.query
    weights = ranked.pool.evidence.term_weights
    priors = passage_priors(ranked)
    scored = [
        u
        for index, c in enumerate(ranked.candidates)
        for u in _score_units(query, weights, index, priors[index], c, shape)
    ]
    if not scored:
        return abstain(ranked)
    # A question that names its error ("RecordTooLargeException: …", "CommitFailedException") is not answered
    # by the rows of other errors: an error table's rows read like any error. Nor is one that names a setting
    # or another entry ("ConfigException: Invalid value -1 for configuration segment.bytes"): INVALID_CONFIG and
    # INVALID_REQUIRED_ACKS share its words, not its subject.
    if query.error_names or any(_asked_about(u.unit, query) and not _is_error_row(u.unit) for u in scored):
        scored = [u for u in scored if not _other_error(u.unit, query)] or scored
    lead_pool = [u for u in scored if u.candidate_index == 0] or scored
    # The reference entry of the setting or error the question names answers it, whatever else scores
    # higher: from the first passage, or else from the next ones ("default of acks" when the first
    # passage is another setting's entry that mentions acks).
    # Not the entry of a setting the user only says they have ("… with processing.guarantee=exactly_once_v2,
    # how often does Streams commit?"): their setup (`Query.setup_identifiers`). From the next passages, only
    # one the asking sentences or a pasted error line name (`_in_asking`): "grafana shows IsrShrinksPerSec
    # spikes … how long can a follower go without fetching?" is not asking about that metric's row.
    named = [
        u
        for u in scored
        if u.candidate_index < NAMED_LEAD_PASSAGES
        and _asked_about(u.unit, query)
        and not _of_setup(u.unit, query)
        and (
            u.candidate_index == 0
            or (_in_asking(u.unit, query) and not _a_word_of_the_first(u.unit, query, ranked.candidates[0].passage))
        )
    ]
    # Of the rows a pasted name fits, the one it fits whole: every row of the MBean type the user pastes
    # (`kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`) names `ReplicaManager`, and only
    # one names `UnderReplicatedPartitions` as well.
    names = [_named_by(u.unit, query) for u in named]
    named = [u for u, by in zip(named, names, strict=True) if not any(by < other for other in names)]
    # "What is the ISR?" is answered by the sentence that says what it is ("… which is known as the ISR") in any
    # passage, not by a first passage that only mentions it (a table of ISR metrics).
    defining = [u for u in scored if defines(u.unit, query.defined)]
    lead_pool = [u for u in named if u.candidate_index == 0] or named or defining or lead_pool
    # The tail of a fenced block whose opening is in an earlier chunk (the last options of a tool's help text)
    # is a fragment without its start or lead-in: it may follow, not lead.
    lead_pool = [u for u in lead_pool if not _block_tail(u, ranked.candidates)] or lead_pool
    lead = max(lead_pool, key=lambda u: u.score)
    # A follow-up asks for something new: what the last answer said leads it only when nothing else of the pool
    # rises over the floor within `told_max_gap` of it (it may still follow the lead).
    if _told(lead, query, shape):
        fresh = [u for u in lead_pool if not u.faint and not _told(u, query, shape)]
        lead = max(
            (u for u in fresh if u.score >= lead.score - shape.told_max_gap), key=lambda u: u.score, default=lead
        )
    # Of two entries for the same name, the one under a heading of that name is the reference: the producer's
    # `acks` section, not the `acks` row of a table of settings recommended for resiliency.
    twins = [
        u
        for u in named
        if u.unit.subject.lower() == lead.unit.subject.lower() and _is_own_entry(u) and not _told(u, query, shape)
    ]
    if twins and not _is_own_entry(lead):
        lead = max(twins, key=lambda u: u.score)
    # Of the same setting's entries on several reference pages (the broker's, the topic's and the producer's
    # `compression.type`), the one on the page the question names ("… on my producer").
    by_place = {_place(u): u for u in scored}
    entry = lead if _is_own_entry(lead) else _entry_of(lead, by_place)
    if entry is not None and entry.unit.kind == "setting":
        namesakes = [
            u
            for u in scored
            if u.candidate_index < NAMESAKE_PASSAGES
            and u.unit.kind == "setting"
            and _is_own_entry(u)
            and u.unit.subject.lower() == entry.unit.subject.lower()
        ]
        page_named = _pages_named([entry, *namesakes], ranked.candidates, query)
        named_page = max(namesakes, key=lambda u: page_named[id(u)])
        if page_named[id(named_page)] > page_named[id(entry)] and not _told(named_page, query, shape):
            lead = named_page
    limit = shape.max_units_troubleshoot if query.intent != "fact" else shape.max_units_fact
    layout = query.intent == "troubleshoot"
    # A troubleshooting answer is laid out as cause / what to do / how to check, and each part's units are
    # measured against the best unit of that part other than the lead: a lead that restates the question
    # ("The record state is invalid.") scores so high that the causes and what to do would fall under a
    # cutoff measured from it.
    best_of_part: dict[str, float] = {}
    for u in scored:
        if u is not lead:
            best_of_part[u.bucket] = max(best_of_part.get(u.bucket, u.score), u.score)
    # A sentence that continues a setting's entry is shown under the entry (`_with_their_entries`), which
    # names the setting and gives its default: choosing the sentence takes in the entry and pays for it.
    chars = lead.size + (HEADINGS_CHARS if layout else 0)
    # So does a lead that leans on the sentence before it ("Failure to do so could …"): that sentence comes first,
    # and what that one leans on in turn ("Such brokers fail …" after "Kafka brokers need both these usages …"
    # after the list of usages), paid for now: later, the answer's other units have taken the room.
    chosen = [lead]
    before = _missing_entry(lead, [], by_place) or _leaned_on(lead, by_place)
    while before is not None and not _among(before, chosen) and len(chosen) <= MAX_LEANING_BACK:
        if chars + before.size > shape.max_chars:
            break
        chosen.insert(0, before)
        chars += before.size
        before = _leaned_on(before, by_place)
    # A lead that is one sentence of a list item comes with the item's other sentences, paid for now too: "The
    # `--zookeeper` option was removed." misleads without "Please use `--bootstrap-server` instead."
    rest = _rest_of_item(lead, chosen, ranked.candidates, by_place)
    if rest and chars + sum(u.size for u in rest) <= shape.max_chars:
        chosen = sorted([*chosen, *rest], key=_place)
        chars += sum(u.size for u in rest)
    seen_terms = {term for u in chosen for term in u.terms}
    question_terms = frozenset(query.tokens)
    pool = [u for u in scored if u is not lead]
    if query.intent == "fact":  # what an error looks like is no fact: a log excerpt only shows a symptom
        pool = [u for u in pool if not (u.unit.kind == "code" and is_log(u.unit.parts[-1]))]
    # Beside the entry the question names, the other entries of its table are about other settings or
    # errors: "RECORD_LIST_TOO_LARGE" is not answered by the rows for codes 9, 11 and 12 under it. So are the
    # other rows of an error's table when that error leads, named or not: "Broker: Not enough in-sync replicas"
    # is the NOT_ENOUGH_REPLICAS row by its words, not INVALID_SESSION_TIMEOUT, the next row that scores.
    # Nor is one of them the answer to one of its asks ("is that error retriable?" after a pasted error's message
    # is answered by the lead's own row, not by the next row that scores for "retriable").
    siblings = set()
    if _asked_about(lead.unit, query) or _is_error_row(lead.unit):
        siblings = {id(u) for u in pool if _sibling_entry(u, lead, ranked.candidates, query)}
        pool = [u for u in pool if id(u) not in siblings]
    focus = query.focus_identifiers
    bare_paste_row = query.intent == "troubleshoot" and not query.asking_words and _is_error_row(lead.unit)
    if (
        focus
        and not query.setup_identifiers
        and (
            (
                query.intent == "fact"
                and (not query.asking_words or focus & (query.asked | frozenset(query.asking_words)))
            )
            or bare_paste_row
        )
        and _names_all(focus, subject := _subject_names(lead, ranked.candidates), classes=bare_paste_row)
    ):
        # A fact about the one thing the lead's heading or line names: other passages add to it only when
        # they carry one of the names the lead gives it (`INVALID_RECORD_STATE` is error code 121). Not when
        # the question names the user's setup ("partitioner.class=… for years: is there a better way?"): the
        # lead may then be their setting's entry, and the answer another's. Nor when only the user's story
        # names the thing and the asking sentences ask something else ("before consumers hit
        # max.poll.interval.ms we'd like a warning. which consumer metric tracks the gap between polls?").
        # So is a log line pasted alone and answered by its error's row: the words around the error ("Error while
        # fetching metadata with correlation id 7 : {orders=LEADER_NOT_AVAILABLE}") are the client's template,
        # and brought an upgrade note on removed producer settings after the row.
        pool = [u for u in pool if u.candidate_index == lead.candidate_index or _carries(u, subject, ranked)]
    # Held right after the lead: the entry of each other setting or error the user asks about, and the best
    # unit for each of the question's asks.
    sources = _default_sources(lead, scored, ranked.candidates)
    # For a comparison, the unit that says what the other thing is comes next to the one that leads with the first.
    others = [[u for u in scored if u is not lead and defines(u.unit, thing)] for thing in query.compared[1:]]
    held = [(max(defining, key=lambda u: u.score), True) for defining in others if defining]
    held += [(unit, True) for unit in sources]
    held += [(unit, True) for unit in _other_named_entries(named, lead, query)]
    held += [
        (by_place[place], False)
        for place in _answers_to_asks(asks, ranked, priors, shape)
        if place in by_place and id(by_place[place]) not in siblings
    ]
    held += [(unit, False) for unit in _what_to_run(lead, pool, query)]
    for unit, asked in held:
        room = shape.max_chars - chars
        added, cost = _admitted(
            unit, chosen, seen_terms, question_terms, ranked.candidates, by_place, room, limit, shape, named=asked
        )
        chosen += added
        seen_terms.update(term for u in added for term in u.terms)
        chars += cost
        pool = [u for u in pool if u is not unit]
    # The row of an error the question does not name, from another passage than the lead's, reads as the error
    # the user has: "Connection to node -1 could not be established" was followed by TRANSACTIONAL_ID_NOT_FOUND.
    pool = [u for u in pool if u.candidate_index == lead.candidate_index or not _other_error(u.unit, query)]
    # A unit under the floor is quoted only beside one chosen for its own sake, as its sequel or its preamble:
    # never one faint sentence after another through a passage.
    anchors = list(chosen)
    while pool and _counted(chosen, ranked.candidates, by_place) < limit:
        # What follows a lead-in already shown first (the rest of a list cut for size, the list a chosen
        # setting's description introduces); then the best remaining unit, a neighbour of a chosen one
        # raised: the sentence after "check if there is a hung transaction" says how to check. So is a unit of a
        # passage the answer quotes nothing of yet: the first passage's third sentence on the same thing tells
        # the user less than the second passage's best (the setting the first one's tutorial sets).
        eligible = [u for u in pool if not u.faint or _beside(u, anchors)]
        if not eligible:
            break
        quoted = {u.candidate_index for u in chosen}
        unit = max(
            eligible,
            key=lambda u: (
                _continues(u, chosen),
                _with_neighbours(u, chosen, shape) + shape.new_passage_weight * (u.candidate_index not in quoted),
                -u.candidate_index,
                -u.unit.position,
            ),
        )
        reference = best_of_part.get(unit.bucket, lead.score) if layout else lead.score
        below = _with_neighbours(unit, chosen, shape) < reference - shape.relative_cutoff
        if below and not layout:
            break  # the best remaining unit is too far below the lead: so is every other one
        pool.remove(unit)
        if below:
            continue  # too far below its part's best
        room = shape.max_chars - chars
        added, cost = _admitted(
            unit, chosen, seen_terms, question_terms, ranked.candidates, by_place, room, limit, shape
        )
        chosen += added
        if added and not unit.faint:  # admitted (`_admitted` gives nothing or holds it), for its own sake
            anchors.append(unit)
        seen_terms.update(term for u in added for term in u.terms)
        chars += cost
    chosen, freed = _without_fragments(chosen, ranked.candidates)
    chosen, budget = _with_their_entries(chosen, by_place, shape.max_chars - chars + freed, shape.min_novelty)
    chosen, budget = _with_what_they_follow(chosen, by_place, budget)
    chosen, budget = _with_their_sequels(chosen, by_place, budget)
    chosen, budget = _with_their_items(chosen, ranked.candidates, by_place, budget)
    chosen, budget = _with_whole_lists(chosen, scored, ranked.candidates, by_place, budget)
    chosen, budget = _with_block_heads(chosen, by_place, budget)
    shown = _with_what_lead_ins_introduce(chosen, by_place, budget)
    after_lead = tuple(_place(u) for u in sources)
    draft, shown = _within(ranked.candidates, shown, layout, shape.max_chars, after_lead)
    return _with_related_settings(draft, ranked, shown, layout, after_lead, scored, shape)


def _told(unit: _Scored, query: Query, shape: AnswerShape) -> bool:
    """The conversation's last answer showed this unit: its longest sentence, of `AnswerShape.told_min_words`
    words or more, is among that answer's words (`Query.told`). The longest sentence of a row or an entry is its
    description, which an answer quotes as it stands whatever it makes of the name and labels around it."""
    if not query.told or not shape.told_min_words:
        return False
    sentences = (
        sentence
        for part in unit.unit.parts
        for line in part.split("\n")
        for cell in row_cells(line)
        for sentence in _SENTENCE_BREAK.split(cell)
    )
    words = max((told_words(sentence) for sentence in sentences), key=len, default="")
    return len(words.split()) >= shape.told_min_words and f" {words} " in query.told


_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")


def _what_to_run(lead: _Scored, pool: list[_Scored], query: Query) -> list[_Scored]:
    """In answer to how to do something, the best config line or command of the first `HOW_TO_CODE_PASSAGES`
    passages, when the lead is none: "how do i make kafka spread replicas over the zones?" is answered by the
    page on rack awareness, whose sentences describe it and whose `broker.rack=my-rack-id` turns it on; that
    line's cosine with the user's words is low. A command that shows something counts: "how can I confirm from
    the CLI which assignment strategy the group is using?" is led by `partition.assignment.strategy`'s entry, and
    answered by the `kafka-consumer-groups.sh --describe --group my-group --state` of the second passage."""
    if not query.how_to or _runnable(lead):
        return []
    code = [u for u in pool if _runnable(u) and u.candidate_index < HOW_TO_CODE_PASSAGES]
    return [max(code, key=lambda u: u.score)] if code else []


def _runnable(unit: _Scored) -> bool:
    """A config line or command: one that does something or shows something, not a log excerpt."""
    return unit.unit.kind == "code" and unit.bucket in ("do", "check")


def _other_named_entries(named: list[_Scored], lead: _Scored, query: Query) -> list[_Scored]:
    """The entries of the other settings or errors the asking sentences name ("retention.ms or segment.ms?"),
    one per name, best first: each is what the question asks about as much as the lead is."""
    shown = {lead.unit.subject.lower()}
    entries = []
    for unit in sorted(named, key=lambda u: -u.score):
        subject = unit.unit.subject.lower()
        asked = bool(_entry_identifiers(unit.unit) & query.asked)
        if subject not in shown and asked and (_is_own_entry(unit) or unit.unit.kind == "row"):
            shown.add(subject)
            entries.append(unit)
    return entries


def _default_sources(lead: _Scored, scored: list[_Scored], candidates: tuple[Candidate, ...]) -> list[_Scored]:
    """An entry with no default of its own ("Default: null") takes its value from the setting its description
    names ("If not set, the value in log.retention.minutes is used"): that setting's entry, when a candidate
    holds it, and its own source in turn. "How long is log data kept by default?" is answered by the 168 of
    `log.retention.hours`, not by the null of `log.retention.ms`."""
    entries = {u.unit.subject.lower(): u for u in scored if u.unit.kind == "setting" and _is_own_entry(u)}
    sources: list[_Scored] = []
    entry: _Scored | None = lead
    while entry is not None and len(sources) < MAX_DEFAULT_HOPS and has_no_default(entry.unit):
        # The section's description and the sentences after its rows, which may say where the value comes from.
        lines = candidates[entry.candidate_index].passage.text.split("\n")
        said = [line for line in lines if len(row_cells(line)) < 2]
        named = [i for line in said for i in extract_identifiers(line) if i != entry.unit.subject.lower()]
        entry = next((entries[i] for i in named if i in entries and not _among(entries[i], [lead, *sources])), None)
        sources += [entry] if entry is not None else []
    return sources


def _answers_to_asks(
    asks: Sequence[Ranked], ranked: Ranked, priors: Sequence[float], shape: AnswerShape
) -> list[tuple[int, int]]:
    """The place of the best unit for each of the question's asks: of all the whole question's passages that
    the ask searched alone retrieves too, scored by that ask's own cosines and a prior halfway between the
    passage's for the whole question (`priors`) and for the ask (where the ask's own ranking puts it). Alone, a
    short ask ("which setting is this") also finds passages about something else; the whole question's
    passages keep it on the subject. An ask the lead's passage answers best adds no unit of a lower passage
    that only ranks first for the ask's words ("how does quota enforcement work" and a sentence on where
    quotas are hard to implement); one the lead's passage only touches does ("what's the max size of a single
    message by default, and how do I raise it for one topic?": the `message.max.bytes` entry, which the first
    ask ranks first, not "the server default is used" in the passage on per-topic overrides)."""
    places = []
    for ask in asks:
        cosines = {c.passage.chunk_id: c.unit_scores for c in ask.pool.candidates}
        own = dict(zip((c.passage.chunk_id for c in ask.candidates), passage_priors(ask), strict=True))
        units = [
            unit
            for index, c in enumerate(ranked.candidates)
            if c.passage.chunk_id in cosines
            for unit in _score_units(
                ask.pool.query,
                ask.pool.evidence.term_weights,
                index,
                (priors[index] + own.get(c.passage.chunk_id, 0.0)) / 2,
                dataclasses.replace(c, unit_scores=cosines[c.passage.chunk_id]),
                shape,
            )
        ]
        best = max(units, key=lambda u: u.score, default=None)
        if best is not None and best.score >= shape.ask_min:
            places.append(_place(best))
    return places


def _admitted(
    unit: _Scored,
    chosen: list[_Scored],
    seen_terms: set[str],
    question_terms: frozenset[str],
    candidates: tuple[Candidate, ...],
    by_place: dict[tuple[int, int], _Scored],
    room: int,
    limit: int,
    shape: AnswerShape,
    named: bool = False,
) -> tuple[list[_Scored], int]:
    """What showing `unit` adds to the answer (its setting's entry first, when not shown; the other sentences
    of its list item with it, when they fit) and the characters that costs; nothing when it says what the
    answer says, or does not fit `room` characters and `limit` units.
    An entry the question names (`named`) is shown however many words it shares with the answer: the words
    two entries share are what the user asks them apart by (NOT_ENOUGH_REPLICAS, ..._AFTER_APPEND), and
    the entries of `log.retention.ms` and `log.retention.minutes` read alike but for their unit. So is a
    table row that brings a word of the question (`question_terms`) the answer lacks: the rows of one table
    share most of their words (the MBean column, "per second in the window"), and the row for "closed
    connections", `connection-close-rate` after `connection-creation-rate`, is new by one word."""
    if _among(unit, chosen) or _restates(unit, chosen, shape.min_novelty):
        return [], 0  # a setting's entry already shown for its continuation, or said by another page
    if any(_same_items(unit, other) for other in chosen):
        return [], 0  # an item of a list cut for size, and the piece of the list that holds it
    if not named and any(
        float(unit.vector @ other.vector) > NEAR_DUPLICATE
        and not _rows_apart(unit, other)
        and not _names_apart(unit, other)
        for other in chosen
    ):
        return [], 0
    # Its words may all be in the answer when only its names are new: "The `groups.blacklist` was removed …
    # Please use `groups.exclude` instead." after the same sentence about `topics.blacklist`.
    new_terms = unit.terms - seen_terms
    apart = (
        all(_names_apart(unit, other) for other in chosen)
        or (unit.unit.kind == "row" and bool(new_terms & question_terms))
        or _new_metric(unit, chosen)
    )
    if not (named or apart) and (not unit.terms or len(new_terms) / len(unit.terms) < shape.min_novelty):
        return [], 0  # adds no fact the answer does not already state
    # Shown first, and paid for now: the entry `unit` continues, or the sentence whose thing it names with a
    # demonstrative ("… within the max time set by this configuration" needs the one naming
    # `replica.lag.time.max.ms`) or that says what a code block with no lead-in of its own runs, so that a unit
    # that cannot be shown with it gives way to one that stands alone. A sentence that only leans back
    # ("Furthermore, …") still reads alone: paying for its predecessor here cost the tuning answers facts
    # (evals/reports/quality_history.md, twenty-eighth session).
    before = _missing_entry(unit, chosen, by_place) or _leaned_on(unit, by_place, _reads_only_after)
    if before is not None and (_among(before, chosen) or _restates(before, chosen, shape.min_novelty)):
        before = None
    cost = unit.size - _shared_lead_in(unit, chosen) + (before.size if before else 0)
    if cost > room or (before and _counted(chosen, candidates, by_place) + 2 > limit):
        return [], 0
    added = ([dataclasses.replace(before, bucket=unit.bucket)] if before else []) + [unit]
    # The rest of its list item is paid for now as well, when it fits: later, other units have taken the room
    # and `_with_their_items` finds none left. An item counts as one unit however many sentences it has.
    rest = _rest_of_item(unit, [*chosen, *added], candidates, by_place)
    if rest and cost + sum(u.size for u in rest) <= room:
        return sorted([*added, *rest], key=_place), cost + sum(u.size for u in rest)
    return added, cost


def _new_metric(unit: _Scored, chosen: list[_Scored]) -> bool:
    """`unit` is the row of a metric whose MBean no chosen unit writes: the rows of a metrics table share their
    words but for the metric's name (the LeaderCount row after the PartitionCount and ReassigningPartitions
    ones: "… counts | kafka.server:type=ReplicaManager,name=… | mostly even across brokers")."""
    if unit.unit.kind != "row":
        return False
    written = {mbean for other in chosen for mbean in mbeans_written(other.unit.matched_text)}
    return bool(metric_entries(unit.unit.matched_text) - written)


def _same_items(unit: _Scored, other: _Scored) -> bool:
    """An item of a list cut for size and the piece of that list holding it: the list gives each item as a
    unit too (`rag.units`), and the item would show twice. Two items, or two pieces, never overlap."""
    mine, theirs = unit.unit, other.unit
    return (
        mine.kind == theirs.kind == "list"
        and mine.item != theirs.item
        and _lead_key(unit) == _lead_key(other)
        and (mine.parts[-1] in theirs.parts[-1] or theirs.parts[-1] in mine.parts[-1])
    )


def _names_apart(unit: _Scored, other: _Scored) -> bool:
    """Each of two units names an identifier the other does not: the items of a list of changes ("The
    `topics.blacklist` was removed …", the same for `groups.blacklist`) read alike but for their names, and state
    different facts. One that only adds a name (another page's entry of the same setting, with its default's
    path) does not stand apart from the other. Two settings' entries stand apart by their keys alone: the
    entries of `log.cleaner.io.buffer.size` and `log.cleaner.dedupe.buffer.size` read alike but for them and
    their defaults. Two command listings stand apart by their long options too: "--alter --add-config
    log.cleaner.threads=2" and "--alter --delete-config log.cleaner.threads" share nearly every word."""
    if unit.unit.kind == other.unit.kind == "setting":
        return unit.unit.subject.lower() != other.unit.subject.lower()
    mine, theirs = _identifiers_of(unit.unit.matched_text), _identifiers_of(other.unit.matched_text)
    if unit.unit.kind == other.unit.kind == "code":  # `--add-config` and `--delete-config` are two operations
        mine, theirs = mine | _flags_of(unit.unit.matched_text), theirs | _flags_of(other.unit.matched_text)
    return bool(mine - theirs) and bool(theirs - mine)


@functools.lru_cache(maxsize=4096)
def _identifiers_of(text: str) -> frozenset[str]:
    return frozenset(extract_identifiers(text))


def _flags_of(text: str) -> frozenset[str]:
    """The long options a command listing passes (`--delete-config`): two command lines alike but for them
    run different operations."""
    return frozenset(_LONG_FLAG.findall(text))


def _within(
    candidates: tuple[Candidate, ...],
    shown: list[_Scored],
    layout: bool,
    max_chars: int,
    after_lead: tuple[tuple[int, int], ...] = (),
) -> tuple[Draft, list[_Scored]]:
    """The rendered answer and the units it shows, last-chosen units left out until it fits `max_chars`
    (names, markers, a table row's labels and the part headings add to the quoted words); the lead is always
    shown. A lead-in whose block was left out goes too: it would introduce nothing. The units placed at
    `after_lead` follow the lead (`_render`)."""
    draft = _render(candidates, shown, layout, after_lead)
    while len(draft.text) > max_chars and len(shown) > 1:
        shown = shown[:-1]
        while len(shown) > 1 and is_lead_in_sentence(shown[-1].unit):
            shown = shown[:-1]
        draft = _render(candidates, shown, layout, after_lead)
    return draft, shown


def _with_related_settings(
    draft: Draft,
    ranked: Ranked,
    shown: list[_Scored],
    layout: bool,
    after_lead: tuple[tuple[int, int], ...],
    scored: list[_Scored],
    shape: AnswerShape,
) -> Draft:
    """The answer, closed by a line naming setting entries it does not show, each with its default: first the
    settings the answer names ("If this value is larger than the `transaction.max.timeout.ms` setting in the
    broker, …" leaves the user asking what that one is set to), from the passages or their references
    (`Ranked.references`), as many as keep the answer within `max_chars`; then the knobs near the answer, among
    the first `shape.related_depth` passages, that score as a unit must to be shown, for a question whose
    setting the lead passage only describes ("what decides when a follower drops out of the ISR?" is answered
    from the replication design, which names `replica.lag.time.max.ms` and not its default, while the setting's
    entry ranks next), as many as keep it within `shape.related_max_chars`. Up to `shape.related_max` in all;
    the units shown keep their place, and a long answer stays as it is. Not a setting of one plain word that the
    answer uses as a word (`field`, `topics`): the answer does not name it; nor, among the knobs near the answer,
    one the question does not spell (a transform's `renames` for "how do I rename a topic?")."""
    candidates = ranked.candidates + ranked.references
    entries = [u for u in scored if u.unit.kind == "setting" and _is_own_entry(u)]
    entries += _reference_entries(ranked.references, len(ranked.candidates))
    # A setting the answer names only as the heading of the prose it quotes (the Streams guide's `state.dir`)
    # comes after those its sentences name: its description is shown, only its default is not.
    prose = [candidates[u.candidate_index].passage for u in shown]
    headings = {p.section_path[-1:] for p in prose if not ends_in_key_values(p.text)}
    named = sorted(_named_settings(draft.text, entries, shown), key=lambda u: (u.unit.subject,) in headings)
    near = [
        u
        for u in entries
        if u.candidate_index < shape.related_depth
        and u.score >= shown[0].score - shape.relative_cutoff
        and u.unit.subject.lower() not in {n.unit.subject.lower() for n in named}
        and (_identifiers_of(u.unit.subject) or _spelt_in(u.unit.subject, ranked.pool.query.question))
    ]
    related: list[_Scored] = []
    for unit in [*named, *near]:
        subject = unit.unit.subject
        if (
            len(related) < shape.related_max
            and subject
            and " " not in subject
            and not any(u.unit.kind == "setting" and u.unit.subject.lower() == subject.lower() for u in shown)
            and not (_spelt_in(subject, draft.text) and not _identifiers_of(subject))
            and all(subject.lower() != u.unit.subject.lower() for u in related)
        ):
            related.append(unit)
    near_ids = {id(u) for u in near}
    mentioned: list[_Scored] = []
    for unit in related:  # each in its turn, as long as the answer stays within the limit of all mentioned
        fuller = _render(candidates, shown, layout, after_lead, [*mentioned, unit])
        limit = shape.related_max_chars if near_ids & {id(u) for u in [*mentioned, unit]} else shape.max_chars
        if len(fuller.text) <= min(shape.max_chars, limit):
            mentioned.append(unit)
            draft = fuller
    return draft


def _reference_entries(references: Sequence[Candidate], offset: int) -> list[_Scored]:
    """The setting entries of `references`, unscored, indexed after the ranked candidates (`offset`)."""
    entries = []
    for index, candidate in enumerate(references, offset):
        heading = candidate.passage.section_path[-1] if candidate.passage.section_path else ""
        units = _units_of(candidate.passage.text, heading, candidate.continues_code)
        position = _entry_position(units, heading)
        if 0 <= position < len(units) and units[position].kind == "setting":
            unit = units[position]
            entries.append(_Scored(index, unit, np.zeros(0), 0.0, frozenset(), "cause", position, 0))
    return entries


def _named_settings(text: str, entries: Sequence[_Scored], shown: Sequence[_Scored]) -> list[_Scored]:
    """The entries of the settings `text` names, in the order it names them, each once: of one setting's entries
    on several pages, the one among the answer's own passages, or else the one every page agrees with on the
    default (the broker's and the producer's `compression.type` differ: neither is named)."""
    quoted = {u.candidate_index for u in shown}
    found = []
    lowered = text.lower()
    for name in sorted(extract_identifiers(text), key=lowered.find):
        same = [u for u in entries if u.unit.subject.lower() == name]
        own = [u for u in same if u.candidate_index in quoted]
        if own:
            found.append(own[0])
        elif same and len({setting_default(u.unit) for u in same}) == 1:
            found.append(same[0])
    return found


def _with_their_entries(
    chosen: list[_Scored], by_place: dict[tuple[int, int], _Scored], budget: int, min_novelty: float
) -> tuple[list[_Scored], int]:
    """A chosen unit that continues a setting's entry ("This setting should correspond roughly to the total
    memory …" below the `buffer.memory` entry) is shown after that entry, which names the setting and gives
    its type and default: the entry moves before it when chosen, or is taken in when the character budget
    allows, in the unit's part of the answer, unless another page's entry of the setting says it (`_restates`).
    `by_place` holds every scored unit by (passage, position). Returns the units and the budget left."""
    shown: list[_Scored] = []
    for unit in chosen:
        entry = _entry_of(unit, by_place)
        if entry is not None and not _among(entry, shown) and not _restates(entry, chosen, min_novelty):
            in_chosen = next((other for other in chosen if _place(other) == _place(entry)), None)
            if in_chosen is not None:
                shown.append(in_chosen)
            elif entry.size <= budget:
                shown.append(dataclasses.replace(entry, bucket=unit.bucket))
                budget -= entry.size
        if not _among(unit, shown):
            shown.append(unit)
    return shown, budget


def _subject_names(lead: _Scored, candidates: tuple[Candidate, ...]) -> frozenset[str]:
    """The identifiers the lead's heading path and the lead itself give (a row's name and its code), the exception
    classes an error name stands for (`exception_names`), and the metric a metrics row leads with names in its
    MBean cell (`metric_tokens`)."""
    passage = candidates[lead.candidate_index].passage
    names = extract_identifiers(" ".join((*passage.section_path, lead.unit.text)))
    return frozenset(names).union(metric_tokens(lead.unit.text), exception_names(names))


def _names_all(focus: frozenset[str], subject: frozenset[str], classes: bool) -> bool:
    """`subject` gives every name of `focus`. With `classes`, a pasted exception class counts as given once the
    subject gives one of the focus's error names: the error line's message named the row ("OutOfOrderSequenceException:
    The broker received an out of order sequence number" is `OUT_OF_ORDER_SEQUENCE_NUMBER`), and the class is that
    error under its client's name, which `exception_names` cannot spell from the row's."""
    named = focus & subject
    if classes and named:
        named |= {name for name in focus if "_" not in name and name.endswith(("exception", "error"))}
    return focus <= named


def _carries(unit: _Scored, names: frozenset[str], ranked: Ranked) -> bool:
    return bool(names & set(ranked.candidates[unit.candidate_index].passage.identifiers))


def _place(unit: _Scored) -> tuple[int, int]:
    """Where a unit stands: its passage's rank and its position there (a copy in another part keeps it)."""
    return unit.candidate_index, unit.unit.position


def _among(unit: _Scored, units: Sequence[_Scored]) -> bool:
    """`unit`, or a copy of it placed in another part of the answer, is among `units`."""
    return any(_place(unit) == _place(other) for other in units)


def _without_fragments(chosen: list[_Scored], candidates: tuple[Candidate, ...]) -> tuple[list[_Scored], int]:
    """`chosen` without the units whose words a chosen unit of another chunk of the same section quotes whole,
    that unit taking the first place of the two: chunks overlap, and a code block shows under its lead-in in one
    chunk and alone at the start of the next ("allow.everyone.if.no.acl.found=true" led an answer bare, then again
    under "If you want to change that behavior, you can include the following …"). Returns the units and the
    characters freed."""
    kept = list(chosen)
    freed = 0
    for unit in chosen:
        section = _section_of(candidates[unit.candidate_index].passage)
        whole = next(
            (
                other
                for other in kept
                if other.candidate_index != unit.candidate_index
                and _section_of(candidates[other.candidate_index].passage) == section
                and unit.unit.text in other.unit.text
            ),
            None,
        )
        if whole is None or not any(u is unit for u in kept):
            continue
        first = min(_index_of(unit, kept), _index_of(whole, kept))
        kept = [u for u in kept if u is not unit and u is not whole]
        kept.insert(first, whole)
        freed += unit.size
    return kept, freed


def _index_of(unit: _Scored, units: Sequence[_Scored]) -> int:
    return next(n for n, other in enumerate(units) if other is unit)


def _restates(entry: _Scored, units: Sequence[_Scored], min_novelty: float) -> bool:
    """Another page's entry of the same setting, with the same default and less than `min_novelty` of `entry`'s
    words new to it, is among `units`: the broker reference's and the tiered-storage reference's
    `remote.log.storage.system.enable` differ by an update mode. A sentence continuing one is shown without its
    own entry. Entries whose defaults differ state different facts (the producer's `request.timeout.ms` 30000,
    the consumer's 40000)."""
    return (
        entry.unit.kind == "setting"
        and bool(entry.terms)
        and any(
            other.unit.kind == "setting"
            and other.unit.subject.lower() == entry.unit.subject.lower()
            and setting_default(other.unit) == setting_default(entry.unit)
            and len(entry.terms - other.terms) / len(entry.terms) < min_novelty
            for other in units
        )
    )


def _entry_of(unit: _Scored, by_place: dict[tuple[int, int], _Scored]) -> _Scored | None:
    """The setting entry `unit` continues; None for the entry itself and for a unit of no entry."""
    continued = unit.entry >= 0 and unit.entry != unit.unit.position
    return by_place.get((unit.candidate_index, unit.entry)) if continued else None


def _missing_entry(unit: _Scored, chosen: list[_Scored], by_place: dict[tuple[int, int], _Scored]) -> _Scored | None:
    """The setting entry `unit` continues, when the answer does not show it yet."""
    entry = _entry_of(unit, by_place)
    return entry if entry is not None and not _among(entry, chosen) else None


def _with_what_they_follow(
    chosen: list[_Scored], by_place: dict[tuple[int, int], _Scored], budget: int
) -> tuple[list[_Scored], int]:
    """A chosen sentence that leans on the one before it ("However, if the consumer …", "This means …") is
    shown after that sentence: taken in when the character budget allows, or moved up when chosen for
    itself further on. One that would mislead without it (`_depends_on`) is left out when it does not fit,
    unless it leads the answer. Returns the units and the budget left."""
    shown: list[_Scored] = []
    for unit in chosen:
        if _among(unit, shown):
            continue  # moved up, before the sentence that leans on it
        run = [unit]  # "They can also delete them …" leans in turn on "Users can create and name each topic."
        while len(run) <= MAX_LEANING_BACK:
            before = _leaned_on(run[0], by_place)
            if before is None or _among(before, shown):
                break
            moved = _among(before, chosen)
            if (
                not moved
                and before.size > budget
                and run == [unit]
                and unit is not chosen[0]
                and _depends_on(unit, before)
            ):
                run, budget = [], budget + unit.size  # read alone it would mislead ("Instead, …"): left out
                break
            if (moved and _list_key(before) is not None) or (not moved and before.size > budget):
                break  # the sentences of list items keep their list's order (`_render`)
            run.insert(0, dataclasses.replace(before, bucket=unit.bucket))
            budget -= 0 if moved else before.size
        shown += run
    return shown, budget


def _with_their_sequels(
    chosen: list[_Scored], by_place: dict[tuple[int, int], _Scored], budget: int
) -> tuple[list[_Scored], int]:
    """A chosen sentence is followed by the sentence after it in its passage when that one draws on it ("So, if
    the number of consumers is larger than the number of partitions, some consumers will never get any data."
    after "a topic partition is the smallest unit that we distribute messages among consumers"): when the
    character budget allows, and when it is no faint match nor a question (which states nothing). Returns the
    units and the budget left."""
    shown: list[_Scored] = []
    for unit in chosen:
        shown.append(unit)
        after = by_place.get((unit.candidate_index, unit.unit.position + 1))
        if (
            after is not None
            and _leans_back(after)
            and not after.faint
            and not after.unit.text.rstrip().endswith("?")
            and not _among(after, chosen)  # each sentence has one sequel: none is added twice
            and after.size <= budget
        ):
            shown.append(dataclasses.replace(after, bucket=unit.bucket))
            budget -= after.size
    return shown, budget


def _leans_back(unit: _Scored) -> bool:
    return unit.unit.kind == "sentence" and _LEANS_BACK.match(unit.unit.text) is not None


def _refers_to(unit: _Scored, before: _Scored) -> bool:
    """`unit` names something with a demonstrative ("this configuration", "these brokers") that `before` names;
    a list by its lead-in ("Relevant usages for Kafka are:" before "Kafka brokers need both these usages …")."""
    if unit.unit.kind != "sentence":
        return False
    named = {match.group(1).lower() for match in _DEMONSTRATIVE.finditer(unit.unit.text)}
    said = before.unit.parts[0] if before.unit.kind == "list" else before.unit.text
    words = set(_WORD.findall(said.lower())) if named else set()
    return any(noun in words or noun.removesuffix("s") in words or f"{noun}s" in words for noun in named)


def _depends_on(unit: _Scored, before: _Scored) -> bool:
    """`unit` misleads or says nothing when shown without `before`, the sentence before it in its passage."""
    return _refers_to(unit, before) or (
        unit.unit.kind == "sentence" and _DEPENDS_ON_BEFORE.match(unit.unit.text) is not None
    )


def _leans_on(unit: _Scored, before: _Scored) -> bool:
    """`unit`, shown right after `before` in its passage, reads as a continuation of it."""
    return _leans_back(unit) or _reads_only_after(unit, before)


def _reads_only_after(unit: _Scored, before: _Scored) -> bool:
    """`unit` names a thing `before` names with a demonstrative (`_refers_to`), or is a code block with no lead-in
    of its own, which runs what the sentence before it says: shown alone after another sentence, the topic-level
    command that disables tiered storage read as the way to re-enable it."""
    bare_code = unit.unit.kind == "code" and len(unit.unit.parts) == 1
    return bare_code or _refers_to(unit, before)


def _leaned_on(
    unit: _Scored,
    by_place: dict[tuple[int, int], _Scored],
    leans: Callable[[_Scored, _Scored], bool] = _leans_on,
) -> _Scored | None:
    """The sentence right before `unit` in its passage, when `unit` leans on it (by `leans`); or the list right
    before it, when `unit` names what the list's lead-in names ("these usages"): read alone, it says "both"
    of nothing."""
    before = by_place.get((unit.candidate_index, unit.unit.position - 1))
    if before is None or before.unit.kind not in ("sentence", "list"):
        return None
    if before.unit.kind == "list":
        return before if _refers_to(unit, before) else None
    return before if leans(unit, before) else None


def _with_their_items(
    chosen: list[_Scored], candidates: tuple[Candidate, ...], by_place: dict[tuple[int, int], _Scored], budget: int
) -> tuple[list[_Scored], int]:
    """A chosen sentence of a list item is shown with the item's other sentences when they fit the character
    budget: "- The `port` and `host.name` configurations were removed. Please use `listeners` instead." is
    one note, and either sentence alone misleads. Returns the units and the budget left."""
    shown: list[_Scored] = []
    for unit in chosen:
        if _among(unit, shown):
            continue  # brought in with an earlier sentence of its item
        rest = _rest_of_item(unit, (*chosen, *shown), candidates, by_place)
        cost = sum(u.size for u in rest)
        if not rest or cost > budget:
            shown.append(unit)
            continue
        shown += sorted([unit, *rest], key=_place)
        budget -= cost
    return shown, budget


def _counted(
    chosen: Sequence[_Scored], candidates: tuple[Candidate, ...], by_place: dict[tuple[int, int], _Scored]
) -> int:
    """The units `chosen` holds toward the answer's limit: the sentences of one list item count once."""
    return len({_place(_item_sentences(u, candidates, by_place)[0]) for u in chosen})


def _rest_of_item(
    unit: _Scored, shown: Sequence[_Scored], candidates: tuple[Candidate, ...], by_place: dict[tuple[int, int], _Scored]
) -> list[_Scored]:
    """The other sentences of the list item `unit` is a sentence of that `shown` lacks, in `unit`'s part of
    the answer."""
    return [
        u if u.bucket == unit.bucket else dataclasses.replace(u, bucket=unit.bucket)
        for u in _item_sentences(unit, candidates, by_place)
        if u is not unit and not _among(u, shown) and not _quoted_in(u, shown)
    ]


def _item_sentences(
    unit: _Scored, candidates: tuple[Candidate, ...], by_place: dict[tuple[int, int], _Scored]
) -> list[_Scored]:
    """The sentences of the list item (of a list without a lead-in, or one an earlier chunk began) that `unit`
    is a sentence of, in text order and itself among them: its neighbours in the same list with no line break
    between."""
    if unit.unit.kind not in ("sentence", "list") or unit.unit.list_start < 0:
        return [unit]
    text = candidates[unit.candidate_index].passage.text
    item = [unit]
    for step in (-1, 1):
        edge = unit
        while (other := by_place.get((unit.candidate_index, edge.unit.position + step))) is not None:
            if other.unit.kind not in ("sentence", "list") or other.unit.list_start != unit.unit.list_start:
                break
            first, second = (other, edge) if step < 0 else (edge, other)
            said = first.unit.parts[-1]  # a list unit's sentence follows its lead-in (`with_block_lead_in`)
            start = text.find(said)
            end = text.find(second.unit.parts[-1], start + len(said))
            if start < 0 or end < 0 or "\n" in text[start + len(said) : end]:
                break
            item.append(other)
            edge = other
    return sorted(item, key=lambda u: u.unit.position)


def _quoted_in(unit: _Scored, shown: Sequence[_Scored]) -> bool:
    """`unit`'s words are already quoted by a unit of the same passage (a list unit holding the item)."""
    return any(unit.unit.text in other.unit.text for other in shown if other.candidate_index == unit.candidate_index)


def _list_key(unit: _Scored) -> tuple[int, int] | None:
    """Sentences of the items of one list without a lead-in, in one passage, share this key (not those shown
    under the lead-in of a list an earlier chunk began: `_lead_key`)."""
    return (
        (unit.candidate_index, unit.unit.list_start)
        if unit.unit.list_start >= 0 and unit.unit.kind == "sentence"
        else None
    )


def _with_whole_lists(
    chosen: list[_Scored],
    scored: list[_Scored],
    candidates: tuple[Candidate, ...],
    by_place: dict[tuple[int, int], _Scored],
    budget: int,
) -> tuple[list[_Scored], int]:
    """Two or more chosen items of one list without a lead-in (the steps under a heading) bring the rest
    of it when all of it fits the character budget: "Finally migrate all producers" and three other steps
    left out "Decommission the 0.7 cluster". One matching item of a list of unrelated notes brings nothing.
    Returns the units and the budget left."""
    shown = list(chosen)
    # one per item, in the order chosen: two sentences of one item are one item
    items = [(key, _item_sentences(u, candidates, by_place)[0].unit.position) for u in chosen if (key := _list_key(u))]
    keys = [key for key, _ in dict.fromkeys(items)]
    for key in dict.fromkeys(k for k in keys if keys.count(k) > 1):
        rest = [u for u in scored if _list_key(u) == key and not _among(u, shown)]
        cost = sum(u.size for u in rest)
        if rest and cost <= budget:
            shown += rest
            budget -= cost
    return shown, budget


def _with_block_heads(
    chosen: list[_Scored], by_place: dict[tuple[int, int], _Scored], budget: int
) -> tuple[list[_Scored], int]:
    """A chosen piece of a code block cut for size that shows what the command opening the block printed is shown
    after the pieces before it, when they fit the character budget; leading the answer, it gives its place to
    the block's first piece when they don't. Alone, the output lines of "the following command displays a summary
    of the metadata quorum:" were shown without the command. Returns the units and the budget left."""
    shown: list[_Scored] = []
    for unit in chosen:
        if _among(unit, shown):
            continue  # brought in before a later piece of its block
        piece = unit.unit.code_piece
        before = [by_place.get((unit.candidate_index, unit.unit.position - back)) for back in range(piece, 0, -1)]
        pieces = [b for b in before if b is not None and b.unit.kind == "code"]
        if not piece or len(pieces) < piece or not opens_with_command(pieces[0].unit):
            shown.append(unit)
            continue
        missing = [b for b in pieces if not _among(b, (*chosen, *shown))]
        cost = sum(b.size for b in missing)
        if not missing or cost <= budget:
            shown += [*(dataclasses.replace(b, bucket=unit.bucket) for b in missing), unit]
            budget -= cost
        elif unit is chosen[0] and missing[0] is pieces[0]:
            shown.append(dataclasses.replace(pieces[0], bucket=unit.bucket))
            budget = max(0, budget + unit.size - pieces[0].size)
        else:
            shown.append(unit)
    return shown, budget


def _with_what_lead_ins_introduce(
    chosen: list[_Scored], by_place: dict[tuple[int, int], _Scored], budget: int
) -> list[_Scored]:
    """A chosen sentence that introduces what follows it ("For instance, the following example moves …:")
    is shown with that next unit of its passage, taken in when the character budget allows; else left out."""
    shown: list[_Scored] = []
    for unit in chosen:
        if not is_lead_in_sentence(unit.unit):
            shown.append(unit)
            continue
        following = by_place.get((unit.candidate_index, unit.unit.position + 1))
        if following is None:
            continue
        if _among(following, (*chosen, *shown)):  # perhaps a copy placed in another part
            shown.append(unit)
        elif following.size <= budget:
            shown += [unit, following]
            budget -= following.size
    return shown or chosen


def _lead_key(unit: _Scored) -> tuple[int, str] | None:
    """Units that follow one lead-in of one passage (pieces of a list cut for size; a setting and the
    list its description introduces) share this key and are shown as one block."""
    lead = lead_in(unit.unit)
    return (unit.candidate_index, lead) if lead else None


def _shared_lead_in(unit: _Scored, chosen: list[_Scored]) -> int:
    """Characters of the unit already in the answer: a lead-in shown with a chosen unit that shares it
    (two settings with one description are both shown whole)."""
    key = _lead_key(unit)
    settings = unit.unit.kind == "setting"
    if key is None or not any(
        _lead_key(other) == key and not (settings and other.unit.kind == "setting") for other in chosen
    ):
        return 0
    return len(key[1]) + 1


def _continues(unit: _Scored, chosen: list[_Scored]) -> bool:
    """`unit` goes on from a lead-in a chosen unit shows (the rest of a list cut for size, the list a setting's
    description introduces), so it comes next. Not one item of a cut list given alone (`EvidenceUnit.item`), nor
    a piece after one: the item answers, and the rest of its list would bury it."""
    if unit.unit.item or _shared_lead_in(unit, chosen) == 0:
        return False
    return not any(other.unit.item and _lead_key(other) == _lead_key(unit) for other in chosen)


def _repeats(terms: frozenset[str], asked: frozenset[str], share: float) -> bool:
    """At least `share` of the unit's words are the question's own: it quotes back what the user pasted."""
    return bool(terms) and len(terms & asked) >= share * len(terms)


def _with_neighbours(unit: _Scored, chosen: list[_Scored], shape: AnswerShape) -> float:
    """The unit's score, plus `neighbour_weight` when it stands next to a chosen unit of its passage."""
    return unit.score + shape.neighbour_weight * _beside(unit, chosen)


def _beside(unit: _Scored, chosen: list[_Scored]) -> bool:
    """`unit` stands next to a chosen unit of its passage, as its sequel or preamble; a table row next to a
    chosen row is only another entry of the table."""
    return any(
        other.candidate_index == unit.candidate_index
        and abs(other.unit.position - unit.unit.position) == 1
        and not (unit.unit.kind == other.unit.kind == "row")
        for other in chosen
    )


def _sibling_entry(unit: _Scored, lead: _Scored, candidates: tuple[Candidate, ...], query: Query) -> bool:
    """`unit` is another entry of the table (in any of its chunks) whose named entry leads the answer, which the
    question does not name, or names only by part of what names the lead (the other rows of a pasted MBean's
    type)."""
    table, other = candidates[lead.candidate_index].passage, candidates[unit.candidate_index].passage
    return (
        (other.source_path, other.section_path) == (table.source_path, table.section_path)
        and bool(unit.unit.subject)
        and (not _asked_about(unit.unit, query) or _named_by(unit.unit, query) < _named_by(lead.unit, query))
    )


def _asked_about(unit: EvidenceUnit, query: Query) -> bool:
    """The unit is the entry of a setting, error or row the question names (`acks`, `linger.ms`, `code:121`).
    A row is named by its own error code as well as by its first cell: "error code 25" asks for the
    `UNKNOWN_MEMBER_ID | 25 | …` row; and by a one-word name in any cell, such as the MBean of a metric
    ("# of under minIsr partitions | kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount | 0")."""
    if not unit.subject:
        return False
    subject_tokens = tokenize(unit.subject)
    named = bool(subject_tokens) and _runs_in(subject_tokens, query.tokens) and _spelt_in(unit.subject, query.text)
    return named or bool(_named_by(unit, query))


def _a_word_of_the_first(unit: EvidenceUnit, query: Query, first: Passage) -> bool:
    """The entry's name is one plain lower-case word (`groups`, `topics`) that the question writes only as prose
    does (never in code quotes, given a value or ending a key of theirs: `transforms.pick.field`), and the first
    passage writes as a word of its prose too (not only as a name, a key given a value or a table's cell): the
    question uses the word in the first passage's sense. "list all consumer groups?" is answered by the passage on
    managing consumer groups, not by a lower passage's MirrorMaker `groups` entry; "what format does renames take?"
    names the `renames` field, a word the first passage ("… rename a topic") does not write."""
    subject = unit.subject
    if not re.fullmatch(r"[a-z]+", subject) or _named_by(unit, query):
        return False
    as_a_name = rf"[`'\"]{subject}[`'\"]|(?<![\w.-]){subject}\s*="
    if re.search(as_a_name, query.text, re.IGNORECASE) or any(
        i.name.rsplit(".", 1)[-1] == subject for i in query.identifiers
    ):
        return False
    return _as_prose(subject, first.text)


def _as_prose(word: str, text: str) -> bool:
    """`text` writes `word` as a word of a sentence at least once: not in quotes, given a value or in a table's
    cell (`acks`, "acks=all", "acks | Producer | …")."""
    pattern = rf"(?<![\w./`'\"|-])(?<!\|\s){word}(?![\w`'\"-]|\.\w|\s*[=|])"
    return re.search(pattern, text, re.IGNORECASE) is not None


def _named_by(unit: EvidenceUnit, query: Query) -> frozenset[str]:
    """The names of the question's focus that name `unit` (`_names_of`)."""
    return query.focus_identifiers & frozenset(_names_of(unit))


def _in_asking(unit: EvidenceUnit, query: Query) -> bool:
    """The entry is named by the asking sentences or a pasted error line, not only by what the user says around
    them; an error's row is what they report wherever they name it."""
    if not query.asking_tokens or _is_error_row(unit):
        return True
    subject_tokens = tokenize(unit.subject)
    if subject_tokens and _runs_in(subject_tokens, query.asking_tokens):
        return True
    named = _named_by(unit, query)
    return bool(query.asked & named) or any(_runs_in(tokenize(i), query.asking_tokens) for i in named)


def _names_of(unit: EvidenceUnit) -> set[str]:
    """The identifiers that name an entry: its own (`_entry_identifiers`), and a row's one-word names in its
    cells (not a key's parts: `min.insync.replicas`)."""
    own = _entry_identifiers(unit)
    if unit.kind == "row":
        own |= {token for token in tokenize(unit.parts[-1]) if token.isalnum()}
    return own


def _other_error(unit: EvidenceUnit, query: Query) -> bool:
    """The unit is the row of an error that the question does not name."""
    return _is_error_row(unit) and not _asked_about(unit, query)


def _is_error_row(unit: EvidenceUnit) -> bool:
    """The unit is a table row that gives an error code: an error's row."""
    return unit.kind == "row" and any(name.startswith("code:") for name in _entry_identifiers(unit))


def _of_setup(unit: EvidenceUnit, query: Query) -> bool:
    """The entry is about what the user says they have (`Query.setup_identifiers`)."""
    own = _entry_identifiers(unit)
    return bool(own) and own <= query.setup_identifiers


def _entry_identifiers(unit: EvidenceUnit) -> set[str]:
    """The identifiers an entry is about: its subject's, and a row's own error code."""
    own = set(extract_identifiers(unit.subject))
    if unit.kind == "row":
        own |= {i for i in extract_identifiers(unit.parts[-1]) if i.startswith("code:")}
    return own


def _spelt_in(subject: str, text: str) -> bool:
    """A one-word subject is named only as spelt: "how do I rename a topic" does not name the `renames` field
    of a transform, though both fold to "rename"; nor does a path's segment ("… instead of polling /status") name
    the `status` metric. A word the corpus writes in capitals as a name (the error
    `NONE`, the ACL operation `READ`) is named only in capitals: "Leader: none" and "can it read …" use the word."""
    if len(subject.split()) > 1:
        return True
    if subject.isalpha() and subject.isupper() and len(subject) > 1:
        return re.search(rf"(?<![\w.-]){re.escape(subject)}(?![\w-]|\.\w)", text) is not None
    return re.search(rf"(?<![\w./-]){re.escape(subject.lower())}(?![\w-]|\.\w)", text.lower()) is not None


def _pages_named(entries: Sequence[_Scored], candidates: tuple[Candidate, ...], query: Query) -> dict[int, int]:
    """How many of the question's words that tell the pages apart the headings above each entry hold (by `id`):
    the page, or section of a page, that lists it ("Configuration › 3.3 Producer Configs" above
    `compression.type`). A word of the question that several of these headings hold names none of them:
    "KafkaConsumer" does not name the page headed "Kafka Streams Configs" when "Kafka Connect Configs" is
    another."""
    words = _words_of(query.text)
    held = {
        id(u): set(tokenize(" ".join(candidates[u.candidate_index].passage.section_path[:-1]))) & words for u in entries
    }
    holders = collections.Counter(word for found in held.values() for word in found)
    return {key: sum(holders[word] == 1 for word in found) for key, found in held.items()}


@functools.lru_cache(maxsize=64)
def _words_of(text: str) -> frozenset[str]:
    """The tokens of `text` and of the words its CamelCase names join: `AdminClient.listTopics` names the admin
    client ("3.7 Admin Configs"), `KafkaProducer` the producer."""
    return frozenset(tokenize(text)) | frozenset(tokenize(_CAMEL_JOIN.sub(" ", text)))


_CAMEL_JOIN = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _is_own_entry(unit: _Scored) -> bool:
    """The unit is the setting entry its passage's heading names (`_entry_position`)."""
    return unit.entry == unit.unit.position


def _runs_in(words: Sequence[str], text: Sequence[str]) -> bool:
    """`words` stand together in `text`: "current leader" is not named by "the current quorum leader"."""
    size = len(words)
    return any(list(text[start : start + size]) == list(words) for start in range(len(text) - size + 1))


def passage_priors(ranked: Ranked) -> tuple[float, ...]:
    """How much each ranked passage's units are raised for where it ranks, 1 for the first: in hybrid mode the
    ranker's probability of the passage relative to the first's, exp(score - first score), at most 1 (the
    listwise fit makes its scores log-odds of holding the answer): a second passage scored as high as the first
    weighs as much, one far below it little. A single retriever's order has no such scores: 1 / (1 + rank)."""
    if ranked.pool.mode != "hybrid" or not ranked.scores:
        return tuple(1 / (1 + index) for index in range(len(ranked.candidates)))
    first = ranked.scores[0]
    return tuple(min(1.0, math.exp(score - first)) for score in ranked.scores)


def _score_units(
    query: Query, weights: dict[str, float], index: int, prior: float, candidate: Candidate, shape: AnswerShape
) -> list[_Scored]:
    """A unit scores by its own similarity, the question's terms (`weights`: their IDF) and identifiers it
    holds, and its passage's `prior` (`passage_priors`; `index` is its rank); for one of the question's asks, by
    that ask's."""
    heading = candidate.passage.section_path[-1] if candidate.passage.section_path else ""
    units = _units_of(candidate.passage.text, heading, candidate.continues_code)
    if len(units) != len(candidate.unit_scores):  # vectors of another unit splitter: skip, never misquote
        return []
    total = sum(weights.values()) or 1.0
    focus, context = query.focus_identifiers, query.context_identifiers
    about_an_exception = any(i.place == "error" for i in query.identifiers) or any(
        name.endswith("exception") for name in focus
    )
    asked = frozenset(query.tokens)
    scored = []
    # The items of a list an earlier chunk introduced, when the chunk begins inside one, show its lead-in.
    text = candidate.passage.text
    block_end = leading_block_end(text, candidate.continues_code) if candidate.block_intro is not None else 0
    entry = _entry_position(units, heading)
    shared = _shared_row_words(units)
    for unit, similarity, vector in zip(units, candidate.unit_scores.tolist(), candidate.unit_vectors, strict=True):
        if is_title(unit) or refers_elsewhere(unit) or stops_mid_sentence(unit):
            continue  # a title, a pointer or half a sentence states nothing
        if unit is units[-1] and points_ahead(unit):
            continue  # a lead-in ending its chunk introduces what is not in it
        terms = frozenset(tokenize(unit.stated_text))
        if unit.kind == "row":
            terms -= shared[unit.parts[:-1]]
        overlap = sum(w for t, w in weights.items() if t in terms) / total
        identifiers = _identifiers_of(unit.matched_text) if focus or context else frozenset()
        named = bool(focus & identifiers)
        if is_bare_row(unit) and not named and not terms & asked:
            continue  # a row with no more than its key says nothing the question did not
        # "Start the server: $ bin/kafka-server-start.sh …" tells the user who pasted that command nothing,
        # nor does a log excerpt made of the words of the log lines they pasted.
        echo = (bool(context & identifiers) and not named) or (
            unit.kind == "code" and _repeats(terms, asked, shape.echo_share)
        )
        # A unit that names an exception the question is not about, pasted or named in its words (a log of
        # another failure, code that handles another exception), looks like the paste, and is about something else.
        exceptions = {i for i in identifiers if i.endswith("exception")}
        echo = echo or (about_an_exception and bool(exceptions) and not (exceptions & focus) and not named)
        bucket = _bucket(unit)
        asked_to_do = query.how_to and bucket == "do"  # what a how-to question asks for
        score = (
            similarity
            + shape.overlap_weight * overlap
            + shape.identifier_weight * named
            + shape.rank_weight * prior
            - shape.echo_weight * echo
            + shape.action_weight * asked_to_do
        )
        if 0 <= text.find(unit.parts[0]) < block_end:
            unit = with_block_lead_in(unit, candidate.block_lead_in)
        belongs = entry if 0 <= entry <= unit.position else -1
        size = len(render_unit(with_table_header(unit, candidate.table_header), index + 1)) + len("\n\n")
        if belongs >= 0 and unit.kind == "sentence":
            size += len(f"`{heading}`: ")  # may be named by its heading (`_render`)
        # What to do is never faint in answer to how to do it: a config line's cosine with the user's words is low
        # ("how do i make kafka spread replicas over the zones?" and `broker.rack=my-rack-id`).
        faint = similarity < shape.floor and not named and not asked_to_do
        scored.append(_Scored(index, unit, vector, score, terms, bucket, belongs, size, faint))
    return scored


@functools.lru_cache(maxsize=256)
def _shared_row_words(units: tuple[EvidenceUnit, ...]) -> dict[tuple[str, ...], frozenset[str]]:
    """For each table among `units` (rows under one lead-in and header), the words at least half of its rows,
    and two or more, say: "The number of … as observed by this Controller" and the MBean prefix are in every row
    of the controller's metrics, and count as no row's own, so that the Global Partition Count row after the
    Offline Partition Count one is not taken for a restatement of it. Once per passage, as `_units_of`; the
    result is shared, so read only."""
    tables: dict[tuple[str, ...], list[frozenset[str]]] = collections.defaultdict(list)
    for unit in units:
        if unit.kind == "row":
            tables[unit.parts[:-1]].append(frozenset(tokenize(unit.stated_text)))
    shared = {}
    for key, rows in tables.items():
        counts = collections.Counter(word for row in rows for word in row)
        shared[key] = frozenset(w for w, n in counts.items() if n >= 2 and n >= len(rows) / 2)
    return shared


@functools.lru_cache(maxsize=256)
def _units_of(text: str, heading: str, continues_code: bool) -> tuple[EvidenceUnit, ...]:
    """`build_units`, once per passage: the question and each of its asks score the same passages' units."""
    return tuple(build_units(text, heading, continues_code))


def _rows_apart(unit: _Scored, other: _Scored) -> bool:
    """Two different rows under the same lead-in and header: their vectors are alike for what they share."""
    return (
        unit.unit.kind == other.unit.kind == "row"
        and unit.unit.parts[:-1] == other.unit.parts[:-1]
        and unit.unit.parts[-1] != other.unit.parts[-1]
    )


def _entry_position(units: Sequence[EvidenceUnit], heading: str) -> int:
    """Where the passage's own setting entry stands (a reference page's section about one setting, headed by
    its key); -1 when the passage is no such section."""
    return next((u.position for u in units if u.kind == "setting" and heading and u.subject == heading), -1)


def _bucket(unit: EvidenceUnit) -> str:
    if unit.kind == "code":
        if is_log(unit.parts[-1]):
            return "cause"  # a log excerpt shows what the error looks like
        if _CHECK.search(unit.text):
            return "check"
        # What a block shows (a tool's output, a znode's layout) is no action, unless its lead-in says to do it
        # ("Add the following Maven dependency:") or gives it as a setting's values ("Example
        # `ssl.principal.mapping.rules` values are:").
        lead_in = " ".join(unit.parts[:-1])
        runnable = is_runnable(unit.parts[-1]) or bool(_DO.search(lead_in) or _QUOTED_KEY.search(lead_in))
        return "do" if runnable else "cause"
    if _DO.search(unit.text):
        return "do"
    if _CHECK_ADVICE.search(unit.text):
        return "check"
    return "cause"


def _block_tail(unit: _Scored, candidates: tuple[Candidate, ...]) -> bool:
    """The unit is code its chunk begins with, inside a fenced block opened in an earlier chunk."""
    candidate = candidates[unit.candidate_index]
    text = candidate.passage.text
    return (
        candidate.continues_code
        and unit.unit.kind == "code"
        and 0 <= text.find(unit.unit.parts[-1]) < continued_block_end(text)
    )


def _carried(unit: _Scored, candidates: tuple[Candidate, ...]) -> bool:
    """The unit is an item shown under the lead-in of a list its chunk began inside, or the code block its chunk
    began with shown under the lead-in that ends the chunk before."""
    candidate = candidates[unit.candidate_index]
    return (
        candidate.block_intro is not None
        and unit.unit.kind in ("list", "code")
        and len(unit.unit.parts) == 2
        and unit.unit.parts[0] == candidate.block_lead_in
    )


def _cited(key: int, candidates: tuple[Candidate, ...], ordered: list[_Scored]) -> tuple[Passage, tuple[str, ...]]:
    """The passage a marker key stands for (`_keyed_passage`) and what the answer quotes from it, verbatim: a
    carried lead-in from its own chunk, every other part from the candidate's."""
    passage = _keyed_passage(key, candidates)
    if key < 0:
        return passage, (candidates[-1 - key].block_lead_in,)
    parts = (part for u in ordered if u.candidate_index == key for part in u.unit.parts)
    return passage, tuple(part for part in parts if part in passage.text)


def _heading_key(passage: Passage, entry: bool) -> str:
    """The setting, error, tool or class a passage's own heading names, when the heading is nothing but that
    name: an identifier, a Java class (a Connect transformation's section,
    `org.apache.kafka.connect.transforms.InsertHeader`), or the key of the setting entry the passage is
    (`acks`, `buffer.memory`)."""
    heading = passage.section_path[-1].strip() if len(passage.section_path) > 1 else ""
    if not heading or " " in heading or not (entry or extract_identifiers(heading) or _CLASS_NAME.match(heading)):
        return ""
    return heading


def _titled_error(passage: Passage) -> str:
    """The one error name (`INVALID_RECORD_STATE`) the passage's title and headings give, "" when none or several:
    an error-knowledge record's page is titled by its error ("Kafka Error INVALID_RECORD_STATE"), and its
    sentences ("The record state is invalid.") never name it."""
    names = {name for heading in passage.section_path for name in _ERROR_NAME.findall(heading)}
    return names.pop() if len(names) == 1 else ""


_ERROR_NAME = re.compile(r"(?<![\w.-])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?![\w.-])")


def _introduced(unit: _Scored, chosen: Sequence[_Scored]) -> _Scored | None:
    """The chosen unit that lead-in sentence `unit` introduces: the next unit of its passage."""
    if not is_lead_in_sentence(unit.unit):
        return None
    return next((u for u in chosen if _place(u) == (unit.candidate_index, unit.unit.position + 1)), None)


def _parts_with_lead_ins(chosen: Sequence[_Scored]) -> dict[int, str]:
    """Each unit's part of the troubleshooting layout, keyed by `id`: a lead-in sentence falls in the part of
    what it introduces ("(1) Throttle Removal:" is read with "The throttle should be removed … --verify", not
    under another heading)."""
    part = {id(u): u.bucket for u in chosen}
    for unit in sorted(chosen, key=lambda u: (u.candidate_index, -u.unit.position)):  # a run of lead-ins: last first
        if (introduced := _introduced(unit, chosen)) is not None:
            part[id(unit)] = part[id(introduced)]
    return part


def _lead_ins_first(ordered: list[_Scored]) -> list[_Scored]:
    """`ordered` with each lead-in sentence moved right before the unit it introduces."""
    moved = [u for u in ordered if _introduced(u, ordered) is not None]
    rest = [u for u in ordered if not any(u is m for m in moved)]
    for unit in sorted(moved, key=lambda u: -u.unit.position):  # a run of lead-ins keeps its order
        introduced = _introduced(unit, ordered)
        rest.insert(next(i for i, u in enumerate(rest) if u is introduced), unit)
    return rest


def _render(
    candidates: tuple[Candidate, ...],
    chosen: list[_Scored],
    layout: bool,
    after_lead: tuple[tuple[int, int], ...] = (),
    related: Sequence[_Scored] = (),
) -> Draft:
    lead = chosen[0]
    part = _parts_with_lead_ins(chosen)
    # The part the lead falls in comes first, so the answer opens with its best unit whatever its part.
    buckets = sorted(
        (bucket for bucket, _ in _HEADINGS if any(part[id(u)] == bucket for u in chosen)),
        key=lambda b: b != part[id(lead)],
    )
    grouped = layout and len(buckets) > 1
    # Grouped by part of the answer, each part by score; or else the lead first, then each section's units
    # together, sections in rank order and a section's units in the page's order, so that steps and "for
    # instance" read as the page has them.
    # The lead comes first with the sentences that lean on it, or on which it leans (`_with_what_they_follow`).
    head = [lead]
    for unit in chosen[1:]:
        if not (_place(unit) == (lead.candidate_index, head[-1].unit.position + 1) and _leans_on(unit, head[-1])):
            break
        head.append(unit)
    # The passages of the entries the lead takes its default from (`_default_sources`) follow the lead's.
    sources = [place[0] for place in after_lead]
    passages = [
        lead.candidate_index,
        *sources,
        *sorted({u.candidate_index for u in chosen} - {lead.candidate_index, *sources}),
    ]
    # The chunks of one section are one source (`_citation`).
    sections: dict[tuple[str, tuple[str, ...]], int] = {}
    for index in passages:
        sections.setdefault(_section_of(candidates[index].passage), len(sections))

    def place_in_reading(unit: _Scored) -> tuple[bool, int, int, int]:
        candidate = candidates[unit.candidate_index]
        return not _among(unit, head), sections[_section_of(candidate.passage)], candidate.row, unit.unit.position

    reading = sorted(chosen, key=place_in_reading)
    by_part = [u for bucket in buckets for u in chosen if part[id(u)] == bucket]
    ordered = _lead_ins_first(by_part) if grouped else reading
    # A list's or code block's lead-in read back from an earlier chunk (`Candidate.block_intro`) is cited to it:
    # its marker, keyed -1 - candidate index, comes right before the marker of the chunk with the items.
    # Chunks of one section share a marker: the section is one source to the reader, however chunking split it.
    markers: dict[int, int] = {}
    section_markers: dict[tuple[str, tuple[str, ...]], int] = {}

    def mark(key: int) -> None:
        if key not in markers:
            section = _section_of(_keyed_passage(key, candidates))
            markers[key] = section_markers.setdefault(section, len(section_markers) + 1)

    for unit in ordered:
        if _carried(unit, candidates):
            mark(-1 - unit.candidate_index)
        mark(unit.candidate_index)
    for unit in related:
        mark(unit.candidate_index)
    blocks: list[str] = []
    current = ""
    named: set[int] = set()

    # Units that share a lead-in show as one block, the lead-in once (pieces of a list cut for size, by chunking
    # too: the chunks of one section are one source); so do the items of one list without a lead-in, as that list.
    # Under the troubleshooting layout, the items of a list that fall in different parts stay apart.
    def shared_key(unit: _Scored) -> tuple[object, ...] | None:
        items = _list_key(unit)
        if lead := _lead_key(unit):
            return markers[unit.candidate_index], lead[1]
        return items and (*items, unit.bucket if grouped else "")

    sharing: dict[tuple[object, ...], list[_Scored]] = {}
    for unit in ordered:
        if (shared := shared_key(unit)) is not None:
            sharing.setdefault(shared, []).append(unit)
    for unit in ordered:
        shared = shared_key(unit)
        group = sharing[shared] if shared is not None else [unit]
        if group[0] is not unit:
            continue  # shown with the first unit of its group
        if grouped and part[id(unit)] != current:
            current = part[id(unit)]
            blocks.append(dict(_HEADINGS)[current])
        marker = markers[unit.candidate_index]
        if len(group) > 1 and _list_key(unit) is not None:
            block = render_list_items([u.unit for u in group], candidates[unit.candidate_index].passage.text, marker)
        elif len(group) > 1:
            block = render_shared_lead(_in_page_order(group, candidates), marker)
        else:
            block = render_unit(with_table_header(unit.unit, candidates[unit.candidate_index].table_header), marker)
        if _carried(unit, candidates) and (intro := markers[-1 - unit.candidate_index]) != marker:
            block = block.replace(f" [{marker}]", f" [{intro}][{marker}]", 1)
        passage = candidates[unit.candidate_index].passage
        key = _heading_key(passage, any(u.entry >= 0 for u in group))
        if not key and unit.unit.kind == "sentence" and _list_key(unit) is None:
            key = _titled_error(passage)  # a sentence of its page, not an item of a list
        # A setting or row names its own subject; a bare code block must start its line.
        prose = all(u.unit.kind in ("sentence", "list") for u in group)
        if key and prose and unit.candidate_index not in named and key.lower() not in unit.unit.text.lower():
            block = f"`{key}`: {block}"  # "This specifies the number of threads" says of what only in its heading
        if key and key.lower() in block.lower():  # named; a setting of the passage names only itself
            named.add(unit.candidate_index)
        blocks.append(block)
    if related:
        mentions = " · ".join(render_setting_mention(u.unit, markers[u.candidate_index]) for u in related)
        blocks.append(f"Related settings: {mentions}")
    keys_of: dict[int, list[int]] = {}
    for marker_key, number in markers.items():
        keys_of.setdefault(number, []).append(marker_key)
    citations = tuple(
        _citation(marker, keys_of[marker], candidates, [*ordered, *related]) for marker in sorted(keys_of)
    )
    return Draft(text="\n\n".join(blocks).strip(), citations=citations, abstained=False)


def _in_page_order(group: Sequence[_Scored], candidates: tuple[Candidate, ...]) -> list[EvidenceUnit]:
    """The units of a group that may span chunks of one section, numbered as one run of the page's text."""
    ordered = sorted(group, key=lambda u: (candidates[u.candidate_index].row, u.unit.position))
    return [dataclasses.replace(u.unit, position=place) for place, u in enumerate(ordered)]


def section_passages(candidates: Sequence[Candidate]) -> tuple[Passage, ...]:
    """The ranked candidates as the sources a reader sees: the chunks of one section merged in the page's order
    (`rag.passages.merged`), sections in the order of their best-ranked chunk. What the LLM answerer numbers."""
    chunks: dict[tuple[str, tuple[str, ...]], list[Candidate]] = {}
    for candidate in candidates:
        chunks.setdefault(_section_of(candidate.passage), []).append(candidate)
    return tuple(merged([c.passage for c in sorted(section, key=lambda c: c.row)]) for section in chunks.values())


def _section_of(passage: Passage) -> tuple[str, tuple[str, ...]]:
    return passage.source_path, passage.section_path


def _keyed_passage(key: int, candidates: tuple[Candidate, ...]) -> Passage:
    """The passage a marker key stands for (see `_render`): a candidate's, or for -1 - its index, the earlier
    chunk its carried lead-in comes from."""
    if key < 0:
        intro = candidates[-1 - key].block_intro
        assert intro is not None  # keyed so only for a carried lead-in
        return intro
    return candidates[key].passage


def _citation(marker: int, keys: list[int], candidates: tuple[Candidate, ...], ordered: list[_Scored]) -> Citation:
    """One section's citation: its chunks merged in the document's order (a carried lead-in's chunk comes before
    the chunk it was read back for), with every sentence the answer quotes from them."""

    def place_in_document(key: int) -> float:
        return candidates[key].row if key >= 0 else candidates[-1 - key].row - 0.5

    cited = [_cited(key, candidates, ordered) for key in sorted(keys, key=place_in_document)]
    passages = list({passage.chunk_id: passage for passage, _ in cited}.values())
    quotes = tuple(dict.fromkeys(quote for _, quoted in cited for quote in quoted))
    return Citation(marker=marker, passage=merged(passages), quotes=quotes)
