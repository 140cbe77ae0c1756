"""Loading: every format becomes titled sections; a file that cannot be loaded says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.documents import FAQ_TITLE, document_id, iter_source_files, load_document
from rag.errors import LoaderError

SEEDS = Path(__file__).resolve().parents[1] / "seeds"


def _seed(prefix: str):
    path = next(SEEDS.glob(f"{prefix}_*.txt"))
    return load_document(path.read_bytes(), path.name)


def _section(document, *headings: str):
    return next(s for s in document.sections if s.headings == headings)


def _all_text(document) -> str:
    return "\n".join(s.text for s in document.sections)


# ------------------------------------------------------------------------------------------ formats


def test_plain_text_headings_become_section_paths():
    raw = (
        "Broker tuning guide\n\n"
        "Replication\n\n"
        "Followers fetch from the leader. Set num.replica.fetchers to 4 on busy brokers.\n\n"
        "Log retention\n\n"
        "Segments older than log.retention.hours are deleted.\n"
    )
    document = load_document(raw.encode(), "guides/broker-tuning.txt")
    assert document.format == "text"
    assert document.title == "Broker tuning guide"
    assert document.source_path == "guides/broker-tuning.txt"
    assert document.doc_id == document_id("guides/broker-tuning.txt")
    assert [s.headings for s in document.sections] == [("Replication",), ("Log retention",)]
    assert _section(document, "Replication").text == (
        "Followers fetch from the leader. Set num.replica.fetchers to 4 on busy brokers."
    )


def test_plain_text_faq_questions_head_their_answers():
    questions = [f"How do I tune setting number {n}?" for n in range(1, 7)]
    raw = "Producer FAQ\n\n" + "\n\n".join(f"{q}\n\nAnswer {n}: set it to {n}." for n, q in enumerate(questions, 1))
    document = load_document(raw.encode(), "faq.txt")
    # A FAQ export starts with its first category, not a title. Its questions are filed under the page: an
    # export drops some category lines, so a category's span is unknown.
    assert document.title == FAQ_TITLE
    assert [s.headings for s in document.sections] == [(q,) for q in questions]
    assert [s.text for s in document.sections] == [f"Answer {n}: set it to {n}." for n in range(1, 7)]


def test_wrapped_sentence_is_not_taken_for_a_heading():
    raw = "Notes\n\nThe consumer commits offsets to the\ngroup coordinator after every poll.\n"
    document = load_document(raw.encode(), "notes.txt")
    assert [s.headings for s in document.sections] == [()]
    assert "to the\ngroup coordinator" in document.sections[0].text


def test_markdown_headings_nest_and_fences_stay_whole():
    raw = (
        "---\nlayout: page\n---\n"
        "# Producer tuning\n\nIntro paragraph.\n\n"
        "## Batching\n\nUse `linger.ms` to batch.\n\n"
        "```\n# not a heading inside a fence\nlinger.ms=5\n```\n\n"
        "### Compression\n\nSet compression.type=lz4.\n\n"
        "## Acks\n\nacks=all waits for the ISR.\n"
    )
    document = load_document(raw.encode(), "producer.md")
    assert document.format == "markdown"
    assert document.title == "Producer tuning"
    assert [s.headings for s in document.sections] == [(), ("Batching",), ("Batching", "Compression"), ("Acks",)]
    assert _section(document, "Batching").text == (
        "Use `linger.ms` to batch.\n\n```\n# not a heading inside a fence\nlinger.ms=5\n```"
    )
    assert "layout: page" not in _all_text(document)


def test_html_goes_through_parse_html_with_anchors_and_without_chrome():
    raw = (
        "<!doctype html><html><head><title>Tab title</title></head><body>"
        "<nav>Home | Docs | Download</nav>"
        "<h1>Consumer guide</h1><p>Intro text about consumers.</p>"
        '<h2 id="rebalance">Rebalancing</h2><p>Set <code>max.poll.interval.ms</code> higher.</p>'
        "<h3>Static membership</h3><p>Use group.instance.id.</p>"
        "<pre>bin/kafka-consumer-groups.sh --describe</pre>"
        "<footer>Copyright 2024</footer></body></html>"
    )
    document = load_document(raw.encode(), "docs/consumer.html")
    assert document.format == "html"
    assert document.title == "Consumer guide"
    assert [s.headings for s in document.sections] == [(), ("Rebalancing",), ("Rebalancing", "Static membership")]
    assert _section(document, "Rebalancing").anchor == "rebalance"
    assert _section(document, "Rebalancing").text == "Set `max.poll.interval.ms` higher."
    assert "```\nbin/kafka-consumer-groups.sh --describe\n```" in _all_text(document)
    assert "Home | Docs" not in _all_text(document)
    assert "Copyright" not in _all_text(document)


def test_html_in_a_txt_file_is_detected_by_content():
    raw = "<!DOCTYPE html><html><body><h1>Page</h1><p>Body text here.</p></body></html>"
    document = load_document(raw.encode(), "saved-page.txt")
    assert document.format == "html"
    assert document.title == "Page"


ERROR_RECORD = {
    "id": "kafka/request-timed-out",
    "signature": "org.apache.kafka.common.errors.TimeoutException: Expiring 3 record(s) for orders-0",
    "signature_zh": "超时异常",
    "error_code": 7,
    "category": "network",
    "root_cause": "The batch stayed in the accumulator longer than delivery.timeout.ms.",
    "root_cause_zh": "批次等待时间过长",
    "versions": [{"version": "kafka 3.6.0"}],
    "workarounds": [{"how": "Increase delivery.timeout.ms", "success_rate": 0.8}],
    "dead_ends": [{"action": "Restarting the broker", "why_fails": "the producer backlog returns", "fail_rate": 0.9}],
    "official_doc_url": "https://kafka.apache.org/documentation/#producerconfigs",
}


def test_error_knowledge_json_becomes_readable_sections_with_metadata():
    document = load_document(json.dumps(ERROR_RECORD).encode(), "errors/timeout.json")
    assert document.format == "json"
    assert document.title == "TimeoutException: Expiring 3 record(s) for orders-0"
    assert [s.headings for s in document.sections] == [
        ("TimeoutException",),
        ("TimeoutException", "Root cause"),
        ("TimeoutException", "Workarounds"),
        ("TimeoutException", "Dead ends (what does not help)"),
    ]
    overview = document.sections[0].text
    assert "Error: `TimeoutException`" in overview
    assert "Error code: 7" in overview
    assert "Seen in: kafka 3.6.0" in overview
    assert _section(document, "TimeoutException", "Root cause").text == ERROR_RECORD["root_cause"]
    assert _section(document, "TimeoutException", "Workarounds").text == (
        "- Increase delivery.timeout.ms (reported to works 80% of the time)"
    )
    assert _section(document, "TimeoutException", "Dead ends (what does not help)").text == (
        "- Restarting the broker the producer backlog returns (reported to fails 90% of the time)"
    )
    record = document.metadata["records"][0]
    assert record["error_name"] == "TimeoutException"
    assert record["error_code"] == 7
    assert record["id"] == "kafka/request-timed-out"
    assert document.url == "https://kafka.apache.org/documentation/#producerconfigs"
    assert "超时" not in _all_text(document)  # translated fields stay out of the text


def test_json_in_a_txt_file_is_detected_by_content():
    document = load_document(json.dumps(ERROR_RECORD, indent=2).encode(), "record.txt")
    assert document.format == "json"
    assert document.metadata["records"][0]["error_name"] == "TimeoutException"


def test_generic_json_records_become_one_section_each():
    records = [{"title": "Acks", "body": "acks=all waits for the ISR"}, {"name": "Retries", "body": "retries=5"}]
    document = load_document(json.dumps(records).encode(), "notes.json")
    assert [s.headings for s in document.sections] == [("Acks",), ("Retries",)]
    assert document.sections[0].text == "title: Acks\nbody: acks=all waits for the ISR"


def _minimal_pdf(lines: list[str], title: str) -> bytes:
    """A one-page PDF written by hand (text operators, real xref table) that any PDF reader parses."""
    content = "BT /F1 12 Tf 72 720 Td 14 TL " + " ".join(f"({line}) Tj T*" for line in lines) + " ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        "/Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(content)} >>\nstream\n{content}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Title ({title}) >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info {len(objects)} 0 R >>\n".encode()
    out += f"startxref\n{xref}\n%%EOF\n".encode()
    return out


def test_pdf_pages_become_sections():
    pdf = _minimal_pdf(["Broker tuning notes", "Set num.replica.fetchers to 4 for faster replication."], "Broker notes")
    document = load_document(pdf, "notes.pdf")
    assert document.format == "pdf"
    assert document.title == "Broker notes"
    assert [s.headings for s in document.sections] == [("Page 1",)]
    assert document.sections[0].text == "Broker tuning notes\nSet num.replica.fetchers to 4 for faster replication."


# ------------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("data", "name", "reason"),
    [
        (b"", "empty.txt", "empty file"),
        (b"  \n\n\t ", "blank.md", "empty file"),
        (b"Kafka\x00\x01\x02 broker \x00 log", "dump.txt", "binary file (NUL bytes)"),
        (b"\x01\x02\x03\x04\x05\x06\x07\x08 mostly control characters", "ctl.txt", "binary file (control characters)"),
        (
            "Caf\xe9 r\xe9sum\xe9 of the broker config\nmore".encode("latin-1"),
            "latin1.txt",
            "not valid UTF-8 text (undecodable bytes)",
        ),
        (b"some text", "report.docx", "unsupported file type '.docx'"),
        (b"some text", "Makefile", "unsupported file type 'no extension'"),
        (b"[1, 2, 3]", "numbers.json", "JSON is not an object or a list of objects"),
        (b"Only a title line", "title-only.txt", "no text content after cleaning"),
    ],
)
def test_unloadable_files_raise_loader_error_with_reason(data, name, reason):
    with pytest.raises(LoaderError) as caught:
        load_document(data, name)
    assert caught.value.reason == reason
    assert caught.value.path == name
    assert str(caught.value) == f"{name}: {reason}"


@pytest.mark.parametrize("name", ["broken.json", "broken.txt"])
def test_malformed_json_reason_names_the_position(name):
    with pytest.raises(LoaderError) as caught:
        load_document(b'{\n  "signature": "X",\n  "root_cause": oops\n}', name)
    assert caught.value.reason == "malformed JSON (line 3, column 17: Expecting value)"


def test_unreadable_pdf_is_a_loader_error():
    with pytest.raises(LoaderError) as caught:
        load_document(b"%PDF-1.4 this is not really a pdf", "fake.pdf")
    assert caught.value.reason.startswith("unreadable PDF (")


def test_iter_source_files_is_sorted_relative_and_skips_hidden(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / ".git").mkdir()
    for name in ("b/two.md", "a.txt", ".hidden.txt", ".git/config"):
        (tmp_path / name).write_text("x")
    assert [rel for _, rel in iter_source_files(tmp_path)] == ["a.txt", "b/two.md"]
    assert list(iter_source_files(tmp_path / "a.txt")) == [(tmp_path / "a.txt", "a.txt")]


# ------------------------------------------------------------------------------------------ the seeds


def test_seed_titles():
    assert _seed("000").title == "Kafka Error INVALID_RECORD_STATE"
    assert _seed("001").title == "KIP-467: Augment ProduceResponse error messaging for specific culprit records"
    assert _seed("002").title == "Enter the Matrix: A practical guide to exactly-once semantics in Kafka Streams"
    assert _seed("003").title == FAQ_TITLE
    assert _seed("004").title == (
        "InvalidCommitOffsetSyncException: Offset commit failed due to synchronization conflict with the group "
        "coordinator"
    )


def test_seed_formats_and_ids():
    formats = {p.name[:3]: load_document(p.read_bytes(), p.name).format for p in sorted(SEEDS.glob("*.txt"))}
    assert formats == {"000": "text", "001": "text", "002": "text", "003": "text", "004": "json"}
    assert _seed("000").doc_id == document_id("000_0424dccc37dbf1fb.txt")


def test_seed_000_sections():
    document = _seed("000")
    assert [s.headings[-1] for s in document.sections] == [
        "Error code 121 · Non-retriable Producer",
        "Common Causes",
        "Solutions",
        "Diagnostic Commands",
        "Related APIs",
    ]
    assert _section(document, "Related APIs").text == "This error can be returned by: ShareAcknowledge"
    assert _section(document, "Diagnostic Commands").text.startswith(
        "# Describe share group state and members\nkafka-share-groups.sh --bootstrap-server localhost:9092"
    )


def test_seed_003_faq_questions_are_heading_paths_with_answers_in_the_body():
    document = _seed("003")
    idempotent = _section(document, "How do I enable idempotent writes?")
    assert idempotent.text == (
        "You can set producer config `enable.idempotence=true` to enable idempotent writes on a producer."
    )
    difference = _section(
        document, 'What is the difference between an "idempotent producer" and a "transactional producer"?'
    )
    assert difference.text.startswith("An idempotent producer guarantees that single messages don't end up")
    zookeeper = _section(
        document, "I had a 3 Zookeeper instance setup and one instance just failed. How should I recover?"
    )
    # The export dropped the category lines between "Exactly-Once Processing" and "Accessing record metadata
    # via ProcessorContext": a consumer question is not filed under exactly-once processing.
    consumer = next(s for s in document.sections if s.headings[-1:] == ("Why does my consumer never get any data?",))
    assert consumer.headings == ("Why does my consumer never get any data?",)
    assert zookeeper.text.startswith("Restart the failed instance with the same configuration")
    questions = [s.headings[-1] for s in document.sections if s.headings and s.headings[-1].endswith("?")]
    assert len(questions) >= 50


def test_seed_004_error_record():
    document = _seed("004")
    assert document.format == "json"
    assert [s.headings for s in document.sections] == [
        ("InvalidCommitOffsetSyncException",),
        ("InvalidCommitOffsetSyncException", "Root cause"),
        ("InvalidCommitOffsetSyncException", "Workarounds"),
        ("InvalidCommitOffsetSyncException", "Dead ends (what does not help)"),
    ]
    assert _section(document, "InvalidCommitOffsetSyncException", "Root cause").text == (
        "The consumer attempted to commit offsets while the group coordinator was in the middle of a rebalance "
        "or epoch change, causing a synchronization mismatch."
    )
    assert "enable.auto.commit=false" in _section(document, "InvalidCommitOffsetSyncException", "Workarounds").text
    record = document.metadata["records"][0]
    assert record["error_name"] == "InvalidCommitOffsetSyncException"
    assert record["category"] == "runtime_error"
    assert record["versions"] == ["kafka 3.4.0", "kafka 3.5.0", "kafka 3.6.0"]
    assert document.url == "https://kafka.apache.org/documentation/#upgrade_340"
    assert "偏移" not in _all_text(document)
