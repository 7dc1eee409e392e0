"""The `syndiffix` command line: CSV in, synthetic CSV out, one-line errors with exit status 2."""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from syndiffix_core import cli


@pytest.fixture
def people_csv(tmp_path):
    rng = np.random.default_rng(0)
    n = 2000
    frame = pd.DataFrame(
        {
            "person": np.arange(n) % 500,
            "age": rng.integers(18, 90, n),
            "income": np.round(rng.normal(50, 10, n), 2),
            "city": rng.choice(["Berlin", "Paris", "Rome"], n),
            "member": np.where(rng.random(n) < 0.4, "true", "false"),
            "joined": (
                pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 10**7, n), unit="s")
            ).astype(str),
        }
    )
    frame.loc[rng.random(n) < 0.05, "income"] = np.nan
    path = tmp_path / "people.csv"
    frame.to_csv(path, index=False)
    return path


COLUMNS = ["--columns", "age:i", "income:r", "city:s", "member:b", "joined:t"]


def run(args, capsys, monkeypatch, salt="cli-salt"):
    if salt is None:
        monkeypatch.delenv(cli.SALT_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(cli.SALT_VARIABLE, salt)
    status = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_csv_to_stdout_with_declared_types(people_csv, capsys, monkeypatch):
    status, out, _ = run([people_csv, *COLUMNS, "--aidcolumns", "person"], capsys, monkeypatch)
    assert status == 0
    result = pd.read_csv(io.StringIO(out))
    assert list(result.columns) == ["age", "income", "city", "member", "joined"]
    assert abs(len(result) - 2000) < 100
    assert set(result["city"]) <= {"Berlin", "Paris", "Rome"}
    assert set(result["member"].dropna()) <= {True, False}
    assert result["age"].between(0, 128).all()  # values fill their power-of-two cells
    assert result["income"].isna().mean() == pytest.approx(0.05, abs=0.025)
    assert pd.to_datetime(result["joined"]).between("2020-01-01", "2020-05-01").all()


def test_same_salt_same_output_and_salt_flag_overrides_the_environment(
    people_csv, capsys, monkeypatch, tmp_path
):
    first = run([people_csv, *COLUMNS], capsys, monkeypatch)[1]
    again = run([people_csv, *COLUMNS], capsys, monkeypatch)[1]
    flagged = run([people_csv, *COLUMNS, "--salt", "other"], capsys, monkeypatch)[1]
    assert first == again
    assert first != flagged
    output = tmp_path / "out.csv"
    status, out, _ = run([people_csv, *COLUMNS, "-o", output], capsys, monkeypatch)
    assert status == 0 and out == ""
    assert output.read_text() == first


def test_reference_flags_change_the_parameters(people_csv):
    args = cli.build_parser().parse_args(
        [
            str(people_csv),
            "-lcf",
            "4",
            "-range",
            "20",
            "-sing",
            "6",
            "-thresh_sd",
            "0.5",
            "-noise_sd",
            "2",
            "--outlier-count",
            "1",
            "3",
            "--top-count",
            "2",
            "4",
            "--no-clustering",
            "--clustering-maincolumn",
            "age",
            "--clustering-mainfeatures",
            "income",
            "city",
            "--clustering-samplesize",
            "500",
            "--clustering-maxweight",
            "12",
            "--clustering-thresh-merge",
            "0.2",
            "--precision-limit-row-fraction",
            "100",
            "--precision-limit-depth-threshold",
            "10",
        ]
    )
    anonymization, bucketization, clustering = cli.parameters(args)
    assert anonymization.low_count_params.low_threshold == 4
    assert anonymization.low_count_params.layer_sd == 0.5
    assert anonymization.layer_noise_sd == 2
    assert (anonymization.outlier_count.lower, anonymization.outlier_count.upper) == (1, 3)
    assert (anonymization.top_count.lower, anonymization.top_count.upper) == (2, 4)
    assert (bucketization.range_low_threshold, bucketization.singularity_low_threshold) == (20, 6)
    assert (bucketization.precision_limit_row_fraction, bucketization.precision_limit_depth_threshold) == (
        100,
        10,
    )
    assert not clustering.enabled
    assert clustering.main_column == "age" and clustering.main_features == ("income", "city")
    assert (clustering.sample_size, clustering.max_weight, clustering.merge_threshold) == (500, 12, 0.2)


def test_verbose_prints_progress_and_parameters_on_stderr(people_csv, capsys, monkeypatch):
    # Without --columns all six columns are synthesized (types detected), so the table is clustered.
    status, out, err = run([people_csv, "--verbose"], capsys, monkeypatch)
    assert status == 0
    assert "synthesize" in err and "done" in err
    assert "ClusteringParams" in err
    clusters = [line for line in err.splitlines() if "clusters (unsatisfied dependence" in line]
    assert len(clusters) == 1 and "city" in clusters[0] and "person" in clusters[0]
    assert "cli-salt" not in err + out.splitlines()[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{csv}", "--columns", "age:q"], "bad column spec 'age:q'"),
        (["{csv}", "--columns", "age"], "bad column spec 'age'"),
        (["{csv}", "--columns", "age:i", "age:r"], "listed twice"),
        (["{dir}/missing.csv"], "input file not found"),
        (["{csv}", "--columns", "height:r"], "no column 'height'"),
        (["{csv}", "--aidcolumns", "nobody"], "no column 'nobody'"),
        (["{csv}", "--columns", "city:i"], "column 'city': value 'Paris' in data row 1 is not a number"),
        (["{csv}", "--columns", "age:i", "--clustering-maincolumn", "city"], "no column 'city'"),
        (["{csv}", "--outlier-count", "5", "2"], "upper bound 2 is below its lower bound 5"),
        (["{csv}", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_input_is_one_line_and_exit_status_two(people_csv, capsys, monkeypatch, args, message):
    args = [a.format(csv=people_csv, dir=people_csv.parent) for a in args]
    status, out, err = run(args, capsys, monkeypatch)
    assert status == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("syndiffix: error: ")
    assert message in err


def test_declared_columns_read_the_same_whichever_parser_takes_them(tmp_path, monkeypatch):
    path = tmp_path / "mixed.csv"
    path.write_text("id,n,x,s,flag\n1,7,1.5,a,yes\n2,,2e3,,no\n3,-4,,c,\n")
    kinds = cli.parse_column_specs(["n:i", "x:r", "s:s", "flag:b"])
    fast = cli.read_table(path, kinds, ["id"])
    assert fast["n"].tolist() == [7, pd.NA, -4] and str(fast["n"].dtype) == "Int64"
    assert fast["x"].tolist()[:2] == [1.5, 2000.0] and np.isnan(fast["x"].iloc[2])
    monkeypatch.setattr(cli, "_PARSER_DTYPES", {})  # force the text path
    pd.testing.assert_frame_equal(fast, cli.read_table(path, kinds, ["id"]))
    monkeypatch.undo()
    # Padded and integral-float integers read as integers; a fraction is rejected naming its row.
    path.write_text("n,x\n 7 ,1\n3.0,2\n3.5,3\n")
    with pytest.raises(cli.UsageError, match="column 'n': value '3.5' in data row 3 is not an integer"):
        cli.read_table(path, cli.parse_column_specs(["n:i", "x:r"]), [])
    path.write_text("n,x\n 7 ,1\n3.0,2\n")
    assert cli.read_table(path, cli.parse_column_specs(["n:i", "x:r"]), [])["n"].tolist() == [7, 3]


def test_a_missing_salt_is_an_error(people_csv, capsys, monkeypatch):
    status, _, err = run([people_csv], capsys, monkeypatch, salt=None)
    assert status == 2
    assert "--salt" in err and cli.SALT_VARIABLE in err


def test_the_installed_command_runs(people_csv):
    script = "import sys; from syndiffix_core.cli import main; sys.exit(main())"
    done = subprocess.run(
        [sys.executable, "-c", script, str(people_csv), "--columns", "age:i", "city:s", "--salt", "x"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "age,city"
    missing = subprocess.run(
        [sys.executable, "-c", script, str(people_csv.parent / "nope.csv"), "--salt", "x"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert missing.returncode == 2
    assert missing.stderr.strip().startswith("syndiffix: error: input file not found")
