"""Read a YAML config file within fixed bounds, so one hostile or broken file costs little.

A config is small: a few tables, a few keys each. A file far outside that shape is refused before it is
expanded, with one line naming the file (and the line, where there is one):
  - more than MAX_FILE_BYTES bytes;
  - collections nested deeper than MAX_DEPTH (PyYAML builds nested collections recursively, so a deep
    file would otherwise end in "maximum recursion depth exceeded"); checked on the parser's event
    stream, which is read without recursion;
  - more than MAX_ALIASES aliases, or aliases that expand to more than MAX_NODES values (an "alias
    bomb": a few lines that expand to billions of values); the expanded size is counted on the node
    graph, where an alias is one shared node, before anything is constructed;
  - more than MAX_TABLES tables.
Only then is the document constructed into Python values. The Airflow DAG processor parses every config
on every pass, so these bounds also keep one bad file from tying it up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MAX_FILE_BYTES = 1_000_000
MAX_DEPTH = 50
MAX_ALIASES = 1_000
MAX_NODES = 200_000
MAX_TABLES = 2_000


class ConfigFileError(ValueError):
    """A config file that cannot be read or is outside the bounds; the message is one line."""


def read_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    """(the document's Python value, its node tree for line numbers) of a config file within bounds."""
    text = _bounded_text(path)
    try:
        _check_events(path, text)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None:
            _check_expanded_size(path, node)
            _check_table_count(path, node)
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigFileError(f"{where}: not valid YAML ({getattr(error, 'problem', error)})") from None
    return data, node


def _bounded_text(path: Path) -> str:
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise ConfigFileError(f"{path}: cannot read the file ({error.strerror})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigFileError(
            f"{path}: the file is larger than {MAX_FILE_BYTES:,} bytes, far beyond any pipeline config; "
            "split it into several configs"
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigFileError(f"{path}: not UTF-8 text (byte {error.start})") from None


def _check_events(path: Path, text: str) -> None:
    depth = aliases = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise ConfigFileError(
                    f"{path}:{event.start_mark.line + 1}: lists and mappings nested more than {MAX_DEPTH} "
                    "deep; a pipeline config needs a handful of levels"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise ConfigFileError(
                    f"{path}:{event.start_mark.line + 1}: more than {MAX_ALIASES} YAML aliases (*name); "
                    "write the values out or use `defaults:`"
                )


def _check_expanded_size(path: Path, root: yaml.Node) -> None:
    """Count the values the document expands to, each shared (aliased) node once per use, stopping at
    the bound; a node's count is memoized, so the work is proportional to the file, not the expansion."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(item) for item in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(key) + size(value) for key, value in node.value)
        total = min(total, MAX_NODES + 1)  # keeps the numbers small; anything above is refused anyway
        sizes[id(node)] = total
        return total

    if size(root) > MAX_NODES:
        raise ConfigFileError(
            f"{path}: the document expands to more than {MAX_NODES:,} values (YAML aliases repeating "
            "aliases); write the values out or use `defaults:`"
        )


def _check_table_count(path: Path, root: yaml.Node) -> None:
    if not isinstance(root, yaml.MappingNode):
        return
    for key, value in root.value:
        if (
            isinstance(key, yaml.ScalarNode)
            and key.value == "tables"
            and isinstance(value, yaml.SequenceNode)
        ) and len(value.value) > MAX_TABLES:
            raise ConfigFileError(
                f"{path}:{value.start_mark.line + 1}: {len(value.value):,} tables, more than the "
                f"{MAX_TABLES:,} one config may hold; split the tables over several configs"
            )
