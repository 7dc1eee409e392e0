"""Declared row rules: a column computed from other synthetic columns after synthesis.

`derive={"sched_dep_time": "hour * 100 + minute"}` leaves `sched_dep_time` out of synthesis and fills it
from the synthetic `hour` and `minute`, so the rule holds on every output row. The expression language is
a small SQL subset, parsed here and evaluated column-wise with pandas (nothing is handed to Python's
eval): numbers, 'strings', NULL, TRUE/FALSE, column names (bare or "double-quoted"), + - * / %, || on
strings, = <> != < <= > >=, IS [NOT] NULL, AND/OR/NOT, CASE [x] WHEN .. THEN .. [ELSE ..] END and the
functions in FUNCTIONS. NULL follows SQL: it propagates through arithmetic and comparisons, a NULL
condition is not true, division or modulo by zero gives NULL. `/` divides exactly (7 / 2 = 3.5).

Expressions are typed before any data is touched: a rule that adds a string to a number, or gives
strings for an integer column, is refused with the derived column and the offending token named.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import InvalidInputError

NUMBER, STRING, BOOLEAN, TIMESTAMP, NULL = "number", "string", "boolean", "timestamp", "null"
FUNCTIONS = {  # name -> (minimum, maximum) argument count; None = any number
    "COALESCE": (1, None),
    "NULLIF": (2, 2),
    "ABS": (1, 1),
    "ROUND": (1, 2),
    "FLOOR": (1, 1),
    "CEIL": (1, 1),
    "CEILING": (1, 1),
    "LEAST": (1, None),
    "GREATEST": (1, None),
    "LOWER": (1, 1),
    "UPPER": (1, 1),
}
KEYWORDS = {"AND", "OR", "NOT", "IS", "NULL", "TRUE", "FALSE", "CASE", "WHEN", "THEN", "ELSE", "END"}
_TOKEN = re.compile(
    r"""\s*(?:
      (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
    | (?P<string>'(?:[^']|'')*')
    | (?P<quoted>"(?:[^"]|"")+")
    | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<operator><=|>=|<>|!=|\|\||[-+*/%=<>(),])
    )""",
    re.VERBOSE,
)
_COMPARISONS = {"=", "<>", "!=", "<", "<=", ">", ">="}


class DeriveError(InvalidInputError):
    """A derive rule that cannot be used; names the derived column and the token at fault."""

    def __init__(self, column: str, message: str, token: str | None = None):
        where = f" at {token!r}" if token is not None else ""
        super().__init__(f"derive of column {column!r}: {message}{where}")
        self.column, self.token = column, token


@dataclass(frozen=True)
class Token:
    kind: str  # number | string | name | keyword | operator | end
    text: str
    position: int


@dataclass(frozen=True)
class Node:
    op: str  # literal | column | unary | binary | is_null | case | call
    token: Token
    children: tuple[Node, ...] = ()
    value: object = None  # literal value, column name, operator or function name, or IS NOT flag


def _tokens(column: str, text: str) -> list[Token]:
    tokens, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            rest = text[position:].lstrip()
            if not rest:
                break
            raise DeriveError(column, "unexpected character", rest[0])
        kind = match.lastgroup
        raw = match.group(kind)
        start = match.start(kind)
        if kind == "word":
            kind = "keyword" if raw.upper() in KEYWORDS else "name"
        elif kind == "quoted":
            kind, raw = "name", raw[1:-1].replace('""', '"')
        elif kind == "string":
            raw = raw[1:-1].replace("''", "'")
        tokens.append(Token(kind, raw, start))
        position = match.end()
    tokens.append(Token("end", "end of expression", len(text)))
    return tokens


class _Parser:
    """Recursive descent over the tokens; precedence from OR (lowest) to unary minus (highest)."""

    def __init__(self, column: str, text: str):
        self.column, self.tokens, self.at = column, _tokens(column, text), 0

    @property
    def token(self) -> Token:
        return self.tokens[self.at]

    def accept(self, *texts: str) -> Token | None:
        token = self.token
        if token.kind in ("keyword", "operator") and token.text.upper() in texts:
            self.at += 1
            return token
        return None

    def expect(self, text: str) -> Token:
        token = self.accept(text)
        if token is None:
            raise DeriveError(self.column, f"expected {text}", self.token.text)
        return token

    def parse(self) -> Node:
        if self.token.kind == "end":
            raise DeriveError(self.column, "the expression is empty")
        node = self.disjunction()
        if self.token.kind != "end":
            raise DeriveError(self.column, "unexpected token", self.token.text)
        return node

    def _binary(self, operand, *operators: str) -> Node:
        node = operand()
        while (token := self.accept(*operators)) is not None:
            node = Node("binary", token, (node, operand()), token.text.upper())
        return node

    def disjunction(self) -> Node:
        return self._binary(self.conjunction, "OR")

    def conjunction(self) -> Node:
        return self._binary(self.negation, "AND")

    def negation(self) -> Node:
        token = self.accept("NOT")
        return Node("unary", token, (self.negation(),), "NOT") if token else self.comparison()

    def comparison(self) -> Node:
        node = self.additive()
        if (token := self.accept(*_COMPARISONS)) is not None:
            return Node("binary", token, (node, self.additive()), "<>" if token.text == "!=" else token.text)
        if (token := self.accept("IS")) is not None:
            negated = self.accept("NOT") is not None
            self.expect("NULL")
            return Node("is_null", token, (node,), negated)
        return node

    def additive(self) -> Node:
        return self._binary(self.multiplicative, "+", "-", "||")

    def multiplicative(self) -> Node:
        return self._binary(self.unary, "*", "/", "%")

    def unary(self) -> Node:
        if (token := self.accept("-", "+")) is not None:
            operand = self.unary()
            return operand if token.text == "+" else Node("unary", token, (operand,), "-")
        return self.primary()

    def primary(self) -> Node:
        token = self.token
        if token.kind == "number":
            self.at += 1
            return Node("literal", token, value=float(token.text))
        if token.kind == "string":
            self.at += 1
            return Node("literal", token, value=token.text)
        if self.accept("NULL", "TRUE", "FALSE"):
            return Node(
                "literal", token, value={"NULL": None, "TRUE": True, "FALSE": False}[token.text.upper()]
            )
        if self.accept("CASE"):
            return self.case(token)
        if self.accept("("):
            node = self.disjunction()
            self.expect(")")
            return node
        if token.kind == "name":
            self.at += 1
            if self.accept("("):
                return self.call(token)
            return Node("column", token, value=token.text)
        raise DeriveError(self.column, "expected a value, a column or (", token.text)

    def call(self, name: Token) -> Node:
        function = name.text.upper()
        if function not in FUNCTIONS:
            raise DeriveError(
                self.column, f"unknown function (known: {', '.join(sorted(FUNCTIONS))})", name.text
            )
        arguments = [self.disjunction()]
        while self.accept(","):
            arguments.append(self.disjunction())
        self.expect(")")
        least, most = FUNCTIONS[function]
        if len(arguments) < least or (most is not None and len(arguments) > most):
            raise DeriveError(self.column, f"{function} takes {least}..{most or 'any'} arguments", name.text)
        return Node("call", name, tuple(arguments), function)

    def case(self, token: Token) -> Node:
        subject = None if self.token.text.upper() == "WHEN" else self.disjunction()
        branches = []
        while self.accept("WHEN"):
            condition = self.disjunction()
            if subject is not None:
                condition = Node("binary", condition.token, (subject, condition), "=")
            self.expect("THEN")
            branches += [condition, self.disjunction()]
        if not branches:
            raise DeriveError(self.column, "CASE needs at least one WHEN", self.token.text)
        if self.accept("ELSE"):
            branches.append(self.disjunction())
        self.expect("END")
        return Node("case", token, tuple(branches))


@dataclass(frozen=True)
class Expression:
    """A parsed rule: the derived column, its text, its tree and the columns it reads."""

    column: str
    text: str
    tree: Node

    @property
    def references(self) -> tuple[str, ...]:
        found: list[str] = []

        def walk(node: Node) -> None:
            if node.op == "column" and node.value not in found:
                found.append(node.value)
            for child in node.children:
                walk(child)

        walk(self.tree)
        return tuple(found)


def parse_expression(column: str, text: str) -> Expression:
    """Parse one rule; a syntax error is a DeriveError naming the column and the offending token."""
    if not isinstance(text, str):
        raise DeriveError(column, f"the expression must be a string, got {type(text).__name__}")
    return Expression(column, text, _Parser(column, text).parse())


def value_kind(series: pd.Series) -> str | None:
    """The expression type of a column, None when expressions cannot use it (e.g. bytes)."""
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return BOOLEAN
    if pd.api.types.is_numeric_dtype(dtype):
        return NUMBER
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return TIMESTAMP
    sample = series.dropna()
    first = sample.iloc[0] if len(sample) else ""
    if isinstance(first, str):
        return STRING
    if isinstance(first, dt.date):
        return TIMESTAMP
    return None


class _Typer:
    """The type of every node, checked before evaluation; errors name the rule's column and token."""

    def __init__(self, column: str, kinds: Mapping[str, str | None]):
        self.column, self.kinds = column, kinds

    def fail(self, message: str, node: Node) -> DeriveError:
        return DeriveError(self.column, message, node.token.text)

    def unify(self, nodes: Sequence[Node], what: str) -> str:
        typed = [(node, self.of(node)) for node in nodes if self.of(node) != NULL]
        for node, kind in typed[1:]:
            if kind != typed[0][1]:
                raise self.fail(f"{what} mixes {typed[0][1]} and {kind} values", node)
        return typed[0][1] if typed else NULL

    def expect(self, node: Node, *wanted: str) -> None:
        kind = self.of(node)
        if kind not in (*wanted, NULL):
            raise self.fail(f"expected {' or '.join(wanted)}, got {kind}", node)

    def of(self, node: Node) -> str:
        return getattr(self, f"_{node.op}")(node)

    def _literal(self, node: Node) -> str:
        value = node.value
        if value is None:
            return NULL
        return BOOLEAN if isinstance(value, bool) else NUMBER if isinstance(value, float) else STRING

    def _column(self, node: Node) -> str:
        if node.value not in self.kinds:
            raise self.fail(f"unknown column (columns: {', '.join(map(str, self.kinds))})", node)
        kind = self.kinds[node.value]
        if kind is None:
            raise self.fail("this column's type cannot be used in an expression", node)
        return kind

    def _unary(self, node: Node) -> str:
        kind = BOOLEAN if node.value == "NOT" else NUMBER
        self.expect(node.children[0], kind)
        return kind

    def _binary(self, node: Node) -> str:
        left, right = node.children
        if node.value in ("AND", "OR"):
            self.expect(left, BOOLEAN), self.expect(right, BOOLEAN)
            return BOOLEAN
        if node.value == "||":
            self.expect(left, STRING), self.expect(right, STRING)
            return STRING
        if node.value in _COMPARISONS:
            self._comparable(left, right, node)
            return BOOLEAN
        self.expect(left, NUMBER), self.expect(right, NUMBER)
        return NUMBER

    def _comparable(self, left: Node, right: Node, node: Node) -> None:
        kinds = {self.of(left), self.of(right)} - {NULL}
        if kinds == {TIMESTAMP, STRING}:
            literal = left if self.of(left) == STRING else right
            if literal.op != "literal" or pd.isna(pd.to_datetime(literal.value, errors="coerce")):
                raise self.fail(
                    "a timestamp compares with a timestamp or a date literal like '2013-01-31'", literal
                )
        elif len(kinds) > 1:
            raise self.fail(f"cannot compare {' with '.join(sorted(kinds))}", node)

    def _is_null(self, node: Node) -> str:
        self.of(node.children[0])
        return BOOLEAN

    def _case(self, node: Node) -> str:
        children = node.children
        conditions, results = children[0 : len(children) - 1 : 2], list(children[1::2])
        if len(children) % 2:
            results.append(children[-1])
        for condition in conditions:
            self.expect(condition, BOOLEAN)
        return self.unify(results, "CASE")

    def _call(self, node: Node) -> str:
        function, arguments = node.value, node.children
        if function in ("COALESCE", "LEAST", "GREATEST", "NULLIF"):
            return self.unify(arguments, function)
        if function in ("LOWER", "UPPER"):
            self.expect(arguments[0], STRING)
            return STRING
        self.expect(arguments[0], NUMBER)
        if function == "ROUND" and len(arguments) == 2:
            digits = arguments[1]
            if digits.op != "literal" or not isinstance(digits.value, float) or not digits.value.is_integer():
                raise self.fail("ROUND's digits must be a whole number", digits)
        return NUMBER


_CANONICAL = {NUMBER: "Float64", STRING: "string", BOOLEAN: "boolean", TIMESTAMP: "datetime64[ns]"}


def _canonical(series: pd.Series, kind: str) -> pd.Series:
    if kind == TIMESTAMP:
        return pd.to_datetime(series)
    return series.astype(_CANONICAL[kind])


class _Evaluator:
    """Evaluates a typed tree column-wise over a frame (all NULLs typed by their context)."""

    def __init__(self, frame: pd.DataFrame, kinds: Mapping[str, str | None], typer: _Typer):
        self.frame, self.kinds, self.typer = frame, kinds, typer
        self.index = frame.index

    def null(self, kind: str) -> pd.Series:
        kind = NUMBER if kind == NULL else kind
        return pd.Series(pd.NA if kind != TIMESTAMP else pd.NaT, index=self.index, dtype=_CANONICAL[kind])

    def of(self, node: Node, context: str = NULL) -> pd.Series:
        if node.op == "literal":
            if node.value is None:
                return self.null(context)
            kind = self.typer.of(node)
            if kind == STRING and context == TIMESTAMP:
                return pd.Series(pd.Timestamp(node.value), index=self.index)
            return pd.Series(node.value, index=self.index, dtype=_CANONICAL[kind])
        if node.op == "column":
            return _canonical(self.frame[node.value], self.kinds[node.value])
        return getattr(self, f"_{node.op}")(node)

    def _unary(self, node: Node) -> pd.Series:
        if node.value == "NOT":
            return ~self.of(node.children[0], BOOLEAN)
        return -self.of(node.children[0], NUMBER)

    def _binary(self, node: Node) -> pd.Series:
        left, right = node.children
        if node.value in _COMPARISONS:
            kinds = {self.typer.of(left), self.typer.of(right)} - {NULL}
            context = TIMESTAMP if TIMESTAMP in kinds else (kinds.pop() if kinds else NULL)
            return _compare(node.value, self.of(left, context), self.of(right, context))
        context = {"AND": BOOLEAN, "OR": BOOLEAN, "||": STRING}.get(node.value, NUMBER)
        a, b = self.of(left, context), self.of(right, context)
        if node.value == "AND":
            return a & b
        if node.value == "OR":
            return a | b
        if node.value in ("+", "||"):
            return a + b
        if node.value == "-":
            return a - b
        if node.value == "*":
            return a * b
        by_zero = (b == 0).fillna(False)
        quotient = (a / b).mask(by_zero)
        if node.value == "/":
            return quotient
        return (a - b * np.trunc(quotient)).mask(by_zero)  # SQL's remainder: the sign of the dividend

    def _is_null(self, node: Node) -> pd.Series:
        missing = self.of(node.children[0]).isna()
        return (~missing if node.value else missing).astype("boolean")

    def _case(self, node: Node) -> pd.Series:
        kind = self.typer.of(node)
        children = node.children
        result, taken = self.null(kind), np.zeros(len(self.index), dtype=bool)
        for at in range(0, len(children) - 1, 2):
            hit = self.of(children[at], BOOLEAN).fillna(False).to_numpy(dtype=bool) & ~taken
            result = result.mask(hit, self.of(children[at + 1], kind))
            taken |= hit
        if len(children) % 2:
            result = result.mask(~taken, self.of(children[-1], kind))
        return result

    def _call(self, node: Node) -> pd.Series:
        function, kind = node.value, self.typer.of(node)
        arguments = [self.of(argument, kind if kind != NUMBER else NUMBER) for argument in node.children]
        first = arguments[0]
        if function == "COALESCE":
            for other in arguments[1:]:
                first = first.where(first.notna(), other)
            return first
        if function == "NULLIF":
            return first.mask(_compare("=", first, arguments[1]).fillna(False))
        if function in ("LEAST", "GREATEST"):
            table = pd.concat(arguments, axis=1)
            chosen = table.min(axis=1) if function == "LEAST" else table.max(axis=1)
            return _canonical(chosen, kind if kind != NULL else NUMBER)
        if function in ("LOWER", "UPPER"):
            return first.str.lower() if function == "LOWER" else first.str.upper()
        if function == "ABS":
            return first.abs()
        if function == "FLOOR":
            return np.floor(first)
        if function in ("CEIL", "CEILING"):
            return np.ceil(first)
        scale = 10.0 ** (node.children[1].value if len(node.children) == 2 else 0)
        return np.sign(first) * np.floor(first.abs() * scale + 0.5) / scale  # half away from zero, as SQL


def _compare(op: str, a: pd.Series, b: pd.Series) -> pd.Series:
    if op == "=":
        raw = a == b
    elif op == "<>":
        raw = a != b
    elif op == "<":
        raw = a < b
    elif op == "<=":
        raw = a <= b
    elif op == ">":
        raw = a > b
    else:
        raw = a >= b
    return raw.astype("boolean").mask(a.isna() | b.isna())


@dataclass(frozen=True)
class _Target:
    """What a derived column's values are cast to: the source column's type."""

    dtype: object
    kind: str
    holds_dates: bool  # an object column of datetime.date values (SQL DATE)


class DerivedColumns:
    """The derive rules of one table, checked against the table's columns and types.

    `frame` is the source table (AID columns included); only its column names and types are used, never
    its values' contents beyond telling dates from strings in object columns.
    """

    def __init__(
        self, rules: Mapping[str, str | Expression], frame: pd.DataFrame, aid_columns: Sequence[str] = ()
    ):
        self.order = [str(c) for c in frame.columns if c not in aid_columns]
        self.expressions = {
            column: rule if isinstance(rule, Expression) else parse_expression(column, rule)
            for column, rule in rules.items()
        }
        self.kinds = {name: value_kind(frame[name]) for name in self.order}
        self.targets: dict[str, _Target] = {}
        for column, expression in self.expressions.items():
            if column in aid_columns or column not in self.kinds:
                what = "an AID column" if column in aid_columns else "not a column of the table"
                raise DeriveError(column, f"the derived column is {what}")
            usable = {name: kind for name, kind in self.kinds.items() if name not in self.expressions}
            typer = _Typer(column, usable)
            self._check_references(expression, aid_columns)
            result = typer.of(expression.tree)
            target = self.kinds[column]
            if target is None or result not in (target, NULL):
                raise DeriveError(column, f"the expression gives {result} values, the column holds {target}")
            holds_dates = target == TIMESTAMP and not pd.api.types.is_datetime64_any_dtype(
                frame[column].dtype
            )
            self.targets[column] = _Target(frame[column].dtype, target, holds_dates)

    def _check_references(self, expression: Expression, aid_columns: Sequence[str]) -> None:
        for name in expression.references:
            if name in aid_columns:
                raise DeriveError(expression.column, "AID columns are never output and cannot be used", name)
            if name in self.expressions:
                raise DeriveError(
                    expression.column, "a derived column cannot use another derived column", name
                )

    @property
    def synthesized(self) -> list[str]:
        """The table's non-AID columns that are synthesized (all but the derived ones), in table order."""
        return [name for name in self.order if name not in self.expressions]

    def complete(self, synthetic: pd.DataFrame) -> pd.DataFrame:
        """The synthetic table with every derived column computed and the table's column order."""
        kinds = {name: self.kinds[name] for name in self.synthesized}
        out = dict(synthetic.items())
        for column, expression in self.expressions.items():
            typer = _Typer(column, kinds)
            values = _Evaluator(synthetic, kinds, typer).of(expression.tree, self.targets[column].kind)
            out[column] = _cast(values, self.targets[column])
        return pd.DataFrame({name: out[name] for name in self.order}, index=synthetic.index)


def _cast(values: pd.Series, target: _Target) -> pd.Series:
    dtype, missing = target.dtype, values.isna().to_numpy()
    if target.kind == NUMBER:
        numbers = values.to_numpy(dtype="float64", na_value=np.nan)
        if not pd.api.types.is_integer_dtype(dtype):
            return pd.Series(numbers, index=values.index).astype(dtype)
        whole = np.sign(numbers) * np.floor(np.abs(numbers) + 0.5)
        if missing.any():
            return pd.Series(whole, index=values.index).astype("Int64")
        return pd.Series(whole, index=values.index).astype(dtype)
    if target.kind == TIMESTAMP:
        stamps = pd.to_datetime(values)
        if target.holds_dates:
            return pd.Series(stamps.dt.date.to_numpy(dtype=object), index=values.index).where(~missing, None)
        return stamps.astype(dtype)
    if target.kind == BOOLEAN and missing.any() and dtype == np.dtype(bool):
        return values.astype("boolean")
    if dtype == np.dtype(object):
        return pd.Series(values.to_numpy(dtype=object, na_value=None), index=values.index)
    return values.astype(dtype)
