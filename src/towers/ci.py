"""`make metrics-diff` (and .github/workflows/metrics.yml): bring the tables up to date with `dvc repro`
(a stage reruns when params.yaml or the code it depends on changed; Snakemake inside it reruns only the
jobs whose inputs or params moved), then print `dvc params diff` and `dvc metrics diff` against a git
revision, and write the same Markdown to a file."""
from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from .cache import DVC, dvc


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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m towers.ci", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    diff = sub.add_parser("metrics-diff", help="dvc repro, then params and metrics diff against --base")
    diff.add_argument("--base", default="main", help="git revision to compare with (default: main)")
    diff.add_argument("--out", type=Path, default=Path("metrics-diff.md"))
    diff.add_argument("--no-repro", action="store_true", help="diff what is there, rebuild nothing")
    args = parser.parse_args(argv)
    print(metrics_diff(args.base, args.out, repro=not args.no_repro))


if __name__ == "__main__":
    main()
