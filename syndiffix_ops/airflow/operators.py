"""SyntheticTableOperator: one configured table (or one column set of it) -> its synthetic copy.

A thin shell over `syndiffix_ops.pipeline.run_table`. What it adds is what only Airflow has:
connections (turned into SQLAlchemy engines without ever printing a credential), the salt from a
connection or a Variable (masked in logs, never a template field, never in XCom), templating, retries,
Asset events for every table written, and OpenLineage facets.

The module imports only the Task SDK at the top: DAG files import it on every parse, so the warehouse
layer (pandas, SQLAlchemy, the engines) is imported inside `execute`, on the worker.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.sdk import AssetAlias, BaseOperator

from syndiffix_ops.airflow.links import SyntheticReportLink

if TYPE_CHECKING:
    import sqlalchemy as sa

    from syndiffix_ops.airflow.openlineage_facets import PlannedTable, TaskPlan
    from syndiffix_ops.config import PipelineConfig, TableConfig
    from syndiffix_ops.run_plan import LinkedSet
    from syndiffix_ops.run_result import TableRunResult


class SyntheticTableOperator(BaseOperator):
    """Synthesize one table of a syndiffix-ops YAML config into the target warehouse.

    :param config_path: the YAML config (read on the worker when the task runs, not at parse time).
    :param table: the table entry's name (its `name`, else its target, else its source).
    :param column_set: write only this column set of the table (the DAG factory maps one task per set).
    :param linked_set: the tables of the linked set this task writes, parents first, as the DAG planned
        them (`table` is the first); an empty list: the table is planned to be written alone. None (an
        operator on its own): the table alone, or its whole linked set, as the keys say when it runs.
    :param source_conn_id: Airflow connection of the source; default the config's `source_conn_id`.
    :param target_conn_id: Airflow connection of the target; default the config's `target_conn_id`.
    :param salt_conn_id: connection whose password is the salt.
    :param salt_variable: Variable holding the salt (used when no salt_conn_id is given). With neither,
        the pipeline reads the environment variable named by the config's `salt_env`.
    :param report_dir: folder for the HTML quality reports when the config sets no `report_dir`.

    Assets: when `outlets` holds an AssetAlias, every table written is added to it as an Asset named the
    way the Postgres provider names tables (postgres://host:port/database/schema/table), one event per
    table per run. Declare either the alias or fixed Assets, not both, or events are emitted twice.
    """

    template_fields: Sequence[str] = (
        "config_path",
        "table",
        "column_set",
        "source_conn_id",
        "target_conn_id",
        "report_dir",
    )
    ui_color = "#e8f1fb"
    operator_extra_links = (SyntheticReportLink(),)

    def __init__(
        self,
        *,
        config_path: str,
        table: str,
        column_set: str | None = None,
        linked_set: Sequence[str] | None = None,
        source_conn_id: str | None = None,
        target_conn_id: str | None = None,
        salt_conn_id: str | None = None,
        salt_variable: str | None = None,
        report_dir: str | None = None,
        **kwargs: Any,
    ) -> None:
        # Synthesis is CPU-bound: it holds a worker slot for its whole run, there is nothing to defer.
        super().__init__(**kwargs)
        self.config_path = str(config_path)
        self.table = table
        self.column_set = column_set
        self.linked_set = list(linked_set) if linked_set is not None else None
        self.source_conn_id = source_conn_id
        self.target_conn_id = target_conn_id
        self.salt_conn_id = salt_conn_id
        self.salt_variable = salt_variable
        self.report_dir = report_dir
        self._written: list[TableRunResult] = []
        self.report_urls: dict[str, str] = {}  # target table -> this run's report (the extra link)
        self.report_index_url: str | None = None
        self._source_url: sa.URL | None = None
        self._target_url: sa.URL | None = None
        self._planned_set: list[str] | None = None  # an operator on its own: its set as planned here

    def execute(self, context: Any) -> list[dict[str, Any]]:
        """Run the table; a failure no retry can fix (config, missing table or column, type policy,
        schema drift, keys changed since the run was planned) fails the task at once, any other failure
        is left to Airflow's retries."""
        with failing_at_once_when_permanent():
            return self._synthesize(context)

    def _synthesize(self, context: Any) -> list[dict[str, Any]]:
        import sqlalchemy as sa

        from syndiffix_ops.config import load_config
        from syndiffix_ops.run_result import AirflowIds

        config = load_config(self.config_path)
        table = _table_for_task(config, self.table, self.column_set)
        self._source_url, self._target_url = self._urls(config)
        ti = context["ti"]
        source = sa.create_engine(self._source_url)
        target = sa.create_engine(self._target_url)
        # With report_dir (any ObjectStoragePath) the reports are written locally, then copied there.
        with tempfile.TemporaryDirectory(prefix="syndiffix-reports-") as staging:
            try:
                self._written = self._run(
                    config,
                    table,
                    source=source,
                    target=target,
                    run_id=context["run_id"],
                    airflow=AirflowIds(dag_id=ti.dag_id, task_id=ti.task_id, run_id=context["run_id"]),
                    salt=self._salt(),
                    report_dir=Path(staging) if self.report_dir else None,
                )
            finally:
                source.dispose()
                target.dispose()
            self._publish_reports(Path(staging))
        self._emit_asset_events(context)
        return [_summary(result, self.report_urls) for result in self._written]

    def _publish_reports(self, staging: Path) -> None:
        """Set report_urls (target table -> report) and report_index_url, copying to report_dir if set."""
        from syndiffix_ops.airflow.report_storage import publish_reports, storage_path

        if self.report_dir:
            destination = storage_path(self.report_dir)
            self.report_urls = publish_reports(staging, self._written, destination)
            self.report_index_url = str(destination / "index.html") if self.report_urls else None
            return
        local = {r.target_table: Path(r.report_path).resolve() for r in self._written if r.report_path}
        self.report_urls = {table: path.as_uri() for table, path in local.items()}
        first = next(iter(local.values()), None)
        self.report_index_url = (first.parent.parent / "index.html").as_uri() if first else None

    def _urls(self, config: PipelineConfig) -> tuple[sa.URL, sa.URL]:
        """(source, target) SQLAlchemy URLs: from the connections, else from the config's URLs."""
        return source_url(config, self.source_conn_id), target_url(config, self.target_conn_id)

    def _run(self, config: PipelineConfig, table: Any, **arguments: Any) -> list[TableRunResult]:
        """The table alone or its linked set, as the DAG planned it."""
        from syndiffix_ops.linked_pipeline import run_linked_set
        from syndiffix_ops.pipeline import run_table

        if self.linked_set == []:
            return run_table(config, table, **arguments)
        linked_set = self._checked_set(config, table, arguments["source"])
        if linked_set is None:
            return run_table(config, table, **arguments)
        return run_linked_set(config, linked_set, **arguments)

    def _checked_set(self, config: PipelineConfig, table: Any, source: sa.Engine) -> LinkedSet | None:
        """The table's linked set, planned again here (its keys are needed to write it); a set other
        than the one the DAG planned (`linked_set`) fails the task."""
        from syndiffix_ops.run_plan import database_key_reader, plan_run

        read_keys = database_key_reader(source) if config.keys_from_database else None
        linked_set = plan_run(config, read_keys).set_of(table.display_name)
        self._planned_set = list(linked_set.tables) if linked_set else []
        if self.linked_set is not None:
            found = list(linked_set.tables) if linked_set else [table.display_name]
            if found != self.linked_set:
                now = f"goes with {', '.join(found)}" if len(found) > 1 else "goes alone"
                changed, remedy = (
                    (
                        "the source's keys changed after the run was planned",
                        "clear the whole DAG run so that its plan task plans it again",
                    )
                    if config.keys_from_database
                    else (
                        "the config's keys changed after the DAG was parsed",
                        "start a new DAG run once Airflow has parsed the new config",
                    )
                )
                raise PlanChanged(
                    f"linked set {', '.join(self.linked_set)}: {changed} (table {table.display_name} "
                    f"now {now}); {remedy}"
                )
        return linked_set

    def _salt(self) -> bytes | None:
        from airflow.sdk import BaseHook, Variable
        from airflow.sdk.log import mask_secret

        if self.salt_conn_id:
            salt = BaseHook.get_connection(self.salt_conn_id).password
            where = f"the password of connection {self.salt_conn_id!r}"
        elif self.salt_variable:
            salt = Variable.get(self.salt_variable, default=None)
            where = f"Variable {self.salt_variable!r}"
        else:
            return None  # run_table reads the environment variable named by salt_env
        if not salt:
            raise ValueError(f"the salt is empty: set {where} to a long random secret")
        mask_secret(salt)
        return salt.encode()

    def _emit_asset_events(self, context: Any) -> None:
        aliases = [outlet for outlet in self.outlets if isinstance(outlet, AssetAlias)]
        if not aliases or self._target_url is None:
            return
        from airflow.sdk import Asset

        events = context["outlet_events"][aliases[0]]
        for result in self._written:
            uri = asset_uri(self._target_url, *target_parts(result))
            events.add(
                Asset(uri=uri, name=uri),
                extra={"rows": result.rows_written, "lineage_id": result.lineage_id},
            )

    def get_openlineage_facets_on_start(self):
        """Source and target tables from the config, before anything runs (see openlineage_facets)."""
        from syndiffix_ops.airflow import openlineage_facets

        return openlineage_facets.on_start(self._lineage_plan())

    def get_openlineage_facets_on_complete(self, task_instance: Any):
        from syndiffix_ops.airflow import openlineage_facets

        return openlineage_facets.on_complete(self._lineage_plan(), self._written)

    def get_openlineage_facets_on_failure(self, task_instance: Any):
        from syndiffix_ops.airflow import openlineage_facets

        return openlineage_facets.on_failure(self._lineage_plan(), self._written)

    def _lineage_plan(self) -> TaskPlan:
        """The tables this task reads and writes, parents first: its linked set as the DAG planned it;
        for an operator on its own, its set as planned by its run, or before the run as the run will
        plan it (see `_set_names`); else its table."""
        import os

        from syndiffix_ops.airflow.openlineage_facets import TaskPlan
        from syndiffix_ops.config import load_config
        from syndiffix_ops.engines import get_engine, resolved_params
        from syndiffix_ops.fingerprint import salt_fingerprint

        config = load_config(self.config_path)
        own = _table_for_task(config, self.table, self.column_set)
        source_url, target_url = self._urls(config)
        names = self._set_names(config, own.display_name, source_url) or [own.display_name]
        tables = [own if name == own.display_name else config.table(name) for name in names]
        first = config.effective(tables[0])
        salt = self._salt() or (os.environ.get(first.salt_env) or "").encode()
        return TaskPlan(
            source_url=source_url,
            target_url=target_url,
            tables=[_planned_table(config, table) for table in tables],
            target_schema=config.target_schema,
            engine=first.engine,
            parameters=resolved_params(get_engine(first.engine), first.engine_params),
            column_set=self.column_set,
            salt_fingerprint=salt_fingerprint(salt) if salt else None,
        )

    def _set_names(self, config: PipelineConfig, table: str, source: sa.URL) -> list[str]:
        """The linked set this task writes (empty: its table alone). An operator on its own plans it as
        its run does, from the YAML's keys and, with keys_from_database, the source's (a few catalog
        queries, no rows); a source that cannot be reached leaves the table alone in the START event."""
        import sqlalchemy as sa

        from syndiffix_ops.run_plan import database_key_reader, plan_run

        if self.linked_set is not None:
            return self.linked_set
        if self._planned_set is None:
            engine = sa.create_engine(source) if config.keys_from_database else None
            try:
                linked_set = plan_run(config, engine and database_key_reader(engine)).set_of(table)
            except sa.exc.OperationalError as error:
                self.log.warning("linked set of %s not planned for lineage: %s", table, type(error).__name__)
                return []
            finally:
                if engine is not None:
                    engine.dispose()
            self._planned_set = list(linked_set.tables) if linked_set else []
        return self._planned_set


class PlanChanged(Exception):
    """The keys changed between a run's plan task and one of its synthesize tasks."""


@contextmanager
def failing_at_once_when_permanent() -> Iterator[None]:
    """A failure no retry can fix fails the task in its first try; other failures are left to retries."""
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    from syndiffix_ops.errors import is_permanent

    try:
        yield
    except (AirflowFailException, AirflowSkipException):
        raise
    except PlanChanged as error:
        raise AirflowFailException(str(error)) from error
    except Exception as error:
        if is_permanent(error):
            raise AirflowFailException(f"{error} (not retried: it fails the same way until fixed)") from error
        raise


def source_url(config: PipelineConfig, source_conn_id: str | None) -> sa.URL:
    """The source's SQLAlchemy URL: from the Airflow connection, else from the config's URL."""
    return _url("source", source_conn_id or config.source_conn_id, config.source_url)


def target_url(config: PipelineConfig, target_conn_id: str | None) -> sa.URL:
    """The target's SQLAlchemy URL: from the Airflow connection, else from the config's URL."""
    return _url("target", target_conn_id or config.target_conn_id, config.target_url)


def _url(side: str, conn_id: str | None, config_url: Callable[[], str]) -> sa.URL:
    """A side's URL: from its Airflow connection when one is named, else from the config's URL."""
    import sqlalchemy as sa

    return _connection_url(side, conn_id) if conn_id else sa.make_url(config_url())


def _table_for_task(config: PipelineConfig, name: str, column_set: str | None):
    """The table entry, narrowed to one column set when the task writes only that set."""
    from syndiffix_ops.config import ConfigError

    table = config.table(name)
    if column_set is None:
        return table
    if column_set not in table.column_sets:
        raise ConfigError(
            [
                f"{config.config_path}: table {name!r} has no column set {column_set!r} "
                f"(column sets: {sorted(table.column_sets)})"
            ]
        )
    return table.model_copy(update={"column_sets": {column_set: table.column_sets[column_set]}})


def _planned_table(config: PipelineConfig, table: TableConfig) -> PlannedTable:
    from syndiffix_ops.airflow.openlineage_facets import PlannedTable

    effective = config.effective(table)
    return PlannedTable(
        name=table.display_name,
        source_schema=table.schema_name,
        source_table=table.table_name,
        targets=list(table.output_targets().values()),
        aid_columns=list(table.aid_columns),
        epsilon_per_output=getattr(effective.engine_params, "epsilon", None),
        engine=effective.engine,
    )


_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306}


def authority(url: sa.URL) -> str:
    backend = url.get_backend_name()
    return f"{url.host or 'localhost'}:{url.port or _DEFAULT_PORTS.get(backend, 0)}"


def target_parts(result: TableRunResult) -> tuple[str | None, str]:
    # Split by the known schema, not at a dot: a target table name may contain one.
    if result.target_schema and result.target_table.startswith(f"{result.target_schema}."):
        return result.target_schema, result.target_table[len(result.target_schema) + 1 :]
    return None, result.target_table


def asset_uri(url: sa.URL, schema: str | None, table: str) -> str:
    """The Asset URI the Postgres (and MySQL) providers use for a table, so Assets from this operator
    and from SQL operators on the same table are one Asset. Names are percent-encoded: an Asset URI
    must be a valid URI even for a table called "order lines"."""
    backend = url.get_backend_name()
    if backend == "postgresql":
        parts = [url.database, schema or "public", table]
        return f"postgres://{authority(url)}/" + "/".join(quote(str(p), safe="") for p in parts)
    if backend in ("mysql", "mariadb"):
        parts = [schema or url.database, table]
        return f"mysql://{authority(url)}/" + "/".join(quote(str(p), safe="") for p in parts)
    if backend == "sqlite":
        return f"sqlite://{quote(url.database or '')}/{quote(table, safe='')}"
    parts = [url.database, schema, table]
    return f"{backend}://{authority(url)}/" + "/".join(quote(str(p), safe="") for p in parts)


def _summary(result: TableRunResult, report_urls: dict[str, str]) -> dict[str, Any]:
    """What goes to XCom: enough to find the table and its lineage row, nothing secret."""
    return {
        "table": result.table,
        "column_set": result.column_set,
        "target_table": result.target_table,
        "rows_written": result.rows_written,
        "lineage_id": result.lineage_id,
        "report_path": report_urls.get(result.target_table),
    }


def _connection_url(side: str, conn_id: str) -> sa.URL:
    """The URL of an Airflow connection; an undefined one is a config error, which no retry fixes."""
    from airflow.sdk.exceptions import AirflowNotFoundException

    from syndiffix_ops.airflow.hooks import connection_url
    from syndiffix_ops.config import ConfigError

    try:
        return connection_url(conn_id)
    except AirflowNotFoundException:
        raise ConfigError(
            [
                f"{side}: Airflow connection {conn_id!r} is not defined; add it (Admin > Connections, "
                f"`airflow connections add` or AIRFLOW_CONN_{conn_id.upper()})"
            ]
        ) from None
