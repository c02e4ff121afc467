"""Maintenance commands the Makefile and CI call.

`metrics-diff` (`make metrics-diff`, .github/workflows/metrics.yml): bring the tables up to date with `dvc repro`
(a stage reruns when params.yaml or the code it depends on changed; Snakemake inside it reruns only the
jobs whose inputs or params moved), then print `dvc params diff` and `dvc metrics diff` against a git
revision, and write the same Markdown to a file.

`keep-expected` (`make expected`): a build's expected values become the profile's committed file."""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from .cache import DVC, dvc
from .params_check import merge_configs


def metrics_diff(base: str, out: Path, repro: bool = True) -> str:
    if repro:
        subprocess.run([DVC, "repro"], check=True)   # its progress shows as it goes
    sections = [f"# Parameters and metrics against {base}\n"]
    for what in ("params", "metrics"):
        table = dvc(what, "diff", base, "--md").strip()
        sections.append(f"## dvc {what} diff {base}\n\n{table or 'no changes'}\n")
    text = "\n".join(sections)
    out.write_text(text)
    return text


def keep_expected(built: Path, params: Path, overlay: Path | None) -> Path:
    """Copy `built` (results/expected-values.csv) over the expected-values file of the profile that params.yaml
    and the overlay name (check.expected); a profile whose expected values are the papers' own refuses."""
    config = merge_configs(*(yaml.safe_load(path.read_text()) for path in (params, overlay) if path))
    target = Path(config["check"]["expected"])
    if target.suffix != ".csv":
        sys.exit(f"error: {target}: a policy of paper values, not written from a build")
    shutil.copyfile(built, target)
    return target


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m towers.ci", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    diff = sub.add_parser("metrics-diff", help="dvc repro, then params and metrics diff against --base")
    diff.add_argument("--base", default="main", help="git revision to compare with (default: main)")
    diff.add_argument("--out", type=Path, default=Path("metrics-diff.md"))
    diff.add_argument("--no-repro", action="store_true", help="diff what is there, rebuild nothing")
    keep = sub.add_parser("keep-expected", help="a build's expected values become the profile's committed file")
    keep.add_argument("--built", type=Path, default=Path("results/expected-values.csv"))
    keep.add_argument("--params", type=Path, default=Path("params.yaml"))
    keep.add_argument("--configfile", type=Path, help="the overlay the build ran with, if any")
    args = parser.parse_args(argv)
    if args.command == "keep-expected":
        print(f"{args.built} -> {keep_expected(args.built, args.params, args.configfile)}")
    else:
        print(metrics_diff(args.base, args.out, repro=not args.no_repro))


if __name__ == "__main__":
    main()
