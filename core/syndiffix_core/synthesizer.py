"""The public entry point: `synthesize(df, aid_columns, salt=...)` -> anonymized synthetic DataFrame.

Structure: encode columns -> hash entities -> build the forest -> plan clusters -> synthesize each
cluster (harvest + microdata) -> assemble -> decode -> shuffle deterministically from the salt.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .anonymizer import CountAnonymizer, Entities
from .cdf_scale import CdfScale
from .clustering.plan import TablePlan, plan_table
from .columns import ColumnKind, encode_frame
from .derive import DerivedColumns
from .errors import InvalidInputError
from .forest import Forest
from .harvest import Harvester
from .memory import return_freed_memory, reuse_freed_memory, reusing_freed_memory
from .microdata import Microdata, MicrodataBuilder
from .noise import Salt, row_content_hashes
from .params import AnonymizationParams, BucketizationParams, ClusteringParams
from .stitching import Microtable
from .stitching import assemble as assemble_clusters
from .timestamp_forms import keep_calendars, read_text_timestamps
from .workers import ParallelMaterializer, available_workers, can_fork

Progress = Callable[[str, float], None]
LOG = logging.getLogger(__name__)

# 2^k - 1 trees per cluster: beyond this many columns a single cluster is not practical.
MAX_SINGLE_CLUSTER_COLUMNS = 12
# Tables with fewer rows build a cluster's trees on one thread: their numpy calls are too short to
# release the GIL for long, so a second thread adds CPU time (GIL hand-offs) and no speed.
THREADED_TREES_MIN_ROWS = 500_000
# Tables with fewer rows build their 1-dim trees one column at a time: two columns' trees side by side
# hold both columns' sort keys and orders at once (at 10M rows the forest stage's peak goes from ~2.5 to
# 3.9 GiB, still under the cluster stage's), and below this the stage takes a second or two on one core
# while its peak is close to the whole synthesis's (1M x 10: +30 MiB over 0.7 GiB for 0.2 s).
THREADED_FOREST_MIN_ROWS = 2_000_000
# Tables with fewer rows calibrate the one-sided columns of a stitch one at a time. From this size on,
# a stitch with cores to spare (no worker left to run, or no workers at all) calibrates them on threads:
# each holds its column's sort keys and orders, which at 1M x 10 raised the peak by ~80 MiB (over the
# 0.7 GiB aimed for) to save a fraction of a second.
THREADED_STITCH_MIN_ROWS = 2_000_000
# Tables with fewer rows materialize their clusters in the calling process: there a worker's fork,
# the pickled microdata it sends back and the shared trees it rebuilds cost 5-45 % more CPU time
# (the 5,000-row tables of bench/fidelity) for a wall-time gain of well under a second.
PARALLEL_CLUSTERS_MIN_ROWS = 10_000
# Tables with fewer rows keep the heap pages their stages free: a few MiB at most, and handing them
# back (malloc_trim, then page faults when they are used again) cost 3-5 % of the CPU time of the
# 5,000-row tables of bench/fidelity.
TRIM_MIN_ROWS = 100_000
# Tables with at least this many rows materialize and stitch their clusters with freed heap space kept
# for reuse (memory.reusing_freed_memory): a float column of more rows is above glibc's largest mmap
# threshold, so each such array would start on freshly zeroed pages. bench_scale at 10M rows: the
# cluster stage 250 -> 204 s wall on 2 cores.
REUSE_MEMORY_MIN_ROWS = 2**22
# While the calling process stitches, free space beyond this at the top of its heap goes back to the
# operating system: keeping all of it raised the 10M-row run's peak beside a worker by 0.8 GiB, this
# much by 0.5 GiB at the same speed (workers keep all of theirs: they exit after one cluster).
STITCH_TRIM_THRESHOLD = 512 * 2**20


@dataclass
class SynthesisContext:
    """Everything built once per table and shared by all clusters."""

    data: pd.DataFrame  # no rows: the synthesized columns (AID columns removed) and their dtypes
    codecs: list
    # The columns' 1-dim trees, and the trees of clusters of several columns (`_scale_cluster_trees`);
    # both None once every cluster is being materialized in a worker process.
    forest: Forest | None
    cluster_forest: Forest | None
    microdata: MicrodataBuilder | None
    salt: Salt
    clustering: ClusteringParams
    target_column: str | None
    clock: _StageClock
    threads: int  # for the independent trees of a cluster materialized in this process (threads.py)
    trims_memory: bool  # hands freed heap pages back between stages (TRIM_MIN_ROWS)


class _StageClock:
    """Wall and CPU seconds per stage, logged at DEBUG level on `syndiffix_core.synthesizer` (the record
    carries `stage`, `wall_s` and `cpu_s` for tools such as bench/bench_wide.py; column names only)."""

    def __init__(self):
        self.enabled = LOG.isEnabledFor(logging.DEBUG)
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def lap(self, stage: str) -> None:
        if not self.enabled:
            return
        wall, cpu = time.perf_counter(), time.process_time()
        LOG.debug(
            "stage %s: %.2f s wall, %.2f CPU-s",
            stage,
            wall - self.wall,
            cpu - self.cpu,
            extra={"stage": stage, "wall_s": wall - self.wall, "cpu_s": cpu - self.cpu},
        )
        self.wall, self.cpu = wall, cpu

    def record(self, stage: str, wall_s: float, cpu_s: float) -> None:
        """Log a stage timed elsewhere (a worker process's cluster), leaving the current lap running."""
        if self.enabled:
            LOG.debug(
                "stage %s: %.2f s wall, %.2f CPU-s",
                stage,
                wall_s,
                cpu_s,
                extra={"stage": stage, "wall_s": wall_s, "cpu_s": cpu_s},
            )


def synthesize(
    df: pd.DataFrame,
    aid_columns: Sequence[str] | None = None,
    *,
    salt: bytes | str,
    anonymization: AnonymizationParams | None = None,
    bucketization: BucketizationParams | None = None,
    clustering: ClusteringParams | None = None,
    target_column: str | None = None,
    column_kinds: Mapping[str, ColumnKind] | None = None,
    progress: Progress | None = None,
    derive: Mapping[str, str] | None = None,
    workers: int | None = None,
) -> pd.DataFrame:
    """Anonymized synthetic copy of `df` (every non-AID column, input dtypes, rows shuffled).

    `workers`: processes that materialize the clusters of a wide table side by side (default: the CPUs
    this process may use; 1 = all in this process; tables under PARALLEL_CLUSTERS_MIN_ROWS rows always
    use 1). The output does not depend on it.

    `derive` maps columns of `df` to SQL-like expressions over other columns (syndiffix_core.derive):
    those columns are not synthesized but computed from the synthetic ones, in their source type.
    """
    if derive:
        aids = [aid_columns] if isinstance(aid_columns, str) else list(aid_columns or [])
        rules = DerivedColumns(derive, df, aids)
        inputs = df[[*aids, *rules.synthesized]]
        kinds = {name: kind for name, kind in (column_kinds or {}).items() if name not in derive}
        synthetic = synthesize(
            inputs,
            aids,
            salt=salt,
            anonymization=anonymization,
            bucketization=bucketization,
            clustering=clustering,
            target_column=target_column,
            column_kinds=kinds,
            progress=progress,
            workers=workers,
        )
        return rules.complete(synthetic)
    report = progress or (lambda stage, fraction: None)
    data, aid_frame = _split_columns(df, aid_columns, target_column)
    del df  # a caller that kept no reference gets the rows freed once they are encoded
    secret = _check_salt(salt)
    worker_count = _check_workers(workers)
    if len(data) == 0:
        return data.iloc[0:0].reset_index(drop=True)
    report("encode", 0.0)
    clock = _StageClock()
    codecs, matrix = encode_frame(data, column_kinds)
    entities = _entities(data, aid_frame, secret)
    anonymization = anonymization or AnonymizationParams()
    bucketization = bucketization or BucketizationParams()
    anonymizer = CountAnonymizer(anonymization, bucketization, secret)
    read_text_timestamps(codecs, matrix, entities, anonymizer, declared=set(column_kinds or ()))
    keep_calendars(codecs, matrix, entities, anonymizer)
    threads = worker_count if len(data) >= THREADED_TREES_MIN_ROWS else 1
    forest_threads = worker_count if len(data) >= THREADED_FOREST_MIN_ROWS else 1
    stitches_on_threads = len(data) >= THREADED_STITCH_MIN_ROWS
    if len(data) < PARALLEL_CLUSTERS_MIN_ROWS:
        worker_count = 1
    data = data.iloc[:0].copy()  # encoded: from here on only the columns and their dtypes are read
    del aid_frame
    clock.lap("encode")
    report("forest", 0.1)
    forest = Forest(
        matrix,
        [str(c) for c in data.columns],
        entities,
        anonymizer,
        bucketization,
        secret,
        threads=forest_threads,
    )
    del matrix
    context = SynthesisContext(
        data=data,
        codecs=codecs,
        forest=forest,
        cluster_forest=forest,
        microdata=MicrodataBuilder(forest, codecs),
        salt=secret,
        clustering=clustering or ClusteringParams(),
        target_column=target_column,
        clock=clock,
        threads=threads,
        trims_memory=forest.row_count >= TRIM_MIN_ROWS,
    )
    reuses_memory = forest.row_count >= REUSE_MEMORY_MIN_ROWS
    del forest, entities  # held by the context alone, so that it can drop them
    clock.lap("forest")
    report("clustering", 0.15)
    plan = plan_clusters(context)
    clock.lap("clustering")
    if any(len(columns) > 1 for columns in plan.clusters.all_clusters()):
        _scale_cluster_trees(context, forest_threads)
        clock.lap("cluster scales")
    report("synthesize", 0.2)
    pending = None
    if plan.clusters.derived:
        pending = [tuple(columns) for columns in plan.clusters.all_clusters()]

    def on_progress(stage: str, fraction: float) -> None:
        if stage.endswith("stitched"):
            clock.lap(stage)
        report(stage, 0.2 + 0.7 * fraction)

    clusters = plan.clusters.all_clusters()
    # Read before any worker starts: the calling process drops the forest once all of them run.
    column_ranges = {j: context.forest.column_range(j) for j in range(context.forest.dims)}
    null_values = dict(enumerate(context.forest.null_values.tolist()))
    parallel = None
    if worker_count > 1 and len(clusters) > 1 and can_fork():
        parallel = ParallelMaterializer(
            clusters,
            lambda columns: _materialize_in_worker(context, columns, reuses_memory),
            worker_count,
            all_started=lambda: _drop_forest(context),
            start_order=_largest_first(clusters),
        )

    if parallel is None and context.threads <= 1:
        context.microdata.cluster_harvester.prepare_pools(clusters)

    def materialize(columns: tuple[int, ...]) -> Microtable:
        if parallel is None:
            microtable = _materialize(context, columns, pending=pending, threads=context.threads)
            clock.lap(_cluster_stage(context, columns))
            return microtable
        # The previous stitch's temporaries are freed: their heap pages go back before the wait, in
        # which `workers` clusters may run beside this process.
        return_freed_memory()
        microtable, wall_s, cpu_s = parallel(columns)
        clock.record(_cluster_stage(context, columns) + " in a worker", wall_s, cpu_s)
        return microtable

    def stitch_threads() -> int:
        if not stitches_on_threads:
            return 1
        return context.threads if parallel is None else parallel.idle_cores()

    reusing = reusing_freed_memory(STITCH_TRIM_THRESHOLD) if reuses_memory else contextlib.nullcontext()
    try:
        with reusing:
            table = assemble_clusters(
                plan.clusters,
                materialize,
                entropies=plan.entropies,
                rng=context.salt.rng("stitch", *map(str, context.data.columns)),
                column_ranges=column_ranges,
                null_values=null_values,
                progress=on_progress,
                stitch_threads=stitch_threads,
            )
    finally:
        if parallel is not None:
            parallel.close()
    report("assemble", 0.9)
    typed = table.typed
    del table  # the float values are only needed for stitching
    result = assemble(context, typed)
    clock.lap("assemble")
    report("done", 1.0)
    return result


def plan_clusters(context: SynthesisContext) -> TablePlan:
    """One cluster for narrow tables or with clustering disabled; otherwise clusters from the dependence
    measure and the annealing solver, or around the ML target (see docs/clustering.md)."""
    plan = plan_table(
        context.forest.value_matrix(),
        [str(c) for c in context.data.columns],
        context.clustering,
        target_column=None if context.target_column is None else str(context.target_column),
        rng=context.salt.rng("clustering", *map(str, context.data.columns)),
        ordered_columns=[codec.kind != ColumnKind.STRING for codec in context.codecs],
    )
    widest = max(len(columns) for columns in plan.clusters.all_clusters())
    if widest > MAX_SINGLE_CLUSTER_COLUMNS:
        raise InvalidInputError(
            f"{widest} columns cannot be synthesized as one cluster (at most "
            f"{MAX_SINGLE_CLUSTER_COLUMNS}); wide tables need clustering with a smaller max weight"
        )
    return plan


def _scale_cluster_trees(context: SynthesisContext, threads: int) -> None:
    """Put the multi-column trees on each number or timestamp column's anonymized cumulative-count scale
    (`cdf_scale`): a forest over the rows' positions on those scales, read from the columns' 1-dim
    harvests. Strings and booleans keep their indices (an order of names, not of magnitudes)."""
    forest, microdata = context.forest, context.microdata
    scales: list[CdfScale | None] = []
    for j, codec in enumerate(context.codecs):
        if codec.kind in (ColumnKind.STRING, ColumnKind.BOOLEAN):
            scales.append(None)
            continue
        buckets = microdata.harvester.harvest((j,))
        scales.append(
            CdfScale.from_buckets(
                buckets.low[:, 0], buckets.high[:, 0], buckets.count, forest.column_range(j)
            )
        )
    maps = [_unchanged if scale is None else scale.positions for scale in scales]
    positions, null_positions = forest.mapped_matrix(maps)
    # The null rows keep standing for null on the scale: the multi-column buckets are clipped to the
    # columns' ranges of values, which leave the null bucket out (`Harvester.column_bounds`).
    context.cluster_forest = forest.over(positions, null_positions, threads)
    del positions
    context.microdata = MicrodataBuilder(
        forest,
        context.codecs,
        microdata.harvester,
        cluster_harvester=Harvester(context.cluster_forest),
        scales=scales,
    )


def _unchanged(values: np.ndarray) -> np.ndarray:
    return values


def assemble(context: SynthesisContext, typed: Mapping[int, pd.Series]) -> pd.DataFrame:
    """The joined clusters' typed columns as the output frame, in input column order, rows shuffled
    (each column is shuffled straight into the frame: no unshuffled frame next to the output) and in
    the input's dtypes (strings, dates and decimals were held as categories until here)."""
    shuffle = context.salt.rng("shuffle", *map(str, context.data.columns)).permutation(len(typed[0]))
    columns = {}
    for j, codec in enumerate(context.codecs):
        columns[codec.name] = codec.expand(typed[j].take(shuffle).reset_index(drop=True))
    return pd.DataFrame(columns, copy=False)


def _largest_first(clusters: Sequence[tuple[int, ...]]) -> list[int]:
    """The clusters' indices, those with the most multi-column trees (2^k - k - 1 for k columns, the
    bulk of a cluster's work) first, ties in plan order.

    The stitches take the clusters in plan order whatever order they were materialized in, and a
    cluster's output does not depend on it. In plan order the workers ran a table's small clusters
    early and its largest late, so at the end one worker ran a large cluster while the other core
    waited for it (bench_scale at 2M rows: 6 of the 53 s from the first cluster to the last stitch)."""
    return sorted(range(len(clusters)), key=lambda i: (-(2 ** len(clusters[i]) - len(clusters[i]) - 1), i))


def _drop_forest(context: SynthesisContext) -> None:
    """Once every cluster is being materialized in a worker, the calling process only stitches: the
    forest, its trees and pools are the workers' (copy-on-write) and are dropped here."""
    context.forest = None
    context.cluster_forest = None
    context.microdata = None
    return_freed_memory()


def _materialize(
    context: SynthesisContext,
    columns: tuple[int, ...],
    *,
    pending: list[tuple[int, ...]] | None,
    threads: int,
) -> Microtable:
    """One cluster's microdata, holding as little at a time as the stages allow: once every pool and
    lookup that refinement reads is computed, the multi-column trees are released (before the refined
    rows are drawn), and once the buckets are harvested, the pools (before the rows are drawn).
    `pending`: the clusters not materialized yet in this process, this one included (None: no later
    cluster here, e.g. one cluster, or a worker process). What a later cluster shares with this one
    (trees and pools over its stitch columns) is kept instead of being rebuilt (it would come out
    identical: everything is seeded); 1-dim trees and pools serve every cluster's microdata.
    `threads`: how many of the cluster's trees are built and harvested side by side."""
    later = []
    if pending is not None:
        pending.remove(tuple(columns))
        later = [set(cluster) for cluster in pending]

    def used_later(key: tuple[int, ...]) -> bool:
        return len(key) == 1 or any(set(key) <= cluster for cluster in later)

    harvester = context.microdata.cluster_harvester
    trim = return_freed_memory if context.trims_memory else lambda: None
    trim()  # what the previous cluster and stitch freed

    def release_pools() -> None:
        harvester.release(used_later)
        trim()

    if len(columns) > 1:  # one column comes from its own 1-dim tree, in the other forest
        harvester.prepare_refinement(columns, threads, keep=used_later)
    context.cluster_forest.release(used_later, set().union(*later))
    harvester.release(used_later, tree_lookups_only=True)
    trim()
    microdata = context.microdata.materialize(columns, after_draws=release_pools)
    return _microtable(microdata)


def _materialize_in_worker(
    context: SynthesisContext, columns: tuple[int, ...], reuses_memory: bool
) -> tuple[Microtable, float, float]:
    """`_materialize` in a worker process, timed. One thread per worker: the workers already keep the
    cores busy, and a second thread would hold a second tree under construction in the worker's peak.
    A worker exits once its cluster is passed on, so it keeps what it frees for its next arrays."""
    if reuses_memory:
        reuse_freed_memory()
    return _timed(_materialize, context, columns, pending=None, threads=1)


def _timed(function: Callable[..., Microtable], *args, **kwargs) -> tuple[Microtable, float, float]:
    """The function's result, its wall seconds and its CPU seconds (every thread of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def _cluster_stage(context: SynthesisContext, columns: tuple[int, ...]) -> str:
    return f"cluster [{', '.join(str(context.data.columns[j]) for j in columns)}]"


def _microtable(microdata: Microdata) -> Microtable:
    return Microtable(
        microdata.columns,
        microdata.floats,
        dict(zip(microdata.columns, microdata.values, strict=True)),
        names=microdata.names,
    )


def _check_workers(workers: int | None) -> int:
    if workers is None:
        return available_workers()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidInputError(f"workers must be a positive integer, got {workers!r}")
    return workers


def _check_salt(salt: bytes | str) -> Salt:
    if not isinstance(salt, bytes | bytearray | str):
        raise InvalidInputError(f"salt must be bytes or str, got {type(salt).__name__}")
    if len(salt) == 0:
        raise InvalidInputError("salt must not be empty: it is the secret that makes the noise unpredictable")
    return Salt.from_secret(bytes(salt) if not isinstance(salt, str) else salt)


def _split_columns(df, aid_columns, target_column) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    if not isinstance(df, pd.DataFrame):
        raise InvalidInputError(f"synthesize expects a pandas DataFrame, got {type(df).__name__}")
    if isinstance(aid_columns, str):
        aid_columns = [aid_columns]
    aid_columns = list(aid_columns or [])
    missing = [c for c in aid_columns if c not in df.columns]
    if missing:
        raise InvalidInputError(f"AID columns not in the table: {missing} (columns: {list(df.columns)})")
    if len(set(aid_columns)) != len(aid_columns):
        raise InvalidInputError(f"AID columns listed twice: {aid_columns}")
    data = df.drop(columns=aid_columns)
    if data.shape[1] == 0:
        raise InvalidInputError("no columns to synthesize: every column is an AID column")
    if target_column is not None and target_column not in data.columns:
        raise InvalidInputError(f"target column {target_column!r} is not a synthesized column of the table")
    aid_frame = df[aid_columns].reset_index(drop=True) if aid_columns else None
    return data.reset_index(drop=True), aid_frame


def _entities(data: pd.DataFrame, aid_frame: pd.DataFrame | None, salt: Salt) -> Entities:
    if aid_frame is None:
        return Entities((salt.hash_rows(row_content_hashes(data)),), None, None)
    hashes, ids, entity_hashes = [], [], []
    for column in aid_frame.columns:
        codes, uniques = pd.factorize(aid_frame[column], sort=True, use_na_sentinel=True)
        unique_hashes = salt.hash_entities(pd.Series(np.asarray(uniques, dtype=object)))
        row_hashes = np.r_[unique_hashes, np.uint64(0)][codes]  # code -1 (null) -> 0
        hashes.append(row_hashes.astype(np.uint64))
        ids.append(codes.astype(np.int32 if uniques.size < 2**31 else np.int64))
        entity_hashes.append(unique_hashes)
    return Entities(tuple(hashes), tuple(ids), tuple(entity_hashes))
