"""The Python of the project lints clean: `ruff check` over src, tests and benchmarks with the rule set of
pyproject.toml's [tool.ruff.lint] (errors, not style). Snakemake files are left to `snakemake --lint`
(tests/workflow/test_lint.py): no snakefmt, since reformatting a rule changes its code, a rerun trigger."""
import subprocess
import sys

from conftest import ROOT


def ruff(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True)


def test_src_tests_and_benchmarks_lint_clean():
    done = ruff("check", "--no-cache", "--output-format", "concise", "src", "tests", "benchmarks")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_the_linter_sees_an_undefined_name(tmp_path):
    """The check is live: the configuration is read and a pyflakes finding fails it."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f():\n    return undefined_name\n")
    done = ruff("check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), "--output-format", "concise", str(bad))
    assert done.returncode == 1 and "F821" in done.stdout and "F401" in done.stdout, done.stdout + done.stderr
