"""Hostile YAML configs are refused with one line naming the file, before they are expanded.

The campaign saw an alias bomb run 52 s to a MemoryError, 5,000 nested lists end in "maximum recursion
depth exceeded", and a 60,000-table config still validating after 600 s. These tests count the work
(which loader stages ran), never the time.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from syndiffix_ops import config_file
from syndiffix_ops.airflow.dag_factory import dag_spec
from syndiffix_ops.cli import EXIT_USAGE, main
from syndiffix_ops.config import ConfigError, load_config

HEAD = "source: sqlite:///source.db\ntarget: sqlite:///target.db\n"


def alias_bomb(levels: int = 9) -> str:
    """Each level lists the previous one ten times: 10**levels values from a dozen short lines."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    return HEAD + "\n".join(lines) + "\ntables: [{source: orders}]\n"


@pytest.fixture
def stages(monkeypatch):
    """How often the loader composed the node graph and constructed Python values (both run only after
    the streaming checks passed)."""
    calls = {"compose": 0, "construct": 0}
    compose, construct = yaml.compose, yaml.SafeLoader.construct_document

    def counting_compose(*args, **kwargs):
        calls["compose"] += 1
        return compose(*args, **kwargs)

    def counting_construct(self, node):
        calls["construct"] += 1
        return construct(self, node)

    monkeypatch.setattr(yaml, "compose", counting_compose)
    monkeypatch.setattr(yaml.SafeLoader, "construct_document", counting_construct)
    return calls


def _refusal(path: Path) -> str:
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    [line] = refused.value.problems
    assert line.startswith(str(path)) and "\n" not in line
    return line


def test_an_alias_bomb_is_refused_before_anything_is_constructed(tmp_path, stages):
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb(), encoding="utf-8")
    assert "expands to more than 200,000 values" in _refusal(path)
    assert stages["construct"] == 0


def test_too_many_aliases_are_refused_while_streaming(tmp_path, stages):
    path = tmp_path / "aliases.yaml"
    path.write_text(
        HEAD + "x: &x 1\ny: [" + ", ".join(["*x"] * (config_file.MAX_ALIASES + 1)) + "]\ntables: []\n",
        encoding="utf-8",
    )
    assert f"more than {config_file.MAX_ALIASES} YAML aliases" in _refusal(path)
    assert stages == {"compose": 0, "construct": 0}


@pytest.mark.parametrize("nesting", ["[" * 5000 + "]" * 5000, "{a: " * 5000 + "1" + "}" * 5000])
def test_deep_nesting_is_refused_before_the_recursive_composer_runs(tmp_path, stages, nesting):
    path = tmp_path / "deep.yaml"
    path.write_text(HEAD + f"tables: {nesting}\n", encoding="utf-8")
    assert _refusal(path).startswith(f"{path}:3: lists and mappings nested more than 50 deep")
    assert stages == {"compose": 0, "construct": 0}


def test_too_many_tables_are_refused_before_validation(tmp_path, stages):
    tables = ", ".join(f"{{source: t{i}}}" for i in range(config_file.MAX_TABLES + 1))
    path = tmp_path / "tables.yaml"
    path.write_text(HEAD + f"tables: [{tables}]\n", encoding="utf-8")
    assert f"{config_file.MAX_TABLES + 1:,} tables, more than the {config_file.MAX_TABLES:,}" in _refusal(
        path
    )
    assert stages["construct"] == 0


def test_an_oversized_file_is_refused_unparsed(tmp_path, stages):
    path = tmp_path / "big.yaml"
    path.write_text(HEAD + "tables: [{source: t}]\n" + "#" * config_file.MAX_FILE_BYTES, encoding="utf-8")
    assert "larger than 1,000,000 bytes" in _refusal(path)
    assert stages == {"compose": 0, "construct": 0}


def test_ordinary_anchors_still_load(tmp_path):
    path = tmp_path / "ok.yaml"
    tables = "".join(f"  - {{source: t{i}, aid_columns: *ids}}\n" for i in range(1, 20))
    path.write_text(
        HEAD + "tables:\n  - {source: t0, aid_columns: &ids [customer]}\n" + tables, encoding="utf-8"
    )
    config = load_config(path)
    assert [t.aid_columns for t in config.tables] == [["customer"]] * 20


def test_cli_validate_exits_2_naming_the_file(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb(), encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == EXIT_USAGE
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(path) in errors[0] and "expands to more than" in errors[0]


def test_the_dag_factory_gets_the_same_quick_refusal(tmp_path, stages):
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb(), encoding="utf-8")
    with pytest.raises(ConfigError, match="expands to more than"):
        dag_spec(path)
    assert stages["construct"] == 0
