"""Maintenance commands the Makefile and CI call.

`metrics-diff` (`make metrics-diff`, .github/workflows/metrics.yml): bring the tables up to date, then print
`dvc params diff` and `dvc metrics diff` against a git revision, and write the same Markdown to a file. The
tables are dvc.yaml's stages, each a Snakemake command; their outputs are built by one Snakemake run (only the
jobs whose inputs, params or code moved rerun), then recorded with `dvc commit`. (`dvc repro` would first delete
every outdated stage's table, and a change to params.yaml outdates them all: each table would be rebuilt.)

`cache-pull` / `cache-push` (`make cache-pull`, `make cache-push`): artifacts/ and their Snakemake records
through a DVC remote (towers.cache). With `--folder` (CI: a folder its cache keeps between runs) the folder
holds the pointer to the last pushed build (artifacts.dvc), and the DVC remote itself where neither
`--remote-url` (CI: DVC_REMOTE_URL) nor the project's default remote names one.

`keep-expected` (`make expected`): a build's expected values become the profile's committed file."""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from . import cache
from .cache import DVC, dvc
from .io import atomic_path
from .params_check import merge_configs

POINTER = Path(f"{cache.ARTIFACTS}.dvc")
CI_REMOTE = "ci"   # the remote this module configures (.dvc/config.local: never committed)


def snakemake_stages(root: Path = Path(".")) -> dict[str, list[str]]:
    """{stage name (chang2020@table1, ...): its outputs} of the dvc.yaml stages whose command is Snakemake's."""
    from dvc.repo import Repo   # DVC's own reading of dvc.yaml, foreach included

    with Repo(str(root)) as repo:
        return {stage.addressing: [out.def_path for out in stage.outs] for stage in repo.index.stages
                if isinstance(stage.cmd, str) and Path(shlex.split(stage.cmd)[0]).name == "snakemake"}


def metrics_diff(base: str, out: Path, repro: bool = True, cores: int = 2) -> str:
    if repro:
        stages = snakemake_stages()
        targets = sorted({path for outputs in stages.values() for path in outputs})
        built = subprocess.run([sys.executable, "-m", "snakemake", *targets, "--cores", str(cores)])
        if built.returncode != 0:   # its own messages went to the terminal above
            sys.exit(f"error: snakemake {len(targets)} outputs of dvc.yaml's stages: failed (exit {built.returncode})")
        if stages:
            dvc("commit", "--force", "--quiet", *stages)
        if subprocess.run([DVC, "repro"]).returncode != 0:   # any stage that is not Snakemake's
            sys.exit("error: dvc repro: failed (its messages above)")
    sections = [f"# Parameters and metrics against {base}\n"]
    for what in ("params", "metrics"):
        table = dvc(what, "diff", base, "--md").strip()
        sections.append(f"## dvc {what} diff {base}\n\n{table or 'no changes'}\n")
    text = "\n".join(sections)
    with atomic_path(out) as tmp:
        tmp.write_text(text)
    return text


def build_remote(folder: Path | None, url: str | None) -> tuple[str | None, bool]:
    """(remote name or None for the default one, whether it is `folder`'s own): `url` as remote "ci" when given;
    else the project's default remote; else `folder`/remote, a local remote that travels inside the folder."""
    if url:
        dvc("remote", "add", "--local", "--force", CI_REMOTE, url)
        return CI_REMOTE, False
    if subprocess.run([DVC, "remote", "default"], capture_output=True).returncode == 0:   # 1: "No default remote set"
        return None, False
    if folder:
        dvc("remote", "add", "--local", "--force", CI_REMOTE, str((folder / "remote").resolve()))
        return CI_REMOTE, True
    return None, False


def pull_build(folder: Path | None, url: str | None) -> bool:
    """Put the last pushed build in place (artifacts/, their records and modification times); False when there
    is none yet in `folder` (a first CI run: everything builds)."""
    if folder is not None:
        if (folder / POINTER).is_file():
            shutil.copyfile(folder / POINTER, POINTER)
        elif not POINTER.is_file():
            print(f"{folder}: no pushed build yet; every job builds")
            return False
    cache.pull(build_remote(folder, url)[0])
    return True


def push_build(folder: Path | None, url: str | None) -> None:
    """Push artifacts/ with their records; with `folder`, keep the pointer there, and where the remote is the
    folder's own, only this build's files (a cache that carries every old build would only grow)."""
    remote, own = build_remote(folder, url)
    cache.push(remote)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_path(folder / POINTER) as tmp:
            shutil.copyfile(POINTER, tmp)
    if own:
        dvc("gc", "--workspace", "--cloud", "--remote", remote, "--force", "--quiet")


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
    parser = argparse.ArgumentParser(prog="python -m towers.ci", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    diff = sub.add_parser("metrics-diff", help="build the tables, then params and metrics diff against --base")
    diff.add_argument("--base", default="main", help="git revision to compare with (default: main)")
    diff.add_argument("--out", type=Path, default=Path("metrics-diff.md"))
    diff.add_argument("--cores", type=int, default=2)
    diff.add_argument("--no-repro", action="store_true", help="diff what is there, rebuild nothing")
    for action in ("cache-pull", "cache-push"):
        share = sub.add_parser(action, help=f"{action[6:]} artifacts/ and their Snakemake records (towers.cache)")
        share.add_argument("--folder", type=Path, help="CI's cache folder: the last build's pointer (and remote)")
        share.add_argument("--remote-url", default=os.environ.get("DVC_REMOTE_URL") or None,
                           help="a DVC remote's URL (default: $DVC_REMOTE_URL, else the default remote)")
    keep = sub.add_parser("keep-expected", help="a build's expected values become the profile's committed file")
    keep.add_argument("--built", type=Path, default=Path("results/expected-values.csv"))
    keep.add_argument("--params", type=Path, default=Path("params.yaml"))
    keep.add_argument("--configfile", type=Path, help="the overlay the build ran with, if any")
    args = parser.parse_args(argv)
    if args.command == "keep-expected":
        print(f"{args.built} -> {keep_expected(args.built, args.params, args.configfile)}")
    elif args.command == "cache-pull":
        pull_build(args.folder, args.remote_url)
    elif args.command == "cache-push":
        push_build(args.folder, args.remote_url)
    else:
        print(metrics_diff(args.base, args.out, repro=not args.no_repro, cores=args.cores))


if __name__ == "__main__":
    main()
