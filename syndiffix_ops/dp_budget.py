"""The differential-privacy budget spent on each protected identity across releases, kept in lineage.

**Identity**: what a DP release protects, i.e. the people behind one source table: the source table
(dialect, host, database and schema.table, as lineage names it) and the protected unit (the entities of
the AID column, or the rows when there is none). Everything else may change without changing who is
protected, so it is the same identity: another `where`, other columns, a column set, another target
table, other engine parameters, another `release` label. Lineage records the identity as a keyed HMAC
(`protected_identity`): HMAC-SHA256 under a key derived from the salt, of the source's names and the unit,
never of the data, so the id says nothing about the content and cannot be recomputed from guessed table
names without the salt.

**Release**: a written DP output (a lineage row with status `success`). Its fingerprint (the engine's
`release_fingerprint`, a keyed id of its noise key) is equal for a rerun on the same data, parameters,
salt and release label, which repeats the same output: such a rerun spends nothing new and is counted once.
A failed or refused run wrote nothing and spends nothing.

**Total**: basic composition, the sum of epsilon and the sum of delta over the identity's distinct
releases. It is an upper bound: the true loss of k releases is at most this (advanced composition gives
less for many releases), never more.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from syndiffix_ops.lineage import LINEAGE_TABLE, SourceIdentity, lineage_table

_IDENTITY_KEY_LABEL = b"syndiffix-ops/dp-identity/v1"


def protected_unit(aid_columns: Sequence[str]) -> str:
    """The unit a release protects, in words: `entities of patient_id`, or `rows`."""
    return f"entities of {', '.join(aid_columns)}" if aid_columns else "rows"


def protected_identity(salt: bytes, source: SourceIdentity, aid_columns: Sequence[str]) -> str:
    """The keyed id of the people a release protects (see the module doc): 32 hex digits."""
    key = hmac.new(salt, _IDENTITY_KEY_LABEL, hashlib.sha256).digest()
    parts = [source.dialect, (source.host or "").lower(), source.database or "", source.table]
    message = "\x1f".join([*parts, protected_unit(aid_columns)]).encode("utf-8")
    return hmac.new(key, message, hashlib.sha256).hexdigest()[:32]


@dataclass(frozen=True)
class Release:
    fingerprint: str | None  # None (a row without one): counted on its own
    epsilon: float
    delta: float


@dataclass(frozen=True)
class Spending:
    """The budget spent on one identity over its distinct releases (basic composition)."""

    releases: int
    epsilon: float
    delta: float

    @classmethod
    def of(cls, releases: Iterable[Release]) -> Spending:
        distinct: dict[object, Release] = {}
        for number, release in enumerate(releases):
            distinct.setdefault(release.fingerprint or ("unfingerprinted", number), release)
        return cls(
            releases=len(distinct),
            epsilon=sum(r.epsilon for r in distinct.values()),
            delta=sum(r.delta for r in distinct.values()),
        )

    def beyond(self, budget_epsilon: float | None, budget_delta: float | None) -> str | None:
        """Which budget this spending exceeds, in words, or None."""
        over = []
        if budget_epsilon is not None and self.epsilon > budget_epsilon:
            over.append(f"epsilon {self.epsilon:.3g} > dp.budget_epsilon {budget_epsilon:g}")
        if budget_delta is not None and self.delta > budget_delta:
            over.append(f"delta {self.delta:.3g} > dp.budget_delta {budget_delta:g}")
        return " and ".join(over) or None


def recorded_releases(bind: sa.Engine | sa.Connection, schema: str | None, identity: str) -> list[Release]:
    """The successful releases of `identity` in the lineage table (none when there is no lineage table
    yet, or one from a release that did not record identities)."""
    if isinstance(bind, sa.Engine):
        with bind.connect() as conn:
            return recorded_releases(conn, schema, identity)
    inspector = sa.inspect(bind)
    if not inspector.has_table(LINEAGE_TABLE, schema=schema):
        return []
    if "dp_identity" not in {c["name"] for c in inspector.get_columns(LINEAGE_TABLE, schema=schema)}:
        return []
    table = lineage_table(schema)
    statement = sa.select(table.c.dp_release, table.c.dp_epsilon, table.c.dp_delta).where(
        table.c.dp_identity == identity, table.c.status == "success"
    )
    return [
        Release(row.dp_release, float(row.dp_epsilon or 0.0), float(row.dp_delta or 0.0))
        for row in bind.execute(statement)
    ]


@dataclass(frozen=True)
class DpRelease:
    """One DP output about to be written: its identity, what it spends, and the totals with it."""

    identity: str
    unit: str
    source_table: str
    release: Release
    total: Spending
    budget_epsilon: float | None
    budget_delta: float | None

    @property
    def over_budget(self) -> str | None:
        return self.total.beyond(self.budget_epsilon, self.budget_delta)

    def refusal(self, label: str) -> str:
        return (
            f"{label}: this release would bring the budget spent on {self.source_table} "
            f"({self.unit}) over {self.total.releases} releases to {self.over_budget}; "
            "nothing written (dp.refuse_over_budget is true)"
        )

    def lineage_fields(self) -> dict[str, Any]:
        return {
            "dp_identity": self.identity,
            "dp_release": self.release.fingerprint,
            "dp_epsilon": self.release.epsilon,
            "dp_delta": self.release.delta,
        }

    def report_fields(self) -> dict[str, Any]:
        """The totals as the report and the index show them (`dp_budget` in the quality metrics)."""
        return {
            "identity_id": self.identity,
            "protected_unit": self.unit,
            "source_table": self.source_table,
            "release_fingerprint": self.release.fingerprint,
            "total_releases": self.total.releases,
            "total_epsilon": self.total.epsilon,
            "total_delta": self.total.delta,
            "budget_epsilon": self.budget_epsilon,
            "budget_delta": self.budget_delta,
            "over_budget": self.over_budget,
        }


def plan_release(
    bind: sa.Engine,
    schema: str | None,
    *,
    salt: bytes,
    source: SourceIdentity,
    aid_columns: Sequence[str],
    metadata: Mapping[str, Any],
    budget: Any,
) -> DpRelease:
    """This release of a DP engine's output (`metadata`: its accounting) with the identity's total over
    the releases recorded in the target's lineage table and this one; `budget` is the config's `dp:`."""
    identity = protected_identity(salt, source, aid_columns)
    release = Release(
        metadata.get("release_fingerprint"),
        float(metadata["epsilon_spent"]),
        float(metadata.get("delta_spent") or 0.0),
    )
    return DpRelease(
        identity=identity,
        unit=protected_unit(aid_columns),
        source_table=source.table,
        release=release,
        total=Spending.of([*recorded_releases(bind, schema, identity), release]),
        budget_epsilon=budget.budget_epsilon,
        budget_delta=budget.budget_delta,
    )
