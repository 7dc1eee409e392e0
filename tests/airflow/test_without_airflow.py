"""The core and the warehouse layer work where Airflow is not installed: Airflow is an extra.

Runs a fresh interpreter in which `import airflow` fails, as on a machine without the extra, and uses
the core, the warehouse layer and the CLI there."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCK_AIRFLOW = textwrap.dedent(
    """
    import importlib.abc, sys

    class NoAirflow(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "airflow" or name.startswith("airflow."):
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, NoAirflow())
    """
)


def _run_without_airflow(code: str, tmp_path) -> subprocess.CompletedProcess:
    script = tmp_path / "probe.py"
    script.write_text(BLOCK_AIRFLOW + textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path)


def test_airflow_is_really_blocked_in_the_probe(tmp_path):
    result = _run_without_airflow("import airflow\n", tmp_path)
    assert result.returncode != 0 and "No module named 'airflow'" in result.stderr


def test_core_warehouse_layer_and_cli_work_without_airflow(tmp_path):
    result = _run_without_airflow(
        """
        from pathlib import Path

        import sqlalchemy as sa
        from click.testing import CliRunner

        import pandas as pd
        import syndiffix_core
        import syndiffix_ops
        from syndiffix_ops import config, engines, lineage, pipeline, report, warehouse
        from syndiffix_ops.airflow.provider import get_provider_info
        from syndiffix_ops.cli import main

        frame = pd.DataFrame({"x": [i % 7 for i in range(400)], "y": [i % 3 == 0 for i in range(400)]})
        synthetic = syndiffix_core.synthesize(frame, salt=b"no-airflow")
        assert list(synthetic.columns) == ["x", "y"] and len(synthetic) > 300

        here = Path.cwd()
        engine = sa.create_engine(f"sqlite:///{here / 'source.db'}")
        frame.to_sql("t", engine, index=False)
        engine.dispose()
        (here / "c.yaml").write_text(
            f"source: sqlite:///{here / 'source.db'}\\n"
            f"target: sqlite:///{here / 'target.db'}\\n"
            "tables:\\n  - source: t\\n"
        )
        outcome = CliRunner().invoke(main, ["validate", str(here / "c.yaml")])
        assert outcome.exit_code == 0, outcome.output
        assert get_provider_info()["package-name"] == "syndiffix-ops"
        import sys
        assert not any(m == "airflow" or m.startswith("airflow.") for m in sys.modules)
        print("ok")
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("ok")
