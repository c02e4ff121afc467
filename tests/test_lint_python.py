"""The Python of the project lints clean: `ruff check` over src, tests and benchmarks with the rule set of
pyproject.toml's [tool.ruff.lint] (errors, not style); the Snakemake files are formatted as `snakefmt --check` wants
them (pyproject.toml's [tool.snakefmt]; `snakemake --lint`: tests/workflow/test_lint.py). A shell rule's code, its
rerun trigger, is its command's text, which layout leaves alone; the two run blocks, whose code is their source,
are kept out of the formatter (`# fmt: off`)."""
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


def test_snakemake_files_are_formatted():
    done = subprocess.run([sys.executable, "-m", "snakefmt", "--check", "Snakefile", "workflow/rules"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]


def test_the_formatter_sees_a_rule_out_of_shape(tmp_path):
    """The check is live: pyproject.toml's settings are read and a misplaced directive fails it."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "x.smk").write_text('rule x:\n    shell:\n        "true"\n    output:\n        "o"\n')
    done = subprocess.run([sys.executable, "-m", "snakefmt", "--check", "x.smk"], cwd=tmp_path, capture_output=True,
                          text=True)
    assert done.returncode == 1, done.stdout + done.stderr
