"""Build the half indexes that every fit and check downstream of the embedding adapter reads (`--half-indexes`).

    python -m evals.half_indexes --set evals/golden.jsonl seeds <seeds index> \\
        --set evals/golden_kafka_docs.jsonl ../shared/corpora/kafka-docs <docs index> --out DIR

The shipped adapter was fitted on every tuning question, so a served index's cosines are in-sample for them.
This fits the two adapters of `fit_embedding --check`'s recipe (each without one half of the human tuning
questions, by a hash of the id), merges each into a model folder of its own, and ingests every set's corpus
once with each, into `DIR/<index name>-half0` and `-half1`. Its last line is the `--half-indexes` argument list
in the order the fits take it. A fresh machine has none of this: without the command, a hand-built half index
merged with the shipped adapter instead of its half's measures nothing and says nothing of it. The `--set`
indexes are read for their chunks, synthetic queries and the parsed questions (as `fit_embedding` reads them).
Test-part ids are never read. About 35 minutes on two cores: two adapter fits, then four ingests.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from evals.fit_embedding import collect, half_adapters
from evals.golden import add_set_argument
from rag import IngestConfig, Settings, model_with_adapter, run_ingest


def build_half_indexes(
    sets: Sequence[tuple[Path, Path, Path]], adapters: Sequence[Path], out: Path, work: Path
) -> list[Path]:
    """Each set's corpus ingested with the base model plus each of the two `adapters`; the indexes in the
    order `--half-indexes` takes them (per set: the one without half 0's questions, then half 1's)."""
    models = [model_with_adapter(adapter, work) for adapter in adapters]
    built = []
    for _, corpus, index in sets:
        for number, model in enumerate(models):
            target = out / f"{index.name}-half{number}"
            settings = Settings.from_env(index_dir=target, model=str(model))
            report = run_ingest(
                [corpus],
                target,
                IngestConfig.from_settings(settings),
                flat_index_max=settings.flat_index_max,
                keep_versions=settings.keep_versions,
            )
            print(f"half indexes: {target}: {report.chunks} chunks with {model.name}", flush=True)
            built.append(target)
    return built


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_set_argument(parser)
    parser.add_argument("--out", type=Path, required=True, help="folder for the half indexes")
    parser.add_argument(
        "--work", type=Path, default=Path("/tmp/kafka-rag-half-indexes"), help="scratch folder: adapters, models"
    )
    args = parser.parse_args(argv)
    sets = [tuple(s) for s in args.set]
    args.work.mkdir(parents=True, exist_ok=True)
    adapters = half_adapters(collect(sets), args.work)
    built = build_half_indexes(sets, adapters, args.out, args.work)
    print("--half-indexes " + " ".join(str(path) for path in built))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
