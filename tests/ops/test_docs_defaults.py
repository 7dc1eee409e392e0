"""The defaults the docs state are the defaults the code has: each documented block is read and compared."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from syndiffix_ops.config import DpBudgetConfig, QualityConfig, RiskConfig, parse_config
from syndiffix_ops.engines import SyndiffixParams, get_engine, resolved_params

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _yaml_block_after(document: str, marker: str, top_key: str) -> dict:
    """The first ```yaml block after `marker` whose text starts with `top_key:`."""
    text = (DOCS / document).read_text(encoding="utf-8")
    start = text.index(marker)
    for block in re.findall(r"```yaml\n(.*?)```", text[start:], flags=re.S):
        if block.lstrip().startswith(f"{top_key}:"):
            return yaml.safe_load(block)[top_key]
    raise AssertionError(f"{document}: no yaml block starting with {top_key}: after {marker!r}")


def test_the_documented_syndiffix_params_are_the_engine_defaults():
    documented = _yaml_block_after("config.md", "### `engine_params` of `syndiffix`", "engine_params")
    assert documented == resolved_params(get_engine("syndiffix"), SyndiffixParams())


def test_the_documented_table_defaults_are_the_effective_defaults():
    text = (DOCS / "config.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", text, flags=re.M))
    effective = parse_config({"source": "sqlite://", "target": "sqlite:///t.db", "tables": [{"source": "t"}]})
    table = effective.effective(effective.tables[0])
    for key in ("engine", "mode", "on_schema_change", "read_chunk_rows", "min_rows"):
        documented = rows[key].strip().strip("`")
        actual = getattr(table, key)
        assert documented == str(getattr(actual, "value", actual)), key


def test_the_documented_quality_and_risk_blocks_are_the_config_defaults():
    assert _yaml_block_after("report.md", "## Scores", "quality") == QualityConfig().model_dump(mode="json")
    assert _yaml_block_after("risk.md", "## Configuration", "risk") == RiskConfig().model_dump(mode="json")


def test_the_documented_dp_budget_block_is_the_config_default():
    documented = _yaml_block_after("dp-marginals.md", "## The budget across releases", "dp")
    assert documented == DpBudgetConfig().model_dump(mode="json")
