"""`syndiffix FILE.csv --columns name:x ...`: the reference SynDiffix command line over CSV files.

Flags follow the reference implementation's README (single-dash short forms included), plus ``--salt``
(or the ``SYNDIFFIX_SALT`` environment variable), ``--ml-target`` and ``--derive``. The synthetic CSV goes to
``--output`` or stdout; progress goes to stderr. Bad input (a column spec, a missing file, an unknown
column, a value that does not parse as its declared type) is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from syndiffix_core.columns import ColumnKind
from syndiffix_core.csv_input import read_declared
from syndiffix_core.csv_output import write_csv
from syndiffix_core.derive import DeriveError
from syndiffix_core.errors import SyndiffixError
from syndiffix_core.params import (
    AnonymizationParams,
    BucketizationParams,
    ClusteringParams,
    FlatteningInterval,
    SuppressionParams,
)
from syndiffix_core.synthesizer import synthesize

SALT_VARIABLE = "SYNDIFFIX_SALT"
KINDS = {
    "b": ColumnKind.BOOLEAN,
    "i": ColumnKind.INTEGER,
    "r": ColumnKind.REAL,
    "t": ColumnKind.TIMESTAMP,
    "s": ColumnKind.STRING,
}
TRUE_WORDS = {"true", "t", "1", "yes", "y"}
FALSE_WORDS = {"false", "f", "0", "no", "n"}


class UsageError(Exception):
    """Bad command-line input: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UsageError(message)


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    defaults_lcf, defaults_bucket = SuppressionParams(), BucketizationParams()
    defaults_cluster = ClusteringParams()
    parser = _Parser(
        prog="syndiffix",
        description="Anonymized synthetic copy of a CSV file (SynDiffix).",
        epilog=f"The salt (a secret that keeps the noise sticky) comes from --salt or ${SALT_VARIABLE}.",
    )
    parser.add_argument("file", metavar="FILE.csv", help="input CSV file with a header row")
    parser.add_argument(
        "--columns",
        nargs="+",
        metavar="NAME:X",
        help="columns to synthesize with their type X: b boolean, i integer, r real, t timestamp, "
        "s string (default: every non-AID column, types detected)",
    )
    parser.add_argument("--output", "-o", type=Path, help="output CSV path (default: stdout)")
    parser.add_argument("--aidcolumns", nargs="+", default=[], metavar="NAME", help="entity ID columns")
    parser.add_argument("--salt", help=f"secret salt (default: ${SALT_VARIABLE})")
    parser.add_argument("--verbose", action="store_true", help="print parameters, clusters and timings")
    parser.add_argument(
        "--workers",
        type=_positive_int,
        metavar="N",
        help="processes materializing clusters side by side (default: the CPUs available; same output)",
    )
    parser.add_argument(
        "--lcf-low-threshold",
        "-lcf",
        type=int,
        default=defaults_lcf.low_threshold,
        help="low threshold of the low-count filter, in entities (default: %(default)s)",
    )
    parser.add_argument(
        "--range-low-threshold",
        "-range",
        type=int,
        default=defaults_bucket.range_low_threshold,
        help="low threshold for splitting a range bucket (default: %(default)s)",
    )
    parser.add_argument(
        "--singularity-low-threshold",
        "-sing",
        type=int,
        default=defaults_bucket.singularity_low_threshold,
        help="low threshold for a singularity (one-value) bucket (default: %(default)s)",
    )
    parser.add_argument(
        "--threshold-sd",
        "-thresh_sd",
        type=float,
        default=defaults_lcf.layer_sd,
        help="SD of the noisy threshold of low-count, range and singularity decisions (default: %(default)s)",
    )
    parser.add_argument(
        "--outlier-count",
        type=int,
        nargs=2,
        metavar=("LOWER", "UPPER"),
        default=(FlatteningInterval().lower, FlatteningInterval().upper),
        help="interval of the number of outlier entities flattened (default: %(default)s)",
    )
    parser.add_argument(
        "--top-count",
        type=int,
        nargs=2,
        metavar=("LOWER", "UPPER"),
        default=(FlatteningInterval().lower, FlatteningInterval().upper),
        help="interval of the number of top entities the outliers are flattened to (default: %(default)s)",
    )
    parser.add_argument(
        "--layer-noise-sd",
        "-noise_sd",
        type=float,
        default=AnonymizationParams().layer_noise_sd,
        help="count SD of each noise layer (default: %(default)s)",
    )
    parser.add_argument("--no-clustering", action="store_true", help="synthesize all columns as one cluster")
    parser.add_argument("--clustering-maincolumn", metavar="NAME", help="column kept in every cluster")
    parser.add_argument(
        "--clustering-mainfeatures", nargs="+", metavar="NAME", help="best features of the main column"
    )
    parser.add_argument(
        "--clustering-samplesize",
        type=int,
        default=defaults_cluster.sample_size,
        help="rows sampled to measure column dependence (default: %(default)s)",
    )
    parser.add_argument(
        "--clustering-maxweight",
        type=float,
        default=defaults_cluster.max_weight,
        help="maximum cluster weight; the default is about 4-7 columns, depending on their entropy "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--clustering-thresh-merge",
        type=float,
        default=defaults_cluster.merge_threshold,
        help="dependence needed to join a cluster or to add a stitch column (default: %(default)s)",
    )
    parser.add_argument(
        "--ml-target", metavar="NAME", help="ML target column: clusters from its best features (scikit-learn)"
    )
    parser.add_argument(
        "--derive",
        action="append",
        default=[],
        metavar="NAME=EXPRESSION",
        help="compute column NAME from other synthetic columns instead of synthesizing it, with a "
        "SQL-like expression, e.g. 'sched_dep_time=hour * 100 + minute' (repeatable)",
    )
    parser.add_argument(
        "--precision-limit-row-fraction",
        type=int,
        default=defaults_bucket.precision_limit_row_fraction,
        help="from the depth threshold on, a tree node splits only if it holds at least "
        "table rows / this (default: %(default)s)",
    )
    parser.add_argument(
        "--precision-limit-depth-threshold",
        type=int,
        default=defaults_bucket.precision_limit_depth_threshold,
        help="tree depth below which the row-fraction check is not applied (default: %(default)s)",
    )
    return parser


def parse_derive_specs(specs: Sequence[str]) -> dict[str, str]:
    rules: dict[str, str] = {}
    for spec in specs:
        name, separator, expression = spec.partition("=")
        name = name.strip()
        if not separator or not name or not expression.strip():
            raise UsageError(
                f"bad --derive {spec!r}: expected NAME=EXPRESSION, e.g. 'total=price * quantity'"
            )
        if name in rules:
            raise UsageError(f"column {name!r} is derived twice in --derive")
        rules[name] = expression
    return rules


def parse_column_specs(specs: Sequence[str]) -> dict[str, ColumnKind]:
    kinds: dict[str, ColumnKind] = {}
    for spec in specs:
        name, separator, code = spec.rpartition(":")
        if not separator or not name or code not in KINDS:
            raise UsageError(f"bad column spec {spec!r}: expected NAME:X with X one of b, i, r, t, s")
        if name in kinds:
            raise UsageError(f"column {name!r} is listed twice in --columns")
        kinds[name] = KINDS[code]
    return kinds


def read_table(path: Path, kinds: dict[str, ColumnKind] | None, aid_columns: Sequence[str]) -> pd.DataFrame:
    """The CSV with the selected columns parsed as their declared kinds (empty field = null)."""
    if not path.is_file():
        raise UsageError(f"input file not found: {path}")
    header = _read_csv(path, nrows=0).columns
    wanted = list(kinds) if kinds is not None else [c for c in header if c not in aid_columns]
    unknown = [c for c in [*wanted, *aid_columns] if c not in header]
    if unknown:
        raise UsageError(f"{path}: no column {unknown[0]!r} (columns: {', '.join(map(str, header))})")
    overlap = [c for c in aid_columns if c in wanted]
    if overlap:
        raise UsageError(f"column {overlap[0]!r} is both an AID column and a synthesized column")
    used = [*aid_columns, *wanted]
    raw = None
    if kinds is not None:
        # Declared numbers and strings straight from a parser: arrow's (multi-threaded), else pandas'
        # C parser, with the same dtypes and values; any value they reject sends the whole file through
        # the text path, which names the bad value.
        declared = {**{c: str for c in aid_columns}, **{n: _PARSER_DTYPES.get(kinds[n], str) for n in wanted}}
        raw = read_declared(path, declared)
        if raw is None:
            try:
                raw = _read_csv(path, usecols=used, dtype=declared)
            except (ValueError, TypeError, OverflowError):
                raw = None
    parsed_by_reader = raw is not None
    if raw is None:
        raw = _read_csv(path, usecols=used, dtype=str)
    table = {c: raw[c] for c in aid_columns}
    for name in wanted:
        if kinds is None:
            table[name] = _detect(raw[name])
        elif parsed_by_reader and kinds[name] in _PARSER_DTYPES:
            table[name] = raw[name]
        else:
            table[name] = _parse(raw[name], kinds[name])
    return pd.DataFrame(table)


# Kinds the CSV parser reads directly with the same result as _parse.
_PARSER_DTYPES = {ColumnKind.REAL: "float64", ColumnKind.INTEGER: "Int64", ColumnKind.STRING: "string"}


def _read_csv(path: Path, **options) -> pd.DataFrame:
    try:
        return pd.read_csv(path, keep_default_na=False, na_values=[""], **options)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {path} as CSV: {str(error).strip().splitlines()[0]}") from error


def _parse(text: pd.Series, kind: ColumnKind) -> pd.Series:
    present = text.notna()
    if kind is ColumnKind.STRING:
        return text.astype("string")
    if kind is ColumnKind.BOOLEAN:
        lowered = text.str.strip().str.lower()
        parsed = pd.Series(pd.NA, index=text.index, dtype="boolean")
        parsed[lowered.isin(TRUE_WORDS)] = True
        parsed[lowered.isin(FALSE_WORDS)] = False
        _fail_on(text, present & parsed.isna(), "boolean")
        return parsed
    if kind is ColumnKind.TIMESTAMP:
        parsed = pd.to_datetime(text, errors="coerce", format="mixed")
        _fail_on(text, present & parsed.isna(), "timestamp")
        return parsed
    numbers = pd.to_numeric(text.str.strip(), errors="coerce")
    _fail_on(text, present & numbers.isna(), "number")
    if kind is ColumnKind.REAL:
        return numbers.astype("float64")
    _fail_on(text, present & (numbers != numbers.round()), "integer")
    return numbers.astype("Int64")


def _detect(text: pd.Series) -> pd.Series:
    """Parse a column without a declared kind: the narrowest kind every value parses as."""
    for kind in (ColumnKind.INTEGER, ColumnKind.REAL, ColumnKind.BOOLEAN, ColumnKind.TIMESTAMP):
        try:
            return _parse(text, kind)
        except UsageError:
            continue
    return text.astype("string")


def _fail_on(text: pd.Series, bad: pd.Series, what: str) -> None:
    if bad.any():
        row = int(bad.to_numpy().argmax())
        raise UsageError(
            f"column {text.name!r}: value {text.iloc[row]!r} in data row {row + 1} is not "
            f"{'an' if what[0] in 'aeiou' else 'a'} {what}"
        )


def parameters(args: argparse.Namespace) -> tuple[AnonymizationParams, BucketizationParams, ClusteringParams]:
    try:
        anonymization = AnonymizationParams(
            low_count_params=SuppressionParams(
                low_threshold=args.lcf_low_threshold, layer_sd=args.threshold_sd
            ),
            outlier_count=FlatteningInterval(*args.outlier_count),
            top_count=FlatteningInterval(*args.top_count),
            layer_noise_sd=args.layer_noise_sd,
        )
        bucketization = BucketizationParams(
            singularity_low_threshold=args.singularity_low_threshold,
            range_low_threshold=args.range_low_threshold,
            precision_limit_row_fraction=args.precision_limit_row_fraction,
            precision_limit_depth_threshold=args.precision_limit_depth_threshold,
        )
        clustering = ClusteringParams(
            enabled=not args.no_clustering,
            sample_size=args.clustering_samplesize,
            max_weight=args.clustering_maxweight,
            merge_threshold=args.clustering_thresh_merge,
            main_column=args.clustering_maincolumn,
            main_features=tuple(args.clustering_mainfeatures) if args.clustering_mainfeatures else None,
        )
    except ValueError as error:
        raise UsageError(str(error)) from error
    return anonymization, bucketization, clustering


class _Progress:
    """Progress on stderr: one updating line on a terminal, a line per stage with --verbose."""

    def __init__(self, verbose: bool):
        self.interactive = sys.stderr.isatty()
        self.verbose = verbose
        self.start = time.perf_counter()
        self.stage = None

    def __call__(self, stage: str, fraction: float) -> None:
        elapsed = time.perf_counter() - self.start
        if self.interactive:
            print(f"\r\033[K[{fraction:4.0%}] {stage} ({elapsed:.1f}s)", end="", file=sys.stderr, flush=True)
        elif self.verbose and stage != self.stage:
            print(f"[{fraction:4.0%}] {stage} ({elapsed:.1f}s)", file=sys.stderr, flush=True)
        self.stage = stage

    def finish(self) -> None:
        if self.interactive:
            print(file=sys.stderr)


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    salt = args.salt if args.salt is not None else os.environ.get(SALT_VARIABLE)
    if not salt:
        raise UsageError(f"no salt: pass --salt or set {SALT_VARIABLE} (a secret kept the same across runs)")
    kinds = parse_column_specs(args.columns) if args.columns else None
    derive = parse_derive_specs(args.derive)
    anonymization, bucketization, clustering = parameters(args)
    table = read_table(Path(args.file), kinds, args.aidcolumns)
    for name in [args.clustering_maincolumn, args.ml_target, *(args.clustering_mainfeatures or [])]:
        if name is not None and name not in table.columns:
            raise UsageError(f"no column {name!r} among the synthesized columns")
    if args.verbose:
        print(f"syndiffix: {len(table)} rows, columns {list(table.columns)}", file=sys.stderr)
        print(
            f"syndiffix: {anonymization}\nsyndiffix: {bucketization}\nsyndiffix: {clustering}",
            file=sys.stderr,
        )

    progress = _Progress(args.verbose)
    # --verbose also shows the engine's own notes (e.g. the clusters chosen; names only, never values).
    log_handler = logging.StreamHandler(sys.stderr)
    log_handler.setFormatter(logging.Formatter("syndiffix: %(message)s"))
    engine_log = logging.getLogger("syndiffix_core")
    previous_level = engine_log.level
    if args.verbose:
        engine_log.addHandler(log_handler)
        engine_log.setLevel(logging.INFO)
    try:
        result = synthesize(
            table,
            aid_columns=args.aidcolumns,
            salt=salt,
            anonymization=anonymization,
            bucketization=bucketization,
            clustering=clustering,
            target_column=args.ml_target,
            column_kinds={name: kind for name, kind in (kinds or {}).items()},
            progress=progress,
            derive=derive,
            workers=args.workers,
        )
    except DeriveError as error:
        raise UsageError(f"{args.file}: {error}") from None
    finally:
        progress.finish()
        engine_log.removeHandler(log_handler)
        engine_log.setLevel(previous_level)
    if args.output is not None:
        with open(args.output, "wb") as output:
            write_csv(result, output)
    else:
        sys.stdout.flush()
        write_csv(result, sys.stdout.buffer)
        sys.stdout.buffer.flush()
    if args.verbose:
        print(
            f"syndiffix: {len(result)} rows in {time.perf_counter() - progress.start:.2f}s", file=sys.stderr
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv)
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: stop quietly, without a second error at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (UsageError, SyndiffixError) as error:
        message = " ".join(str(error).split())
        print(f"syndiffix: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
