"""A table's `where:` filter: exactly one SQL boolean expression, parsed and re-rendered before use.

`where` is SQL written by the config's author, who holds the source credentials, so it may use any
function or subquery the source allows. It may not be anything but one expression: a `;`, a second
statement, a data-changing statement inside a subquery, or text that closes the surrounding query (the
PostgreSQL read wraps it in `COPY (...) TO STDOUT`) is refused with one line saying why.

What reaches the database is the expression re-rendered from sqlglot's parse tree in the source's
dialect, without comments: the server runs exactly what was checked (no `--` comment swallowing the rest
of a statement, no quoting the parser and the server read differently), and the text is handed to
SQLAlchemy as a literal, so a colon inside a string (`label = 'ratio :high'`) is never a bind parameter.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

# SQLAlchemy dialect name -> sqlglot dialect name; others parse with sqlglot's generic dialect.
_DIALECTS = {"postgresql": "postgres", "mysql": "mysql", "mariadb": "mysql", "sqlite": "sqlite"}
_STATEMENTS = (exp.DDL, exp.DML, exp.Command, exp.Transaction, exp.Commit, exp.Rollback, exp.Into, exp.Copy)
_STATEMENTS += (exp.Set, exp.Use, exp.Pragma, exp.Describe, exp.Show, exp.Kill, exp.Grant, exp.Analyze)


class WhereError(ValueError):
    """A `where:` that is not exactly one boolean expression; the message says what was found."""


def render_where(where: str, dialect: str | None) -> str:
    """`where` re-rendered in parentheses from its parse tree in `dialect` (a SQLAlchemy dialect name)."""
    read = _DIALECTS.get(dialect or "")
    tree = _one_expression(where, read)
    return f"({tree.sql(dialect=read, comments=False)})"


def check_where(where: str, dialect: str | None) -> None:
    """Refuse a `where` that is not one expression; with no dialect known (a connection id), accept
    what any supported dialect parses as one expression."""
    if dialect is not None:
        render_where(where, dialect)
        return
    problems = []
    for candidate in ("postgresql", "mysql", "sqlite"):
        try:
            render_where(where, candidate)
            return
        except WhereError as error:
            problems.append(str(error))
    raise WhereError(problems[0])


def _one_expression(where: str, read: str | None) -> exp.Expression:
    try:
        tokens = sqlglot.Dialect.get_or_raise(read).tokenize(where)
        if any(token.token_type is TokenType.SEMICOLON for token in tokens):
            raise WhereError("where: a ';' ends a statement; write one boolean expression without ';'")
        statements = sqlglot.parse(where, read=read)
    except (ParseError, TokenError) as error:
        raise WhereError(f"where: not one SQL expression ({_first_problem(error)})") from None
    if len(statements) != 1 or statements[0] is None:
        raise WhereError("where: write exactly one boolean expression (e.g. status = 'paid')")
    tree = statements[0]
    inner = tree.unnest() if isinstance(tree, exp.Paren) else tree
    if not isinstance(inner, exp.Condition) or isinstance(inner, exp.Query | exp.Subquery | exp.Alias):
        raise WhereError(
            f"where: {type(inner).__name__.lower()} is not a boolean expression; write a condition "
            "on the source's columns (e.g. status = 'paid')"
        )
    statement = next(tree.find_all(*_STATEMENTS), None)
    if statement is not None:
        raise WhereError(
            f"where: holds a {statement.key.upper()} statement; a filter may only read (use a condition, "
            "or a SELECT subquery)"
        )
    return tree


def _first_problem(error: ParseError | TokenError) -> str:
    if isinstance(error, ParseError) and error.errors:
        first = error.errors[0]
        description = first.get("description") or "syntax error"
        if description.startswith("Required keyword"):
            description = "incomplete expression"
        return f"{description} at line {first.get('line')}, column {first.get('col')}"
    return str(error).splitlines()[0]
