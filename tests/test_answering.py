"""The extractive answerer over hand-made ranked candidates: which evidence units it quotes, in what order,
how it renders them, and when it abstains."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from rag.answering import AnswerShape, abstain, extract_answer, passage_priors, section_passages
from rag.passages import NOT_COVERED
from rag.query import QueryIdentifier, parse_query
from rag.ranking import Ranked
from rag.units import build_units
from tests.test_ranking import make_candidate, make_pool

FACT = "what is the record lock duration?"
TROUBLESHOOT = "why does my share consumer fail to acknowledge?"

FIX = (
    "The record lock expired before the acknowledgement arrived. "
    "Increase group.share.record.lock.duration.ms so records stay locked longer. "
    "Check the broker logs for ShareFetch errors to verify the cause."
)
SASL = (
    "Kafka supports several SASL mechanisms. The following mechanisms are supported:\n\n"
    "- GSSAPI (Kerberos)\n- PLAIN\n- SCRAM-SHA-256\n- SCRAM-SHA-512\n- OAUTHBEARER\n\n"
    "Each needs its own JAAS configuration."
)
COMMAND = (
    "To describe a share group, run the following command:\n\n"
    "$ bin/kafka-share-groups.sh --bootstrap-server localhost:9092 --describe --group g\n\n"
    "The output lists each member of the group."
)
OTHER = (
    "Share groups were introduced by KIP-932 as an early access feature. "
    "Consumers in a share group cooperatively consume records from the same partitions."
)

MARKER = re.compile(r"\[(\d+)\]")
DIMENSION = 32


def shape(**overrides) -> AnswerShape:
    """Units score by their similarity alone unless a test turns the other weights on."""
    values = {
        "max_units_fact": 2,
        "max_units_troubleshoot": 4,
        "relative_cutoff": 1.0,
        "min_novelty": 0.0,
        "overlap_weight": 0.0,
        "identifier_weight": 0.0,
        "rank_weight": 0.0,
        "neighbour_weight": 0.0,
        "new_passage_weight": 0.0,
        "echo_weight": 0.0,
        "echo_share": 1.01,
        "action_weight": 0.0,
        "max_chars": 5000,
        "ask_min": 0.8,
        "floor": 0.0,
        "told_min_words": 0,
        "told_max_gap": 9.0,
        "related_max": 0,
        "related_depth": 5,
        "related_max_chars": 5000,
    } | overrides
    return AnswerShape(**values)


class _Axes:
    """Orthogonal unit vectors, so no two units are near-duplicates unless a test says so."""

    def __init__(self) -> None:
        self.used = 0

    def take(self, count: int) -> np.ndarray:
        vectors = np.eye(DIMENSION, dtype=np.float32)[self.used : self.used + count]
        self.used += count
        return vectors


def candidate(axes: _Axes, name: str, text: str, scores, heading: str = "Heading", vectors=None, source: str = ""):
    units = build_units(text, heading)
    assert len(scores) == len(units), [u.parts for u in units]
    return make_candidate(
        name,
        section=("Doc", heading),
        source=source or f"{name}.html",
        text=text,
        unit_scores=tuple(scores),
        unit_vectors=vectors if vectors is not None else axes.take(len(units)),
    )


def ranked(candidates, question: str = FACT) -> Ranked:
    return Ranked(make_pool(candidates, question=question), tuple(candidates), tuple(range(len(candidates), 0, -1)))


def _answer_from(text: str, scores, question: str, **overrides):
    """The checked answer that one passage of `text`, its units scored `scores`, gives to `question`."""
    draft = extract_answer(ranked([candidate(_Axes(), "top", text, scores)], question), shape(**overrides))
    _check(draft)
    return draft


def _units(text: str) -> list[str]:
    return [block for block in text.split("\n\n") if not block.startswith("**")]


def _check(draft) -> None:
    assert not draft.abstained
    assert [c.marker for c in draft.citations] == list(range(1, len(draft.citations) + 1))
    assert {int(n) for n in MARKER.findall(draft.text)} == {c.marker for c in draft.citations}
    for citation in draft.citations:
        assert citation.quotes
        for quote in citation.quotes:
            assert quote in citation.passage.text


RACKS = (
    "The rack awareness feature spreads replicas of the same partition across different racks. "
    "You can specify that a broker belongs to a particular rack by adding a property to the broker config:\n\n"
    "```\nbroker.rack=my-rack-id\n```\n\n"
    "The algorithm used to assign replicas to brokers keeps the number of leaders per broker constant."
)


@pytest.mark.parametrize(
    ("question", "shown"),
    [
        ("how do I make kafka spread replicas over the zones?", "broker.rack=my-rack-id"),
        ("does kafka spread replicas over the zones?", "The algorithm used"),
    ],
)
def test_a_how_to_question_raises_what_to_do(question, shown):
    """ "how do i make kafka spread replicas of a partition over the zones?" got six sentences about rack
    awareness and not the config line that sets `broker.rack`, which scored under them."""
    draft = _answer_from(RACKS, [0.9, 0.6, 0.7], question, max_units_fact=2, action_weight=0.2)
    assert shown in _units(draft.text)[1], draft.text


@pytest.mark.parametrize(
    ("question", "shown"),
    [
        ("how do I make kafka spread replicas over the zones?", "broker.rack=my-rack-id"),
        ("does kafka spread replicas over the zones?", "The algorithm used"),
    ],
)
def test_what_to_do_is_never_faint_in_answer_to_how_to_do_it(question, shown):
    """The config line that sets `broker.rack` has a low cosine with "how do i make kafka spread replicas over the
    zones?": under the floor, it was quoted only beside a chosen unit, and the sentence between kept it apart."""
    text = RACKS.replace(
        "different racks. ", "different racks. This extends the guarantees Kafka provides for broker failure. "
    )
    draft = _answer_from(text, [0.9, 0.3, 0.6, 0.7], question, max_units_fact=2, action_weight=0.2, floor=0.65)
    assert shown in _units(draft.text)[1], draft.text


@pytest.mark.parametrize(
    ("question", "shows_the_line"),
    [
        ("how do I make kafka spread replicas over the zones?", True),
        ("does kafka spread replicas over the zones?", False),
    ],
)
def test_a_how_to_answer_shows_the_first_passages_config_line_however_low_it_scores(question, shows_the_line):
    """Sentences describing rack awareness score within the cutoff of the lead and the config line that turns it
    on far under it: a how-to answer without it says what the feature does and not how to turn it on."""
    text = RACKS.replace(
        "different racks. ", "different racks. This extends the guarantees Kafka provides for broker failure. "
    )
    draft = _answer_from(text, [0.9, 0.85, 0.3, 0.8], question, max_units_fact=3, relative_cutoff=0.2)
    assert ("broker.rack=my-rack-id" in draft.text) == shows_the_line, draft.text


ASSIGNORS = (
    "The assignment strategy is chosen with partition.assignment.strategy. "
    "The default list allows upgrading to the cooperative assignor with a single rolling bounce."
)
GROUP_STATE = (
    "To see the state of a group and its assignment strategy, use the --state option:\n\n"
    "```\n$ bin/kafka-consumer-groups.sh --bootstrap-server localhost:9092 --describe --group my-group --state\n```"
)


@pytest.mark.parametrize(
    ("question", "shows_the_command"),
    [
        ("how can I confirm from the CLI which assignment strategy my group is using?", True),
        ("which assignment strategy does my group use by default?", False),
    ],
)
def test_a_how_to_answer_shows_a_command_that_shows_something_from_a_lower_passage(question, shows_the_command):
    """The command that answers "how can I confirm …?" describes the group (a command that checks, not one that
    changes anything) and sits in the second passage, under the first passage's sentences about the setting."""
    axes = _Axes()
    top = candidate(axes, "top", ASSIGNORS, [0.9, 0.8])
    below = candidate(axes, "below", GROUP_STATE, [0.2])
    draft = extract_answer(ranked([top, below], question), shape(relative_cutoff=0.3))
    _check(draft)
    assert ("--describe --group my-group --state" in draft.text) == shows_the_command, draft.text


def test_the_lead_is_the_best_unit_of_the_best_ranked_passage():
    axes = _Axes()
    top = candidate(axes, "top", FIX, [0.3, 0.6, 0.2])
    second = candidate(axes, "second", OTHER, [0.9, 0.1])  # a better unit, but a lower passage
    draft = extract_answer(ranked([top, second], "why does my share consumer fail?"), shape(max_units_troubleshoot=2))
    _check(draft)
    units = _units(draft.text)
    assert len(units) == 2, draft.text
    quotes = {c.passage.chunk_id: c.quotes for c in draft.citations}
    assert quotes == {
        "top": ("Increase group.share.record.lock.duration.ms so records stay locked longer.",),
        "second": ("Share groups were introduced by KIP-932 as an early access feature.",),
    }
    # the lead's part (what to do) opens the answer; markers follow the order of display
    assert draft.text.startswith("**What to do**\n\nIncrease"), draft.text
    assert [c.passage.chunk_id for c in draft.citations] == ["top", "second"]


def test_a_fact_answer_leads_with_the_top_passage_even_when_a_lower_unit_scores_higher():
    axes = _Axes()
    top = candidate(axes, "top", FIX, [0.3, 0.6, 0.2])
    second = candidate(axes, "second", OTHER, [0.9, 0.8])
    draft = extract_answer(ranked([top, second], FACT), shape(max_units_fact=2))
    _check(draft)
    assert [c.passage.chunk_id for c in draft.citations] == ["top", "second"]
    units = _units(draft.text)
    assert units[0] == "Increase `group.share.record.lock.duration.ms` so records stay locked longer. [1]"
    assert len(units) == 2 and units[1].endswith("[2]")


def test_a_fact_answer_shows_each_passages_units_together_in_the_order_of_its_text():
    # By score the answer read [1] [2] [1], and "For instance" came before what it exemplifies.
    axes = _Axes()
    top = candidate(axes, "top", FIX, [0.5, 0.9, 0.3])
    second = candidate(axes, "second", OTHER, [0.8, 0.1])
    draft = extract_answer(ranked([top, second], FACT), shape(max_units_fact=4))
    _check(draft)
    assert _units(draft.text) == [
        "Increase `group.share.record.lock.duration.ms` so records stay locked longer. [1]",  # the lead
        "The record lock expired before the acknowledgement arrived. [1]",
        "Check the broker logs for ShareFetch errors to verify the cause. [1]",
        "Share groups were introduced by KIP-932 as an early access feature. [2]",
    ]


def test_items_of_a_list_an_earlier_chunk_began_are_shown_under_its_lead_in_cited_to_that_chunk():
    axes = _Axes()
    text = "- GSSAPI (Kerberos) for Active Directory.\n- PLAIN with TLS.\n\nEach needs its own JAAS configuration."
    intro = make_candidate("intro", text="SASL is configured per listener. Kafka supports these mechanisms:").passage
    top = dataclasses.replace(
        candidate(axes, "top", text, [0.9, 0.8, 0.1]),
        block_lead_in="Kafka supports these mechanisms:",
        block_intro=intro,
    )
    draft = extract_answer(ranked([top], FACT), shape(max_units_fact=2))
    _check(draft)  # every quote is verbatim in its own passage
    assert draft.text == (
        "Kafka supports these mechanisms: [1][2]\n- GSSAPI (Kerberos) for Active Directory.\n- PLAIN with TLS."
    )
    assert [(c.passage.chunk_id, c.quotes) for c in draft.citations] == [
        ("intro", ("Kafka supports these mechanisms:",)),
        ("top", ("- GSSAPI (Kerberos) for Active Directory.", "- PLAIN with TLS.")),
    ]


def test_a_later_sentence_of_an_item_an_earlier_chunk_introduced_is_shown_in_its_item_under_the_lead_in():
    """ "Please use the `GET /tasks` endpoint instead." matched best, and was shown as an item of its own, apart
    from the endpoint it is about: its item comes with it, as one line under the list's lead-in."""
    axes = _Axes()
    text = (
        "- `GET /tasks-config` - get the configuration of all tasks. This endpoint is deprecated. "
        "Please use the `GET /tasks` endpoint instead.\n- `PUT /stop` - stop the connector."
    )
    intro = make_candidate("intro", text="The connector REST API has these endpoints:").passage
    top = dataclasses.replace(
        candidate(axes, "top", text, [0.3, 0.2, 0.9, 0.1]),
        block_lead_in="The connector REST API has these endpoints:",
        block_intro=intro,
    )
    draft = extract_answer(ranked([top], FACT), shape(max_units_fact=1))
    _check(draft)
    assert draft.text == (
        "The connector REST API has these endpoints: [1][2]\n- `GET /tasks-config` - get the configuration of all "
        "tasks. This endpoint is deprecated. Please use the `GET /tasks` endpoint instead."
    )


def test_the_tail_of_a_code_block_an_earlier_chunk_opened_follows_the_lead_and_does_not_lead():
    """ "can I delete records older than an offset from a topic?" was led by the last options of the reset tool's
    help text: the chunk began inside its fenced block, so the answer opened mid-sentence, with no command."""
    text = (
        "                  to delete. Must be a subset of the topics.\n"
        "--shift-by <Long>   Reset offsets shifting current offset by n.\n"
        "```\n\n"
        "The reset tool rewinds the input topics of a Streams application."
    )
    units = build_units(text, "Heading", continues_code=True)
    assert [u.kind for u in units] == ["code", "sentence"]
    top = dataclasses.replace(
        make_candidate(
            "top", text=text, unit_scores=(0.9, 0.6), unit_vectors=_Axes().take(2), section=("Doc", "Heading")
        ),
        continues_code=True,
    )
    draft = extract_answer(ranked([top], FACT), shape(max_units_fact=2))
    _check(draft)
    assert draft.text.startswith("The reset tool rewinds the input topics of a Streams application. [1]")
    assert "--shift-by <Long>" in draft.text  # it may follow


def test_a_title_line_is_never_quoted_even_when_it_scores_best():
    """A title states nothing: the answer leads with the best statement under it."""
    axes = _Axes()
    text = "Using the Native Docker Image\nThe native image is experimental and not recommended for production."
    top = candidate(axes, "top", text, [0.95, 0.7])
    draft = extract_answer(ranked([top], "can we run the native image in production?"), shape())
    _check(draft)
    assert _units(draft.text) == ["The native image is experimental and not recommended for production. [1]"]


def test_a_lead_in_that_ends_its_chunk_is_never_quoted_but_one_followed_by_prose_is():
    """The list "All workers require a few configs:" introduces starts the next chunk: alone, the lead-in
    says nothing. One followed by what it introduces, even as prose, states something."""
    text = (
        "You may safely remove these properties from your worker configurations:\n"
        "`internal.key.converter=org.apache.kafka.connect.json.JsonConverter`\n\n"
        "All workers (both standalone and distributed) require a few configs:"
    )
    draft = _answer_from(text, [0.5, 0.4, 0.95], "which configs does a connect worker need?", max_units_fact=3)
    assert "require a few configs" not in draft.text, draft.text
    assert draft.text.startswith("You may safely remove these properties"), draft.text


SEGMENTS = "Tiered storage keeps old log segments in remote storage."
ANNOUNCEMENTS = [
    "Below are the configuration properties for Tiered Storage.",  # the page includes the table from elsewhere
    "Further cleaner configurations are described here.",  # "here" was a link
    "The following example enables it for one topic.",  # the example starts the next chunk
]
POINTERS = [
    "Please check KIP-405 for more information.",  # was the whole answer to "KIP-405"
    "For more information, see the Kafka Producer documentation.",
    "See KIP-950 for more details.",
    "For more detailed information, please refer to KIP-937.",
    "- Refer to the upgrade guide.",
]


@pytest.mark.parametrize(
    ("text", "scores"),
    [(f"{SEGMENTS} {announcement}", [0.5, 0.95]) for announcement in ANNOUNCEMENTS]  # at the end of its chunk
    + [(f"{pointer}\n{SEGMENTS}", [0.95, 0.5]) for pointer in POINTERS],  # anywhere
)
def test_a_sentence_that_states_nothing_here_is_not_quoted(text, scores):
    draft = _answer_from(text, scores, "how do I configure KIP-405 tiered storage?", max_units_fact=2)
    assert _units(draft.text) == [f"{SEGMENTS} [1]"], draft.text


@pytest.mark.parametrize("announcement", ANNOUNCEMENTS)
def test_an_announcement_followed_by_more_of_its_passage_stays_quotable(announcement):
    # It is not a word list of bad sentences: only at the end of its chunk does it announce what is not there.
    middle = candidate(_Axes(), "mid", f"{announcement} {SEGMENTS}", [0.95, 0.5])
    assert extract_answer(ranked([middle], "how do I configure tiered storage?"), shape()).text.startswith(announcement)


def test_an_instruction_to_check_or_read_something_is_no_pointer():
    axes = _Axes()
    text = "Check the broker log for the fenced epoch. Read the committed offsets with the group tool."
    top = candidate(axes, "top", text, [0.9, 0.8])
    draft = extract_answer(ranked([top], "how do I find the fenced epoch?"), shape(max_units_fact=2))
    assert len(_units(draft.text)) == 2, draft.text


@pytest.mark.parametrize(("budget", "shown"), [(5000, True), (170, False)])
def test_a_chosen_lead_in_brings_what_it_introduces_or_is_left_out(budget, shown):
    # "For instance, the following example moves …:" was quoted while the plan it introduces was not.
    axes = _Axes()
    text = (
        "The tool can move replicas of a partition to chosen brokers.\n\n"
        "For instance, the following example moves partition 0 of topic foo1 to brokers 5 and 6:\n\n"
        "Another lead-in sentence here:\n\n"
        '```\n$ cat custom-reassignment.json\n{"version":1}\n```'
    )
    top = candidate(axes, "top", text, [0.9, 0.8, 0.1])
    draft = extract_answer(ranked([top], FACT), shape(max_units_fact=2, max_chars=budget))
    _check(draft)
    assert draft.text.startswith("The tool can move replicas"), draft.text
    assert ("For instance" in draft.text) is shown, draft.text
    assert ("custom-reassignment.json" in draft.text) is shown, draft.text


@pytest.mark.parametrize(("weight", "second"), [(0.0, "Check the broker logs"), (0.1, "Increase")])
def test_the_sentence_next_to_a_chosen_one_is_raised_by_the_neighbour_weight(weight, second):
    """The sentence after "check whether X" often says how: with the weight, it beats a slightly better
    sentence further away."""
    axes = _Axes()
    top = candidate(axes, "top", FIX, [0.9, 0.5, 0.55])
    draft = extract_answer(ranked([top], FACT), shape(max_units_fact=2, neighbour_weight=weight))
    _check(draft)
    assert _units(draft.text)[1].startswith(second)


@pytest.mark.parametrize(("weight", "second"), [(0.0, "Increase"), (0.2, "Share groups were introduced")])
def test_a_unit_of_a_passage_the_answer_does_not_quote_yet_is_raised_by_the_new_passage_weight(weight, second):
    """The first passage's next sentence on the same thing tells the user less than the second passage's best:
    with the weight, that one beats a slightly better sentence of the passage the answer already quotes."""
    axes = _Axes()
    top = candidate(axes, "top", FIX, [0.9, 0.6, 0.1])
    other = candidate(axes, "other", OTHER, [0.5, 0.1])
    draft = extract_answer(ranked([top, other], FACT), shape(max_units_fact=2, new_passage_weight=weight))
    _check(draft)
    assert _units(draft.text)[1].startswith(second), draft.text


@pytest.mark.parametrize("floor", [0.0, 0.32])  # with the floor, the row is faint: not quoted for its place either
def test_a_table_row_is_no_neighbour_of_the_row_before_it(floor):
    """A sentence next to a chosen one continues it; a row next to a chosen row is another setting, metric or
    error, raised by nothing but its place in the table ("which jmx bean shows how many partitions each broker
    leads?" also quoted the reassignment-traffic row under the one it asked for)."""
    axes = _Axes()
    rows = _error_table(axes, (0.9, 0.3, 0.2))
    prose = candidate(axes, "log", "A batch larger than the log segment size is rejected by the broker.", [0.35])
    draft = extract_answer(ranked([rows, prose], FACT), shape(max_units_fact=2, neighbour_weight=0.1, floor=floor))
    _check(draft)
    assert _units(draft.text)[0].startswith("`CORRUPT_MESSAGE`"), draft.text
    assert "RECORD_LIST_TOO_LARGE" not in draft.text and "log segment size" in draft.text, draft.text


def test_a_unit_under_the_floor_is_quoted_only_beside_one_chosen_for_its_own_sake():
    """A sentence that merely scores near the lead tells the user nothing ("ZooKeeper has been upgraded to version
    3.6.3" under an answer about `acks`); one that continues a quoted sentence still reads as its sequel, but
    not a chain of them through a passage."""
    axes = _Axes()
    top = candidate(axes, "top", FIX, [0.9, 0.2, 0.1])  # the lead, then two faint sentences of its passage
    early, consume = OTHER.split(". ")
    faint = candidate(axes, "faint", early + ".", [0.25])
    over = candidate(axes, "over", consume, [0.5])
    question = ranked([top, faint, over], FACT)
    unfloored = extract_answer(question, shape(max_units_fact=5))
    _check(unfloored)
    assert "ShareFetch" in unfloored.text and "early access" in unfloored.text, unfloored.text
    floored = extract_answer(question, shape(max_units_fact=5, floor=0.3))
    _check(floored)
    assert _units(floored.text)[0].startswith("The record lock expired"), floored.text
    # Beside the lead, its next sentence stays, not the faint one after that; nor the other faint passage.
    assert "Increase" in floored.text and "ShareFetch" not in floored.text, floored.text
    assert "early access" not in floored.text and "cooperatively consume" in floored.text, floored.text


def test_a_unit_that_names_what_the_question_is_about_is_over_any_floor():
    axes = _Axes()
    top = candidate(axes, "top", OTHER, [0.9, 0.8])
    named = candidate(axes, "named", FIX, [0.1, 0.1, 0.1])  # names group.share.record.lock.duration.ms
    question = "what is group.share.record.lock.duration.ms?"
    draft = extract_answer(ranked([top, named], question), shape(max_units_fact=3, floor=0.3))
    _check(draft)
    assert "group.share.record.lock.duration.ms" in draft.text, draft.text


def test_a_fact_answer_takes_no_log_excerpt_but_a_troubleshooting_answer_shows_it_as_the_cause():
    """ "and what's its default?" lost "The default `transaction.timeout.ms` is only 10s" to the exception
    Streams prints, which took most of the answer's room and states no fact."""
    text = (
        "Make sure the transaction timeout is at least the commit interval.\n"
        "Streams throws the following exception otherwise:\n"
        "java.lang.IllegalArgumentException: Transaction timeout 10000 was set\n"
        "lower than streams commit interval 30000.\n\n"
        "The default transaction timeout is only 10s."
    )
    fact = _answer_from(text, [0.95, 0.92, 0.84], "and what's the default transaction timeout?", max_units_fact=3)
    assert "IllegalArgumentException" not in fact.text and "only 10s" in fact.text, fact.text
    trouble = _answer_from(text, [0.95, 0.92, 0.84], TROUBLESHOOT, max_units_troubleshoot=3)
    cause = trouble.text.split("**What it means / likely cause**")[1].split("**")[0]
    assert "IllegalArgumentException" in cause, trouble.text


@pytest.mark.parametrize(("lead_in", "an_action"), [("", False), ("Add the following node:\n", True)])
def test_a_block_that_only_shows_a_layout_is_no_action_unless_its_lead_in_says_to_do_it(lead_in, an_action):
    """ "ERROR Error while creating ephemeral at /brokers/ids/1, node already exists" showed the znode's JSON
    layout under *What to do*: a block with nothing to run, set or write shows what something looks like."""
    text = (
        "An attempt to register a broker id that is already in use results in an error.\n\n"
        f'{lead_in}```\n/brokers/ids/[0...N] --> {{"host":...,"port":...}} (ephemeral node)\n```'
    )
    trouble = _answer_from(text, [0.9, 0.6], TROUBLESHOOT, max_units_troubleshoot=3)
    assert "/brokers/ids" in trouble.text, trouble.text
    to_do = trouble.text.partition("**What to do**")[2].split("**")[0]
    assert ("/brokers/ids" in to_do) is an_action, trouble.text


@pytest.mark.parametrize(("second_score", "second_shown"), [(1.95, True), (-3.0, False)])
def test_a_lower_passage_weighs_as_much_as_the_ranker_believes_in_it(second_score, second_shown):
    """Units are raised by their passage's probability relative to the first's: a second passage the ranker
    scores nearly as high as the first gives its unit a place beside the lead's passage's next unit; one far
    below it does not."""
    axes = _Axes()
    top = candidate(axes, "top", FIX, [0.9, 0.5, 0.2])
    second = candidate(axes, "second", OTHER, [0.6, 0.1])
    pool = make_pool([top, second], question=FACT)
    draft = extract_answer(Ranked(pool, (top, second), (2.0, second_score)), shape(max_units_fact=2, rank_weight=0.5))
    _check(draft)
    assert ("KIP-932" in draft.text) is second_shown, draft.text
    assert ("Increase `group.share" in draft.text) is not second_shown, draft.text


def test_passage_priors_are_relative_probabilities_in_hybrid_mode_and_rank_based_otherwise():
    axes = _Axes()
    cands = [candidate(axes, name, OTHER, [0.5, 0.4]) for name in "abc"]
    hybrid = Ranked(make_pool(cands), tuple(cands), (1.0, 1.0 - np.log(2), 3.0))
    assert passage_priors(hybrid) == pytest.approx((1.0, 0.5, 1.0))  # a rule put a lower-scored passage first
    dense = Ranked(make_pool(cands, mode="dense"), tuple(cands), (1.0, 0.9, 0.8))
    assert passage_priors(dense) == pytest.approx((1.0, 1 / 2, 1 / 3))


def test_a_fact_question_takes_at_most_max_units_fact():
    axes = _Axes()
    candidates = [candidate(axes, "a", FIX, [0.9, 0.8, 0.7]), candidate(axes, "b", OTHER, [0.85, 0.75])]
    draft = extract_answer(ranked(candidates, FACT), shape(max_units_fact=2, max_units_troubleshoot=5))
    _check(draft)
    assert len(_units(draft.text)) == 2
    assert "**" not in draft.text  # no troubleshooting layout for a fact


def test_a_troubleshooting_question_takes_up_to_max_units_troubleshoot_under_headings():
    axes = _Axes()
    candidates = [candidate(axes, "a", FIX, [0.9, 0.8, 0.7]), candidate(axes, "b", OTHER, [0.85, 0.75])]
    draft = extract_answer(ranked(candidates, TROUBLESHOOT), shape(max_units_troubleshoot=4))
    _check(draft)
    assert len(_units(draft.text)) == 4
    assert "**What it means / likely cause**" in draft.text
    assert "**What to do**" in draft.text
    assert draft.text.index("**What it means / likely cause**") < draft.text.index("**What to do**")
    do = draft.text.split("**What to do**")[1]
    assert "Increase `group.share.record.lock.duration.ms`" in do


@pytest.mark.parametrize(
    "advice",
    [
        "To report errors to a dead letter queue topic, set errors.deadletterqueue.topic.name on the connector.",
        "If you want to keep failed records, set errors.deadletterqueue.topic.name on the connector.",
    ],
)
def test_an_imperative_after_a_clause_of_purpose_or_condition_is_what_to_do(advice):
    text = f"By default connectors fail fast on an error. {advice}"
    question = "my connector keeps failing on bad records, how do I skip them?"
    draft = _answer_from(text, [0.8, 0.9], question, max_units_troubleshoot=2)
    do, cause = draft.text.split("**What it means / likely cause**")
    assert do.startswith("**What to do**") and "errors.deadletterqueue.topic.name" in do, draft.text
    assert "fail fast" in cause


def test_a_lead_in_sentence_sits_in_the_part_of_what_it_introduces():
    """ "(1) Throttle Removal:" was shown under "What it means" and the sentence it introduces under "How to
    check": each heading then held half of one note."""
    text = (
        "The record lock expired before the acknowledgement arrived. "
        "Some care should be taken when the lock is short. "
        "(1) Lock Removal:\n"
        "Check the broker logs for ShareFetch errors to verify the lock was released."
    )
    draft = _answer_from(text, [0.95, 0.9, 0.85, 0.8], TROUBLESHOOT, max_units_troubleshoot=4, relative_cutoff=0.5)
    check = draft.text.split("**How to check**")[1]
    assert "(1) Lock Removal: [1]\n\nCheck the broker logs" in check, draft.text
    assert "Lock Removal" not in draft.text.split("**How to check**")[0]


@pytest.mark.parametrize(
    ("mention", "check"),
    [
        (
            "A user without Describe authorization on the topic gets UNKNOWN_TOPIC_OR_PARTITION instead.",
            "Check the topic's ACLs with the kafka-acls.sh tool before retrying.",
        ),
        (
            "The main reason for this check is to stop clients that retry forever.",
            "Lost acknowledgements: kafka.server:type=share-group-metrics,name=lost-acknowledgements",
        ),
        (
            "Kafka cannot verify whether the record was processed, and the metrics reporting lags behind.",
            "Run the share groups tool with --describe to see each member's delivery count.",
        ),
    ],
)
def test_how_to_check_holds_what_says_to_check_not_what_only_mentions_a_check_word(mention, check):
    """ "When using an Authorizer and a user doesn't have Describe authorization on a topic, …" was shown under
    "How to check" for naming the operation Describe; so were "the main reason for this check" and "cannot verify"."""
    text = f"The record lock expired before the acknowledgement arrived. {mention} {check}"
    draft = _answer_from(text, [0.95, 0.9, 0.85], TROUBLESHOOT, max_units_troubleshoot=3, relative_cutoff=0.5)
    cause, how_to_check = draft.text.split("**How to check**")
    mentioned, checked = mention[:30], check[:30]
    assert mentioned in cause and mentioned not in how_to_check, draft.text
    assert checked in how_to_check, draft.text


def test_what_to_do_is_measured_against_the_best_fix_not_a_lead_that_restates_the_question():
    """ "What causes INVALID_RECORD_STATE and how do I fix it?": the record's "The record state is invalid."
    scores far above every cause and fix; a cutoff measured from it left the answer without them."""
    axes = _Axes()
    cause = (
        "The record state is invalid. The acknowledgement of delivery could not be completed. "
        "The record was produced in 2024 by a broker in another region."
    )
    fixes = "Ensure each record is acknowledged exactly once. Upgrade the client library to the latest version."
    candidates = [
        candidate(axes, "record", cause, [0.95, 0.5, 0.1]),
        candidate(axes, "solutions", fixes, [0.35, 0.3]),
    ]
    question = "What causes INVALID_RECORD_STATE and how do I fix it?"
    draft = extract_answer(ranked(candidates, question), shape(relative_cutoff=0.2, max_units_troubleshoot=4))
    _check(draft)
    assert "**What to do**" in draft.text, draft.text
    assert "Ensure each record is acknowledged exactly once. [2]" in draft.text
    assert "Upgrade the client library" in draft.text  # within the cutoff of the best fix
    assert "could not be completed" in draft.text  # the best cause after the lead
    assert "another region" not in draft.text  # far below it
    # A fact answer keeps one cutoff, measured from its lead.
    fact = extract_answer(ranked(candidates, FACT), shape(relative_cutoff=0.2))
    assert "Ensure" not in fact.text and "**" not in fact.text, fact.text


OVERRIDES = (
    "To add a config override for broker 0:\n\n"
    "$ bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type brokers --entity-name 0 --alter "
    "--add-config log.cleaner.threads=2\n\n"
    "To remove the override again:\n\n"
    "$ bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type brokers --entity-name 0 --alter "
    "--delete-config log.cleaner.threads\n"
)


@pytest.mark.parametrize(
    ("scores", "first", "second"),
    [([0.9, 0.8], "--add-config", "--delete-config"), ([0.8, 0.9], "--delete-config", "--add-config")],
)
def test_a_command_line_that_differs_from_a_shown_one_by_its_options_is_new(scores, first, second):
    """Two command lines that share nearly every word but an option run different operations: the second is
    no repetition of the first, however few new words it brings."""
    draft = _answer_from(OVERRIDES, scores, FACT, min_novelty=0.9)
    units = _units(draft.text)
    assert len(units) == 2 and first in units[0] and second in units[1], draft.text


def test_units_far_below_the_lead_are_left_out():
    axes = _Axes()
    draft = extract_answer(ranked([candidate(axes, "a", FIX, [0.9, 0.85, 0.5])]), shape(relative_cutoff=0.1))
    assert len(_units(draft.text)) == 2
    assert "ShareFetch" not in draft.text


NOTES = (
    "- The `port` and `host.name` configurations were removed. Please use `listeners` instead.\n"
    "- The `quota.producer.default` configuration was removed."
)


@pytest.mark.parametrize(("max_chars", "whole"), [(5000, True), (60, False)])
def test_a_sentence_of_a_list_item_is_shown_with_the_items_other_sentences_when_they_fit(max_chars, whole):
    draft = _answer_from(NOTES, [0.2, 0.9, 0.1], "what replaces host.name?", max_units_fact=1, max_chars=max_chars)
    item = "- The `port` and `host.name` configurations were removed. Please use `listeners` instead. [1]"
    assert (draft.text == item) is whole, draft.text
    assert "Please use `listeners` instead." in draft.text
    assert "quota.producer.default" not in draft.text  # another item of the list


REMOVED = "which broker configurations were removed in the upgrade?"
LISTENERS = "Brokers accept connections on every listener named in `advertised.listeners` after a restart."
RECONNECT = "Clients must reconnect to the new listener ports once the rolling restart of the cluster completes."
REPLACEMENT = "- The `port` and `host.name` configurations were removed. Please use `listeners` instead. ["


@pytest.mark.parametrize(("max_chars", "second_passage"), [(5000, True), (180, False)])
def test_a_lead_that_is_a_sentence_of_a_list_item_pays_for_the_rest_of_the_item_first(max_chars, second_passage):
    """The rest of the lead's item comes before any other unit takes the room: "… were removed." alone would
    mislead. The item's two sentences count as one unit: a second passage still follows within two."""
    axes = _Axes()
    notes = candidate(axes, "notes", NOTES, [0.9, 0.1, 0.1])
    second = candidate(axes, "second", LISTENERS, [0.85])
    draft = extract_answer(ranked([notes, second], REMOVED), shape(max_units_fact=2, max_chars=max_chars))
    _check(draft)
    assert draft.text.startswith(REPLACEMENT + "1]"), draft.text
    assert ("after a restart" in draft.text) is second_passage, draft.text


def test_a_list_item_sentence_chosen_after_the_lead_is_admitted_with_the_rest_of_its_item():
    """Chosen below the lead, an item's sentence brings its item's other sentences when they fit the room left,
    before a lower unit takes it (`_with_their_items` would find no room left at the end)."""
    axes = _Axes()
    first = candidate(axes, "first", LISTENERS, [0.9])
    notes = candidate(axes, "notes", NOTES, [0.8, 0.1, 0.1])
    third = candidate(axes, "third", RECONNECT, [0.7])
    draft = extract_answer(ranked([first, notes, third], REMOVED), shape(max_units_fact=3, max_chars=280))
    _check(draft)
    assert REPLACEMENT + "2]" in draft.text, draft.text
    assert "rolling restart" not in draft.text, draft.text  # no room left for it


TWO_ASKS = "what is the record lock duration, and how do consumers of a share group read records?"


@pytest.mark.parametrize(
    ("ask_passage", "ask_min", "held"),
    [
        ("second", 0.8, True),  # the second ask's best unit, far below the lead for the whole question
        ("second", 0.99, False),  # it scores too little for that ask
        ("elsewhere", 0.8, False),  # the ask alone retrieves no passage the whole question ranks
    ],
)
def test_each_ask_of_a_question_holds_its_best_unit(ask_passage, ask_min, held):
    axes = _Axes()
    top = candidate(axes, "top", FIX, [0.9, 0.2, 0.1])
    second = candidate(axes, "second", OTHER, [0.3, 0.2])
    alone = dataclasses.replace(candidate(_Axes(), ask_passage, OTHER, [0.1, 0.95]), unit_vectors=second.unit_vectors)
    ask = ranked([alone], "how do consumers of a share group read records?")
    draft = extract_answer(ranked([top, second], TWO_ASKS), shape(relative_cutoff=0.1, ask_min=ask_min), [ask])
    _check(draft)
    assert draft.text.startswith("The record lock expired"), draft.text
    assert ("cooperatively consume" in draft.text) is held, draft.text
    if held:
        assert {c.passage.chunk_id for c in draft.citations} == {"top", "second"}


def test_an_ask_the_lead_passage_answers_best_holds_that_unit_not_the_first_one_the_ask_retrieves():
    """ "How does quota enforcement work?" searched alone ranked first a passage whose best sentence was on where
    quotas are hard to implement; the sentence that answers it sat in the lead's passage, below the lead."""
    axes = _Axes()
    top = candidate(axes, "top", FIX, [0.9, 0.2, 0.1])
    second = candidate(axes, "second", OTHER, [0.3, 0.2])
    ask = ranked(
        [
            dataclasses.replace(second, unit_scores=np.array([0.1, 0.85])),  # the ask's own first passage
            dataclasses.replace(top, unit_scores=np.array([0.2, 0.2, 0.95])),
        ],
        "how do I check the cause?",
    )
    draft = extract_answer(ranked([top, second], TWO_ASKS), shape(relative_cutoff=0.1), [ask])
    _check(draft)
    assert draft.text.startswith("The record lock expired"), draft.text
    assert "Check the broker logs" in draft.text, draft.text
    assert "cooperatively consume" not in draft.text, draft.text


def test_without_asks_the_same_answer_leaves_the_second_asks_unit_out():
    axes = _Axes()
    top = candidate(axes, "top", FIX, [0.9, 0.2, 0.1])
    second = candidate(axes, "second", OTHER, [0.3, 0.2])
    draft = extract_answer(ranked([top, second], TWO_ASKS), shape(relative_cutoff=0.1))
    assert "cooperatively consume" not in draft.text


def test_an_asks_best_unit_that_is_another_row_of_the_leading_errors_table_is_not_held():
    """ "… Offset commit failed …: The request timed out. is that error retriable, and which setting controls the
    timeout?": its row led by its words, and the ask "is that error retriable" held CORRUPT_MESSAGE's row, the
    next row that scored for it."""
    axes = _Axes()
    table = _error_table(axes, (0.5, 0.6, 0.9))
    question = "Messages are rejected since there are fewer in-sync replicas than required. is that error retriable?"
    ask = ranked([dataclasses.replace(table, unit_scores=np.array([0.99, 0.2, 0.3]))], "is that error retriable?")
    draft = extract_answer(ranked([table], question), shape(max_units_fact=3, ask_min=0.5), [ask])
    _check(draft)
    assert [u.split("`")[1] for u in _units(draft.text)] == ["NOT_ENOUGH_REPLICAS"], draft.text


ACKS = "\n".join(
    [
        "The number of acknowledgments the producer requires. This controls durability.",
        "",
        "Type: | string",
        "Default: | all",
        "Valid Values: | [all, -1, 0, 1]",
        "",
        "Setting all is equivalent to the acks=-1 setting.",
    ]
)


ISR_METRICS = (
    "ISR shrink rate | kafka.server:type=ReplicaManager,name=IsrShrinksPerSec | 0\n"
    "ISR expansion rate | kafka.server:type=ReplicaManager,name=IsrExpandsPerSec | 0"
)
REPLICATION = (
    "The leader keeps track of the set of in-sync replicas, which is known as the ISR. "
    "A replica that falls behind is removed from the ISR."
)


@pytest.mark.parametrize(
    ("question", "lead"),
    [
        ("what is the ISR?", "The leader keeps track"),
        # not a question that only asks what something is: the first passage leads
        ("how often does the ISR shrink?", "ISR shrink rate"),
    ],
)
def test_the_sentence_that_says_what_the_thing_asked_about_is_leads_from_any_passage(question, lead):
    """ "what is the ISR?" was answered with a table of ISR metrics ranked first, the sentence naming it second."""
    axes = _Axes()
    metrics = candidate(axes, "metrics", ISR_METRICS, [0.9, 0.8])
    replication = candidate(axes, "replication", REPLICATION, [0.5, 0.4])
    draft = extract_answer(ranked([metrics, replication], question), shape(max_units_fact=2))
    _check(draft)
    assert _units(draft.text)[0].startswith(lead), draft.text


def test_the_entry_of_the_setting_the_question_names_leads_the_answer():
    axes = _Axes()
    units = build_units(ACKS, "acks")
    assert [(u.kind, u.subject) for u in units] == [("setting", "acks"), ("sentence", "")]
    scores = [0.2, 0.9]  # the loose sentence is more similar to the question
    entry = candidate(axes, "acks", ACKS, scores, heading="acks")
    draft = extract_answer(ranked([entry], "what is the default value of acks?"), shape(max_units_fact=2))
    _check(draft)
    assert draft.text.startswith("`acks`: "), draft.text
    assert "Default: all" in _units(draft.text)[0], draft.text


def _assert_led_by(candidates, question: str, leader: str) -> None:
    """The two-unit answer that `candidates` give to `question` opens with `leader` (under a layout heading for a
    troubleshooting question)."""
    draft = extract_answer(ranked(candidates, question), shape(max_units_fact=2))
    _check(draft)
    assert _units(draft.text)[0].startswith(leader), draft.text


GUARANTEE = "\n".join(
    ["The processing guarantee that should be used.", "", "Type: | string", "Default: | at_least_once"]
)


@pytest.mark.parametrize(
    ("question", "leader"),
    [
        ("what does processing.guarantee control?", "`processing.guarantee`: "),
        # the setting is what the user has, given a value; what they ask is answered by the passage ranked first
        ("We run with processing.guarantee=exactly_once_v2. How often does Streams commit?", "Streams commits"),
    ],
)
def test_the_entry_of_a_setting_the_user_only_says_they_have_does_not_take_the_lead(question, leader):
    axes = _Axes()
    prose = candidate(axes, "commit", "Streams commits every 100 ms under exactly-once.", [0.5])
    entry = candidate(axes, "guarantee", GUARANTEE, [0.4], heading="processing.guarantee")
    _assert_led_by([prose, entry], question, leader)


POLL_INTERVAL = "\n".join(["The maximum delay between invocations of poll().", "", "Type: | int", "Default: | 300000"])


@pytest.mark.parametrize(
    ("question", "leader"),
    [
        # the asking sentence names the setting: its entry leads from the lower passage
        ("Which metric warns before max.poll.interval.ms is hit?", "`max.poll.interval.ms`: "),
        # only the sentence before it does: what is asked is answered by the passage ranked first
        (
            "Our consumers have a long max.poll.interval.ms. Which metric tracks the time between poll calls?",
            "The time-between-poll-max metric",
        ),
        # an error line the user pastes is what they report, named as much as what they ask
        (
            "Deploys fail:\nERROR Consumer exceeded max.poll.interval.ms\nWhich metric tracks the time between polls?",
            "`max.poll.interval.ms`: ",
        ),
    ],
)
def test_the_entry_of_a_setting_named_only_around_the_asking_sentence_does_not_lead_from_a_lower_passage(
    question, leader
):
    axes = _Axes()
    prose = candidate(axes, "metric", "The time-between-poll-max metric tracks the delay between polls.", [0.5])
    entry = candidate(axes, "poll", POLL_INTERVAL, [0.4], heading="max.poll.interval.ms")
    _assert_led_by([prose, entry], question, leader)


RENAMES = "\n".join(["Field rename mappings.", "", "Type: | list", 'Default: | ""', "Importance: | medium"])
RENAME_PROSE = "It is not possible to rename a topic directly."
MIRRORED_GROUPS = "\n".join(
    ["Consumer groups to replicate.", "", "Type: | list", "Default: | .*", "Importance: | high"]
)
GROUPS_PROSE = "To list all consumer groups, run kafka-consumer-groups.sh with --list."


@pytest.mark.parametrize(
    ("prose_text", "entry_text", "name", "question", "leader"),
    [
        # "rename a topic" and the `renames` field fold to one token, but the question does not name the field
        (RENAME_PROSE, RENAMES, "renames", "how do I rename a topic?", "It is not possible"),
        # a word the first passage does not write: the question names the field
        (RENAME_PROSE, RENAMES, "renames", "what format does renames take?", "`renames`: "),
        # a word of the question's prose that the first passage writes too: its command leads, not a lower entry
        (GROUPS_PROSE, MIRRORED_GROUPS, "groups", "list all consumer groups?", "To list all consumer groups"),
        # written as a name, in code quotes or given a value: the entry leads from the lower passage
        (GROUPS_PROSE, MIRRORED_GROUPS, "groups", "what does `groups` default to in a checkpoint?", "`groups`: "),
        (GROUPS_PROSE, MIRRORED_GROUPS, "groups", "we set groups=orders-.* for the consumer groups, ok?", "`groups`: "),
    ],
)
def test_a_one_word_setting_is_named_only_as_it_is_spelt_and_not_as_the_first_passages_prose(
    prose_text, entry_text, name, question, leader
):
    axes = _Axes()
    prose = candidate(axes, "prose", prose_text, [0.6])
    entry = candidate(axes, name, entry_text, [0.9], heading=name)
    _assert_led_by([prose, entry], question, leader)


STATUS_ROW = (
    "Metric/Attribute name | Description | Mbean name\n"
    "status | The status of the connector. | kafka.connect:type=connector-metrics\n"
    "connector-count | The number of connectors run in this worker. | kafka.connect:type=connect-worker-metrics"
)


@pytest.mark.parametrize(
    ("question", "leader"),
    [
        # a REST path's segment is the endpoint, not the metric: the worker metric the question asks for leads
        ("is there a worker metric that counts task starts, so I don't poll /status?", "Task starts are counted"),
        ("what does the status metric of a connector show?", "`status`"),
    ],
)
def test_a_one_word_row_is_not_named_by_a_path_segment(question, leader):
    axes = _Axes()
    prose = candidate(axes, "worker", "Task starts are counted by the worker metrics.", [0.7])
    table = candidate(axes, "connect", STATUS_ROW, [0.5, 0.4], heading="Connect Monitoring")
    _assert_led_by([prose, table], question, leader)


NONE_ROW = "Error | Code | Retriable | Description\nNONE | 0 | False | \nUNKNOWN_SERVER_ERROR | -1 | False | Oops."


@pytest.mark.parametrize(
    ("question", "leader"),
    [
        ("describe shows Leader: none for some partitions. how do I get a leader back?", "Run the election tool"),
        ("a response carries error NONE, is that a failure?", "`NONE`"),
    ],
)
def test_a_word_the_corpus_writes_in_capitals_is_named_only_in_capitals(question, leader):
    """ "Leader: none" uses the word; the error `NONE` (code 0) is named by "NONE". Named, its row led the
    answer from the second passage."""
    axes = _Axes()
    prose = candidate(axes, "leaders", "Run the election tool to elect a leader for each partition.", [0.6])
    rows = make_candidate(
        "errors", section=("Protocol errors", "Error codes"), source="errors.html", text=NONE_ROW,
        unit_scores=(0.7, 0.1), unit_vectors=axes.take(2),
    )  # fmt: skip
    _assert_led_by([prose, rows], question, leader)


def test_a_row_that_states_nothing_but_its_key_is_not_quoted_unless_the_question_names_it():
    """The `NONE` row (code 0, no description) embeds as its table's header: "is that error retriable, and what's
    its code?" quoted "`NONE` (Code: 0 · Retriable: False)" after the row of the error the user had pasted."""
    axes = _Axes()
    rows = make_candidate(
        "errors", section=("Protocol errors", "Error codes"), source="errors.html", text=NONE_ROW,
        unit_scores=(0.9, 0.6), unit_vectors=axes.take(2),
    )  # fmt: skip
    draft = extract_answer(ranked([rows], "is that error retriable, and what's its code?"), shape(max_units_fact=3))
    _check(draft)
    assert _units(draft.text) == ["`UNKNOWN_SERVER_ERROR` (Code: -1 · Retriable: False): Oops. [1]"], draft.text


RESILIENCE = (
    "Parameter Name | Corresponding Client | Default value | Consider setting to\n"
    "acks | Producer | acks=1 | acks=all\n"
    "replication.factor | Streams | -1 | 3"
)


def test_of_two_entries_for_one_name_the_one_under_its_own_heading_leads():
    """ "what is the default of acks?" was answered by the `acks` row of a table of settings recommended for
    resiliency ("Default value: acks=1", a Streams recommendation), not by the producer's `acks` entry."""
    axes = _Axes()
    table = candidate(axes, "table", RESILIENCE, [0.9, 0.3], heading="Recommended configuration parameters")
    entry = candidate(axes, "acks", ACKS, [0.5, 0.4], heading="acks")
    draft = extract_answer(ranked([table, entry], "what is the default value of acks?"), shape(max_units_fact=2))
    _check(draft)
    assert draft.text.startswith("`acks`: The number of acknowledgments"), draft.text
    assert "Default: all" in _units(draft.text)[0], draft.text


ERROR_ROWS = (
    "Error | Code | Retriable | Description\n"
    "CORRUPT_MESSAGE | 2 | True | This message has failed its CRC checksum or is otherwise corrupt.\n"
    "RECORD_LIST_TOO_LARGE | 18 | False | The request included message batch larger than the configured segment size.\n"
    "NOT_ENOUGH_REPLICAS | 19 | True | Messages are rejected since there are fewer in-sync replicas than required."
)
MORE_ERROR_ROWS = "INVALID_TIMESTAMP | 32 | False | The timestamp of the message is out of acceptable range."


def _error_table(axes: _Axes, scores: tuple[float, ...]):
    """A chunk of the protocol error table (`ERROR_ROWS`), its three rows scored `scores`."""
    return make_candidate(
        "errors", section=("Protocol errors", "Error codes"), source="errors.html", text=ERROR_ROWS,
        unit_scores=scores, unit_vectors=axes.take(3),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("question", "rows"),
    [
        ("every produce fails with RECORD_LIST_TOO_LARGE, why?", ["RECORD_LIST_TOO_LARGE"]),
        ("what do RECORD_LIST_TOO_LARGE and INVALID_TIMESTAMP mean?", ["RECORD_LIST_TOO_LARGE", "INVALID_TIMESTAMP"]),
    ],
)
def test_beside_the_entry_the_question_names_the_other_entries_of_its_table_are_left_out(question, rows):
    axes = _Axes()
    table = ("Protocol errors", "Error codes")
    first = make_candidate(
        "errors-1", section=table, source="errors.html", text=ERROR_ROWS,
        unit_scores=(0.8, 0.9, 0.8), unit_vectors=axes.take(3),
    )  # fmt: skip
    second = make_candidate(
        "errors-2", section=table, source="errors.html", text=MORE_ERROR_ROWS,
        unit_scores=(0.8,), unit_vectors=axes.take(1),
    )  # fmt: skip
    prose = candidate(axes, "log", "A batch larger than the log segment size is rejected by the broker.", [0.7])
    draft = extract_answer(ranked([first, second, prose], question), shape(max_units_fact=5))
    _check(draft)
    named = [u.split("`")[1] for u in _units(draft.text) if u.startswith("`")]
    assert named == rows, draft.text
    assert "log segment size" in draft.text  # what is not another entry still follows


@pytest.mark.parametrize("table_first", [True, False])
def test_a_question_that_names_its_error_is_not_answered_by_the_rows_of_other_errors(table_first):
    """ "RecordTooLargeException: … max.request.size …" got the `max.request.size` entry and then the rows for
    OFFSET_METADATA_TOO_LARGE and INVALID_GROUP_ID; "CommitFailedException: …", an error no row names, got six
    rows of other errors. The rows of errors the question does not name neither lead nor follow."""
    axes = _Axes()
    table = _error_table(axes, (0.9, 0.9, 0.9))
    prose = candidate(axes, "poll", "The group rebalances when a member fails to poll in time.", [0.6])
    question = "my consumer fails with CommitFailedException: the group has already rebalanced. what do I do?"
    candidates = [table, prose] if table_first else [prose, table]
    draft = extract_answer(ranked(candidates, question), shape(max_units_troubleshoot=4))
    _check(draft)
    assert _units(draft.text) == ["The group rebalances when a member fails to poll in time. [1]"], draft.text


def test_an_error_row_that_leads_by_its_words_is_shown_without_the_rows_of_other_errors():
    """ "Broker: Not enough in-sync replicas" names no error: its row led by its words, and the rows of
    INCONSISTENT_GROUP_PROTOCOL and INVALID_COMMIT_OFFSET_SIZE, which scored next, followed it."""
    axes = _Axes()
    table = _error_table(axes, (0.8, 0.8, 0.9))
    prose = candidate(axes, "isr", "Topics have a setting for the minimum number of in-sync replicas.", [0.5])
    draft = extract_answer(ranked([table, prose], "Broker: Not enough in-sync replicas"), shape(max_units_fact=4))
    _check(draft)
    assert _units(draft.text) == [
        "`NOT_ENOUGH_REPLICAS` (Code: 19 · Retriable: True): Messages are rejected since there are fewer in-sync "
        "replicas than required. [1]",
        "Topics have a setting for the minimum number of in-sync replicas. [2]",
    ], draft.text


def test_a_follow_up_that_points_back_is_answered_by_the_entry_of_what_the_conversation_named():
    """After "my producer gets NOT_ENOUGH_REPLICAS", "is that retriable?" asks about that error: its row leads,
    though another error's row scores higher (a reverted change, which read only the follow-up's own words, let
    the higher row lead: NOT_ENOUGH_REPLICAS_AFTER_APPEND's, on the Kafka docs)."""
    axes = _Axes()
    table = _error_table(axes, (0.5, 0.9, 0.6))
    history = [
        {"role": "user", "content": "my producer gets NOT_ENOUGH_REPLICAS"},
        {"role": "assistant", "content": "Too few in-sync replicas. [1]"},
    ]
    question = "is that retriable?"
    query = parse_query(question, history)
    assert query.followup and "not_enough_replicas" in query.text.lower(), query.text
    pool = dataclasses.replace(make_pool([table], question=question), query=query)
    draft = extract_answer(Ranked(pool, (table,), (1.0,)), shape(max_units_fact=2))
    _check(draft)
    assert _units(draft.text)[0].startswith("`NOT_ENOUGH_REPLICAS` (Code: 19 · Retriable: True)"), draft.text


def test_a_row_the_question_names_still_answers_it_beside_its_error():
    axes = _Axes()
    table = _error_table(axes, (0.5, 0.6, 0.9))
    question = "RecordTooLargeException on produce: is it RECORD_LIST_TOO_LARGE?"
    draft = extract_answer(ranked([table], question), shape(max_units_troubleshoot=4))
    _check(draft)
    assert [u.split("`")[1] for u in _units(draft.text)] == ["RECORD_LIST_TOO_LARGE"], draft.text


def test_a_rows_name_is_asked_about_only_when_its_words_stand_together_in_the_question():
    axes = _Axes()
    table = candidate(axes, "raft", RAFT_METRICS, [0.8, 0.9, 0.3], heading="KRaft Quorum Monitoring Metrics")
    prose = candidate(axes, "quorum", "The quorum elects a leader among the voters.", [0.85])
    # "Current Leader" leads both answers; only where the question names it are its sibling rows left out.
    scattered = extract_answer(ranked([table, prose], "which is the current quorum leader?"), shape(max_units_fact=3))
    assert "Current State" in scattered.text, scattered.text
    named = extract_answer(ranked([table, prose], "what does current leader show?"), shape(max_units_fact=3))
    assert "Current Leader" in named.text and "quorum elects a leader" in named.text, named.text
    assert "Current State" not in named.text and "Current Epoch" not in named.text, named.text


def test_a_row_is_named_by_its_error_code_too():
    # "error code 25 what does it mean" opened with the rows for -1, 1 and 2.
    axes = _Axes()
    table = _error_table(axes, (0.9, 0.3, 0.8))
    draft = extract_answer(ranked([table], "error code 18 what does it mean"), shape(max_units_fact=3))
    _check(draft)
    assert _units(draft.text) == [
        "`RECORD_LIST_TOO_LARGE` (Code: 18 · Retriable: False): The request included message batch larger than "
        "the configured segment size. [1]"
    ]


@pytest.mark.parametrize(("other_default", "entries_shown"), [("30000 (30 seconds)", 1), ("40000 (40 seconds)", 2)])
def test_another_pages_entry_of_a_setting_is_quoted_only_when_it_says_more(other_default, entries_shown):
    """The broker's and the tiered-storage page's `remote.log.storage.system.enable` read alike but for an update
    mode: the second page's further sentence is shown under the key, without its entry again. The producer's and
    the consumer's `request.timeout.ms` differ by their defaults: both entries are quoted."""
    description = (
        "The configuration controls the maximum amount of time the client will wait for the response of a request. "
        "If the response is not received before the timeout elapses the client will resend the request."
    )
    further = "This should be larger than the broker replica lag time to reduce the possibility of duplicates."
    axes = _Axes()
    producer = make_candidate(
        "producer", section=("Configuration", "Producer Configs", "request.timeout.ms"), source="producer.html",
        text=f"{description}\n\nType: | int\nDefault: | 30000 (30 seconds)\nImportance: | medium",
        unit_scores=(0.9, 0.1), unit_vectors=axes.take(2),
    )  # fmt: skip
    consumer = make_candidate(
        "consumer", section=("Configuration", "Consumer Configs", "request.timeout.ms"), source="consumer.html",
        text=f"{description} {further}\n\nType: | int\nDefault: | {other_default}\nImportance: | medium",
        unit_scores=(0.3, 0.2, 0.85), unit_vectors=axes.take(3),
    )  # fmt: skip
    producer, consumer = (_about(c, c.passage.section_path, "request.timeout.ms") for c in (producer, consumer))
    draft = extract_answer(
        ranked([producer, consumer], "what is request.timeout.ms?"), shape(max_units_fact=3, min_novelty=0.35)
    )
    _check(draft)
    assert draft.text.count("`request.timeout.ms`: The configuration controls") == entries_shown, draft.text
    assert further in draft.text, draft.text


def test_a_second_settings_entry_is_news_by_its_own_words_not_the_labels_every_entry_repeats():
    """The question "how often are consumer group offsets synced?" ranks `sync.group.offsets.enabled` first;
    the entry of `sync.group.offsets.interval.seconds` ("Frequency of consumer group offset sync.") answers it.
    Counting the labels (Type, Default, Valid Values, Importance), which no second entry can bring anew, it
    brought too few new words to be shown."""
    axes = _Axes()
    enabled = make_candidate(
        "enabled", section=("Configuration", "MirrorMaker Checkpoint Configs", "sync.group.offsets.enabled"),
        source="mirror.html",
        text="Whether to periodically write the translated offsets to __consumer_offsets topic in target cluster, as "
        "long as no active consumers in that group are connected to the target cluster.\n\n"
        "Type: | boolean\nDefault: | false\nValid Values: |\nImportance: | low",
        unit_scores=(0.9,), unit_vectors=axes.take(1),
    )  # fmt: skip
    interval = make_candidate(
        "interval", section=("Configuration", "MirrorMaker Checkpoint Configs", "sync.group.offsets.interval.seconds"),
        source="mirror.html",
        text="Frequency of consumer group offset sync.\n\n"
        "Type: | long\nDefault: | 60\nValid Values: |\nImportance: | low",
        unit_scores=(0.85,), unit_vectors=axes.take(1),
    )  # fmt: skip
    draft = extract_answer(
        ranked([enabled, interval], "how often are consumer group offsets synced?"),
        shape(max_units_fact=3, min_novelty=0.35),
    )
    _check(draft)
    assert "`sync.group.offsets.interval.seconds`: Frequency of consumer group offset sync." in draft.text, draft.text


def test_the_entries_of_two_settings_that_read_alike_stand_apart_by_their_keys():
    """ "How much memory do the log cleaner threads use for their i/o buffers, apart from the dedupe buffer?"
    ranks the dedupe buffer's entry first; the I/O buffer's entry, which answers it, says the same but for its
    key, default and type (4 of its 17 words new), and was left out as no news."""
    axes = _Axes()
    rows = "\n\nType: | {0}\nDefault: | {1}\nValid Values: |\nImportance: | medium\nUpdate Mode: | cluster-wide"
    dedupe = make_candidate(
        "dedupe", section=("Configuration", "Broker Configs", "log.cleaner.dedupe.buffer.size"), source="broker.html",
        text="The total memory used for log deduplication across all cleaner threads" + rows.format("long", 134217728),
        unit_scores=(0.95,), unit_vectors=axes.take(1),
    )  # fmt: skip
    io = make_candidate(
        "io", section=("Configuration", "Broker Configs", "log.cleaner.io.buffer.size"), source="broker.html",
        text="The total memory used for log cleaner I/O buffers across all cleaner threads"
        + rows.format("int", 524288),
        unit_scores=(0.9,), unit_vectors=axes.take(1),
    )  # fmt: skip
    question = "how much memory do the log cleaner threads use for their i/o buffers?"
    draft = extract_answer(ranked([dedupe, io], question), shape(max_units_fact=3, min_novelty=0.35))
    _check(draft)
    assert "`log.cleaner.io.buffer.size`: The total memory used for log cleaner I/O buffers" in draft.text, draft.text


def test_a_sentence_of_an_error_record_is_named_by_the_error_its_page_is_titled_by():
    """An error-knowledge record is titled by its error ("Kafka Error INVALID_RECORD_STATE") and its sentences never
    name it: "what does error code 121 mean?" was answered "The record state is invalid." alone."""
    axes = _Axes()
    text = "The record state is invalid. The acknowledgement of delivery could not be completed."
    record = make_candidate(
        "record", section=("Kafka Error INVALID_RECORD_STATE", "Error code 121 · Non-retriable"), source="e.txt",
        text=text, unit_scores=(0.9, 0.8), unit_vectors=axes.take(2),
    )  # fmt: skip
    draft = extract_answer(ranked([record], "what does error code 121 mean?"), shape(max_units_fact=2))
    _check(draft)
    assert _units(draft.text) == [
        "`INVALID_RECORD_STATE`: The record state is invalid. [1]",
        "The acknowledgement of delivery could not be completed. [1]",
    ]


def test_half_a_sentence_that_a_list_completes_is_never_quoted_alone():
    """ "If you want to use static membership," was quoted as a unit of its own: the list that completes it is
    units of its own, and the half sentence says nothing."""
    text = (
        "Static membership avoids rebalances on restarts. If you want to use static membership,\n"
        "- Upgrade the brokers to 2.3 or beyond.\n- Set group.instance.id to a unique value for each consumer."
    )
    draft = _answer_from(text, [0.5, 0.9, 0.4, 0.6], "how do I use static membership?", max_units_fact=4)
    assert "If you want to use static membership," not in draft.text, draft.text
    assert "group.instance.id" in draft.text, draft.text


RAFT_METRICS = (
    "These metrics are reported on both Controllers and Brokers in a KRaft Cluster\n"
    "Metric/Attribute name | Description | Mbean name\n"
    "Current State | The current state of this member; possible values are leader, follower, observer. | "
    "kafka.server:type=raft-metrics,name=current-state\n"
    "Current Leader | The current quorum leader's id; -1 indicates unknown. | "
    "kafka.server:type=raft-metrics,name=current-leader\n"
    "Current Epoch | The current quorum epoch. | kafka.server:type=raft-metrics,name=current-epoch"
)


def test_rows_of_one_table_are_not_near_duplicates_for_what_they_share_and_show_under_one_lead_in():
    # Each row's vector holds the table's lead-in and header: the rows of the KRaft quorum metrics were
    # all dropped as near-duplicates of the first, and "which metric tells a node's raft role" lost its row.
    alike = np.tile(np.eye(DIMENSION, dtype=np.float32)[0], (3, 1))
    table = candidate(_Axes(), "raft", RAFT_METRICS, [0.8, 0.9, 0.3], "KRaft Quorum Monitoring Metrics", alike)
    question = "who is the current quorum leader, and which metric tells me a node's raft role?"
    draft = extract_answer(ranked([table], question), shape(max_units_fact=2, relative_cutoff=0.4))
    _check(draft)
    assert draft.text.split("\n") == [
        "These metrics are reported on both Controllers and Brokers in a KRaft Cluster [1]",
        "Current State: The current state of this member; possible values are leader, follower, observer. · "
        "Mbean name: kafka.server:type=raft-metrics,name=current-state",
        "Current Leader: The current quorum leader's id; -1 indicates unknown. · "
        "Mbean name: kafka.server:type=raft-metrics,name=current-leader",
    ]


CONTROLLER_METRICS = (
    "Metric/Attribute name | Description | Mbean name\n"
    "Offline Partition Count | The number of offline topic partitions (non-internal) as observed by this Controller. "
    "| kafka.controller:type=KafkaController,name=OfflinePartitionsCount\n"
    "Global Partition Count | The number of global partitions as observed by this Controller. "
    "| kafka.controller:type=KafkaController,name=GlobalPartitionCount\n"
    "Global Topic Count | The number of global topics as observed by this Controller. "
    "| kafka.controller:type=KafkaController,name=GlobalTopicCount\n"
    "Metadata Error Count | The number of times this controller node has encountered an error during metadata log "
    "processing. | kafka.controller:type=KafkaController,name=MetadataErrorCount"
)


def test_a_row_is_news_by_its_own_words_not_those_most_rows_of_its_table_share():
    """After the Offline Partition Count row, Global Partition Count brings two words that are not in every row
    of the controller's table ("global" and its MBean's name): counted with the table's shared words ("The
    number of … as observed by this Controller", the MBean prefix) it was too little news, and a row scoring far
    lower took its place."""
    table = candidate(_Axes(), "controller", CONTROLLER_METRICS, [1.0, 0.99, 0.95, 0.5], "Controller Metrics")
    question = "which controller metrics give me the cluster-wide counts of topics and partitions?"
    draft = extract_answer(ranked([table], question), shape(max_units_fact=3, min_novelty=0.35))
    _check(draft)
    assert "Global Partition Count: " in draft.text and "Global Topic Count: " in draft.text, draft.text
    assert "Metadata Error Count" not in draft.text, draft.text


BROKER_METRICS = (
    "Description | Mbean name | Normal value\n"
    "Leader replica counts | kafka.server:type=ReplicaManager,name=LeaderCount | mostly even across brokers\n"
    "# of under minIsr partitions (|ISR| < min.insync.replicas) | "
    "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount | 0"
)


def test_a_row_whose_mbean_holds_the_name_the_question_is_about_leads():
    """Retrieval adds the CamelCase names the corpus holds to the question's identifiers
    (`Retriever._carried_names`); the row that holds one in any cell is the entry asked about, though its
    first cell is words and another row scores higher."""
    table = candidate(_Axes(), "ops", BROKER_METRICS, [0.9, 0.6], heading="Common monitoring metrics")
    question = "Prometheus shows UnderMinIsrPartitionCount at 3 for broker 2. What should it normally be?"
    pool = make_pool([table], question=question)
    bare = extract_answer(Ranked(pool, (table,), (1.0,)), shape(max_units_fact=1))
    assert bare.text.startswith("Leader replica counts"), bare.text
    named = dataclasses.replace(
        pool.query, identifiers=(*pool.query.identifiers, QueryIdentifier("underminisrpartitioncount", "question"))
    )
    draft = extract_answer(Ranked(dataclasses.replace(pool, query=named), (table,), (1.0,)), shape(max_units_fact=1))
    _check(draft)
    assert draft.text.startswith("`# of under minIsr partitions (|ISR| < min.insync.replicas)` (Normal value: 0)")


REPLICA_MANAGER_METRICS = (
    "Description | Mbean name | Normal value\n"
    "Partition counts | kafka.server:type=ReplicaManager,name=PartitionCount | mostly even across brokers\n"
    "Offline Replica counts | kafka.server:type=ReplicaManager,name=OfflineReplicaCount | 0\n"
    "Leader replica counts | kafka.server:type=ReplicaManager,name=LeaderCount | mostly even across brokers\n"
    "Number of reassigning partitions | kafka.server:type=ReplicaManager,name=ReassigningPartitions | "
    "The number of reassigning leader partitions on a broker.\n"
    "ISR shrink rate | kafka.server:type=ReplicaManager,name=IsrShrinksPerSec | If a broker goes down, ISR for "
    "some of the partitions will shrink.\n"
    "Under replicated partitions | kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions | 0"
)


def test_a_metrics_row_is_news_by_its_mbean_when_its_words_are_all_said():
    """After the partition, offline replica and reassigning partitions rows and a sentence about JMX, the Leader replica
    counts row says no word the answer lacks but its MBean's name: it is the metric asked for, and it was left
    out as no news."""
    jmx = candidate(
        _Axes(),
        "remote",
        "You can enable remote monitoring using JMX by setting the environment variable JMX_PORT for processes "
        "started using the CLI.",
        [0.82],
    )
    scores = [0.9, 0.86, 0.8, 0.85, 0.4, 0.3]
    table = candidate(_Axes(), "ops", REPLICA_MANAGER_METRICS, scores, heading="Common monitoring metrics")
    question = "which jmx bean shows how many partitions each broker is currently leader for?"
    draft = extract_answer(ranked([table, jmx], question), shape(max_units_fact=5, min_novelty=0.35))
    _check(draft)
    assert "name=LeaderCount" in draft.text, draft.text


INSERT_HEADER = (
    "Add a header to each record.\n\n"
    "header\nThe name of the header.\nType: | string\nDefault: |\nValid Values: | non-null string\n"
    "Importance: | high"
)


def test_a_sentence_under_a_class_heading_is_named_by_the_class_though_a_setting_of_it_comes_first():
    """A Connect transformation's section is headed by its class: "Add a header to each record." says of what
    only there. Its `header` setting, shown first, names itself, not the class."""
    heading = "org.apache.kafka.connect.transforms.InsertHeader"
    section = candidate(_Axes(), "smt", INSERT_HEADER, [0.8, 0.9], heading=heading)
    draft = extract_answer(ranked([section], "which transform adds a header to each record?"), shape())
    _check(draft)
    assert _units(draft.text) == [
        "`header`: The name of the header. (Type: string · Valid Values: non-null string) [1]",
        f"`{heading}`: Add a header to each record. [1]",
    ]


def test_a_sentence_under_a_setting_heading_is_shown_with_the_setting_name():
    axes = _Axes()
    text = "This specifies the number of stream threads in an instance. It can be changed at runtime."
    entry = candidate(axes, "threads", text, [0.9, 0.8], heading="num.stream.threads")
    prose = candidate(axes, "prose", OTHER, [0.1, 0.1], heading="Share groups")
    draft = extract_answer(ranked([entry, prose], "how many stream threads run by default?"), shape(max_units_fact=3))
    _check(draft)
    units = _units(draft.text)
    assert units[0] == "`num.stream.threads`: This specifies the number of stream threads in an instance. [1]"
    assert not units[1].startswith("`num.stream.threads`")  # named once per passage
    assert all(not u.startswith("`Share") for u in units)  # a heading of words is not a name


BUFFER = (
    "The total bytes of memory the producer can use to buffer records.\n\n"
    "This setting should correspond roughly to the total memory the producer will use.\n\n"
    "Type: | long\nDefault: | 33554432\nImportance: | high"
)
BUFFER_ENTRY = "`buffer.memory`: The total bytes of memory the producer can use to buffer records. (Type: long"
BUFFER_MORE = "This setting should correspond roughly to the total memory the producer will use. [1]"


@pytest.mark.parametrize("units_allowed", [1, 2])  # the entry left out by the unit limit, or chosen after the sentence
def test_a_sentence_continuing_a_setting_entry_is_shown_after_the_entry(units_allowed):
    # "This setting should correspond roughly to …" led an answer above the `buffer.memory` entry it belongs
    # to, and without it once the answer was full.
    axes = _Axes()
    entry = candidate(axes, "buffer", BUFFER, [0.5, 0.9], heading="buffer.memory")
    question = "the producer blocks when its memory is full"
    draft = extract_answer(ranked([entry], question), shape(max_units_fact=units_allowed))
    _check(draft)
    units = _units(draft.text)
    assert units[0].startswith(BUFFER_ENTRY), draft.text
    assert units[1:] == [BUFFER_MORE]


def test_a_continuing_sentence_without_room_for_its_entry_is_named_by_it():
    axes = _Axes()
    entry = candidate(axes, "buffer", BUFFER, [0.1, 0.9], heading="buffer.memory")
    question = "the producer blocks when its memory is full"
    draft = extract_answer(ranked([entry], question), shape(max_units_fact=1, max_chars=len(BUFFER_MORE) + 10))
    _check(draft)
    assert _units(draft.text) == ["`buffer.memory`: " + BUFFER_MORE]


def test_a_continuing_sentence_pays_for_its_entry_before_later_units_fill_the_answer():
    # "`commit.interval.ms`: For exactly-once processing, it means …" was shown without the entry's default
    # because a lower unit, chosen after it, had used the room the entry needed.
    axes = _Axes()
    lead = candidate(axes, "lead", "The producer buffers records before it sends them.", [0.95])
    entry = candidate(axes, "buffer", BUFFER, [0.1, 0.9], heading="buffer.memory")
    later = candidate(axes, "later", "Records wait in the buffer " + "while the batch fills up " * 7 + "here.", [0.8])
    question = "the producer blocks when its memory is full"
    draft = extract_answer(ranked([lead, entry, later], question), shape(max_units_fact=3, max_chars=420))
    _check(draft)
    units = _units(draft.text)
    assert units[1].startswith(BUFFER_ENTRY), draft.text
    assert "Default: 33554432" in units[1]
    assert units[2] == BUFFER_MORE.replace("[1]", "[2]")
    assert "Records wait in the buffer" not in draft.text  # no room left for it beside the entry
    assert len(draft.text) <= 420


def _retention_entry(unit: str, default: str, source: str = "") -> str:
    then = f"If not set, the value in log.retention.{source} is used" if source else ""
    description = f"The number of {unit} to keep a log file before deleting it (in {unit}). {then}".strip()
    return f"{description}\n\nType: | long\nDefault: | {default}\nImportance: | high"


@pytest.mark.parametrize("alike", [False, True])  # the real entries read alike: near-duplicate vectors
def test_a_setting_with_no_default_is_followed_by_the_settings_it_takes_its_value_from(alike):
    # "How long does a broker keep log data by default?" got `log.retention.ms` (Default: null) and another
    # setting's 7 days, not the 168 hours of `log.retention.hours` that `log.retention.minutes` falls back to.
    axes = _Axes()
    millis = candidate(
        axes, "ms", _retention_entry("milliseconds", "null", "minutes"), [0.9], heading="log.retention.ms"
    )
    other = candidate(axes, "meta", BUFFER, [0.85, 0.8], heading="buffer.memory")
    same = millis.unit_vectors if alike else None
    hours = candidate(
        axes, "hours", _retention_entry("hours", "168"), [0.5], heading="log.retention.hours", vectors=same
    )
    minutes = candidate(
        axes,
        "minutes",
        _retention_entry("minutes", "null", "hours"),
        [0.6],
        heading="log.retention.minutes",
        vectors=same,
    )
    question = "How long does a broker keep log data by default before deleting it?"
    draft = extract_answer(ranked([millis, other, hours, minutes], question), shape(max_units_fact=3))
    _check(draft)
    names = [unit.split("`")[1] for unit in _units(draft.text)]
    assert names == ["log.retention.ms", "log.retention.minutes", "log.retention.hours"], draft.text
    assert "Default: 168" in draft.text


def test_a_setting_with_a_default_brings_no_other_entry():
    axes = _Axes()
    millis = candidate(
        axes, "ms", _retention_entry("milliseconds", "604800000", "minutes"), [0.9], heading="log.retention.ms"
    )
    minutes = candidate(
        axes, "minutes", _retention_entry("minutes", "null", "hours"), [0.3], heading="log.retention.minutes"
    )
    draft = extract_answer(
        ranked([millis, minutes], "how long is log data kept?"), shape(max_units_fact=2, relative_cutoff=0.2)
    )
    _check(draft)
    assert "log.retention.minutes`:" not in draft.text, draft.text


ISR_DESIGN = (
    "The leader keeps track of the set of in-sync replicas. "
    "The determination of lagging replicas is controlled through configuration."
)


UNSET = "log.retention.minutes"


def _isr_answer(**overrides):
    """A design passage answers, naming no setting; three setting entries rank below it, the last one far below
    the lead's score."""
    axes = _Axes()
    design = candidate(axes, "design", ISR_DESIGN, [0.9, 0.8])
    fetch_wait = candidate(
        axes, "wait", _retention_entry("milliseconds", "500"), [0.7], heading="replica.fetch.wait.max.ms"
    )
    lag = candidate(axes, "lag", _retention_entry("milliseconds", "30000"), [0.6], heading="replica.lag.time.max.ms")
    unset = candidate(axes, "unset", _retention_entry("minutes", "null"), [0.1], heading="log.retention.minutes")
    draft = extract_answer(
        ranked([design, fetch_wait, lag, unset], "what decides when a follower drops out of the ISR?"),
        shape(max_units_fact=2, **overrides),
    )
    _check(draft)
    return draft


def test_setting_entries_the_answer_does_not_name_close_it_with_their_defaults():
    draft = _isr_answer(related_max=3, relative_cutoff=0.4)
    assert draft.text.endswith(
        "Related settings: `replica.fetch.wait.max.ms` (default 500) [2]"
        " · `replica.lag.time.max.ms` (default 30000) [3]"
    ), draft.text  # `log.retention.minutes` scores too far below the lead
    assert [c.passage.chunk_id for c in draft.citations] == ["design", "wait", "lag"]
    assert "Default: | 30000" in draft.citations[2].quotes[-1]  # the default is quoted from the entry


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"related_max": 0}, []),
        ({"related_max": 1}, ["replica.fetch.wait.max.ms"]),
        ({"related_max": 3, "related_depth": 2}, ["replica.fetch.wait.max.ms"]),
        ({"related_max": 3, "related_max_chars": 80}, ["replica.fetch.wait.max.ms"]),  # as many as fit
        ({"related_max": 3, "related_max_chars": 10}, []),  # a long answer stays as it is
        ({"related_max": 3, "relative_cutoff": 1.0}, ["replica.fetch.wait.max.ms", "replica.lag.time.max.ms", UNSET]),
    ],
)
def test_the_related_settings_line_is_bounded_by_count_depth_length_and_score(overrides, named):
    """`related_max_chars` is given here as the room over the answer without the line."""
    bare = len(_isr_answer(relative_cutoff=0.4).text)
    if "related_max_chars" in overrides:
        overrides = {**overrides, "related_max_chars": bare + overrides["related_max_chars"]}
    draft = _isr_answer(**{"relative_cutoff": 0.4, **overrides})
    line = draft.text.split("Related settings: ")[1] if "Related settings: " in draft.text else ""
    assert re.findall(r"`([^`]+)` \(", line) == named, draft.text
    assert len(draft.text) <= overrides.get("related_max_chars", 5000)


def test_a_setting_the_answer_names_without_its_entry_is_related_with_its_default():
    """ "What decides when a lagging follower is dropped from the ISR?" was answered from the replication design,
    which names `replica.lag.time.max.ms`; its entry ranked next, and its default (30000) was left out because
    the answer spelt its name."""
    axes = _Axes()
    design = candidate(
        axes,
        "design",
        "The leader keeps track of the set of in-sync replicas. "
        "The determination of lagging replicas is controlled through the `replica.lag.time.max.ms` configuration.",
        [0.9, 0.8],
    )
    lag = candidate(axes, "lag", _retention_entry("milliseconds", "30000"), [0.6], heading="replica.lag.time.max.ms")
    draft = extract_answer(
        ranked([design, lag], "what decides when a follower drops out of the ISR?"),
        shape(max_units_fact=2, related_max=3, relative_cutoff=0.4),
    )
    _check(draft)
    assert draft.text.endswith("Related settings: `replica.lag.time.max.ms` (default 30000) [2]"), draft.text


TIMEOUT_DESIGN = (
    "The transaction coordinator aborts a transaction that stays open too long. "
    "If this value is larger than the `transaction.max.timeout.ms` setting in the broker, the request fails."
)


def _timeout_answer(*references, heading: str = "Heading", **overrides):
    """An answer whose second sentence names a setting no ranked passage is the entry of; `references` are the
    chunks the retriever read for the names the passages use (`Ranked.references`), `heading` the passage's."""
    axes = _Axes()
    design = candidate(axes, "design", TIMEOUT_DESIGN, [0.9, 0.8], heading=heading)
    of_question = ranked([design], "what is the broker's ceiling for a transaction timeout?")
    draft = extract_answer(
        dataclasses.replace(of_question, references=references),
        shape(max_units_fact=2, related_max=3, relative_cutoff=0.4, **overrides),
    )
    _check(draft)
    return draft


def _entry(axes: _Axes, name: str, default: str, heading: str, source: str = ""):
    return candidate(axes, name, _retention_entry("milliseconds", default), [0.0], heading=heading, source=source)


def test_a_setting_the_answer_names_is_related_with_its_default_from_the_entry_the_retriever_read():
    axes = _Axes()
    draft = _timeout_answer(_entry(axes, "max", "900000", "transaction.max.timeout.ms"))
    assert draft.text.endswith("Related settings: `transaction.max.timeout.ms` (default 900000) [2]"), draft.text
    assert draft.citations[1].passage.section_path[-1] == "transaction.max.timeout.ms"  # cited to its entry
    assert "Default: | 900000" in draft.citations[1].quotes[-1]


def test_a_setting_whose_prose_the_answer_quotes_under_its_heading_is_related_after_those_its_sentences_name():
    """The Streams guide describes `state.dir` under its own heading without its default: the answer closes with
    the entry's default, but after the settings its sentences name, which the user has not seen described."""
    axes = _Axes()
    references = (
        _entry(axes, "own", "60000", "transaction.timeout.ms"),
        _entry(axes, "max", "900000", "transaction.max.timeout.ms"),
    )

    def answer(**overrides):
        return _timeout_answer(*references, heading="transaction.timeout.ms", **overrides)

    both = answer().text
    assert both.startswith("`transaction.timeout.ms`: "), both
    own = " · `transaction.timeout.ms` (default 60000) [3]"
    assert both.endswith(f"Related settings: `transaction.max.timeout.ms` (default 900000) [2]{own}"), both
    room_for_one = len(both) - len(own)
    assert answer(max_chars=room_for_one).text.endswith("`transaction.max.timeout.ms` (default 900000) [2]")


def test_a_named_setting_whose_pages_disagree_on_the_default_is_not_related():
    """The broker's and the producer's entries of one name may differ: the answer cannot tell which it means."""
    axes = _Axes()
    broker = _entry(axes, "broker", "900000", "transaction.max.timeout.ms", source="broker.html")
    other = _entry(axes, "other", "60000", "transaction.max.timeout.ms", source="other.html")
    assert "Related settings" not in _timeout_answer(broker, other).text
    agree = _entry(axes, "agree", "900000", "transaction.max.timeout.ms", source="agree.html")
    assert "(default 900000)" in _timeout_answer(broker, agree).text


def test_a_setting_the_answer_names_may_run_it_to_its_length_limit_but_no_further():
    axes = _Axes()
    reference = _entry(axes, "max", "900000", "transaction.max.timeout.ms")
    bare = len(_timeout_answer().text)
    mention = len("\n\nRelated settings: `transaction.max.timeout.ms` (default 900000) [2]")
    # `related_max_chars` bounds the knobs near the answer, not the settings it names
    named = _timeout_answer(reference, related_max_chars=bare, max_chars=bare + mention)
    assert named.text.endswith("(default 900000) [2]"), named.text
    assert "Related settings" not in _timeout_answer(reference, max_chars=bare + mention - 1).text


def test_a_setting_of_one_plain_word_the_answer_uses_as_a_word_is_not_related():
    axes = _Axes()
    design = candidate(axes, "design", "MirrorMaker replicates topics and consumer groups between clusters.", [0.9])
    topics = candidate(axes, "topics", _retention_entry("names", ".*"), [0.8], heading="topics")
    draft = extract_answer(
        ranked([design, topics], "what does MirrorMaker replicate?"),
        shape(max_units_fact=1, related_max=3, relative_cutoff=0.4),
    )
    _check(draft)
    assert "Related settings" not in draft.text, draft.text


@pytest.mark.parametrize(("heading", "related"), [("renames", False), ("topic.renames", True)])
def test_a_setting_of_one_plain_word_the_question_does_not_name_is_not_related(heading, related):
    """ "is there a way to rename a topic?" closed with "Related settings: `renames` (default "")", a transform's
    field that folds to the question's word; a key is a knob whatever words the question uses."""
    axes = _Axes()
    design = candidate(axes, "design", "It is not possible to rename a topic directly.", [0.9])
    entry = candidate(axes, "entry", _retention_entry("fields", '""'), [0.8], heading=heading)
    draft = extract_answer(
        ranked([design, entry], "is there a way to rename a topic?"),
        shape(max_units_fact=1, related_max=3, relative_cutoff=0.4),
    )
    _check(draft)
    assert ("Related settings: `" in draft.text) is related, draft.text


def test_a_setting_the_answer_names_is_not_related_again_and_one_without_default_says_so():
    axes = _Axes()
    entry = candidate(axes, "ms", _retention_entry("milliseconds", "604800000"), [0.9], heading="log.retention.ms")
    again = candidate(axes, "again", _retention_entry("milliseconds", "1"), [0.8], heading="log.retention.ms")
    unset = candidate(axes, "minutes", _retention_entry("minutes", "null"), [0.7], heading="log.retention.minutes")
    draft = extract_answer(
        ranked([entry, again, unset], "how long is log data kept?"), shape(max_units_fact=1, related_max=3)
    )
    _check(draft)
    assert draft.text.endswith("Related settings: `log.retention.minutes` (no default) [2]"), draft.text


def _compression_entry(axes: _Axes, section: str, description: str, default: str, score: float):
    text = f"{description}\n\nType: | string\nDefault: | {default}\nImportance: | high"
    entry = candidate(axes, section.split()[1].lower(), text, [score], heading="compression.type")
    return _about(entry, ("Configuration", section, "compression.type"), "compression.type")


@pytest.mark.parametrize(
    ("question", "lead_section"),
    [
        ("how do I enable gzip compression on my producer", "3.3 Producer Configs"),
        ("how do I enable gzip compression on my kafka producer", "3.3 Producer Configs"),
        ("how do I enable gzip compression for a topic", "3.2 Topic-Level Configs"),
        ("which compression does the broker apply by default", "3.1 Broker Configs"),
        ("how do I enable gzip compression", "3.2 Topic-Level Configs"),  # none named: the best-ranked entry leads
    ],
)
def test_of_one_settings_entries_in_several_sections_the_one_the_question_names_leads(question, lead_section):
    # "how do I enable gzip compression on my producer" led with the topic's `compression.type`, ranked above
    # the producer's own entry. The generated reference pages sit in "Configuration" under a section per
    # component (`rag.includes`): the section above the entry names it.
    axes = _Axes()
    topic = _compression_entry(axes, "3.2 Topic-Level Configs", "Specify the final compression type.", "producer", 0.9)
    broker = _compression_entry(axes, "3.1 Broker Configs", "Specify the final compression type.", "producer", 0.85)
    producer = _compression_entry(axes, "3.3 Producer Configs", "The compression type for all data.", "none", 0.8)
    draft = extract_answer(ranked([topic, broker, producer], question), shape(max_units_fact=2))
    _check(draft)
    lead = next(c for c in draft.citations if c.marker == 1)
    assert lead.passage.section_path[1] == lead_section, draft.text
    assert draft.text.startswith("`compression.type`:"), draft.text


RECORD_STATE = "The record state is invalid. The acknowledgement of delivery could not be completed."


def _about(candidate_, section_path: tuple[str, ...], *identifiers: str):
    """The candidate with the heading path and the identifiers its chunk carries."""
    passage = dataclasses.replace(candidate_.passage, section_path=section_path, identifiers=identifiers)
    return dataclasses.replace(candidate_, passage=passage)


@pytest.mark.parametrize(
    ("question", "other_shown"),
    [
        ("what does kafka error code 121 mean?", False),
        # the question names more than the lead's subject: other passages may answer the rest
        ("what does error code 121 mean when max.poll.interval.ms is exceeded?", True),
    ],
)
def test_a_fact_about_the_leads_subject_takes_other_passages_only_when_they_carry_its_names(question, other_shown):
    # "what does kafka error code 121 mean?" was answered by the record's first line and then four generic
    # sentences about other errors from other passages ("This error means that the timestamp extractor …").
    axes = _Axes()
    record = candidate(axes, "record", RECORD_STATE, [0.6, 0.5])
    record = _about(record, ("Kafka Error INVALID_RECORD_STATE", "Error code 121"), "code:121", "invalid_record_state")
    other = candidate(axes, "other", "This error means that the timestamp extractor failed on a record.", [0.9])
    causes = candidate(axes, "causes", "A consumer acknowledged a record that another consumer released.", [0.4])
    causes = _about(causes, ("Kafka Error INVALID_RECORD_STATE", "Common Causes"), "invalid_record_state")
    draft = extract_answer(ranked([record, other, causes], question), shape(max_units_fact=4))
    _check(draft)
    assert draft.text.startswith("`INVALID_RECORD_STATE`: The record state is invalid. [1]")  # named by its title
    assert "acknowledged a record that another consumer released" in draft.text  # carries INVALID_RECORD_STATE
    assert ("timestamp extractor" in draft.text) is other_shown, draft.text


@pytest.mark.parametrize(
    ("question", "other_shown"),
    [
        ("what is partitioner.class for?", False),
        # the setting is what the user has, given a value; what they ask may be answered by another entry
        ("Our producers run with partitioner.class=RoundRobinPartitioner. What spreads keyed records now?", True),
        # named only in the user's story: the asking sentence asks about something else
        ("We moved off partitioner.class last week. Which setting makes the producer ignore record keys?", True),
    ],
)
def test_the_one_subject_rule_reads_the_asked_identifiers_not_a_setting_the_user_states(question, other_shown):
    axes = _Axes()
    entry = candidate(axes, "entry", "The partitioner class decides the partition of each record.", [0.8])
    entry = _about(entry, ("Producer config", "partitioner.class"), "partitioner.class")
    other = candidate(axes, "other", "When set to true, the producer ignores the record key for partitioning.", [0.7])
    other = _about(other, ("Producer config", "partitioner.ignore.keys"), "partitioner.ignore.keys")
    draft = extract_answer(ranked([entry, other], question), shape(max_units_fact=3))
    _check(draft)
    assert draft.text.startswith("`partitioner.class`: The partitioner class decides"), draft.text
    assert ("ignores the record key" in draft.text) is other_shown, draft.text


LEANING = (
    "An idempotent producer that restarts gets a new producer id. "
    "However, the pair of producer id and sequence number stays unique, so brokers drop duplicate writes. "
    "Transactions build on idempotence."
)


@pytest.mark.parametrize(("max_chars", "shown"), [(5000, 2), (120, 1)])
@pytest.mark.parametrize(
    "opening",
    [
        "However, the pair",
        "In short, this pair",
        "In practice, that pair",
        "Because of this, the pair",
        "Despite that, the pair",
        "For instance, the pair",
        "Failing to do so, the pair",
        "Doing so, the pair",
        "Then the pair",
    ],
)
def test_a_sentence_that_leans_on_the_one_before_is_shown_after_it_when_it_fits(max_chars, shown, opening):
    axes = _Axes()
    passage = candidate(axes, "pid", LEANING.replace("However, the pair", opening), [0.1, 0.9, 0.2])
    draft = extract_answer(
        ranked([passage], "how do brokers drop duplicate writes?"), shape(max_units_fact=1, max_chars=max_chars)
    )
    _check(draft)
    units = _units(draft.text)
    assert len(units) == shown, draft.text
    assert units[-1].startswith(opening)
    if shown == 2:
        assert units[0] == "An idempotent producer that restarts gets a new producer id. [1]"


PARTITIONS = (
    "A topic partition is the smallest unit that messages are distributed by among the consumers of a group. "
    "{sequel} "
    "The solution is to add partitions."
)


@pytest.mark.parametrize(
    ("sequel", "score", "max_chars", "shown"),
    [
        ("So, if there are more consumers than partitions, some consumers never get any data.", 0.5, 5000, 2),
        ("So, if there are more consumers than partitions, some consumers never get any data.", 0.5, 150, 1),  # no room
        ("So, if there are more consumers than partitions, some consumers never get any data.", 0.2, 5000, 1),  # faint
        ("So, what happens when there are more consumers than partitions?", 0.5, 5000, 1),  # a question states nothing
        ("Consumers in other groups get their own copy.", 0.5, 5000, 1),  # says something of its own
    ],
)
def test_a_sentence_that_draws_on_a_chosen_one_follows_it_when_it_fits(sequel, score, max_chars, shown):
    """ "only 8 of my 12 consumers get messages" was answered by the first sentence; what it means for the
    user, the one after it, scored just under the units a lower passage filled the answer with."""
    axes = _Axes()
    passage = candidate(axes, "faq", PARTITIONS.format(sequel=sequel), [0.9, score, 0.1])
    question = "I started 12 consumers in one group but only 8 of them ever get messages"
    draft = extract_answer(ranked([passage], question), shape(max_units_fact=1, max_chars=max_chars, floor=0.3))
    _check(draft)
    units = _units(draft.text)
    assert len(units) == shown, draft.text
    assert units[0].startswith("A topic partition")
    if shown == 2:
        assert units[1] == f"{sequel} [1]"


def test_a_lead_that_leans_back_pays_for_the_sentence_it_leans_on_before_other_units():
    # "How can I throttle replication traffic?" led with "Failure to do so could cause …", alone: the
    # sentence it leans on was left for last, and a lower passage had taken the room.
    axes = _Axes()
    text = (
        "Remove the throttle once the reassignment completes, with the --verify option. "
        "Failure to do so could cause regular replication traffic to be throttled."
    )
    passage = candidate(axes, "throttle", text, [0.2, 0.9])
    other = candidate(axes, "other", "Kafka lets you apply a throttle to replication traffic between brokers.", [0.85])
    draft = extract_answer(
        ranked([passage, other], "how do I throttle replication traffic?"), shape(max_units_fact=3, max_chars=200)
    )
    _check(draft)
    assert [unit.split(" ")[0] for unit in _units(draft.text)] == ["Remove", "Failure"], draft.text


def test_a_lead_pays_for_what_the_sentence_it_leans_on_leans_on_in_turn_a_list_named_by_its_lead_in():
    # A pasted SSLHandshakeException about a corporate CA's certificate led with a sentence about corporate CAs
    # that leans on "Kafka brokers need both these usages …", which was shown, but not the list of usages before
    # it: by then a lower passage had taken the room, and the answer never said which usages.
    axes = _Axes()
    text = (
        "Relevant usages for Kafka are:\n"
        "- Client authentication\n"
        "- Server authentication\n"
        "Kafka brokers need both these usages to be allowed. "
        "Such brokers fail the handshake when a corporate CA signs with a profile that holds only serverAuth."
    )
    passage = candidate(axes, "usages", text, [0.1, 0.2, 0.9])
    other = candidate(axes, "other", "Certificates signed by an intermediate CA need the whole chain of trust.", [0.85])
    question = "corporate CA certificate fails the SSL handshake"
    draft = extract_answer(ranked([passage, other], question), shape(max_units_fact=3, max_chars=340))
    _check(draft)
    assert [unit.split(" ")[0] for unit in _units(draft.text)] == ["Relevant", "Kafka", "Such"], draft.text
    assert "- Client authentication" in draft.text


def test_a_lead_that_leans_back_is_shown_after_the_sentences_it_leans_on_when_they_are_chosen_too():
    # "How do I rename a topic?" scored "Instead, …" best, and the two sentences it leans on further down.
    axes = _Axes()
    text = (
        "Users can create and name each topic. They can also delete them, but it is not possible to rename a topic "
        "directly. Instead, to rename a topic, create a new topic, move its messages and delete the original. "
        "Topic names may hold dots."
    )
    passage = candidate(axes, "topics", text, [0.7, 0.75, 0.9, 0.1])
    draft = extract_answer(ranked([passage], "How do I rename a topic?"), shape(max_units_fact=3))
    _check(draft)
    assert [unit.split(" ")[0] for unit in _units(draft.text)] == ["Users", "They", "Instead,"], draft.text


def test_a_sentence_that_names_this_thing_comes_after_the_sentence_that_says_which_thing():
    # "What decides when a lagging follower is dropped from the ISR?" quoted "... within the max time set by this
    # configuration ..." and left out the sentence before it, the one that names replica.lag.time.max.ms.
    axes = _Axes()
    text = (
        "The leader tracks the in-sync replicas. "
        "The determination of lagging replicas is controlled through the replica.lag.time.max.ms configuration. "
        "Replicas that cannot catch up within the max time set by this configuration are removed from the ISR."
    )
    passage = candidate(axes, "isr", text, [0.3, 0.1, 0.9])
    draft = extract_answer(ranked([passage], "when is a lagging follower dropped?"), shape(max_units_fact=1))
    _check(draft)
    assert [unit.split(" ")[0] for unit in _units(draft.text)] == ["The", "Replicas"], draft.text
    assert "replica.lag.time.max.ms" in draft.text


@pytest.mark.parametrize(("max_chars", "referring_shown"), [(5000, True), (260, False)])
def test_a_sentence_that_names_this_thing_is_chosen_only_with_room_for_the_sentence_that_says_which(
    max_chars, referring_shown
):
    # Chosen after the lead, "... set by this configuration ..." was shown alone when the sentence naming the
    # setting no longer fitted: it pays for that sentence when chosen, or gives way to a unit that stands alone.
    axes = _Axes()
    lead = candidate(axes, "lead", "Followers fetch from the leader to stay in sync.", [0.9])
    text = (
        "The determination of lagging replicas is controlled through the replica.lag.time.max.ms configuration. "
        "Replicas that cannot catch up within the max time set by this configuration are removed from the ISR."
    )
    isr = candidate(axes, "isr", text, [0.1, 0.85])
    alone = candidate(axes, "alone", "A follower that dies is removed from the ISR.", [0.8])
    draft = extract_answer(
        ranked([lead, isr, alone], "when is a lagging follower dropped?"),
        shape(max_units_fact=4, max_chars=max_chars),
    )
    _check(draft)
    shown = draft.text
    assert ("set by this configuration" in shown) is referring_shown, shown
    assert "replica.lag.time.max.ms" in shown, shown  # alone, the sentence naming the setting stands
    assert "A follower that dies" in shown, shown


@pytest.mark.parametrize(("max_chars", "contrast_shown"), [(5000, True), (210, False)])
@pytest.mark.parametrize("opening", ["Instead, the consumer", "However, the consumer", "If not, the consumer"])
def test_a_sentence_that_reads_the_other_way_alone_is_left_out_without_the_one_before(
    max_chars, contrast_shown, opening
):
    # "What is the difference between session.timeout.ms and max.poll.interval.ms?" showed "Instead, the consumer
    # will stop sending heartbeats …" without the sentence before it, which limits it to static members.
    axes = _Axes()
    lead = candidate(axes, "lead", "The consumer is considered failed when poll() is not called in time.", [0.9])
    text = (
        "For consumers with a group.instance.id that reach this timeout, partitions are not reassigned at once. "
        f"{opening} stops sending heartbeats and its partitions move after session.timeout.ms."
    )
    static = candidate(axes, "static", text, [0.1, 0.85])
    draft = extract_answer(
        ranked([lead, static], "what happens when poll() is not called in time?"),
        shape(max_units_fact=3, max_chars=max_chars),
    )
    _check(draft)
    assert (opening in draft.text) is contrast_shown, draft.text
    assert ("group.instance.id" in draft.text) is contrast_shown, draft.text
    assert draft.text.startswith("The consumer is considered failed"), draft.text


@pytest.mark.parametrize("named", ["this section", "these brokers"])
def test_a_demonstrative_for_something_the_sentence_before_does_not_name_leans_on_nothing(named):
    axes = _Axes()
    text = (
        "The determination of lagging replicas is controlled through the replica.lag.time.max.ms configuration. "
        f"Replicas that cannot catch up as {named} describe are removed from the ISR."
    )
    passage = candidate(axes, "isr", text, [0.1, 0.9])
    draft = extract_answer(ranked([passage], "when is a lagging follower dropped?"), shape(max_units_fact=1))
    assert [unit.split(" ")[0] for unit in _units(draft.text)] == ["Replicas"], draft.text


@pytest.mark.parametrize("opening", ["Sometimes the pair", "For example: the pair", "It is true that the pair"])
def test_a_sentence_that_only_begins_like_a_back_reference_stands_alone(opening):
    # "Some additional memory …" opens with the letters of "So" but leans on nothing; "For example:" introduces;
    # the "It" of "It is true that …" stands for what follows.
    axes = _Axes()
    text = LEANING.replace("However, the pair", opening)
    passage = candidate(axes, "pid", text, [0.1, 0.9, 0.2])
    draft = extract_answer(ranked([passage], "how do brokers drop duplicate writes?"), shape(max_units_fact=1))
    assert [u.split(" ")[0] for u in _units(draft.text)] == [opening.split(" ")[0]], draft.text


def test_near_duplicate_units_are_dropped():
    axes = _Axes()
    first = candidate(axes, "a", OTHER, [0.9, 0.2])
    same = np.vstack([first.unit_vectors[0], axes.take(1)[0]])  # its first unit says what a's first says
    second = candidate(axes, "b", OTHER.replace("early access", "preview"), [0.88, 0.1], vectors=same)
    draft = extract_answer(ranked([first, second], TROUBLESHOOT), shape())
    assert draft.text.count("Share groups were introduced") == 1
    assert "Share groups were introduced by KIP-932 as a preview feature" not in draft.text


def test_a_block_two_overlapping_chunks_both_hold_is_shown_once_under_its_lead_in():
    """Chunks overlap: the code block ends one chunk under its lead-in and opens the next alone. The bare copy
    led the answer, and the block showed again under its lead-in further down."""
    axes = _Axes()
    ending = (
        "By default no one but super users may access a resource without ACLs. "
        "If you want to change that behavior, include the following in server.properties:\n\n"
        "```\nallow.everyone.if.no.acl.found=true\n```"
    )
    opening = "```\nallow.everyone.if.no.acl.found=true\n```\n\nOne can also add super users in server.properties."
    top = candidate(axes, "next", opening, [0.9, 0.3], source="security.html")
    second = candidate(axes, "previous", ending, [0.2, 0.8], source="security.html")
    draft = extract_answer(ranked([top, second], FACT), shape(max_units_fact=3))
    _check(draft)
    assert draft.text.count("allow.everyone.if.no.acl.found=true") == 1, draft.text
    assert draft.text.startswith("If you want to change that behavior"), draft.text


CLIENT_METRICS = (
    "Metric/Attribute name | Description | Mbean name\n"
    "connection-creation-rate | New connections established per second in the window. | "
    "kafka.producer:type=producer-metrics,client-id=([-.\\w]+)\n"
    "connection-close-rate | Connections closed per second in the window. | "
    "kafka.producer:type=producer-metrics,client-id=([-.\\w]+)\n"
    "network-io-rate | The average number of network operations (reads or writes) on all connections per second. | "
    "kafka.producer:type=producer-metrics,client-id=([-.\\w]+)"
)


def test_a_row_that_brings_a_word_the_question_asks_is_new_though_it_shares_most_of_the_tables_words():
    # The rows of a metrics table share their MBean and "per second in the window": the row for closed
    # connections brings a few words of its own, under the share a sentence needs, and was left out for the
    # network-io-rate row, which brings more words and none that the question asks. (Since the sixty-fifth
    # session a row's words are counted without those most rows of its table share:
    # `test_a_row_is_news_by_its_own_words_not_those_most_rows_of_its_table_share`.)
    table = candidate(_Axes(), "metrics", CLIENT_METRICS, [0.9, 0.85, 0.8], "Common monitoring metrics")
    question = "which producer metrics show new connections per second and closed connections per second?"
    draft = extract_answer(ranked([table], question), shape(max_units_fact=2, min_novelty=0.35))
    _check(draft)
    assert [unit.split(":")[0] for unit in _units(draft.text)] == [
        "`connection-creation-rate`",
        "`connection-close-rate`",
    ], draft.text


def test_a_unit_that_adds_no_new_words_is_dropped():
    axes = _Axes()
    first = candidate(axes, "a", OTHER, [0.9, 0.2])
    repeat = candidate(axes, "b", "Share groups were introduced by KIP-932 as an early access feature.", [0.88])
    draft = extract_answer(ranked([first, repeat], TROUBLESHOOT), shape(min_novelty=0.5))
    assert [c.passage.chunk_id for c in draft.citations] == ["a"]


def test_max_chars_bounds_the_rendered_answer():
    """Markers, part headings and a setting's labels count: the rendered answer stays within `max_chars`."""
    counts = []
    for max_chars in (130, 260, 5000):
        axes = _Axes()
        passage = candidate(axes, "a", FIX, [0.9, 0.85, 0.8])
        draft = extract_answer(ranked([passage], TROUBLESHOOT), shape(max_chars=max_chars))
        assert len(draft.text) <= max_chars, draft.text
        counts.append(len(_units(draft.text)))
    assert counts == [1, 2, 3]


def test_a_lead_longer_than_max_chars_is_still_shown_alone():
    axes = _Axes()
    draft = extract_answer(ranked([candidate(axes, "a", FIX, [0.9, 0.85, 0.8])], TROUBLESHOOT), shape(max_chars=20))
    assert len(_units(draft.text)) == 1


def test_a_list_stays_with_its_lead_in():
    axes = _Axes()
    draft = extract_answer(ranked([candidate(axes, "sasl", SASL, [0.3, 0.8, 0.1])]), shape(max_units_fact=1))
    _check(draft)
    assert draft.text.startswith("The following mechanisms are supported: [1]\n- GSSAPI (Kerberos)\n- PLAIN\n")
    assert "- SCRAM-SHA-256" in draft.text and "- OAUTHBEARER" in draft.text


STEPS = (
    "- Set up a new cluster running the new version.\n"
    "- Mirror the data from the old cluster into the new one.\n"
    "- Move the consumers to the new cluster.\n"
    "- Finally move all producers to the new cluster.\n"
    "- Decommission the old cluster."
)


@pytest.mark.parametrize(("max_chars", "whole"), [(5000, True), (120, False)])
def test_a_chosen_step_of_a_list_without_a_lead_in_brings_its_list_in_order_when_it_fits(max_chars, whole):
    axes = _Axes()
    steps = candidate(axes, "steps", STEPS, [0.5, 0.1, 0.1, 0.9, 0.1], heading="Migration Steps")
    draft = extract_answer(ranked([steps], "what are the steps to migrate?"), shape(max_chars=max_chars))
    _check(draft)
    lines = draft.text.split("\n")
    if whole:  # every step, as the list, in the page's order, cited once
        assert lines == [
            "- Set up a new cluster running the new version. [1]",
            "- Mirror the data from the old cluster into the new one.",
            "- Move the consumers to the new cluster.",
            "- Finally move all producers to the new cluster.",
            "- Decommission the old cluster.",
        ]
    else:  # over budget: only the chosen steps, still in the page's order
        assert lines == [
            "- Set up a new cluster running the new version. [1]",
            "- Finally move all producers to the new cluster.",
        ]


def test_one_chosen_item_of_a_list_without_a_lead_in_brings_nothing_else():
    # A release-notes list: one matching note says nothing about the others.
    axes = _Axes()
    steps = candidate(axes, "steps", STEPS, [0.5, 0.1, 0.1, 0.9, 0.1], heading="Notable changes")
    draft = extract_answer(ranked([steps], "what are the steps to migrate?"), shape(max_units_fact=1))
    _check(draft)
    assert draft.text == "Finally move all producers to the new cluster. [1]"


LOCK_CAUSE = "**What it means / likely cause**\n\nThe record lock expired before the ack arrived. [1]"
LOCK_FIX = "**What to do**\n\nIncrease the record lock duration to fix it. [1]"


@pytest.mark.parametrize(
    ("scores", "parts"),
    [
        ([0.9, 0.8], [LOCK_CAUSE, LOCK_FIX]),
        # The best unit leads the answer even when it is a fix: its part comes first.
        ([0.8, 0.9], [LOCK_FIX, LOCK_CAUSE]),
    ],
)
def test_items_of_one_list_in_different_parts_stay_apart_and_the_leads_part_comes_first(scores, parts):
    axes = _Axes()
    text = "- The record lock expired before the ack arrived.\n- Increase the record lock duration to fix it."
    items = candidate(axes, "fix", text, scores)
    draft = extract_answer(ranked([items], TROUBLESHOOT), shape(max_units_troubleshoot=2))
    _check(draft)
    assert draft.text == "\n\n".join(parts)


def test_a_list_cut_for_size_is_shown_whole_with_its_lead_in_once():
    """The best piece leads; the rest of the list comes next, before better-scoring units of other passages."""
    axes = _Axes()
    items = [
        f"- For internal topics of kind {n}, the cleanup policy is {'compact' * 3} and {'x' * 120}." for n in range(5)
    ]
    text = "The following settings apply to internal topics:\n" + "\n".join(items)
    units = build_units(text)
    # cut at an item boundary, each piece with the lead-in; each item is a unit too
    assert [u.kind for u in units if not u.item] == ["list", "list"]
    assert sum(u.item for u in units) == len(items)
    first_piece = next(u for u in units if not u.item)
    scores = [0.1 if u.item else 0.5 if u is first_piece else 0.9 for u in units]
    top = candidate(axes, "top", text, scores)
    other = candidate(axes, "other", OTHER, [0.85, 0.8])
    draft = extract_answer(ranked([top, other]), shape(max_units_fact=3, max_chars=1100))
    _check(draft)
    first = _units(draft.text)[0]
    assert first.count("The following settings apply") == 1
    assert [line.split(" kind ")[1][0] for line in first.split("\n")[1:]] == ["0", "1", "2", "3", "4"]


RESET_SCENARIOS = "--reset-offsets also has the following scenarios to choose from:\n" + "\n".join(
    f"- --{name} : Reset offsets to {what}. {'Each scenario is applied to every partition of the group.' * 2}"
    for name, what in [
        ("to-datetime", "offset from datetime"),
        ("to-earliest", "earliest offset"),
        ("to-latest", "latest offset"),
        ("shift-by", "current offset shifted by n"),
        ("to-offset", "a specific offset"),
    ]
)


def test_one_item_of_a_list_cut_for_size_answers_with_its_lead_in_and_not_twice():
    """The item a question is about leads with its lead-in; the piece of the list that holds it is not shown
    again beside it, and the list's other piece does not jump the queue because it shares the lead-in."""
    units = build_units(RESET_SCENARIOS)
    assert sum(not u.item for u in units) == 2  # two pieces
    scores = [0.9 if u.item and "to-earliest :" in u.text else 0.5 if u.item else 0.6 for u in units]
    top = candidate(_Axes(), "ops", RESET_SCENARIOS, scores, "Managing Consumer Groups")
    other = candidate(_Axes(), "other", OTHER, [0.65, 0.1])
    draft = extract_answer(ranked([top, other], "reset my group's offsets to the earliest"), shape(max_units_fact=2))
    _check(draft)
    lines = draft.text.split("\n")
    assert lines[0] == "--reset-offsets also has the following scenarios to choose from: [1]"
    assert lines[1].startswith("- --to-earliest : Reset offsets to earliest offset.")
    assert draft.text.count("--to-earliest") == 1 and "--shift-by" not in draft.text, draft.text
    assert "Share groups were introduced" in draft.text


def test_two_items_of_a_cut_list_show_though_one_items_words_are_inside_the_others():
    filler = [f"- Step {n}: {'wait for the cluster to settle before going on. ' * 4}" for n in range(6)]
    items = ["- Use SCRAM.", "- Use SCRAM. Rotate its credentials every month.", *filler]
    text = "To secure the cluster:\n" + "\n".join(items)
    units = build_units(text)
    assert sum(u.item and "SCRAM" in u.text for u in units) == 2  # the list is cut, so each item is a unit
    scores = [0.9 if u.item and "SCRAM" in u.text else 0.1 for u in units]
    draft = extract_answer(ranked([candidate(_Axes(), "sec", text, scores)], "should we use SCRAM?"), shape())
    _check(draft)
    assert "- Use SCRAM.\n- Use SCRAM. Rotate its credentials every month." in draft.text, draft.text


OFFSET_RESET = (
    "What to do when there is no initial offset in Kafka:\n\n"
    "- earliest: automatically reset the offset to the earliest offset\n"
    "- latest: automatically reset the offset to the latest offset\n\n"
    "Type: | string\nDefault: | latest\nValid Values: | [latest, earliest, none]\nImportance: | medium"
)
PARTITIONER = (
    "Determines which partition to send a record to. Available options are:\n\n"
    "- If not set, the default partitioning logic is used.\n"
    "- RoundRobinPartitioner sends each record to the next partition.\n\n"
    "Type: | class\nDefault: | null\nImportance: | medium"
)


@pytest.mark.parametrize(
    ("text", "key", "kinds", "lead_in", "question"),
    [
        (OFFSET_RESET, "auto.offset.reset", ["list", "setting"], "What to do when there is no initial offset in Kafka:",
         "what is the default of auto.offset.reset?"),
        # a description of several sentences: "… are produced. Available options are:" was followed by
        # "Available options are: [1]" again
        (PARTITIONER, "partitioner.class", ["setting", "list"], "Available options are:",
         "how does the producer pick a partition?"),
    ],
)  # fmt: skip
def test_a_setting_whose_description_ends_in_a_list_states_the_description_once(text, key, kinds, lead_in, question):
    """The setting's entry and the list its description introduces share that sentence: one block."""
    axes = _Axes()
    assert [u.kind for u in build_units(text, key)] == kinds
    entry = candidate(axes, "entry", text, [0.7, 0.9], heading=key)
    other = candidate(axes, "other", OTHER, [0.3, 0.2])
    draft = extract_answer(ranked([entry, other], question), shape(max_units_fact=2))
    _check(draft)
    assert draft.text.count(lead_in) == 1, draft.text
    first = _units(draft.text)[0]
    description, items = text.split("\n\n")[:2]
    assert first.startswith(f"`{key}`: {description} (Type: "), first
    assert first.endswith(items.split("\n")[-1])  # the list's last item
    assert [c.passage.chunk_id for c in draft.citations] == ["entry"]  # the list filled the second place


def test_a_code_block_cut_for_size_is_shown_as_one_fence_under_its_lead_in():
    axes = _Axes()
    rows = "\n".join(
        f"consumer{n}-3fc8d6f1-581a-4472-bdf3 /127.0.0.1 consumer{n} 2 topic1(0), topic2({n})" for n in range(14)
    )
    text = f"To see the members, run:\n\n```\n$ bin/kafka-consumer-groups.sh --describe --members\n{rows}\n```"
    assert [u.kind for u in build_units(text)] == ["code", "code"]
    draft = extract_answer(ranked([candidate(axes, "members", text, [0.9, 0.5])]), shape(max_units_fact=2))
    _check(draft)
    assert draft.text.count("To see the members, run:") == 1
    assert draft.text.count("```") == 2
    assert [line.split()[2] for line in draft.text.split("\n")[3:-1]] == [f"consumer{n}" for n in range(14)]


def test_a_command_renders_as_a_fenced_block():
    axes = _Axes()
    draft = extract_answer(ranked([candidate(axes, "cmd", COMMAND, [0.8, 0.1])]), shape(max_units_fact=1))
    _check(draft)
    assert draft.text == (
        "To describe a share group, run the following command: [1]\n```\n"
        "$ bin/kafka-share-groups.sh --bootstrap-server localhost:9092 --describe --group g\n```"
    )


LOG = (
    "If the acknowledgement is rejected, the broker logs a line like the following:\n\n"
    "[2024-06-02 11:04:19,332] ERROR [ShareFetch groupId=g] Acknowledgement rejected: INVALID_RECORD_STATE\n\n"
    "Increase group.share.record.lock.duration.ms so records stay locked longer."
)


def test_a_log_excerpt_renders_as_a_fenced_block_under_what_it_means():
    axes = _Axes()
    draft = extract_answer(ranked([candidate(axes, "log", LOG, [0.9, 0.8])], TROUBLESHOOT), shape())
    _check(draft)
    cause, do = draft.text.split("**What to do**")
    assert cause == (
        "**What it means / likely cause**\n\n"
        "If the acknowledgement is rejected, the broker logs a line like the following: [1]\n```\n"
        "[2024-06-02 11:04:19,332] ERROR [ShareFetch groupId=g] Acknowledgement rejected: INVALID_RECORD_STATE\n```\n\n"
    )
    assert "Increase `group.share.record.lock.duration.ms`" in do


def test_the_question_terms_and_identifiers_raise_a_unit():
    axes = _Axes()
    question = "what is group.share.record.lock.duration.ms?"
    base = candidate(axes, "a", FIX, [0.5, 0.45, 0.5])
    plain = extract_answer(ranked([base], question), shape(max_units_fact=1))
    boosted = extract_answer(ranked([base], question), shape(max_units_fact=1, identifier_weight=0.2))
    assert not plain.text.startswith("Increase")
    assert boosted.text.startswith("Increase `group.share.record.lock.duration.ms`")


def test_a_unit_that_repeats_the_pasted_command_is_lowered_by_the_echo_weight():
    """The user ran kafka-server-start.sh: quoting "Start the server: $ bin/kafka-server-start.sh …" back
    tells them nothing, so with the weight the statement about their error leads."""
    question = (
        "Fresh KRaft node won't start:\n./kafka-server-start.sh ../config/kraft/server.properties\n"
        "java.lang.RuntimeException: No readable meta.properties files found."
    )
    assert "kafka-server-start" in parse_query(question).context_identifiers
    text = (
        "Start the Kafka server:\n\n$ bin/kafka-server-start.sh config/kraft/server.properties\n\n"
        "Format the log directories with kafka-storage.sh before the first start."
    )
    plain, lowered = _one_unit_without_and_with(question, text, [0.8, 0.7], {}, {"echo_weight": 0.3})
    assert "kafka-server-start.sh" in plain.text
    assert "kafka-server-start.sh" not in lowered.text and "Format the log directories" in lowered.text


def test_a_log_excerpt_of_the_users_own_log_lines_is_lowered_too():
    log = "ERROR [ReplicaFetcherThread-0-6], Error for partition [test,22] to broker 6:class kafka.common.UnknownError"
    question = f"broker log spam:\n{log}"
    text = (
        f"The broker logs errors like:\n\n{log}\n\nA common problem is that two brokers registered the same host/port."
    )
    echo = {"echo_weight": 0.3}
    plain, lowered = _one_unit_without_and_with(question, text, [0.9, 0.7], echo, echo | {"echo_share": 0.8})
    assert "ReplicaFetcherThread" in plain.text
    assert "ReplicaFetcherThread" not in lowered.text and "same host/port" in lowered.text


@pytest.mark.parametrize(
    "question",
    [
        "org.apache.kafka.common.errors.InvalidTxnStateException: The producer attempted an invalid operation.",
        # named in the user's own words, not pasted as an error line: still what the question is about
        "our producer keeps throwing InvalidTxnStateException, what do I do?",
    ],
    ids=["pasted", "named"],
)
def test_a_unit_naming_another_exception_than_the_one_asked_about_is_lowered_too(question):
    """A log of another failure, or code that handles another exception, looks like the user's paste and is
    about something else."""
    text = (
        "If the keystore password is wrong, the producer fails to start with:\n\n"
        "org.apache.kafka.common.KafkaException: Failed to construct kafka producer\n\n"
        "Abort the open transaction and close the producer before you retry."
    )
    plain, lowered = _one_unit_without_and_with(question, text, [0.9, 0.7], {}, {"echo_weight": 0.3})
    assert "KafkaException" in plain.text
    assert "KafkaException" not in lowered.text and "Abort the open transaction" in lowered.text
    # the same log naming the exception asked about is about it
    about = text.replace(
        "org.apache.kafka.common.KafkaException", "org.apache.kafka.common.errors.InvalidTxnStateException"
    )
    _, kept = _one_unit_without_and_with(question, about, [0.9, 0.7], {}, {"echo_weight": 0.3})
    assert "InvalidTxnStateException" in kept.text


def _one_unit_without_and_with(question: str, text: str, scores, without: dict, with_: dict):
    """The one-unit troubleshooting answers from one passage under two answer shapes."""
    top = candidate(_Axes(), "top", text, scores)
    return tuple(
        extract_answer(ranked([top], question), shape(max_units_troubleshoot=1, **values))
        for values in (without, with_)
    )


def test_units_of_another_splitter_are_never_quoted():
    """Unit vectors that do not match the chunk's units (an index built by another splitter) are skipped."""
    axes = _Axes()
    stale = make_candidate("stale", text=FIX, unit_scores=(0.9,), unit_vectors=axes.take(1))
    good = candidate(axes, "good", OTHER, [0.5, 0.4])
    draft = extract_answer(ranked([stale, good], TROUBLESHOOT), shape())
    assert [c.passage.chunk_id for c in draft.citations] == ["good"]
    assert extract_answer(ranked([stale]), shape()).abstained


def test_abstain_lists_the_closest_passages_without_citations():
    axes = _Axes()
    candidates = [candidate(axes, name, OTHER, [0.5, 0.4]) for name in "abcd"]
    draft = abstain(ranked(candidates))
    assert draft.abstained and draft.citations == ()
    assert draft.text.startswith(NOT_COVERED) and "possibly related" in draft.text
    assert [p.chunk_id for p in draft.related] == ["a", "b", "c"]
    assert abstain(ranked([])).text == NOT_COVERED


def test_abstain_lists_each_related_section_once():
    axes = _Axes()
    a, b, c, d = (
        candidate(axes, name, OTHER, [0.5, 0.4], heading=heading) for name, heading in zip("abcd", "XXYZ", strict=True)
    )
    b = dataclasses.replace(b, passage=dataclasses.replace(b.passage, source_path="a.html"))  # a's section
    draft = abstain(ranked([a, b, c, d]))
    assert [p.chunk_id for p in draft.related] == ["a", "c", "d"]


def test_extract_answer_is_deterministic():
    axes = _Axes()
    candidates = [candidate(axes, "a", FIX, [0.9, 0.8, 0.7]), candidate(axes, "b", OTHER, [0.85, 0.75])]
    assert extract_answer(ranked(candidates, TROUBLESHOOT), shape()) == extract_answer(
        ranked(candidates, TROUBLESHOOT), shape()
    )


@pytest.mark.parametrize("question", [FACT, TROUBLESHOOT])
def test_nothing_ranked_abstains(question):
    assert extract_answer(ranked([], question), shape()).abstained


QUOTA = (
    "How does a broker react when it detects a quota violation? "
    "The broker computes the delay needed to bring the client under its quota. "
    "Quotas are defined per broker."
)


def test_a_question_the_text_asks_is_shown_with_its_answer():
    """A question the docs ask states nothing: quoted alone, it answers the user's question with a question."""
    draft = _answer_from(QUOTA, [0.95, 0.5, 0.1], "how does the broker enforce a quota?", max_units_fact=1)
    assert _units(draft.text) == [
        "How does a broker react when it detects a quota violation? [1]",
        "The broker computes the delay needed to bring the client under its quota. [1]",
    ], draft.text


def test_a_question_ending_its_passage_is_not_quoted():
    text = "Quotas are defined per broker. What happens when a client exceeds its quota?"
    draft = _answer_from(text, [0.3, 0.9], "how are quotas enforced?")
    assert draft.text == "Quotas are defined per broker. [1]", draft.text


REMOVED = (
    "The `topics.blacklist` configuration was removed. Please use `topics.exclude` instead. "
    "The `groups.blacklist` configuration was removed. Please use `groups.exclude` instead. "
    "The `topics.blacklist` configuration was removed from MirrorMaker. Please use `topics.exclude` instead."
)


def test_units_that_read_alike_but_name_different_settings_are_both_shown():
    """Items of a list of changes share every word but their names: neither near-duplicates nor news-free.
    A third that names nothing new is left out as a repeat."""
    same = np.ones((6, DIMENSION)) / np.sqrt(DIMENSION)  # every unit's vector alike
    top = candidate(_Axes(), "top", REMOVED, [0.9, 0.5, 0.85, 0.5, 0.8, 0.5], vectors=same)
    draft = extract_answer(
        ranked([top], "which of our mirror maker settings stop working?"), shape(max_units_fact=6, min_novelty=0.5)
    )
    _check(draft)
    assert "`groups.blacklist`" in draft.text, draft.text
    assert "from MirrorMaker" not in draft.text, draft.text


# ------------------------------------------------------------------------------------ a follow-up's lead

GROUPS = (
    "Consumers in a group share the partitions of the topics that they subscribe to between them. "
    "The rebalance-rate-per-hour metric shows how often the group has been rebalancing lately. "
    "Rebalances are short."
)
GROUPS_ANSWER = "Consumers in a group share the partitions of the topics that they subscribe to between them. [1]"
FOLLOW_UP = "and how can I see how often that happens?"


def _after(answer: str, text: str, scores, question: str = FOLLOW_UP, **overrides):
    """The checked answer that one passage of `text` gives to `question` asked after `answer`."""
    history = [{"role": "user", "content": "how do consumer groups split the work?"}]
    history.append({"role": "assistant", "content": answer})
    top = candidate(_Axes(), "top", text, scores)
    pool = dataclasses.replace(make_pool([top], question=question), query=parse_query(question, history))
    draft = extract_answer(
        Ranked(pool, (top,), (1.0,)), shape(**{"max_units_fact": 2, "told_min_words": 12} | overrides)
    )
    _check(draft)
    return _units(draft.text)


def test_a_follow_up_is_not_led_by_the_sentence_the_last_answer_showed():
    """Asked after the assistant's own answers, half of the tuning follow-ups led with the block the answer before
    had led with: the user, who asked for something new, read the same sentence again first."""
    units = _after(GROUPS_ANSWER, GROUPS, [0.9, 0.8, 0.1])
    assert "rebalance-rate-per-hour" in units[0], units
    assert units[1].startswith("Consumers in a group share"), units  # it still follows, scoring second
    assert _after("Rebalances are short. [1]", GROUPS, [0.9, 0.8, 0.1])[0].startswith("Consumers in a group")
    assert _after(GROUPS_ANSWER, GROUPS, [0.9, 0.8, 0.1], told_min_words=0)[0].startswith("Consumers in a group")


def test_a_short_sentence_the_last_answer_showed_may_lead_again():
    """ "By default, clients receive an unlimited quota." is the fact "and if nothing is configured?" asks for."""
    text = "By default, clients receive an unlimited quota. Quotas can be set per user and per client id as well."
    units = _after("By default, clients receive an unlimited quota. [1]", text, [0.9, 0.8])
    assert units[0].startswith("By default, clients receive an unlimited quota."), units


def test_a_told_sentence_leads_when_nothing_else_rises_over_the_floor_or_comes_near_it():
    assert _after(GROUPS_ANSWER, GROUPS, [0.9, 0.5, 0.1], floor=0.6)[0].startswith("Consumers in a group")
    assert _after(GROUPS_ANSWER, GROUPS, [0.9, 0.8, 0.1], told_max_gap=0.05)[0].startswith("Consumers in a group")
    assert "rebalance-rate-per-hour" in _after(GROUPS_ANSWER, GROUPS, [0.9, 0.8, 0.1], told_max_gap=0.15)[0]


def test_chunks_of_one_section_are_one_source():
    """A section that chunking split is one source to the reader: units quoted from two of its chunks share a
    marker, and the citation's passage holds both chunks' text in the document's order, their overlap once."""
    axes = _Axes()
    first = "Reassigning partitions copies replicas between brokers. Throttle the copy to protect the network."
    second = "Throttle the copy to protect the network. Remove the throttle when the reassignment completes."
    early = candidate(axes, "early", first, (0.2, 0.7), heading="Throttling", source="ops.html")
    late = candidate(axes, "late", second, (0.1, 0.9), heading="Throttling", source="ops.html")
    other = candidate(axes, "other", OTHER, (0.3, 0.2), heading="Share groups")
    early, late, other = (dataclasses.replace(c, row=row) for c, row in ((early, 10), (late, 11), (other, 3)))
    draft = extract_answer(ranked([late, early, other], FACT), shape(max_units_fact=4))
    _check(draft)
    assert draft.text.startswith("Remove the throttle when the reassignment completes. [1]\n\n")  # the lead
    body = draft.text.split("\n\n")[1:]
    assert body[:2] == [  # then the rest of its section as the page has it, the earlier chunk first
        "Reassigning partitions copies replicas between brokers. [1]",
        "Throttle the copy to protect the network. [1]",
    ]
    throttling, share_groups = draft.citations
    assert throttling.passage.text == (
        "Reassigning partitions copies replicas between brokers. Throttle the copy to protect the network. "
        "Remove the throttle when the reassignment completes."
    )
    assert share_groups.marker == 2 and share_groups.passage.source_path == "other.html"


def test_a_list_that_chunking_split_is_shown_once_under_its_lead_in_in_the_page_order():
    """Two chunks of one section each hold part of a list (the second begins with bare items and carries the
    lead-in back): the answer shows one list under the lead-in once, the items as the page has them."""
    axes = _Axes()
    first = "Kafka supports these mechanisms:\n\n- GSSAPI (Kerberos) for Active Directory.\n- PLAIN with TLS."
    second = (
        "- SCRAM-SHA-256 with salted passwords.\n- OAUTHBEARER with tokens.\n\nEach needs its own JAAS configuration."
    )
    early = candidate(axes, "early", first, [0.7], heading="SASL", source="security.html")
    late = candidate(axes, "late", second, [0.9, 0.8, 0.1], heading="SASL", source="security.html")
    early = dataclasses.replace(early, row=4)
    late = dataclasses.replace(late, row=5, block_lead_in="Kafka supports these mechanisms:", block_intro=early.passage)
    draft = extract_answer(ranked([late, early], FACT), shape(max_units_fact=3))
    _check(draft)
    assert draft.text == (
        "Kafka supports these mechanisms: [1]\n- GSSAPI (Kerberos) for Active Directory.\n- PLAIN with TLS.\n"
        "- SCRAM-SHA-256 with salted passwords.\n- OAUTHBEARER with tokens."
    )
    (citation,) = draft.citations
    assert citation.passage.text == f"{first}\n\n{second}"


def test_section_passages_are_the_ranked_sections_each_in_the_page_order():
    def chunk(name: str, heading: str, text: str, row: int):
        return dataclasses.replace(
            make_candidate(name, section=("Ops", heading), source="ops.html", text=text), row=row
        )

    later = chunk("later", "Quotas", "Quotas are enforced per client group.", 8)
    other = chunk("other", "Racks", "Replicas are spread across racks.", 2)
    earlier = chunk("earlier", "Quotas", "Quotas protect the cluster.", 7)
    quotas, racks = section_passages([later, other, earlier])
    assert (quotas.chunk_id, quotas.text) == (
        "earlier",
        "Quotas protect the cluster.\n\nQuotas are enforced per client group.",
    )
    assert racks.chunk_id == "other"


def test_an_asks_best_unit_comes_from_the_passage_its_own_ranking_puts_first():
    """The second passage, which the ask alone ranks first, answers it: the first passage's sentence that merely
    shares the ask's words ("the server default is used") scored higher by the whole question's rank alone."""
    axes = _Axes()
    question = "how do I set the record lock duration for a topic, and what is its default?"
    overrides = "The lock duration can be set per topic. If no per-topic value is set, the server default is used."
    entry = "The broker's default record lock duration is 30 seconds."
    top = candidate(axes, "overrides", overrides, (0.9, 0.1))
    second = candidate(axes, "entry", entry, (0.2,))
    whole = ranked([top, second], question)
    ask_top = dataclasses.replace(top, unit_scores=np.asarray((0.3, 0.85)))
    ask_second = dataclasses.replace(second, unit_scores=np.asarray((0.95,)))
    ask = ranked([ask_second, ask_top], "what is the default")
    draft = extract_answer(whole, shape(max_units_fact=2, rank_weight=0.5), asks=(ask,))
    assert draft.text.startswith("The lock duration can be set per topic.")
    assert entry in draft.text and "server default is used" not in draft.text, draft.text


QUORUM = (
    "The kafka-metadata-quorum.sh tool describes the runtime state of the cluster metadata partition.\n\n"
    "For example, the following command displays a summary of the metadata quorum:\n\n```\n"
    "$ bin/kafka-metadata-quorum.sh --bootstrap-server localhost:9092 describe --status\n"
    + "".join(
        f"CurrentVoter{n}:  {{'id': {3000 + n}, 'endpoints': ['CONTROLLER://localhost:{9093 + n}']}}\n"
        for n in range(10)
    )
    + "```"
)


@pytest.mark.parametrize(("max_chars", "tail"), [(5000, True), (800, False)])
def test_the_output_a_command_printed_is_shown_under_the_command(max_chars, tail):
    """A code block cut for size: its later piece, what the command opening the block printed, matched best. It
    is shown after the piece with the command when that fits, else the command's piece takes its place."""
    assert [u.code_piece for u in build_units(QUORUM)] == [0, 0, 1]
    question = "which controllers are voters?"
    draft = _answer_from(QUORUM, [0.3, 0.5, 0.9], question, max_units_fact=1, max_chars=max_chars)
    assert draft.text.startswith("For example, the following command displays"), draft.text
    assert "$ bin/kafka-metadata-quorum.sh --bootstrap-server localhost:9092 describe --status" in draft.text
    assert ("CurrentVoter9" in draft.text) is tail, draft.text
    assert draft.text.count("For example") == 1


def test_a_later_piece_of_a_config_sample_is_shown_alone():
    """A configuration sample's lines say what they set: its later piece is no output of a first one."""
    sample = QUORUM.replace(
        "$ bin/kafka-metadata-quorum.sh --bootstrap-server localhost:9092 describe --status", "# voters"
    )
    draft = _answer_from(sample, [0.3, 0.5, 0.9], "which controllers are voters?", max_units_fact=1, max_chars=800)
    assert "CurrentVoter9" in draft.text and "CurrentVoter0:" not in draft.text, draft.text


def test_a_comparison_leads_with_what_the_first_thing_is_and_shows_what_the_second_is_next():
    """ "KStream vs KTable?" led with a sentence about both ("Compare this behavior …"); the sentences that say
    what each is answer it, the first thing's leading, the second's shown however it scores."""
    axes = _Axes()
    kstream = candidate(
        axes,
        "kstream",
        "A KStream is an abstraction of a record stream. Compare this behavior of KStream to KTable below.",
        [0.9, 0.95],
    )
    ktable = candidate(
        axes,
        "ktable",
        "Only the DSL has the notion of a KTable. A KTable is an abstraction of a changelog stream.",
        [0.8, 0.3],
    )
    draft = extract_answer(ranked([kstream, ktable], "KStream vs KTable?"), shape(relative_cutoff=0.4))
    _check(draft)
    assert draft.text.startswith("A KStream is an abstraction of a record stream. [1]"), draft.text
    assert "A KTable is an abstraction of a changelog stream. [2]" in draft.text, draft.text
