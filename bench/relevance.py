"""Relevance benchmark: nDCG@10, recall@5, recall@10 and recall@100 on BEIR-format
evaluation sets.

Each dataset goes through the product's own code, in a fresh, throw-away stack (see
:mod:`bench.runner`: a Milvus Lite server, an SQLite database, the real ingestion and
search services); the datasets are read by :mod:`bench.datasets` and the results
summarised and rendered by :mod:`bench.report`. This module is the command line.

A set whose folder holds ``edges.tsv`` (links between its documents) is ingested with
them, and measured in one more mode: ``hybrid`` is then the default hybrid request plus
the graph leg (``--graph-weight``, beside the encoder's dense and sparse weights, and
``--graph-scoring``, ``--graph-depth``, ``--graph-seeds``), ``hybrid_no_graph`` the default
hybrid request; both are in ``modes``, the graph settings in ``settings.graph``. Sets
without it run and report as before.

Usage (from the repository root)::

    python -m bench.relevance --dataset ../shared/datasets/en-limit-small
    python -m bench.relevance --all --json > results.jsonl      # one JSON object per line
    python -m bench.relevance --markdown results.jsonl           # tables for docs/benchmarks.md
    python -m bench.relevance --dataset ../shared/datasets/en-musique-train-100 \
        --graph-weight 0.2 --graph-scoring proximity --graph-seeds 10

Progress goes to stderr; results to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.datasets import DATASETS_ROOT, DEFAULT_SEED, dataset_folders, is_beir_folder
from bench.interrupt import INTERRUPTED, progress, unwind_on_signals
from bench.report import (
    DEFAULT_GRAPH_SCORING,
    DEFAULT_GRAPH_SEEDS,
    DEFAULT_GRAPH_WEIGHT,
    GRAPH_SCORINGS,
    MODES,
    SINGLE_LEG_MODES,
    dataset_result,
    read_results,
    render_markdown,
    render_text,
)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.relevance",
        description="Relevance (nDCG@10, R@5, R@10, R@100) of hsearch's search modes on "
        "BEIR-format datasets, through the real ingestion and search code.",
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--dataset", type=Path, action="append", metavar="DIR",
        help="a BEIR folder (corpus.jsonl, queries.jsonl, qrels.tsv); repeatable",
    )  # fmt: skip
    what.add_argument("--all", action="store_true", help=f"every folder under {DATASETS_ROOT}")
    what.add_argument(
        "--markdown", metavar="JSONL",
        help="render earlier --json output (a file, or - for stdin) as Markdown tables; "
        "runs nothing",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="one JSON object per dataset")
    parser.add_argument(
        "--encoder", choices=["offline", "bge-m3", "fake"], default="offline",
        help="offline (MiniLM + BM25, the default), bge-m3 (needs --bge-m3-path) or fake "
        "(hashing encoder: a plumbing smoke test, meaningless numbers)",
    )  # fmt: skip
    parser.add_argument("--bge-m3-path", type=Path, help="directory holding BGE-M3 weights")
    parser.add_argument(
        "--max-queries", type=int, metavar="N",
        help="evaluate a seeded random sample of N queries (default: all)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="sampling seed")
    parser.add_argument(
        "--modes", default=",".join(MODES),
        help=f"comma-separated subset of {','.join(MODES)} (default: all three)",
    )  # fmt: skip
    parser.add_argument(
        "--fusion", choices=("adaptive", "rrf", "score", "sum"),
        help="fusion method for hybrid (default: the encoder's, or HSEARCH_SEARCH__FUSION)",
    )  # fmt: skip
    parser.add_argument(
        "--query-prefix", metavar="P", help="only queries whose id starts with P (e.g. en:)"
    )
    parser.add_argument(
        "--by-prefix", action="store_true",
        help="also report metrics per query-id prefix (the part before ':', e.g. languages)",
    )  # fmt: skip
    parser.add_argument(
        "--no-flush", dest="flush", action="store_false",
        help="search right after ingesting, without sealing Milvus' growing segments first",
    )  # fmt: skip
    parser.add_argument(
        "--save-legs", type=Path, metavar="JSONL",
        help="append each query's dense and sparse candidate lists (from the semantic and "
        "keyword modes) and the keyword leg's coverage of the query to JSONL, for python "
        "-m bench.fusion_replay; turns the coverage reading on (a hybrid mode of the same "
        "run reads it too; read where the fusion is adaptive) unless "
        "HSEARCH_SEARCH__KEYWORD_COVERAGE is set",
    )  # fmt: skip
    add_graph_arguments(parser)
    parser.add_argument("--keep", action="store_true", help="keep the temporary data directory")
    parser.add_argument("--verbose", action="store_true", help="hsearch's own INFO logs")
    args = parser.parse_args(argv)
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    unknown = set(modes) - set(MODES)
    if unknown or not modes:
        parser.error(f"--modes: unknown {sorted(unknown)}; choose from {','.join(MODES)}")
    args.modes = modes
    if args.save_legs is not None and not set(SINGLE_LEG_MODES) <= set(modes):
        parser.error("--save-legs needs the semantic and keyword modes (their hits are the legs)")
    if args.encoder == "bge-m3" and args.bge_m3_path is None:
        parser.error("--encoder bge-m3 needs --bge-m3-path")
    if args.max_queries is not None and args.max_queries < 1:
        parser.error("--max-queries must be >= 1")
    if not 0 < args.graph_weight <= 1:
        parser.error("--graph-weight must be in (0, 1]")
    if args.graph_seeds < 1:
        parser.error("--graph-seeds must be >= 1")
    return args


def add_graph_arguments(parser: argparse.ArgumentParser) -> None:
    """The graph leg's options of ``hybrid`` on a set with ``edges.tsv``."""
    graph = parser.add_argument_group(
        "graph leg (sets with edges.tsv)",
        "hybrid is the default hybrid request plus the graph leg; hybrid_no_graph the "
        "default request. The depth left unset is the server's default.",
    )
    graph.add_argument(
        "--graph-weight", type=float, default=DEFAULT_GRAPH_WEIGHT, metavar="W",
        help="the graph leg's weight, beside the default dense and sparse weights "
        f"(default {DEFAULT_GRAPH_WEIGHT}, measured with python -m bench.graph_sweep)",
    )  # fmt: skip
    graph.add_argument(
        "--graph-scoring", choices=GRAPH_SCORINGS, default=DEFAULT_GRAPH_SCORING,
        help=f"how the leg ranks (default {DEFAULT_GRAPH_SCORING})",
    )  # fmt: skip
    graph.add_argument(
        "--graph-depth", type=int, choices=range(1, 4), metavar="1..3",
        help="links followed from the seeds (proximity)",
    )  # fmt: skip
    graph.add_argument(
        "--graph-seeds", type=int, metavar="N", default=DEFAULT_GRAPH_SEEDS,
        help=f"the best hits the leg starts from (default {DEFAULT_GRAPH_SEEDS})",
    )  # fmt: skip


def prepare_process(*, verbose: bool) -> None:
    """What a run needs before it imports the code it measures: no model hub, logs on
    stderr, signals that unwind (also ``bench.graph_sweep``'s)."""
    # Nothing may reach a model hub: the encoders load from disk.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )  # fmt: skip
    logging.getLogger("hsearch").setLevel(logging.INFO if verbose else logging.WARNING)
    # Ctrl-C and SIGTERM unwind through the finally blocks that stop the Milvus server
    # (SIGINT explicitly: a shell starting us in the background would have ignored it).
    unwind_on_signals()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.markdown:
        render_markdown(read_results(args.markdown), sys.stdout)
        return 0

    prepare_process(verbose=args.verbose)

    # The runner imports every hsearch module it uses, here, up front: the process then
    # runs one consistent version of the code even if the working tree changes during a
    # long run (and --markdown and --help never pay for the imports).
    from bench.runner import GraphOptions, Options, run_dataset  # noqa: PLC0415

    paths = dataset_folders(DATASETS_ROOT) if args.all else list(args.dataset)
    for path in paths:
        if not is_beir_folder(path):
            progress(f"{path}: not a BEIR folder (corpus.jsonl, queries.jsonl, qrels.tsv)")
            return 2
    options = Options(
        encoder=args.encoder,
        bge_m3_path=args.bge_m3_path,
        max_queries=args.max_queries,
        seed=args.seed,
        modes=args.modes,
        query_prefix=args.query_prefix,
        by_prefix=args.by_prefix,
        keep=args.keep,
        flush=args.flush,
        fusion=args.fusion,
        graph=GraphOptions(
            weight=args.graph_weight,
            scoring=args.graph_scoring,
            depth=args.graph_depth,
            seeds=args.graph_seeds,
        ),
    )
    try:
        with contextlib.ExitStack() as stack:
            if args.save_legs is not None:
                options.save_legs = stack.enter_context(args.save_legs.open("a", encoding="utf-8"))
            for path in paths:
                result = dataset_result(run_dataset(path, options))
                progress(f"{result['dataset']}: done in {result['total_seconds']} s")
                if args.json:
                    print(json.dumps(result, ensure_ascii=False), flush=True)
                else:
                    render_text(result, sys.stdout)
    except KeyboardInterrupt:
        progress("interrupted")
        return INTERRUPTED
    return 0


if __name__ == "__main__":
    sys.exit(main())
