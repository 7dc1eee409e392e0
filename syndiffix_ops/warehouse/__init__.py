"""Warehouse I/O: reflect source tables, read them in chunks, write synthetic tables atomically."""

from syndiffix_ops.warehouse.identifiers import IdentifierError
from syndiffix_ops.warehouse.read import (
    RowLimitExceeded,
    SourceColumn,
    SourceTable,
    SourceTableError,
    check_row_limit,
    read_columns,
    reflect_table,
)
from syndiffix_ops.warehouse.types import (
    ColumnValueError,
    UnsupportedTypeError,
    ValueKind,
    to_python,
    value_kind,
)
from syndiffix_ops.warehouse.write import TargetColumn, TargetSchemaError, target_type_sql, write_table

__all__ = [
    "ColumnValueError",
    "IdentifierError",
    "RowLimitExceeded",
    "SourceColumn",
    "SourceTable",
    "SourceTableError",
    "TargetColumn",
    "TargetSchemaError",
    "UnsupportedTypeError",
    "ValueKind",
    "check_row_limit",
    "read_columns",
    "reflect_table",
    "target_type_sql",
    "to_python",
    "value_kind",
    "write_table",
]
