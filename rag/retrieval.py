"""First-stage retrieval: dense (FAISS), lexical (BM25) and exact identifier matches find candidates,
and every feature that ranking and abstention need is computed here, once, and handed down.

Reads only immutable arrays of a `LoadedIndex`, so one `Retriever` serves concurrent requests.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import math
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rag.casing import class_name_parts
from rag.chunking import lexical_text
from rag.embedding import Embedder, QueryEncoder
from rag.errors import RetrievalError
from rag.identifiers import MBean, extract_identifiers, is_plain_two_part, mbeans_written, metric_entries
from rag.index_store import LoadedIndex
from rag.lexical import (
    bm25_scores,
    correction,
    document_frequency,
    inflection_pattern,
    parts_only,
    rows_holding,
    rows_with,
    slips,
    tokenize,
    word_roots,
)
from rag.passages import Passage
from rag.query import Query, QueryIdentifier, extra_terms, says_message, shared_run
from rag.ranking import RANK_FEATURES
from rag.settings import RETRIEVAL_MODES, Settings
from rag.tokens import late_interaction
from rag.units import (
    before_closing_block,
    ends_in_key_values,
    lead_in_ending,
    leading_block_end,
    list_ending,
    row_cells,
    starts_in_list,
    starts_with_code,
    table_start,
)

MESSAGE_TOKENS = 3  # a pasted or quoted message is looked up as a table row's description by its rarest words
MESSAGE_ROWS = 50  # chunks read back for one message at most
SHARED_RUN_WORDS = 5  # words a client's own wording of an error shares with its row at least (4-6 measured alike)
BM25_K1 = 1.2  # the usual Okapi constants, for the heading field scored here
BM25_B = 0.75
ERROR_ROW_READS = 64  # chunks carrying an error-like name read for one that defines it as an error
MIN_WORDS_ONE_APART = 3  # an exception class's name this long may stand for the one error name a word apart
PHRASE_ROWS_READ = 64  # chunks holding two neighbouring words of a name read for the two written together
MIN_ABBREVIATION = 3  # letters of a tag's word read as the start of a longer corpus word ("dev", "prod")
LOOKBACK_CHUNKS = 64  # chunks read back for a table's header row or a list's lead-in (the error table spans 13)
NAMED_ENTRIES = 8  # reference entries read for the names the answer's passages use (`Retriever.named_entries`)
ENTRIES_PER_NAME = 3  # ... of one name: its pages (the broker's, the topic's and the producer's `compression.type`)
ENTRY_READS = 16  # chunks defining one name read for its entries
SPELLING_CHUNKS = 16  # chunks read for how the corpus writes a word (`Retriever.corpus_spelling`)
MAX_RESPELT_KEYS = 64  # of a question's identifiers, those looked up as a misspelt key (~0.4 ms each)
HEADING_CACHE = 16_384  # tokenized heading paths kept: a bounded few MB, whatever the corpus size
# A lower-case word standing alone; the dot that ends its sentence is none of a file name's ("… the partiton.").
_PLAIN_WORD = re.compile(r"(?<![\w.\-/@$`'\"&=?])[a-z]+(?![\w\-/@$`'\"&=]|\.[\w\-/@$])")
_INSIDE_SENTENCE = re.compile(r"[a-z0-9,;]\s$")  # what stands before a word inside a sentence: "… the Kafka"
_NUMBER = re.compile(r"[\d.,_:-]+")  # a token of digits: `412883120`, `1,874.2`, `2.13.0`
_JOINER = r"[ /_-]?"  # what stands between two words of one name: "Mirror Maker", "SASL/SCRAM", never a sentence end
_CODE_SHAPED = re.compile(r"^[a-z]+[A-Z]|[A-Za-z0-9][._][A-Za-z]")
_NAME_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_CAMEL_CASE = re.compile(r"[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*|[a-z]+[A-Z][A-Za-z0-9]*")  # `KafkaStreams`, `commitSync`
_CAPITALISED_CAMEL_CASE = re.compile(r"(?<![A-Za-z0-9])[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*")  # `KafkaStreams`
_ERROR_NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")  # an error's name as identifiers carry it


@dataclass(frozen=True)
class FirstStage:
    """How candidates are found and fused, from `Settings`."""

    candidates: int
    rrf_k: int
    dense: float
    bm25: float
    identifier: float
    sentence: float

    @classmethod
    def from_settings(cls, settings: Settings) -> FirstStage:
        return cls(
            candidates=settings.candidates,
            rrf_k=settings.rrf_k,
            dense=settings.dense_weight,
            bm25=settings.bm25_weight,
            identifier=settings.identifier_weight,
            sentence=settings.sentence_weight,
        )


@dataclass(frozen=True)
class Candidate:
    """One chunk with everything the later stages read: its passage, features and unit similarities."""

    passage: Passage
    features: tuple[float, ...]  # in `RANK_FEATURES` order
    first_stage: float  # RRF for hybrid, cosine for dense, BM25 for bm25
    dense: float
    unit_scores: np.ndarray  # cosine of the question with each evidence unit (`rag.units.build_units` order)
    unit_vectors: np.ndarray
    matched_terms: frozenset[str]  # the question's terms that occur in the chunk
    identifiers: tuple[str, ...]  # the question's identifiers the chunk carries
    row: int = -1  # in the index's chunk table
    table_header: str = ""  # the header row of the table the chunk begins inside (`Retriever.with_earlier_context`)
    # The lead-in of the list the chunk begins inside, or of the fenced block it begins with, read back from an
    # earlier chunk (`Retriever.with_earlier_context`).
    block_lead_in: str = ""
    block_intro: Passage | None = None  # the earlier chunk that holds `block_lead_in`, cited for it
    continues_code: bool = False  # the chunk begins inside a fenced block (`rag.units.build_units`)
    # The chunk defines (in its heading, or a table row's first cell) an identifier of the question's error
    # line, or the error row a message the user quotes names: what the pasted error means
    # (`rag.ranking.rank` puts the best such chunk first). 2 when that identifier is an error the paste
    # names (its exception's error name, one spelt in words, the row its message says); 1 for another
    # identifier of the error line (the `api=CREATE_TOPICS` of a log line's request context).
    defines_pasted_error: int = 0

    def feature(self, name: str) -> float:
        return self.features[RANK_FEATURES.index(name)]


@dataclass(frozen=True)
class QueryEvidence:
    """What the corpus as a whole says about the question's words: inputs to abstention."""

    term_weights: dict[str, float]  # IDF of each question term (unknown terms weigh most)
    unknown_term_share: float  # IDF-weighted share of the question's terms the corpus never uses
    # ... of those, the words the embedding model reads as one token (`Embedder.knows_word`): everyday words
    # ("what changed yesterday", "a recipe for …") rather than another product's names ("redpanda", "sarama").
    unknown_word_share: float
    names: int  # name-like words in the question (products, APIs, features)
    unknown_names: tuple[str, ...]  # of those, the ones neither whole nor in parts in the corpus
    focus_identifiers: int
    unknown_focus_identifiers: int  # identifiers the question is about that no chunk carries
    unknown_label_share: float  # share of the words of the question's opening label the corpus never uses
    unknown_asked_name_share: float  # share of the asking sentences' names the corpus never mentions
    unknown_asked_identifier_share: float  # share of the identifiers the asking sentences name no chunk carries
    unknown_asked_phrase_share: float  # share of the asking sentences' names of several words the corpus never writes
    # IDF-weighted share of the asking sentences' terms that neither the corpus nor the embedding model's
    # vocabulary knows: a product named in lower case ("how do i set up tiered storage on redpanda?"), which no
    # name check sees
    unknown_asked_foreign_share: float


@dataclass(frozen=True)
class _PerRow:
    """What retrieval looked up for each candidate row, read by the feature stage."""

    records: dict[int, dict]
    carried: dict[int, frozenset[str]]  # the question's identifiers and CamelCase names the row holds
    defined: dict[int, frozenset[str]]  # its stored `defined`, and the asked metrics it is the entry of
    lexical: np.ndarray  # BM25 score of every row
    dense: dict[int, float]
    best_unit: dict[int, float]
    late_interaction: dict[int, float]  # `rag.tokens.late_interaction`
    first: dict[int, float]  # first-stage (fused) score
    matched_terms: dict[int, frozenset[str]]


@dataclass(frozen=True)
class CandidatePool:
    query: Query
    mode: str
    candidates: tuple[Candidate, ...]  # first-stage order
    evidence: QueryEvidence
    timings_ms: dict[str, float]


class Retriever:
    """Reads a memory-mapped `LoadedIndex`: what it keeps in memory per chunk is a few numbers (positions,
    the identifier lookup), never text or vectors, so a serving process grows with what queries touch."""

    def __init__(self, index: LoadedIndex, embedder: Embedder) -> None:
        self.index = index
        self._queries = QueryEncoder(embedder)
        chunks = index.chunks
        self._size = len(chunks)
        self._identifier_lookup = _IdentifierLookup(chunks.column("identifiers"))
        self._definitions = _IdentifierLookup(chunks.column("defined"))
        # The heading field (title + section path): document frequencies and mean length, from each distinct heading.
        headings = pc.value_counts(pc.binary_join(chunks.column("section_path"), " ")).to_pylist()
        self._heading_df: Counter[str] = Counter()
        heading_tokens = 0
        for entry in headings:
            tokens = tokenize(entry["values"] or "")
            heading_tokens += len(tokens) * entry["counts"]
            for token in set(tokens):
                self._heading_df[token] += entry["counts"]
        self._heading_avg = heading_tokens / max(self._size, 1)
        self._position = _positions(chunks)
        self._command_flags = frozenset(index.manifest.get("command_flags", ()))
        # Rows are read from the table's record batches: `Table.take` would concatenate whole columns first.
        self._batches = chunks.to_batches()
        self._batch_starts = np.cumsum([0, *(len(batch) for batch in self._batches)])

    @property
    def size(self) -> int:
        return self._size

    @property
    def version(self) -> str:
        return self.index.version

    def retrieve(self, query: Query, depth: int, mode: str, stage: FirstStage) -> CandidatePool:
        """Candidates for `query` with their features, in first-stage order."""
        if mode not in RETRIEVAL_MODES:
            raise RetrievalError(f"Unknown retrieval mode {mode!r}: use one of {', '.join(RETRIEVAL_MODES)}")
        timings: dict[str, float] = {}
        started = time.perf_counter()
        query = self._spelling_corrected(query)
        own_names = self._names_after_flags(query)
        if own_names:  # the user's own topic, group or host, as they name it after the word for it
            query = dataclasses.replace(query, own_terms=query.own_terms | own_names)
        # Two-part dotted words no chunk carries are no key of this corpus; those the question is about still
        # count as unknown to it when they look like keys of its kind ("`default.goals`" of another product).
        unknown_keys = self._unknown_keys(query)
        if unknown_keys:
            query = dataclasses.replace(query, identifiers=tuple(i for i in query.identifiers if i not in unknown_keys))
        spelt = self._spelt_keys(query)
        if spelt:  # `KAFKA_ADVERTISED_LISTENERS` is `advertised.listeners`: the key stands in its place
            query = dataclasses.replace(
                query, identifiers=tuple(dataclasses.replace(i, name=spelt.get(i, i.name)) for i in query.identifiers)
            )
        spelt_names = frozenset(i.name for i in spelt)
        errors = self._carried_errors(query) | self._described_errors(query)
        if errors:  # searched and matched like the identifiers the user wrote, in the same place
            named = tuple(dataclasses.replace(i, name=name) for i, name in errors.items())
            query = dataclasses.replace(query, identifiers=query.identifiers + named)
        names = self._carried_names(query)
        if names:  # `UnderMinIsrPartitionCount`, `KafkaStreams`: what the question is about, as its keys are
            query = dataclasses.replace(
                query,
                identifiers=query.identifiers
                + tuple(
                    QueryIdentifier(name, "command" if name in query.pasted_fields else "question") for name in names
                ),
            )
        query_vector, query_tokens = self._queries.encode(query.embedded_text)
        timings["embed_query"] = elapsed_ms(started)

        started = time.perf_counter()
        depth = min(max(stage.candidates, depth), self.size)
        dense_order: list[int] = []
        if mode != "bm25":
            dense_order = self.index.dense.search(query_vector, depth).tolist()
        timings["dense"] = elapsed_ms(started)

        started = time.perf_counter()
        lexical = (
            bm25_scores(self.index.bm25, query.text, parts_only(query.text, self._foreign_compounds(query)))
            if mode != "dense"
            else np.zeros(self.size, np.float32)
        )
        lexical_order = _top_rows(lexical, depth)
        timings["bm25"] = elapsed_ms(started)

        started = time.perf_counter()
        wanted = {i.name for i in query.identifiers}
        matched = self._identifier_lookup.matches(wanted - names.keys()) if mode == "hybrid" else {}
        names_at: dict[int, set[str]] = {}
        for name, carriers in names.items():
            for row in carriers.tolist():
                names_at.setdefault(row, set()).add(name)
        if mode == "hybrid":
            matched |= {row: matched.get(row, frozenset()) | held for row, held in names_at.items()}
        idf = functools.partial(self._idf, names)
        identifier_order = self._identifier_order(matched, query_vector, depth, idf)
        unit_order = self._unit_order(query_vector, depth) if mode == "hybrid" else []
        rows = sorted({*dense_order, *lexical_order, *identifier_order, *unit_order})  # ascending reads from the maps
        records = self._records(rows)
        carried = {row: frozenset(records[row]["identifiers"]) | names_at.get(row, set()) for row in rows}
        written = mbeans_written(query.text) if names else frozenset()
        defined = {row: _defined(records[row], names_at.get(row, set()), written) for row in rows}
        dense_scores = np.asarray(self.index.vectors[rows], dtype=np.float32) @ query_vector
        dense_of = dict(zip(rows, dense_scores.tolist(), strict=True))
        unit_vectors = {row: self.index.unit_vectors(row) for row in rows}
        unit_scores = {row: vectors @ query_vector for row, vectors in unit_vectors.items()}
        best_unit = {row: float(s.max()) if len(s) else dense_of[row] for row, s in unit_scores.items()}
        tokens, token_offsets = self.index.token_vectors(rows)
        question_tokens = self.index.token_basis.question(query_tokens)  # times codes: cosines
        late = dict(zip(rows, late_interaction(question_tokens, tokens, token_offsets).tolist(), strict=True))
        first = self._first_stage(
            mode, dense_order, lexical_order, identifier_order, dense_of, unit_order, lexical, stage
        )
        order = sorted(first, key=lambda row: (-first[row], row))
        unknown_asked = sum(
            i.focus and i.name not in query.own_terms and self._identifier_lookup.shares_a_key_part(i.name)
            for i in unknown_keys
        )  # not the user's quoted 'my.topic', nor their `dc1.orders`
        evidence = self._query_evidence(query, errors, unknown_asked, names.keys(), spelt_names)
        matched_terms = self._matched_terms(rows, evidence.term_weights)
        per_row = _PerRow(records, carried, defined, lexical, dense_of, best_unit, late, first, matched_terms)
        features = self._features(query, mode, order, per_row, evidence, stage, idf)
        pasted = {i.name for i in query.identifiers if i.place == "error"}
        named_errors = set(errors.values())
        candidates = tuple(
            Candidate(
                passage=_passage(records[row], first[row]),
                features=vector,
                first_stage=first[row],
                dense=dense_of[row],
                unit_scores=unit_scores[row],
                unit_vectors=unit_vectors[row],
                matched_terms=matched_terms[row],
                identifiers=tuple(sorted(carried[row] & wanted)),
                row=row,
                continues_code=records[row]["continues_code"],
                defines_pasted_error=_defines_pasted_error(defined[row], pasted, named_errors),
            )
            for row, vector in zip(order, features, strict=True)
        )
        timings["features"] = elapsed_ms(started)
        return CandidatePool(query, mode, candidates, evidence, timings)

    def _names_after_flags(self, query: Query) -> frozenset[str]:
        """The tokens of the names that follow a word the corpus's commands take as an option: "lag on group
        fraud-scorer" names the user's group as `--group fraud-scorer` would, not a subject the corpus lacks."""
        return frozenset(
            token for word, name in query.named_after if word in self._command_flags for token in tokenize(name)
        )

    def _foreign_compounds(self, query: Query) -> frozenset[str]:
        """The question's hyphenated words that the corpus uses in no spelling (with dots, underscores or
        joined): a name of the user's (`dc-east`, `payments-reader`, `kraft-ctl-01`), whose parts are no
        search terms where the question does not use them on their own; `isolation-level` is the key
        `isolation.level`, searched by its parts."""
        return frozenset(
            token
            for token in query.tokens
            if "-" in token
            and "." not in token
            and "_" not in token
            and not any(
                self._document_frequency(spelling)
                for spelling in (token, token.replace("-", "."), token.replace("-", "_"), token.replace("-", ""))
            )
        )

    def _carried_names(self, query: Query) -> dict[str, np.ndarray]:
        """The CamelCase names of the user's own words that the corpus holds, each as its one BM25 token with
        the rows holding it: a metric (`UnderMinIsrPartitionCount`) or a class (`KafkaStreams`) is what the
        question is about, as a key or an exception is, though no identifier pattern spells it. So is one the
        user writes as words ("under replicated partitions", `Query.run_together`) where the corpus writes
        those words as one CamelCase name."""
        known = {i.name for i in query.identifiers}
        found: dict[str, np.ndarray] = {}
        written = [(tokenize(name), False) for name in query.names if _CAMEL_CASE.fullmatch(name)]
        for tokens, written_as_words in written + [(tokenize(words), True) for words in query.run_together]:
            if len(tokens) != 1 or tokens[0] in known or tokens[0] in found:
                continue
            rows = rows_with(self.index.bm25, tokens[0])
            if len(rows) and (not written_as_words or self._written_as_camel_case(tokens[0], rows)):
                found[tokens[0]] = rows
        return found

    def _written_as_camel_case(self, token: str, rows: np.ndarray) -> bool:
        """Whether the first chunk holding `token` writes it as one capitalised CamelCase name, a metric's or a
        class's (`UnderReplicatedPartitions`), not as a plain compound word ("keystore") that three of the user's
        words might also run together into, nor as a method's or field's name in code (`numberOfPartitions`:
        "how do I increase the number of partitions" is plain English)."""
        text = self._record(int(rows[0]))["text"]
        return any(tokenize(name) == [token] for name in _CAPITALISED_CAMEL_CASE.findall(text))

    def corpus_spelling(self, word: str) -> str | None:
        """How the corpus mostly writes `word` inside its sentences as a word of its own, when not as typed
        (`casing.corpus_cased`): the commonest spelling in the first `SPELLING_CHUNKS` chunks holding it as a BM25
        token, of the occurrences that do not open a sentence (of all, when every one does). A sentence's first
        word is capitalised whatever it is; inside one, `Confluent` and `JMX` keep their capitals where `consumer`
        does not. None when no chunk holds it so."""
        tokens = tokenize(word)
        rows = rows_with(self.index.bm25, tokens[0])[:SPELLING_CHUNKS] if tokens else None
        if rows is not None and len(rows):
            pattern = re.compile(rf"(?<![\w.$/@-]){re.escape(word)}(?![\w$/@-]|\.\w)", re.IGNORECASE)
            inside, opening = Counter[str](), Counter[str]()
            for record in self._records(rows.tolist()).values():
                text = lexical_text(record["section_path"], record["text"])  # what BM25 read the token from
                for match in pattern.finditer(text):
                    within = _INSIDE_SENTENCE.search(text[max(0, match.start() - 2) : match.start()])
                    (inside if within else opening)[match.group(0)] += 1
            if spellings := (inside or opening):
                spelt = spellings.most_common(1)[0][0]
                if spelt != word:
                    return spelt
        # An exception class the corpus knows by its error's name: `groupauthorizationexception` is
        # `GroupAuthorizationException` where the corpus carries `GROUP_AUTHORIZATION_FAILED`.
        parts = class_name_parts(word)
        words = self._identifier_lookup.error_words(parts[0]) if parts else None
        return "".join(w.capitalize() for w in words) + parts[1].capitalize() if parts and words else None

    def _idf(self, names: Mapping[str, np.ndarray], identifier: str) -> float:
        """An identifier's weight: rarer in the corpus weighs more (a name's carriers are its BM25 rows)."""
        carriers = names.get(identifier)
        if carriers is None:
            return self._identifier_lookup.idf(identifier)
        return _inverse_frequency(self.size, len(carriers))

    def _spelling_corrected(self, query: Query) -> Query:
        """The query with each misspelt word of the user's in the corpus's spelling (`correction`): a word
        written in lower case on its own, not part of a name (`spring-kafka`) nor one of the user's own terms.
        A typo is no word the corpus lacks: "how to incrase partitons" was declined as uncovered. So with a
        dotted key the corpus never carries and one of its keys is one slip away from (`key_misspelt_as`):
        "max.pol.interval.ms" is `max.poll.interval.ms`."""
        fixed: dict[str, str] = {}
        for word in set(_PLAIN_WORD.findall(query.text)):
            if query.own_terms.intersection(tokenize(word)):
                continue
            right = correction(word, self._document_frequency)
            if right is not None:
                fixed[word] = right
        asked = [i.name for i in query.identifiers if i.focus][:MAX_RESPELT_KEYS]  # a long paste stays cheap
        keys = {name: key for name in asked if (key := self._identifier_lookup.key_misspelt_as(name))}
        if not fixed and not keys:
            return query
        text = _PLAIN_WORD.sub(lambda m: fixed.get(m.group(0), m.group(0)), query.text)
        for wrong, right in keys.items():
            text = re.sub(rf"(?<![\w.-]){re.escape(wrong)}(?![\w-]|\.\w)", right, text, flags=re.IGNORECASE)
        return dataclasses.replace(
            query,
            text=text,
            tokens=tuple(tokenize(text)),
            identifiers=tuple(dataclasses.replace(i, name=keys.get(i.name, i.name)) for i in query.identifiers),
            asked=frozenset(keys.get(name, name) for name in query.asked),
            valued=frozenset(keys.get(name, name) for name in query.valued),
            read_as=tuple(sorted(keys.items())),
        )

    def _unknown_keys(self, query: Query) -> frozenset[QueryIdentifier]:
        """The question's two-part dotted words that no chunk carries: `buffer.memory` is a key where the
        corpus names it; "node.js" or `default.goals` is none of this corpus's."""
        return frozenset(
            i for i in query.identifiers if is_plain_two_part(i.name) and not self._identifier_lookup.carried(i.name)
        )

    def _spelt_keys(self, query: Query) -> dict[QueryIdentifier, str]:
        """The carried keys that the question's uncarried names spell another way (`key_spelt_as`): a
        container image's variable or a framework's property (`KAFKA_CFG_LOG_RETENTION_HOURS` sets
        `log.retention.hours`)."""
        keys = {i: self._identifier_lookup.key_spelt_as(i.name) for i in query.identifiers}
        return {i: key for i, key in keys.items() if key is not None}

    def _carried_errors(self, query: Query) -> dict[QueryIdentifier, str]:
        """The error names of the query's exception classes that this corpus carries, each with the
        corpus's spelling (an error table row names `NOT_ENOUGH_REPLICAS`, the user pastes
        `NotEnoughReplicasException`); and the error names its error lines spell in words, the longest
        carried run of each ("Broker: Unknown topic or partition") that names an error: "Failed to update
        metadata" spells `UPDATE_METADATA`, which the docs carry as a request's name, not as an error."""
        lookup = self._identifier_lookup
        written = frozenset(query.tokens)
        named = {i: lookup.error_name(i.name) or self._error_one_word_apart(i.name, written) for i in query.error_names}
        carried = {i: name for i, name in named.items() if name is not None}
        phrases = sorted(
            (i for i in query.error_phrases if self._identifier_lookup.carried(i.name) and self.names_an_error(i.name)),
            key=lambda i: -len(i.name),
        )
        kept: list[QueryIdentifier] = []
        for phrase in phrases:  # the longest run only: "unknown topic or partition", not also "unknown topic"
            if not any(f"_{phrase.name}_" in f"_{longer.name}_" for longer in kept):
                kept.append(phrase)
        return carried | {i: i.name for i in kept}

    def _error_one_word_apart(self, name: str, written: frozenset[str]) -> str | None:
        """`error_name_one_word_apart`, when the corpus defines that name as an error (`names_an_error`)."""
        other = self._identifier_lookup.error_name_one_word_apart(name, written)
        return other if other is not None and self.names_an_error(other) else None

    def _described_errors(self, query: Query) -> dict[QueryIdentifier, str]:
        """The names of the table rows whose description is a message the question pastes or quotes: "The
        coordinator is loading and hence can't process requests." is `COORDINATOR_LOAD_IN_PROGRESS`. Looked
        up by the message's rarest words in the BM25 postings, then read in the few chunks that hold any two.
        A quoted message is an error the user reports, as a pasted one is: both name an error-line identifier."""
        named: dict[QueryIdentifier, str] = {}
        for message in query.messages:
            frequency = {t: self._document_frequency(t) for t in dict.fromkeys(tokenize(message))}
            rarest = sorted((t for t, n in frequency.items() if n), key=frequency.__getitem__)[:MESSAGE_TOKENS]
            if not rarest:
                continue
            # Any two of the rarest words: a client's own wording of the error shares most, not all, of them.
            pairs = [(a, b) for i, a in enumerate(rarest) for b in rarest[i + 1 :]] or [(rarest[0], rarest[0])]
            found: set[int] = set()
            for first, second in pairs:
                rows = rows_with(self.index.bm25, first)
                found.update(rows[rows_holding(self.index.bm25, second, rows)].tolist())
            texts = (self._record(row)["text"] for row in sorted(found)[:MESSAGE_ROWS])
            for name in _rows_saying(texts, message):
                named.setdefault(QueryIdentifier(name, "error"), name)
        return named

    def names_an_error(self, name: str) -> bool:
        """A chunk that defines `name` (in its heading or a table row's first cells) holds an error code
        too: an error table (`UNKNOWN_TOPIC_OR_PARTITION | 3 | …`) or an error's page ("Kafka Error
        INVALID_RECORD_STATE", "Error code 121"); the ACL table's `UPDATE_METADATA (6)` row is a request's."""
        for row in self._identifier_lookup.rows(name)[:ERROR_ROW_READS].tolist():
            record = self._record(row)
            if name in record["defined"] and any(i.startswith("code:") for i in record["identifiers"]):
                return True
        return False

    def _record(self, row: int) -> dict:
        return self._records([row])[row]

    def _records(self, rows: list[int]) -> dict[int, dict]:
        """`_record` of each of `rows` (ascending), with one take per record batch: a take converts many
        rows for about the price of one slice."""
        positions = np.asarray(rows, dtype=np.int64)
        batches = np.searchsorted(self._batch_starts, positions, side="right") - 1
        records: dict[int, dict] = {}
        for batch in np.unique(batches).tolist():
            held = positions[batches == batch]
            taken = self._batches[batch].take(pa.array(held - self._batch_starts[batch])).to_pylist()
            records.update(zip(held.tolist(), taken, strict=True))
        return records

    def with_earlier_context(self, candidates: tuple[Candidate, ...]) -> tuple[Candidate, ...]:
        """The candidates an answer is made from, each with the header row of the table or the lead-in of
        the list or code block it begins with, so its rows show their column names, its items what they list
        and its code what it is; read for these few only (a long table or list is read back chunk by chunk)."""
        return tuple(
            dataclasses.replace(
                c,
                table_header=self._table_header(c.row, c.passage),
                **self._block_intro(c.row, c.passage, c.continues_code),
            )
            if c.row >= 0
            else c
            for c in candidates
        )

    def named_entries(self, candidates: Sequence[Candidate]) -> tuple[Candidate, ...]:
        """The reference entries (a section of its own name: a setting's) of the names the `candidates` use that
        none of them is the entry of, in the candidates' order: "If this value is larger than the
        `transaction.max.timeout.ms` setting in the broker, …" names a setting whose default the user asks next.
        A candidate under the name's heading is its entry only when it ends in the entry's key/value rows: the
        Streams guide describes `state.dir` in prose under its own heading, without the default the user asks for.
        At most `NAMED_ENTRIES` names, `ENTRIES_PER_NAME` entries each."""
        shown = {name for c in candidates if (name := _entry_name(c.passage.section_path, c.passage.text))}
        names = [i for c in candidates for i in c.passage.identifiers if i not in shown]
        rows: list[int] = []
        named = 0
        for name in dict.fromkeys(names):
            if named == NAMED_ENTRIES:
                break
            defining = sorted(set(self._definitions.rows(name).tolist()[:ENTRY_READS]) - set(rows))
            entries = [
                row
                for row, record in self._records(defining).items()
                if _entry_name(record["section_path"], record["text"]) == name
            ]
            rows += entries[:ENTRIES_PER_NAME]
            named += bool(entries)
        return tuple(self._reference(row) for row in rows)

    def _reference(self, row: int) -> Candidate:
        """The chunk at `row` as a candidate no stage ranked: a reference the answer may name."""
        record = self._record(row)
        return Candidate(
            passage=_passage(record, 0.0),
            features=(0.0,) * len(RANK_FEATURES),
            first_stage=0.0,
            dense=0.0,
            unit_scores=np.zeros(0, np.float32),
            unit_vectors=self.index.unit_vectors(row),
            matched_terms=frozenset(),
            identifiers=(),
            row=row,
            continues_code=record["continues_code"],
        )

    def _earlier_in_section(self, row: int, passage: Passage) -> Iterator[dict]:
        """The chunks before `row` in the same section, nearest first, at most `LOOKBACK_CHUNKS`."""
        for previous in range(row - 1, max(row - 1 - LOOKBACK_CHUNKS, -1), -1):
            earlier = self._record(previous)
            if (earlier["source_path"], tuple(earlier["section_path"])) != (passage.source_path, passage.section_path):
                return
            yield earlier

    def _block_intro(self, row: int, passage: Passage, continues_code: bool) -> dict[str, Any]:
        """`block_lead_in` and `block_intro` of a chunk that begins inside a list, read back from the earlier
        chunks of its section, or with a fenced block that the chunk before it in the section introduces
        ("… like this:"), ending with it or with the same block under it; nothing when the chunk begins otherwise
        or no earlier chunk introduces the block."""
        if starts_with_code(passage.text, continues_code):
            opening = passage.text[: leading_block_end(passage.text, continues_code)]
            for earlier in itertools.islice(self._earlier_in_section(row, passage), 1):
                # The chunk before may end with this very block, under its lead-in (chunks overlap).
                before = before_closing_block(earlier["text"], opening)
                if lead_in := lead_in_ending(before, earlier["continues_code"]):
                    return {"block_lead_in": lead_in, "block_intro": _passage(earlier, 0.0)}
            return {}
        if not starts_in_list(passage.text):
            return {}
        for earlier in self._earlier_in_section(row, passage):
            ending = list_ending(earlier["text"], earlier["continues_code"])
            if ending is None:
                return {}
            lead_in, complete = ending
            if complete:
                return {"block_lead_in": lead_in, "block_intro": _passage(earlier, 0.0)} if lead_in else {}
        return {}

    def _table_header(self, row: int, passage: Passage) -> str:
        """The header row of the table a chunk begins inside, read back from the earlier chunks of its
        section ("" when the chunk does not begin in a table, or the table began more than
        `LOOKBACK_CHUNKS` chunks earlier): its rows are shown with their column names."""
        if " | " not in passage.text.lstrip().split("\n", 1)[0]:
            return ""
        header = ""
        read = 0
        for earlier in self._earlier_in_section(row, passage):
            read += 1
            start, complete = table_start(earlier["text"])
            if not start:
                return ""
            if complete:
                return start
            header = start
        # The section's first chunk began with the table (its first row is the header), unless the
        # lookback ran out before the section's start.
        return header if read < LOOKBACK_CHUNKS else ""

    def _identifier_order(
        self, matched: dict[int, frozenset[str]], query_vector: np.ndarray, depth: int, idf: Callable[[str], float]
    ) -> list[int]:
        """Rows carrying the question's identifiers, most identifier weight first, then closest to the
        question: the top `depth`, as the other channels hand down theirs. A tool or setting name can sit in
        thousands of chunks of a big corpus, and every candidate costs its features (at 10^6 chunks a
        question naming `kafka-topics.sh` took 8,500 candidates and 1.4 s)."""
        if not matched:
            return []
        rows = sorted(matched)  # ascending reads from the vector map
        closeness = dict(
            zip(rows, (np.asarray(self.index.vectors[rows], np.float32) @ query_vector).tolist(), strict=True)
        )
        weight = {i: idf(i) for i in set().union(*matched.values())}
        strength = {row: sum(weight[i] for i in ids) for row, ids in matched.items()}
        return sorted(rows, key=lambda row: (-strength[row], -closeness[row], row))[:depth]

    def _unit_order(self, query_vector: np.ndarray, depth: int) -> list[int]:
        """Chunks by their best evidence unit over the whole corpus: finds the one sentence or row that
        answers a question whose words the chunk as a whole does not share ("shrink" vs "reducing")."""
        units = self.index.unit_search.search(query_vector, depth * 3)
        rows = np.searchsorted(self.index.unit_offsets, units, side="right") - 1
        return list(dict.fromkeys(rows.tolist()))[:depth]

    def _matched_terms(self, rows: list[int], weights: dict[str, float]) -> dict[int, frozenset[str]]:
        """The question's terms each row holds, looked up in the BM25 postings (the same tokens it indexed)."""
        ordered = np.asarray(rows, dtype=np.int64)
        held: dict[int, set[str]] = {row: set() for row in rows}
        for term in weights:
            for row in ordered[rows_holding(self.index.bm25, term, ordered)].tolist():
                held[row].add(term)
        return {row: frozenset(terms) for row, terms in held.items()}

    def _first_stage(self, mode, dense_order, lexical_order, identifier_order, dense_of, unit_order, lexical, stage):
        if mode == "dense":
            return {row: float(dense_of[row]) for row in dense_order}
        if mode == "bm25":
            return {row: float(lexical[row]) for row in lexical_order}
        fused: dict[int, float] = {}

        def add(order: list[int], weight: float) -> None:
            for rank, row in enumerate(order, start=1):
                fused[row] = fused.get(row, 0.0) + weight / (stage.rrf_k + rank)

        add(dense_order, stage.dense)
        add(lexical_order, stage.bm25)
        add(identifier_order, stage.identifier)
        add(unit_order, stage.sentence)
        return fused

    def _features(
        self,
        query: Query,
        mode: str,
        order: list[int],
        per_row: _PerRow,
        evidence: QueryEvidence,
        stage: FirstStage,
        idf: Callable[[str], float],
    ) -> list[tuple[float, ...]]:
        weights = evidence.term_weights
        total_weight = sum(weights.values()) or 1.0
        focus = {i: idf(i) for i in query.focus_identifiers}
        context = {i: idf(i) for i in query.context_identifiers}
        # The entry of a setting the user only says they have is no answer for being its definition.
        defining = focus.keys() - query.setup_identifiers
        best_bm25 = max((float(per_row.lexical[row]) for row in order), default=0.0) or 1.0
        heading_counts = {row: _heading_terms(" ".join(per_row.records[row]["section_path"])) for row in order}
        heading = {row: self._heading_bm25(heading_counts[row], weights) for row in order}
        best_heading = max(heading.values(), default=0.0) or 1.0
        rrf_scale = stage.rrf_k + 1  # a first place in one order scores ~1
        vectors: list[tuple[float, ...]] = []
        for row in order:
            heading_terms = heading_counts[row]
            vectors.append(
                (
                    per_row.first[row] * rrf_scale if mode == "hybrid" else 0.0,
                    float(per_row.dense[row]),
                    float(per_row.best_unit[row]),
                    float(per_row.lexical[row]) / best_bm25,
                    heading[row] / best_heading,
                    sum(w for t, w in weights.items() if t in heading_terms) / total_weight,
                    sum(weights[t] for t in per_row.matched_terms[row]) / total_weight,
                    _share(focus, per_row.carried[row]),
                    _share(context, per_row.carried[row]),
                    1.0 if defining & per_row.defined[row] else 0.0,
                    float(self._position[row]),
                    per_row.late_interaction[row],
                )
            )
        return vectors

    def _heading_bm25(self, counts: Counter[str], weights: dict[str, float]) -> float:
        if not counts:
            return 0.0
        norm = BM25_K1 * (1 - BM25_B + BM25_B * counts.total() / (self._heading_avg or 1))
        score = 0.0
        for term in weights:
            tf = counts.get(term, 0)
            if tf:
                df = self._heading_df[term]
                idf = math.log(1 + (self.size - df + 0.5) / (df + 0.5))
                score += idf * tf * (BM25_K1 + 1) / (tf + norm)
        return score

    def _document_frequency(self, token: str) -> int:
        return document_frequency(self.index.bm25, token)

    def _query_evidence(
        self,
        query: Query,
        errors: dict[QueryIdentifier, str],
        unknown_keys_asked: int,
        carried_names: Collection[str],
        spelt_names: Collection[str],
    ) -> QueryEvidence:
        """What the corpus says about the question's words; `unknown_keys_asked` counts the key-shaped
        words it asks about that no chunk carries (`_unknown_keys`, dropped from its identifiers);
        `carried_names` are the CamelCase names it holds (`_carried_names`), `spelt_names` the question's names
        that spell one of its keys another way (`_spelt_keys`)."""
        total = self.size or 1
        frequency = {t: self._document_frequency(t) for t in dict.fromkeys(query.tokens)}
        # A number the corpus never uses is a value of this occurrence (an offset, a size, a count in a
        # pasted log), not a subject the corpus lacks nor a term any passage could match.
        frequency = {t: n for t, n in frequency.items() if n or not _NUMBER.fullmatch(t)}
        weights = {t: math.log(1 + total / (1 + n)) for t, n in frequency.items()}
        focus = query.focus_identifiers
        # An exception class the corpus never names is known when its error name is (`NotEnoughReplicasException`),
        # and so is a name that spells a key another way (`KAFKA_NUM_PARTITIONS`).
        carried_errors = {e.name.replace("_", "") for e in errors}
        known = {
            i
            for i in {*focus, *query.asked}
            if i.removesuffix("exception").removesuffix("error") in carried_errors
            or i in carried_names
            or i in spelt_names
        }
        unseen = [t for t in weights if not frequency[t] and t not in query.own_terms and t not in known]
        total_weight = sum(weights.values()) or 1.0
        names = [name for name in query.names if self._unknown_name(name)]
        # A sentence's capitalised first word counts as a name only when the corpus never uses it.
        openers = [name for name in query.opening_names if self._unknown_name(name)]
        return QueryEvidence(
            term_weights=weights,
            unknown_term_share=sum(weights[t] for t in unseen) / total_weight,
            unknown_word_share=sum(weights[t] for t in unseen if self._queries.knows_word(t)) / total_weight,
            names=len(query.names) + len(openers),
            unknown_names=tuple(names + openers),
            focus_identifiers=len(focus) + unknown_keys_asked,
            unknown_focus_identifiers=unknown_keys_asked
            + sum(
                1
                for i in focus
                if not self._identifier_lookup.carried(i) and i not in known and i not in query.own_terms
            ),
            unknown_label_share=self._unknown_label_share(query),
            unknown_asked_name_share=self._unknown_asked_name_share(query),
            unknown_asked_identifier_share=self._unknown_asked_identifier_share(query, known),
            unknown_asked_phrase_share=self._unknown_asked_phrase_share(query),
            unknown_asked_foreign_share=self._unknown_asked_foreign_share(query, weights, unseen),
        )

    def _unknown_asked_foreign_share(self, query: Query, weights: dict[str, float], unseen: Collection[str]) -> float:
        """`QueryEvidence.unknown_asked_foreign_share`, of `Query.asking_words`. Words of the question's identifiers
        do not count: an exception class, a key or a host is what the user got or has. Nor do the words of a
        class written with its package in the sentence (`javax.net.ssl.SSLHandshakeException`): the package is
        where the class lives, not a word the user asks with."""
        asking = set(query.asking_words) & weights.keys()
        named = {token for identifier in query.identifiers for token in tokenize(identifier.name)}
        named |= {
            part for token in asking if "." in token and token.rpartition(".")[2] in named for part in tokenize(token)
        }
        foreign = [t for t in asking if t in unseen and t not in named and self._foreign(t)]
        return sum(weights[t] for t in foreign) / (sum(weights[t] for t in asking) or 1.0)

    def _foreign(self, token: str) -> bool:
        """Neither the corpus nor the embedding model's vocabulary knows `token`: a word of another product. A
        compound is foreign only by a foreign part ("under-replicated" is two known words), a quantity never
        ("9am", "30s"), nor a form of a known word (`word_roots`: "What is it tripping over?", the model's
        vocabulary holds "trip", not "tripping"; "dont" is "do")."""
        if token[0].isdigit() or self._known(token) or any(self._known(stem) for stem in word_roots(token)):
            return False
        parts = tokenize(token)[1:]
        return not parts or any(self._foreign(part) for part in parts)

    def _known(self, token: str) -> bool:
        return bool(self._document_frequency(token)) or self._queries.knows_word(token)

    def _unknown_asked_phrase_share(self, query: Query) -> float:
        """Of the names of several words the asking sentences use (`Query.asked_phrases`: "Event Hubs", "Topic
        Operator") whose every word the corpus uses, the share it never writes together: a product named in
        common words ("Which REST Proxy property …?"), which no check of single words can tell from the corpus's
        own vocabulary. A name with a word the corpus lacks ("Spring Kafka") counts in `_unknown_asked_name_share`."""
        phrases = [p for p in query.asked_phrases if all(self._known_word(word) for word in p)]
        return sum(not self._written(phrase) for phrase in phrases) / len(phrases) if phrases else 0.0

    def _known_word(self, word: str) -> bool:
        tokens = tokenize(word)
        return not tokens or bool(self._document_frequency(tokens[0]))

    def _written(self, phrase: tuple[str, ...]) -> bool:
        """Whether the corpus writes two neighbouring words of `phrase` together: as one word (`Mirror Maker` is
        `MirrorMaker`), or next to each other in either order and any inflection ("Shrinking ISR" is the
        corpus's "ISR shrinks"). One pair is enough: "Consumer Group Protocol GA" names the corpus's consumer
        group protocol. Read from at most `PHRASE_ROWS_READ`
        chunks holding both words; a pair that more chunks hold is taken as written."""
        for first, second in itertools.pairwise(phrase):
            tokens = [tokenize(first)[:1], tokenize(second)[:1]]
            if not all(tokens):
                continue
            if self._document_frequency(tokens[0][0] + tokens[1][0]):
                return True
            rows = np.intersect1d(rows_with(self.index.bm25, tokens[0][0]), rows_with(self.index.bm25, tokens[1][0]))
            if len(rows) > PHRASE_ROWS_READ:
                return True
            one, other = inflection_pattern(first), inflection_pattern(second)
            together = re.compile(rf"(?<![^\W_])(?:{one}{_JOINER}{other}|{other}{_JOINER}{one})", re.I)
            if any(together.search(record["text"]) for record in self._records(rows.tolist()).values()):
                return True
        return False

    def _unknown_asked_identifier_share(self, query: Query, known: Collection[str]) -> float:
        """Of the identifiers the asking sentences name (`Query.asked`: "what's the `kafka-get-offsets.sh`
        command for …?"), the share no chunk carries; the user's own names do not count, nor do the `known` ones
        the corpus names otherwise ("my producer gets NotEnoughReplicasException": the error `NOT_ENOUGH_REPLICAS`).
        A tool, setting or class the user asks about by name that the corpus never names is one the docs do not
        cover, where an unknown identifier of a pasted error line may still be answered by the passage about its
        error."""
        asked = [i for i in query.asked if i not in query.own_terms]
        unknown = sum(i not in known and not self._identifier_lookup.carried(i) for i in asked)
        return unknown / len(asked) if asked else 0.0

    def _unknown_asked_name_share(self, query: Query) -> float:
        """Of the names the asking sentences use (`Query.asked_names`), the share the corpus never mentions. A
        sentence's capitalised first word counts only when unknown, and a name of the user's own resources
        (`Query.own_terms`) not at all."""
        unknown = counted = 0
        for name in query.asked_names:
            if set(tokenize(name)) <= query.own_terms:
                continue
            lacking = self._unknown_name(name)
            if lacking or name not in query.opening_names:
                counted += 1
                unknown += lacking
        return unknown / counted if counted else 0.0

    def _unknown_label_share(self, query: Query) -> float:
        """Of the words of the question's opening label ("Amazon MSK:", "franz-go producer:"), the share the
        corpus never uses. Numbers (a version) and the user's own names do not count; a hyphenated word is
        unknown only when a part is too: `single-broker` is two known words. Of a bracketed tag's words
        (`Query.tag`), each counts only when the embedding model's vocabulary lacks it too (`_foreign`: not
        "[urgent]") and it abbreviates no word of the corpus (not "[prod]", "[perf]"); "[Strimzi]", "[EKS]" count.
        The larger share of the two: a known tag does not make the label under it ("[prod] ksqlDB: …") less
        unknown."""
        tag = [
            self._foreign(whole) and not self._abbreviates(whole) for whole, *_ in self._label_tokens(query.tag, query)
        ]
        label = [
            not self._document_frequency(whole) and (not parts or any(not self._document_frequency(t) for t in parts))
            for whole, *parts in self._label_tokens(query.label, query)
        ]
        return max(sum(words) / len(words) if words else 0.0 for words in (tag, label))

    @staticmethod
    def _label_tokens(words: Sequence[str], query: Query) -> list[list[str]]:
        """Each word's tokens, without numbers (a version) and the user's own names; words left with none dropped."""
        tokens = (
            [t for t in tokenize(word) if not _NUMBER.fullmatch(t) and t not in query.own_terms] for word in words
        )
        return [found for found in tokens if found]

    def _abbreviates(self, token: str) -> bool:
        """A longer word of the corpus begins with `token` ("prod" of "production"): the shortening of a word, not
        a name. Read only for a ticket's tag: a product's name that begins a word ("boot" of "bootstrap", in
        "Spring Boot:") is a label's subject."""
        if len(token) < MIN_ABBREVIATION:
            return False
        words = self._sorted_vocabulary
        at = bisect.bisect_right(words, token)
        return at < len(words) and words[at].startswith(token)

    @functools.cached_property
    def _sorted_vocabulary(self) -> list[str]:
        return sorted(self.index.bm25.vocab_dict)

    def _unknown_name(self, word: str) -> bool:
        """True when the corpus does not know `word`. A CamelCase name is known by any of its parts
        (`ShareConsumer`); a hyphenated artifact id is unknown when one of its parts is
        (`spring-cloud-stream-binder`), since its parts are mostly generic words of the domain."""
        tokens = tokenize(word)
        if not tokens or self._document_frequency(tokens[0]):
            return False
        if _CODE_SHAPED.search(word):
            # A field or member of an API is the corpus's when it writes it whole, or the member a path ends in
            # (`consumer.commitSync` is the corpus's `commitSync`); not by its words (`ack_wait`, `logCreator`);
            # `enable_idempotence` is `enable.idempotence` spelt as a keyword argument.
            spellings = (word.rsplit(".", 1)[-1], word.replace("_", "."))
            return not any(self._document_frequency(t[0]) for t in map(tokenize, spellings) if t)
        if "-" in word:
            return any(not self._document_frequency(t) for t in tokens[1:] if len(t) > 2)
        if any(self._document_frequency(t) for t in tokens[1:]):
            return False
        parts = [t for part in _NAME_PARTS.findall(word) for t in tokenize(part) if len(t) > 2]
        return not any(self._document_frequency(t) for t in parts)


def _entry_name(section_path: Sequence[str], text: str) -> str | None:
    """The name a chunk is the reference entry of: its section's, when the chunk ends in the entry's key/value
    rows (`Default: | …`)."""
    return section_path[-1].lower() if section_path and ends_in_key_values(text) else None


def _inverse_frequency(chunks: int, carriers: int) -> float:
    """The weight of a name that `carriers` of `chunks` chunks hold: rarer weighs more."""
    return math.log(1 + chunks / carriers)


def _defined(record: Mapping[str, Any], names: Collection[str], written: Collection[MBean]) -> frozenset[str]:
    """What the chunk defines: the identifiers stored at ingest (`defined_identifiers`), and those of the question's
    CamelCase `names` it holds that one of its metrics table rows is the entry of (`metric_entries`; a metric name
    is no identifier pattern's, so only the question tells which of the chunk's words to look for). Both sides as
    their one BM25 token, the form `_carried_names` finds a name by. Where the question writes the metric's MBean
    out, only the entry under the same owner is its: `MaxLag` of Confluent's cluster links is not the replica
    fetcher's."""
    stored = frozenset(record["defined"])
    if not names:
        return stored
    entries = {
        token
        for token, entry in metric_tokens(record["text"]).items()
        if token in names and (entry in written or not any(w.name == entry.name for w in written))
    }
    return stored | entries


def metric_tokens(text: str) -> dict[str, MBean]:
    """The metrics whose entries `text`'s table rows are (`metric_entries`), each by its one BM25 token: the form a
    question's CamelCase name is found by (`UnderReplicatedPartitions` is `underreplicatedpartition`)."""
    return {tokens[0]: entry for entry in metric_entries(text) if len(tokens := tokenize(entry.name)) == 1}


def _defines_pasted_error(defined: frozenset[str], pasted: set[str], named_errors: set[str]) -> int:
    """`Candidate.defines_pasted_error` of a chunk that defines `defined`."""
    return 2 if defined & pasted & named_errors else 1 if defined & pasted else 0


def _rows_saying(texts: Iterable[str], message: str) -> list[str]:
    """The identifiers named by the first cell of each table row of `texts` whose last cell (its description)
    the message holds, or which holds the message; else of the row whose description shares the longest
    run of words with it, of `SHARED_RUN_WORDS` or more (a client prints the broker's error in its own
    words: "The consumer group is actively subscribed to the topic" is GROUP_SUBSCRIBED_TO_TOPIC's "…while
    the consumer group is actively subscribed to it"); else of the row whose description holds every word of
    the message but its values, and the fewest others (`extra_terms`): a broker prints its error with the
    values filled in ("Replication factor: 3 larger than available brokers: 1" is INVALID_REPLICATION_FACTOR's
    "Replication factor is below 1 or larger than the number of available brokers"), which breaks every run."""
    names: list[str] = []
    closest: list[str] = []
    covering: list[str] = []
    longest = SHARED_RUN_WORDS - 1
    fewest = math.inf
    for line in (line for text in texts for line in text.split("\n")):
        cells = row_cells(line)
        if len(cells) < 2:
            continue
        if says_message(cells[-1], message):
            names += extract_identifiers(cells[0])
        elif (run := shared_run(cells[-1], message)) > longest:
            longest, closest = run, list(extract_identifiers(cells[0]))
        elif (extra := extra_terms(cells[-1], message)) is not None and extra < fewest:
            fewest, covering = extra, list(extract_identifiers(cells[0]))
    return names or closest or covering


class _IdentifierLookup:
    """Identifier → the chunk rows that carry it, as one sorted int array and offsets (no per-row objects)."""

    def __init__(self, column: pa.ChunkedArray) -> None:
        lists = column.combine_chunks()
        encoded = pc.dictionary_encode(pc.list_flatten(lists))
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
        order = np.lexsort((parents, codes))
        self._rows = parents[order]
        counts = np.bincount(codes, minlength=len(encoded.dictionary))
        self._offsets = np.concatenate([[0], np.cumsum(counts)])
        self._code = {name: code for code, name in enumerate(encoded.dictionary.to_pylist())}
        self._names = sorted(self._code)
        self._chunks = max(len(lists), 1)
        self._key_parts = frozenset(part for name in self._names if "." in name for part in name.split("."))
        # Error names run together (`groupauthorizationfailed`), as a lower-case typist writes their classes.
        self._by_joined = {name.replace("_", ""): name for name in self._names if _ERROR_NAME.fullmatch(name)}
        self._joined = sorted(self._by_joined)
        # Error names of three or more words, under each of their words but the last left blank: the names one
        # word from a class's stem (`error_name_one_word_apart`).
        self._by_blanked: dict[tuple[str, ...], list[str]] = defaultdict(list)
        for name in self._by_joined.values():
            words = name.split("_")
            if len(words) >= MIN_WORDS_ONE_APART:
                for position in range(len(words) - 1):
                    self._by_blanked[_blanked(words, position)].append(name)

    def rows(self, identifier: str) -> np.ndarray:
        code = self._code.get(identifier)
        return self._rows[self._offsets[code] : self._offsets[code + 1]] if code is not None else self._rows[:0]

    def carried(self, identifier: str) -> bool:
        return identifier in self._code

    def shares_a_key_part(self, dotted: str) -> bool:
        """A part of `dotted` is a part of a dotted name the corpus carries (`default` of `default.goals`,
        as in `default.replication.factor`); "dc1.orders", a topic's name, has none."""
        return any(part in self._key_parts for part in dotted.split("."))

    def key_spelt_as(self, name: str) -> str | None:
        """The carried dotted key that an uncarried snake-case or dotted `name` ends with, read with dots
        for its underscores and hyphens, after one or more leading words (a prefix) for a dotted name: an
        environment variable (`KAFKA_CFG_LOG_RETENTION_HOURS` sets `log.retention.hours`), the key in capitals
        (`MAX_POLL_INTERVAL_MS`) or a framework's property (`spring.kafka.consumer.auto-offset-reset` sets
        `auto.offset.reset`); the longest such key."""
        if self.carried(name) or not ("_" in name or "." in name):
            return None
        words = re.split(r"[._-]", name)
        if len(words) < 3 or any(not w or not w.isalnum() for w in words):
            return None
        dotted = "." in name
        for start in range(1 if dotted else 0, len(words) - 1):
            key = ".".join(words[start:])
            # A dotted name is another product's only under a prefix of its own: `spring.kafka.consumer.`,
            # not the corpus's own `topic.creation.default.` (whose tail is no broker key there).
            foreign = not dotted or any(word not in self._key_parts for word in words[:start])
            if foreign and self.carried(key):
                return key
        return None

    def key_misspelt_as(self, name: str) -> str | None:
        """The carried dotted key, of those one slip (`slips`) away from an uncarried dotted `name`, that the
        most chunks carry: a key with a letter left out or two swapped."""
        if "." not in name or self.carried(name):
            return None
        found = [(len(self.rows(key)), key) for key in sorted(slips(name)) if self.carried(key)]
        return max(found)[1] if found else None

    def error_name(self, name: str) -> str | None:
        """The carried error name an exception class's `name` stands for: itself, or the one name with one
        more word (`GroupAuthorizationException` is `GROUP_AUTHORIZATION_FAILED`, `OutOfOrderSequenceException`
        is `OUT_OF_ORDER_SEQUENCE_NUMBER`)."""
        if self.carried(name):
            return name
        prefix = name + "_"
        one_more: list[str] = []
        for position in range(bisect.bisect_left(self._names, prefix), len(self._names)):
            other = self._names[position]
            if not other.startswith(prefix):
                break
            if "_" not in other[len(prefix) :]:
                one_more.append(other)
        return one_more[0] if len(one_more) == 1 else None

    def error_name_one_word_apart(self, name: str, written: frozenset[str] = frozenset()) -> str | None:
        """The one carried name that differs from an exception class's `name` (of `MIN_WORDS_ONE_APART` words or
        more) in one word, as a few of Kafka's classes are named: `RecordBatchTooLargeException` is
        `RECORD_LIST_TOO_LARGE`, `RecordTooLargeException` is `MESSAGE_TOO_LARGE`. Not in the last word, which
        says what went wrong (`DelegationTokenDisabledException` is no `DELEGATION_TOKEN_EXPIRED`); nor with fewer
        words, where one word is too much of the name (`SslAuthenticationException` is no
        `SASL_AUTHENTICATION_FAILED`). Of several that fit, the one whose own word is among the `written` tokens
        of the question: the class's message says what it is about ("RecordTooLargeException: The message is
        2097152 bytes …" is `MESSAGE_TOO_LARGE`, not `TELEMETRY_TOO_LARGE`)."""
        words = name.split("_")
        if len(words) < MIN_WORDS_ONE_APART:
            return None
        found = {
            (other, other.split("_")[position])
            for position in range(len(words) - 1)
            for other in self._by_blanked.get(_blanked(words, position), ())
        }
        if len(found) > 1:
            found = {(other, word) for other, word in found if set(tokenize(word)) & written}
        return found.pop()[0] if len(found) == 1 else None

    def error_words(self, joined: str) -> tuple[str, ...] | None:
        """The words that `joined`, an exception class's stem typed in lower case (`groupauthorization`), runs
        together, read from the carried error name it stands for as `error_name` reads one: all its words, or all
        but one more last word (`GROUP_AUTHORIZATION_FAILED`)."""
        found: list[tuple[str, ...]] = []
        for position in range(bisect.bisect_left(self._joined, joined), len(self._joined)):
            other = self._joined[position]
            if not other.startswith(joined):
                break
            words = tuple(self._by_joined[other].split("_"))
            for kept in (words, words[:-1]):
                if "".join(kept) == joined and kept not in found:
                    found.append(kept)
        return found[0] if len(found) == 1 else None

    def idf(self, identifier: str) -> float:
        carriers = len(self.rows(identifier))
        return _inverse_frequency(self._chunks, carriers) if carriers else 1.0

    def matches(self, wanted: set[str]) -> dict[int, frozenset[str]]:
        """Rows carrying any of `wanted`, each with the ones it carries."""
        held: dict[int, set[str]] = {}
        for identifier in wanted:
            for row in self.rows(identifier).tolist():
                held.setdefault(row, set()).add(identifier)
        return {row: frozenset(ids) for row, ids in held.items()}


def _blanked(words: Sequence[str], position: int) -> tuple[str, ...]:
    return (*words[:position], "", *words[position + 1 :])


@functools.lru_cache(maxsize=HEADING_CACHE)
def _heading_terms(heading: str) -> Counter[str]:
    """The tokens of a heading path, counted. Many candidates share a few headings, and tokenizing them
    anew was about half of the feature stage (~4 ms a question); callers only read the counts."""
    return Counter(tokenize(heading))


def _passage(record: dict, score: float) -> Passage:
    return Passage(
        chunk_id=record["chunk_id"],
        doc_id=record["doc_id"],
        title=record["title"],
        section_path=tuple(record["section_path"]),
        source_path=record["source_path"],
        text=record["text"],
        score=round(score, 6),
        url=record["url"] or "",
        identifiers=tuple(record["identifiers"]),
    )


def _top_rows(scores: np.ndarray, depth: int) -> list[int]:
    """Rows of the `depth` highest positive scores, best first (ties by row), without sorting the whole corpus."""
    if depth <= 0 or not len(scores):
        return []
    top = np.argpartition(-scores, depth - 1)[:depth] if depth < len(scores) else np.arange(len(scores))
    top = top[scores[top] > 0]
    return top[np.lexsort((top, -scores[top]))].tolist()


def _positions(chunks: pa.Table) -> np.ndarray:
    """Where each chunk starts in its document, as a share of the document's length."""
    ends = chunks.group_by("doc_id").aggregate([("end", "max")])
    length = dict(zip(ends.column("doc_id").to_pylist(), ends.column("end_max").to_pylist(), strict=True))
    starts = chunks.column("start").to_numpy().astype(np.float32)
    lengths = np.asarray([max(length[d], 1) for d in chunks.column("doc_id").to_pylist()], dtype=np.float32)
    return starts / lengths


def _share(weights: dict[str, float], carried: frozenset[str]) -> float:
    total = sum(weights.values())
    return sum(w for i, w in weights.items() if i in carried) / total if total else 0.0


def elapsed_ms(started: float) -> float:
    """Milliseconds since `started` (a `time.perf_counter()` reading), for the per-stage timings."""
    return round((time.perf_counter() - started) * 1000, 3)
