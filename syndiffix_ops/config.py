"""The YAML pipeline config: validated models and a loader whose errors name file, line, table and field.

Precedence of settings, highest first: the table's own field, then the `defaults:` block, then the
built-in default of the field. `engine_params` are deep-merged the same way (table keys over `defaults`
keys) when the table uses the same engine as `defaults`; a table that picks another engine starts from
that engine's own defaults.

Secrets never live in the file: URLs may reference `${ENV_VAR}` (resolved only when a connection is
made, so `validate` works without secrets) and the salt is read from the environment variable named by
`salt_env` (default `SYNDIFFIX_SALT`).
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from syndiffix_ops.config_file import ConfigFileError, read_yaml
from syndiffix_ops.errors import PermanentError

DEFAULT_SALT_ENV = "SYNDIFFIX_SALT"
# An output with fewer synthetic rows is not swapped in: a filter that stopped matching must not empty a table.
DEFAULT_MIN_ROWS = 1
_ENV_REFERENCE = re.compile(r"\$\{([^}]*)\}")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ConfigError(PermanentError, ValueError):
    """A config that cannot be used; `problems` holds one line per problem, `str()` lists them all."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("invalid syndiffix-ops config:\n" + "\n".join(f"  {p}" for p in self.problems))


class ColumnPolicy(enum.StrEnum):
    SYNTHESIZE = "synthesize"
    DROP = "drop"


class WriteMode(enum.StrEnum):
    REPLACE = "replace"
    APPEND = "append"


class SchemaChangePolicy(enum.StrEnum):
    FAIL = "fail"
    IGNORE = "ignore"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False)


_SALT_IN_FILE = (
    "the salt is a secret and never goes in the config file; "
    "put it in an environment variable named by salt_env (default SYNDIFFIX_SALT)"
)


def _reject_salt_key(data: Any) -> Any:
    # A salt in the file would be committed to git and shown in diffs: refuse it with a pointer to salt_env.
    if isinstance(data, Mapping) and "salt" in data:
        raise ValueError(_SALT_IN_FILE)
    return data


def _check_env_references(value: str) -> str:
    for name in _ENV_REFERENCE.findall(value):
        if not _ENV_NAME.match(name):
            raise ValueError(f"${{{name}}} is not a valid environment variable reference")
    return value


def interpolate_env(value: str, *, what: str, environ: Mapping[str, str] | None = None) -> str:
    """Replace every `${NAME}` in `value` from the environment; a missing variable is an error naming it."""
    env = os.environ if environ is None else environ
    missing = [name for name in _ENV_REFERENCE.findall(value) if name not in env]
    if missing:
        raise ConfigError([f"{what}: environment variable(s) {', '.join(missing)} not set"])
    return _ENV_REFERENCE.sub(lambda m: env[m.group(1)], value)


def _without_duplicates(names: list[str], what: str) -> list[str]:
    duplicates = sorted(n for n, uses in Counter(names).items() if uses > 1)
    if duplicates:
        raise ValueError(f"{what} listed more than once: {duplicates}")
    return names


class DerivedColumn(_Strict):
    """`column: {derive: EXPRESSION}`: computed from other synthetic columns after synthesis, never
    synthesized itself (docs/config.md)."""

    derive: str


def _column_entry(name: str, value: Any) -> ColumnPolicy | DerivedColumn:
    """One entry of the `columns:` mapping, as one clear message when it is wrong."""
    if isinstance(value, DerivedColumn | ColumnPolicy):
        return value
    if not isinstance(value, Mapping):
        try:
            return ColumnPolicy(value)
        except ValueError:
            raise ValueError(f"{name}: {value!r} is not synthesize, drop or {{derive: EXPRESSION}}") from None
    unknown = sorted(str(key) for key in value if key != "derive")
    if unknown or "derive" not in value:
        raise ValueError(
            f"{name}: a column entry is synthesize, drop or {{derive: EXPRESSION}}; unknown keys {unknown}"
        )
    if not isinstance(value["derive"], str):
        raise ValueError(f'{name}: derive takes an expression in quotes, e.g. derive: "hour * 100 + minute"')
    # imported only for configs with derive rules: validating other configs stays free of the engine
    from syndiffix_core.derive import DeriveError, parse_expression

    try:
        parse_expression(name, value["derive"])
    except DeriveError as error:
        raise ValueError(str(error)) from None
    return DerivedColumn(derive=value["derive"])


class ColumnSetConfig(_Strict):
    """A narrower output from the same source table: fewer columns synthesize more accurately."""

    columns: list[str] = Field(min_length=1)
    target: str | None = Field(
        default=None, description="target table name; default <table target>_<set name>"
    )

    @field_validator("columns")
    @classmethod
    def _unique(cls, columns: list[str]) -> list[str]:
        return _without_duplicates(columns, "columns")


class TableRiskConfig(_Strict):
    """A table's `risk:` block: the column combinations an attacker may know together (docs/risk.md)."""

    quasi_identifiers: list[list[str]] = Field(
        default_factory=list, description="column combinations to assess besides every single column"
    )

    @field_validator("quasi_identifiers")
    @classmethod
    def _combinations(cls, combinations: list[list[str]]) -> list[list[str]]:
        for combination in combinations:
            if not combination:
                raise ValueError("a quasi-identifier combination needs at least one column")
            _without_duplicates(combination, f"columns of quasi-identifier combination {combination}")
        return combinations


class QualityConfig(_Strict):
    """The top-level `quality:` block: when a column or pair needs attention, and the optional quality gate
    (docs/report.md). Defaults mirror syndiffix_ops.verdict.QualityThresholds."""

    column_tvd: float = Field(default=0.05, gt=0, le=1, description="flag a column above this 1-dim TVD")
    pair_tvd: float = Field(default=0.15, gt=0, le=1, description="flag a pair above this 2-dim TVD")
    correlation_diff: float = Field(
        default=0.3, gt=0, le=2, description="flag a pair whose correlation moved more"
    )
    bin_share_ratio: float = Field(
        default=2.0, gt=1, description="flag a bin or tail whose share changed by more than this factor"
    )
    min_bin_share: float = Field(
        default=0.05, gt=0, le=1, description="bins below this source share are not checked"
    )
    fail_below_score: float | None = Field(
        default=None, ge=0, le=100, description="a table scoring below is not written and the run fails"
    )
    fail_on_attention: bool = Field(
        default=False, description="a table with a flagged column or pair is not written and the run fails"
    )

    def overridden_by(self, table_quality: QualityConfig | None) -> QualityConfig:
        """These thresholds with the keys a table's own `quality:` block sets (only those: a key the
        table leaves out keeps the top-level value, not the built-in default)."""
        if table_quality is None or not table_quality.model_fields_set:
            return self
        return self.model_copy(
            update={key: getattr(table_quality, key) for key in table_quality.model_fields_set}
        )


class DpBudgetConfig(_Strict):
    """The top-level `dp:` block: the budget of each protected identity over all its DP releases
    (docs/dp-marginals.md, syndiffix_ops.dp_budget)."""

    budget_epsilon: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="warn when an identity's total epsilon exceeds it",
    )
    budget_delta: float | None = Field(
        default=None, gt=0, lt=1, description="warn when an identity's total delta exceeds it"
    )
    refuse_over_budget: bool = Field(
        default=False, description="a release that would exceed the budget is not written and the run fails"
    )


class RiskConfig(_Strict):
    """The top-level `risk:` block: KHLL sketch parameters and report thresholds (docs/risk.md)."""

    enabled: bool = Field(default=True, description="assess source and output risk in every run")
    k: int = Field(default=4096, ge=16, le=1 << 20, description="values sampled per column set (KMV level)")
    hll_precision: int = Field(default=10, ge=4, le=18, description="log2 of the per-value HLL registers")
    thresholds: list[int] = Field(default_factory=lambda: [1, 2, 5, 10], min_length=1)
    identifying_share: float = Field(default=0.5, gt=0, le=1)
    elevated_share: float = Field(default=0.05, gt=0, le=1)
    linkable_containment: float = Field(default=0.5, gt=0, le=1)
    joinability: bool = Field(default=True, description="compare columns across the configured tables")

    @field_validator("thresholds")
    @classmethod
    def _positive(cls, thresholds: list[int]) -> list[int]:
        if any(t < 1 for t in thresholds):
            raise ValueError(f"thresholds are numbers of ids per value and must be >= 1, got {thresholds}")
        return sorted(set(thresholds))


class TableDefaults(_Strict):
    """Settings every table inherits unless it sets its own (see the module doc for the precedence)."""

    engine: str | None = None
    engine_params: dict[str, Any] = Field(default_factory=dict)
    mode: WriteMode | None = None
    on_schema_change: SchemaChangePolicy | None = None
    max_rows: int | None = Field(default=None, gt=0)
    min_rows: int | None = Field(
        default=None, ge=0, description="refuse to write an output with fewer synthetic rows (default 1)"
    )
    salt_env: str | None = None
    other_columns: ColumnPolicy | None = None
    read_chunk_rows: int | None = Field(default=None, gt=0)

    _no_salt = model_validator(mode="before")(_reject_salt_key)

    @field_validator("salt_env")
    @classmethod
    def _env_name(cls, name: str | None) -> str | None:
        if name is not None and not _ENV_NAME.match(name):
            raise ValueError(f"{name!r} is not a valid environment variable name")
        return name


_REFERENCE = re.compile(r"^\s*([^()\s]+)\s*\(([^()]*)\)\s*$")


class OrphanPolicy(enum.StrEnum):
    NULL = "null"
    DROP = "drop"
    ERROR = "error"


class ConstraintsPolicy(enum.StrEnum):
    NONE = "none"
    COPY = "copy"


class ForeignKeyConfig(_Strict):
    """A foreign key declared in the YAML (a virtual key) where the database declares none (docs/linked-tables.md)."""

    columns: list[str] = Field(min_length=1, description="the child's key columns")
    references: str = Field(description="parent(col, ...): a configured table's name and its key columns")
    on_orphan: OrphanPolicy = Field(
        default=OrphanPolicy.NULL, description="a non-null key with no parent row: null, drop or error"
    )
    context: list[str] | None = Field(default=None, description="parent columns the children are matched on")
    aggregates: list[str] | None = Field(
        default=None, description="numeric child columns averaged per parent"
    )
    entity: bool | None = Field(default=None, description="the parent's entity protects the child (auto)")

    @field_validator("on_orphan", mode="before")
    @classmethod
    def _yaml_null(cls, value: Any) -> Any:
        return OrphanPolicy.NULL if value is None else value  # `on_orphan: null` is YAML's null

    @field_validator("columns")
    @classmethod
    def _unique_columns(cls, columns: list[str]) -> list[str]:
        return _without_duplicates(columns, "foreign key columns")

    @field_validator("references")
    @classmethod
    def _reference(cls, references: str) -> str:
        match = _REFERENCE.match(references)
        if not match or not all(c.strip() for c in match.group(2).split(",")):
            raise ValueError(f"{references!r} is not of the form table(column, ...)")
        return references

    @model_validator(mode="after")
    def _arity(self) -> ForeignKeyConfig:
        if len(self.parent_columns) != len(self.columns):
            raise ValueError(
                f"{len(self.columns)} column(s) {self.columns} reference {len(self.parent_columns)} in {self.references}"
            )
        return self

    @property
    def parent(self) -> str:
        return _REFERENCE.match(self.references).group(1)

    @property
    def parent_columns(self) -> list[str]:
        return [c.strip() for c in _REFERENCE.match(self.references).group(2).split(",")]


class TableConfig(TableDefaults):
    """One source table and the synthetic output(s) made from it."""

    name: str | None = Field(
        default=None, description="name used by --table and in messages; default: target"
    )
    source: str = Field(description="source table as schema.table (or table in the default schema)")
    target: str | None = Field(default=None, description="target table name; default: the source table name")
    columns: dict[str, ColumnPolicy | DerivedColumn] | list[str] | None = None
    aid_columns: list[str] = Field(default_factory=list)
    column_sets: dict[str, ColumnSetConfig] = Field(default_factory=dict)
    where: str | None = Field(default=None, description="SQL boolean expression filtering source rows")
    risk: TableRiskConfig = Field(default_factory=TableRiskConfig)
    primary_key: list[str] | None = Field(default=None, description="virtual primary key columns")
    unique: list[list[str]] = Field(default_factory=list, description="virtual unique keys")
    foreign_keys: list[ForeignKeyConfig] = Field(default_factory=list, description="virtual foreign keys")
    quality: QualityConfig | None = Field(
        default=None, description="quality thresholds of this table's outputs, over the top-level quality:"
    )

    @field_validator("source")
    @classmethod
    def _source_name(cls, source: str) -> str:
        parts = source.split(".")
        if not 1 <= len(parts) <= 2 or not all(p.strip() for p in parts):
            raise ValueError(f"{source!r} is not of the form schema.table or table")
        return source

    @field_validator("aid_columns")
    @classmethod
    def _unique_aids(cls, aids: list[str]) -> list[str]:
        return _without_duplicates(aids, "AID columns")

    @field_validator("columns", mode="before")
    @classmethod
    def _column_entries(cls, columns: Any) -> Any:
        if isinstance(columns, list):
            return _without_duplicates(columns, "columns")
        if isinstance(columns, Mapping):
            return {name: _column_entry(str(name), entry) for name, entry in columns.items()}
        return columns

    @model_validator(mode="after")
    def _consistent(self) -> TableConfig:
        policies = self.column_policies
        problems = []
        for aid in self.aid_columns:
            if policies.get(aid) is ColumnPolicy.DROP:
                problems.append(f"AID column {aid!r} has policy drop; AID columns must be read")
        for set_name, column_set in self.column_sets.items():
            for column in column_set.columns:
                if column in self.aid_columns:
                    problems.append(
                        f"column set {set_name!r} lists AID column {column!r}; AID columns protect, they are not output"
                    )
                elif policies.get(column) is ColumnPolicy.DROP or (
                    column not in policies and self._unlisted_dropped
                ):
                    problems.append(f"column set {set_name!r} lists column {column!r}, which is dropped")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def derive_problems(self) -> list[tuple[str, str]]:
        """(derived column, problem) for rules whose inputs are not synthesized output columns; the
        source's columns and types are checked when the table runs."""
        derived = self.derived_columns
        if not derived:
            return []
        from syndiffix_core.derive import parse_expression  # only configs with derive rules load the engine

        policies, problems = self.column_policies, []
        for column, text in derived.items():
            references = parse_expression(column, text).references
            for name in references:
                if name in self.aid_columns:
                    problems.append((column, f"uses AID column {name!r}, which is never output"))
                elif name in derived:
                    problems.append(
                        (column, f"uses derived column {name!r}; derive from synthesized columns")
                    )
                elif policies.get(name) is ColumnPolicy.DROP or (
                    name not in policies and self._unlisted_dropped
                ):
                    problems.append((column, f"uses column {name!r}, which is dropped"))
            for set_name, column_set in self.column_sets.items():
                missing = [name for name in references if name not in column_set.columns]
                if column in column_set.columns and missing:
                    problems.append((column, f"is in column set {set_name!r} without its inputs {missing}"))
        return [(column, f"derive of column {column!r} {problem}") for column, problem in problems]

    @model_validator(mode="after")
    def _keys_are_read(self) -> TableConfig:
        policies = self.column_policies
        keys = [*(self.primary_key or []), *(c for u in self.unique for c in u)]
        keys += [c for fk in self.foreign_keys for c in fk.columns]
        dropped = [c for c in dict.fromkeys(keys) if policies.get(c) is ColumnPolicy.DROP]
        if dropped:
            raise ValueError(f"key column(s) {dropped} have policy drop; key columns are always written")
        if (self.primary_key or self.unique or self.foreign_keys) and self.column_sets:
            raise ValueError("a table with keys cannot have column_sets: its keys must join one output table")
        return self

    @model_validator(mode="after")
    def _risk_columns_are_not_aids(self) -> TableConfig:
        for combination in self.risk.quasi_identifiers:
            aids = [column for column in combination if column in self.aid_columns]
            if aids:
                raise ValueError(
                    f"risk.quasi_identifiers {combination} lists AID column(s) {aids}; AIDs are the ids "
                    "whose re-identification is measured, not values"
                )
        return self

    @property
    def _unlisted_dropped(self) -> bool:
        if self.other_columns is not None:
            return self.other_columns is ColumnPolicy.DROP
        return isinstance(self.columns, list)

    @property
    def schema_name(self) -> str | None:
        return self.source.split(".")[0] if "." in self.source else None

    @property
    def table_name(self) -> str:
        return self.source.split(".")[-1]

    @property
    def target_name(self) -> str:
        return self.target or self.table_name

    @property
    def display_name(self) -> str:
        return self.name or self.target_name

    @property
    def column_policies(self) -> dict[str, ColumnPolicy]:
        """Explicit per-column policies; the list form means 'exactly these columns'."""
        if self.columns is None:
            return {}
        if isinstance(self.columns, list):
            return dict.fromkeys(self.columns, ColumnPolicy.SYNTHESIZE)
        # a derived column is an output column: written, though computed rather than synthesized
        return {
            name: ColumnPolicy.SYNTHESIZE if isinstance(entry, DerivedColumn) else entry
            for name, entry in self.columns.items()
        }

    @property
    def derived_columns(self) -> dict[str, str]:
        """Derived column -> its expression, in config order."""
        if not isinstance(self.columns, dict):
            return {}
        return {
            name: entry.derive for name, entry in self.columns.items() if isinstance(entry, DerivedColumn)
        }

    def output_targets(self) -> dict[str | None, str]:
        """Column set name (None for the whole table) -> target table name, one entry per output."""
        if not self.column_sets:
            return {None: self.target_name}
        return {name: cs.target or f"{self.target_name}_{name}" for name, cs in self.column_sets.items()}


class DagConfig(_Strict):
    """Scheduling read by the Airflow DAG factory and passed through to the DAG; nothing here runs a DAG."""

    dag_id: str | None = None
    schedule: str | None = None
    start_date: date | datetime | None = None
    catchup: bool = False
    tags: list[str] = Field(default_factory=list)
    default_args: dict[str, Any] = Field(default_factory=dict)
    pool: str | None = None
    max_active_tasks: int | None = Field(default=None, gt=0)
    # One run at a time by default: two runs of one DAG write the same target tables.
    max_active_runs: int = Field(default=1, gt=0)


class EffectiveTable(BaseModel):
    """A table's settings after applying defaults: what run_table actually uses."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    table: TableConfig
    engine: str
    engine_params: BaseModel
    mode: WriteMode
    on_schema_change: SchemaChangePolicy
    max_rows: int | None
    min_rows: int
    salt_env: str
    other_columns: ColumnPolicy
    read_chunk_rows: int
    quality: QualityConfig


class PipelineConfig(_Strict):
    version: int = 1
    source: str | None = Field(default=None, description="SQLAlchemy URL of the source; ${ENV} allowed")
    source_conn_id: str | None = Field(default=None, description="Airflow connection id of the source")
    target: str | None = Field(default=None, description="SQLAlchemy URL of the target; ${ENV} allowed")
    target_conn_id: str | None = Field(default=None, description="Airflow connection id of the target")
    target_schema: str | None = None
    salt_env: str = DEFAULT_SALT_ENV
    report_dir: Path | None = None
    dag: DagConfig | None = None
    defaults: TableDefaults = Field(default_factory=TableDefaults)
    risk: RiskConfig = Field(default_factory=RiskConfig)
    keys_from_database: bool = Field(
        default=True, description="link tables by the source's declared primary, unique and foreign keys"
    )
    constraints: ConstraintsPolicy = Field(
        default=ConstraintsPolicy.NONE,
        description="copy: recreate the keys and NOT NULL on linked target tables",
    )
    quality: QualityConfig = Field(default_factory=QualityConfig)
    dp: DpBudgetConfig = Field(default_factory=DpBudgetConfig)
    tables: list[TableConfig] = Field(min_length=1)
    config_path: Path | None = Field(default=None, exclude=True, description="set by load_config")

    _no_salt = model_validator(mode="before")(_reject_salt_key)

    @field_validator("version")
    @classmethod
    def _known_version(cls, version: int) -> int:
        if version != 1:
            raise ValueError(f"unsupported config version {version}; this release reads version 1")
        return version

    @field_validator("source", "target")
    @classmethod
    def _url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        _check_env_references(url)
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import NoSuchModuleError

        if _ENV_REFERENCE.fullmatch(url):
            # The whole URL comes from one variable (a common way to keep credentials out of files):
            # its shape can only be checked once it is resolved, in _resolved_url.
            return url
        # Placeholders stand in for ${VAR}s so the URL's shape is checked without the secrets.
        shape = _ENV_REFERENCE.sub("x", url)
        problem = url_shape_problem(shape)
        if problem:
            raise ValueError(f"not a SQLAlchemy URL ({problem})")
        try:
            make_url(shape).get_dialect()
        except NoSuchModuleError:
            raise ValueError(unknown_dialect_problem(make_url(shape).drivername)) from None
        return url

    @field_validator("salt_env")
    @classmethod
    def _env_name(cls, name: str) -> str:
        if not _ENV_NAME.match(name):
            raise ValueError(f"{name!r} is not a valid environment variable name")
        return name

    @model_validator(mode="after")
    def _endpoints_and_names(self) -> PipelineConfig:
        problems = []
        for side in ("source", "target"):
            url, conn_id = getattr(self, side), getattr(self, f"{side}_conn_id")
            if url is None and conn_id is None:
                problems.append(f"{side}: give either {side} (a SQLAlchemy URL) or {side}_conn_id")
            elif url is not None and conn_id is not None:
                problems.append(f"{side}: give {side} or {side}_conn_id, not both")
        problems += _cross_table_problems(self.tables)
        target = _url_shape(self.target) if self.target else None
        if target is not None and target.get_backend_name() == "sqlite" and self.target_schema:
            problems.append(f"target_schema: {sqlite_schema_problem(self.target_schema)}")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def table(self, name: str) -> TableConfig:
        """The table entry named `name` (its `name`, else its target, else its source)."""
        for table in self.tables:
            if name in (table.display_name, table.source):
                return table
        known = ", ".join(t.display_name for t in self.tables)
        raise ConfigError([f"{self._file}: no table named {name!r} (tables: {known})"])

    @property
    def _file(self) -> str:
        return str(self.config_path) if self.config_path else "<config>"

    def effective(self, table: TableConfig) -> EffectiveTable:
        """Apply the precedence table > defaults > built-in to one table."""
        from syndiffix_ops.engines import get_engine

        engine_name = table.engine or self.defaults.engine or "syndiffix"
        params = _effective_engine_params(self.defaults, table.engine_params, engine_name)
        return EffectiveTable(
            table=table,
            engine=engine_name,
            engine_params=get_engine(engine_name).params_model.model_validate(params),
            mode=table.mode or self.defaults.mode or WriteMode.REPLACE,
            on_schema_change=table.on_schema_change
            or self.defaults.on_schema_change
            or SchemaChangePolicy.FAIL,
            max_rows=table.max_rows or self.defaults.max_rows,
            min_rows=_first_set(table.min_rows, self.defaults.min_rows, DEFAULT_MIN_ROWS),
            salt_env=table.salt_env or self.defaults.salt_env or self.salt_env,
            other_columns=table.other_columns
            or self.defaults.other_columns
            or (ColumnPolicy.DROP if isinstance(table.columns, list) else ColumnPolicy.SYNTHESIZE),
            read_chunk_rows=table.read_chunk_rows or self.defaults.read_chunk_rows or 100_000,
            quality=self.quality.overridden_by(table.quality),
        )

    def source_url(self, environ: Mapping[str, str] | None = None) -> str:
        return self._resolved_url("source", environ)

    def target_url(self, environ: Mapping[str, str] | None = None) -> str:
        return self._resolved_url("target", environ)

    def _resolved_url(self, side: str, environ: Mapping[str, str] | None) -> str:
        url = getattr(self, side)
        if url is None:
            raise ConfigError(
                [
                    f"{self._file}: {side} is given as {side}_conn_id={getattr(self, f'{side}_conn_id')!r}, "
                    "which only the Airflow operator resolves; pass a SQLAlchemy URL or engine instead"
                ]
            )
        resolved = interpolate_env(url, what=f"{self._file}: {side}", environ=environ)
        problem = url_shape_problem(resolved)
        if problem:
            # Name the variable, never echo its value: it may hold a password.
            raise ConfigError([f"{self._file}: {side}: {url} does not hold a SQLAlchemy URL ({problem})"])
        return resolved

    def config_hash(self) -> str:
        """SHA-256 of the validated config (not of the file's formatting), recorded in lineage."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def _first_set(*values: int | None) -> int:
    return next(value for value in values if value is not None)


def url_shape_problem(url: str) -> str | None:
    """Why `url` is not a usable SQLAlchemy URL, without echoing any of it (it may hold a password).

    An unencoded '@' or ':' in a password makes the rest of it the host or port, which drivers then
    print in their errors: refused here."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        parsed = None
    if parsed is None or "@" in (parsed.host or ""):
        return (
            "the form is dialect+driver://user:password@host:port/database, and a user name or password "
            "holding '@', ':' or '/' must be percent-encoded (%40, %3A, %2F)"
        )
    return None


def sqlite_schema_problem(schema: str) -> str:
    return (
        f"target_schema {schema!r} is set, but a SQLite target has no schemas; remove target_schema "
        "(the synthetic tables and the lineage table go into the target file)"
    )


def unknown_dialect_problem(drivername: str) -> str:
    hint = (
        " (PostgreSQL is postgresql+psycopg://)" if drivername.split("+")[0] in ("postgres", "pgsql") else ""
    )
    return (
        f"{drivername!r} is not a database type SQLAlchemy knows{hint}; use postgresql+psycopg://, "
        "mysql+pymysql://, mariadb+pymysql:// or sqlite:///"
    )


def _deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _effective_engine_params(
    defaults: TableDefaults, table_params: Mapping[str, Any], engine_name: str
) -> dict[str, Any]:
    inherits = (defaults.engine or "syndiffix") == engine_name
    return _deep_merge(defaults.engine_params if inherits else {}, table_params)


def _cross_table_problems(tables: Sequence[TableConfig]) -> list[str]:
    problems = []
    names = Counter(t.display_name for t in tables)
    for name in sorted(n for n, uses in names.items() if uses > 1):
        problems.append(f"tables: name {name!r} is used by more than one table; set distinct `name`s")
    known = {n for t in tables for n in (t.display_name, t.table_name)}
    for table in tables:
        for fk in table.foreign_keys:
            if fk.parent not in known:
                problems.append(
                    f"tables: {table.display_name}: foreign key {fk.columns} references {fk.parent!r}, "
                    f"which is not a configured table"
                )
    targets = [target for t in tables for target in t.output_targets().values()]
    for target in sorted(t for t, uses in Counter(targets).items() if uses > 1):
        problems.append(f"tables: target table {target!r} is written by more than one output")
    return problems


def output_conflicts(config: PipelineConfig, table: TableConfig) -> list[str]:
    """Outputs of `table` that would overwrite a source table of the config or the lineage table, as far
    as the config alone tells: the same source and target URL (or SQLite file) and the same schema, or
    both in the connection's default schema. The pipeline checks again against the live connections."""
    problems = lineage_name_conflicts(table)
    if not _same_database(config.source, config.target):
        return problems
    for target in table.output_targets().values():
        for source_table in config.tables:
            if _same_table_name(source_table, target, config.target_schema, config.source):
                problems.append(
                    f"output {_dotted(config.target_schema, target)} would overwrite source table "
                    f"{source_table.source} (source and target are the same database); "
                    "choose another target name or set target_schema to another schema"
                )
    return problems


def _where_problem(where: str, source_url: str | None) -> str | None:
    """Why `where` is not one boolean expression in the source's dialect (any, without a source URL)."""
    from syndiffix_ops.where import WhereError, check_where

    shape = _url_shape(source_url) if source_url else None
    try:
        check_where(where, shape.get_backend_name() if shape is not None else None)
    except WhereError as error:
        return str(error).removeprefix("where: ")
    return None


def lineage_name_conflicts(table: TableConfig) -> list[str]:
    """Outputs named like the lineage table, which records every run in the target schema."""
    from syndiffix_ops.lineage import LINEAGE_TABLE

    return [
        f"output {target!r} is the name of the lineage table that records every run; choose another target name"
        for target in table.output_targets().values()
        if target.casefold() == LINEAGE_TABLE
    ]


def _dotted(schema: str | None, name: str) -> str:
    return f"{schema}.{name}" if schema else name


def _same_database(source: str | None, target: str | None) -> bool:
    if source is None or target is None:
        return False
    left, right = _url_shape(source), _url_shape(target)
    if left is None or right is None or left.get_backend_name() != right.get_backend_name():
        return source == target
    if left.get_backend_name() == "sqlite":  # in-memory databases are never shared between engines
        return _sqlite_file(left.database) is not None and _sqlite_file(left.database) == _sqlite_file(
            right.database
        )
    host = lambda url: (url.host or "localhost").lower().replace("127.0.0.1", "localhost")  # noqa: E731
    return (host(left), left.port, left.database) == (host(right), right.port, right.database)


def _url_shape(url: str):
    """The URL with each ${VAR} replaced by a placeholder naming it, so equal variables compare equal."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(_ENV_REFERENCE.sub(r"env_\1", url))
    except ArgumentError:
        return None


def _sqlite_file(database: str | None) -> str | None:
    return os.path.realpath(database) if database and database != ":memory:" else None


def _same_table_name(
    source_table: TableConfig, target: str, target_schema: str | None, url: str | None
) -> bool:
    shape = _url_shape(url) if url else None
    backend = shape.get_backend_name() if shape is not None else ""
    # the schema a name without one lands in: SQLite's main database, MySQL's database of the URL
    default = {"sqlite": "main"}.get(backend, shape.database if backend in ("mysql", "mariadb") else None)
    source_schema = source_table.schema_name or default
    if (target_schema or default) != source_schema:
        return False
    if backend in (
        "sqlite",
        "mysql",
        "mariadb",
    ):  # case-insensitive names (MySQL: on many servers; refuse to be safe)
        return source_table.table_name.casefold() == target.casefold()
    return source_table.table_name == target


# ---------------------------------------------------------------------------------------------- loading


def load_config(path: str | Path) -> PipelineConfig:
    """Read and validate a YAML config; raise ConfigError listing every problem with file, line and field."""
    path = Path(path)
    try:
        data, node = read_yaml(path)
    except ConfigFileError as error:
        raise ConfigError([str(error)]) from None
    lines = _line_numbers(node) if node is not None else {}
    config = parse_config(data, file=str(path), lines=lines)
    if config.report_dir is not None and not config.report_dir.is_absolute():
        config = config.model_copy(update={"report_dir": path.parent / config.report_dir})
    return config.model_copy(update={"config_path": path})


def parse_config(
    data: Any, *, file: str = "<config>", lines: Mapping[tuple[Any, ...], int] | None = None
) -> PipelineConfig:
    """Validate a config mapping. Each table entry is validated on its own so one broken table does not
    hide the problems of the others."""
    lines = lines or {}
    if not isinstance(data, Mapping):
        raise ConfigError(
            [f"{file}: the config must be a mapping with at least `source`, `target` and `tables`"]
        )
    problems: list[str] = []

    def report(loc: Sequence[Any], message: str, table_label: str | None = None) -> None:
        problems.append(_format_problem(file, lines, loc, message, table_label))

    data = _without_salt(data, (), report)
    raw_tables = data.get("tables")
    good_tables: list[TableConfig] = []
    defaults = _validate_defaults(_without_salt(data.get("defaults"), ("defaults",), report), report)
    if isinstance(raw_tables, list):
        for index, raw in enumerate(raw_tables):
            raw = _without_salt(raw, ("tables", index), report, _table_label(raw))
            table = _validate_table(index, raw, defaults, report)
            if table is not None:
                good_tables.append(table)

    # The top level is validated with the good tables only, so table problems are not reported twice.
    top = dict(data)
    tables_checked = isinstance(raw_tables, list) and len(raw_tables) > 0
    if tables_checked:
        top["tables"] = good_tables
    try:
        config = PipelineConfig.model_validate(top)
    except ValidationError as error:
        for err in error.errors(include_input=False):
            loc = err["loc"]
            if loc and loc[0] == "tables" and tables_checked:
                continue  # the per-table pass has reported it
            report(loc, _message(err))
        config = None
    if config is not None:
        for index, table in enumerate(config.tables):
            for message in output_conflicts(config, table):
                report(("tables", index, "target"), message, table.display_name)
            if table.where is not None:
                problem = _where_problem(table.where, config.source)
                if problem:
                    report(("tables", index, "where"), problem, table.display_name)
    if problems or config is None:
        raise ConfigError(problems)
    return config


def _without_salt(raw: Any, loc: tuple[Any, ...], report, label: str | None = None) -> Any:
    if isinstance(raw, Mapping) and "salt" in raw:
        report((*loc, "salt"), _SALT_IN_FILE, label)
        return {k: v for k, v in raw.items() if k != "salt"}
    return raw


def _validate_defaults(raw: Any, report) -> TableDefaults | None:
    if raw is None:
        return TableDefaults()
    try:
        defaults = TableDefaults.model_validate(raw)
    except ValidationError as error:
        for err in error.errors(include_input=False):
            report(("defaults", *err["loc"]), _message(err))
        return None
    return defaults


def _validate_table(index: int, raw: Any, defaults: TableDefaults | None, report) -> TableConfig | None:
    label = _table_label(raw)
    loc_prefix = ("tables", index)
    table = None
    try:
        table = TableConfig.model_validate(raw)
    except ValidationError as error:
        for err in error.errors(include_input=False):
            if err["loc"] and err["loc"][0] == "engine_params":
                continue  # checked below against the engine's own params model
            report((*loc_prefix, *err["loc"]), _message(err), label)
    if not isinstance(raw, Mapping):
        return None
    for column, problem in table.derive_problems() if table is not None else []:
        report((*loc_prefix, "columns", column, "derive"), problem, label)
        table = None
    # engine_params are checked from the raw entry so their problems show even when other fields are broken.
    from syndiffix_ops.engines import ENGINES

    base = defaults or TableDefaults()
    engine_name = raw.get("engine") or base.engine or "syndiffix"
    table_params = raw.get("engine_params") or {}
    if not isinstance(engine_name, str) or not isinstance(table_params, Mapping):
        return None
    if engine_name not in ENGINES:
        field = "engine" if raw.get("engine") else "defaults.engine"
        report(
            (*loc_prefix, "engine"),
            f"unknown engine {engine_name!r} ({field}); known: {sorted(ENGINES)}",
            label,
        )
        return None
    params = _effective_engine_params(base, table_params, engine_name)
    try:
        ENGINES[engine_name].params_model.model_validate(params)
    except ValidationError as error:
        for err in error.errors(include_input=False):
            report(
                (*loc_prefix, "engine_params", *err["loc"]), f"{_message(err)} (engine {engine_name})", label
            )
        return None
    return table


def _table_label(raw: Any) -> str | None:
    if isinstance(raw, Mapping):
        for key in ("name", "target", "source"):
            if isinstance(raw.get(key), str):
                return raw[key]
    return None


def _message(err: Mapping[str, Any]) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown key (check the spelling; see docs/config.md)"
    message = err["msg"]
    return message.removeprefix("Value error, ")


def _format_problem(
    file: str, lines: Mapping[tuple[Any, ...], int], loc: Sequence[Any], message: str, table_label: str | None
) -> str:
    loc = tuple(loc)
    line = None
    for end in range(len(loc), 0, -1):
        if loc[:end] in lines:
            line = lines[loc[:end]]
            break
    where = f"{file}:{line}" if line else file
    if len(loc) >= 2 and loc[0] == "tables" and isinstance(loc[1], int):
        head = f"tables[{loc[1]}]" + (f" ({table_label})" if table_label else "")
        field = ".".join(str(part) for part in loc[2:]) or "(table entry)"
        return _printable(f"{where}: {head} -> {field}: {message}")
    field = ".".join(str(part) for part in loc) or "(top level)"
    return _printable(f"{where}: {field}: {message}")


def _printable(problem: str) -> str:
    """One line, whatever the names in it hold: a line break in a table name must not split the problem."""
    if problem.isprintable():
        return problem
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in problem)


def _line_numbers(node: yaml.Node, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    """Map each key path of the YAML document to its 1-based line number."""
    lines: dict[tuple[Any, ...], int] = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node)
            lines.update(_line_numbers(value_node, (*path, key)))
            lines[(*path, key)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines.update(_line_numbers(item, (*path, index)))
    return lines
