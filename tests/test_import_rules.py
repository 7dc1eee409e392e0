"""The one rule of the layout that is not a suggestion: core <- warehouse layer <- Airflow shell."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _imported_top_level_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


CORE_MODULES = _modules(ROOT / "core")
WAREHOUSE_MODULES = [
    p for p in _modules(ROOT / "syndiffix_ops") if "airflow" not in p.relative_to(ROOT).parts
]


@pytest.mark.parametrize("path", CORE_MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_core_never_imports_sqlalchemy_airflow_or_the_warehouse_layer(path: Path):
    forbidden = _imported_top_level_modules(path) & {"sqlalchemy", "airflow", "syndiffix_ops"}
    assert not forbidden, f"{path.relative_to(ROOT)} imports {sorted(forbidden)}"


@pytest.mark.parametrize("path", WAREHOUSE_MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_warehouse_layer_never_imports_airflow(path: Path):
    assert "airflow" not in _imported_top_level_modules(path), f"{path.relative_to(ROOT)} imports airflow"


def test_the_rule_sees_the_packages():
    assert any(p.name == "__init__.py" for p in CORE_MODULES)
    assert any(p.name == "__init__.py" for p in WAREHOUSE_MODULES)


def test_the_rule_catches_a_forbidden_import(tmp_path: Path):
    offender = tmp_path / "offender.py"
    offender.write_text("import numpy\nfrom sqlalchemy.orm import Session\nimport airflow.models\n")
    assert _imported_top_level_modules(offender) == {"numpy", "sqlalchemy", "airflow"}
