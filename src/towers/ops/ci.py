"""Maintenance commands the Makefile and CI call.

`metrics-diff` (`make metrics-diff`, .github/workflows/metrics.yml): bring the tables up to date, then print
`dvc params diff` and `dvc metrics diff` against a git revision, and write the same Markdown to a file. The
tables are dvc.yaml's stages, each a Snakemake command; their outputs are built by one Snakemake run (only the
jobs whose inputs, params or code moved rerun), then recorded with `dvc commit`. (`dvc repro` would first delete
every outdated stage's table, and a change to params.yaml outdates them all: each table would be rebuilt.)

`cache-pull` / `cache-push` (`make cache-pull`, `make cache-push`): artifacts/ and their Snakemake records
through a DVC remote (towers.ops.cache). With `--folder` (CI: a folder its cache keeps between runs) the folder
holds the pointer to the last pushed build (artifacts.dvc), and the DVC remote itself where neither
`--remote-url` (CI: DVC_REMOTE_URL) nor the project's default remote names one.

`keep-expected` (`make expected`): a build's expected values become the profile's committed file (with `--also`,
combined with those of builds on other machines).

`dvc-yaml` (`make dvc-yaml`): dvc.yaml written from data/papers/papers.yaml (DVC cannot read that file's lists
itself); `--check` only says whether the committed one is that.

`dvc-lock` (`make dvc-lock`): dvc.lock recorded from a copy of the tracked files alone, so a fresh clone's `dvc status`
finds no dependency modified (hashes taken in a workspace count its bytecode and other untracked files); `--check`
only lists the stages a fresh clone would call changed."""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from . import cache
from .cache import DVC, dvc
from ..io import StageError, atomic_path
from ..config.params_check import merge_configs

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
            # dated as a pull would date them: the records this build writes (a local_dir collection's listing
            # of times) then agree with those of the clones that pull it
            cache.restore_source_times()
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


def keep_expected(built: Path, params: Path, overlay: Path | None, also: list[Path] = (),
                  tables: list[str] = (), seeds: list[Path] = ()) -> Path:
    """Copy `built` (results/expected-values.csv) over the expected-values file of the profile that params.yaml
    and the overlay name (check.expected); a profile whose expected values are the papers' own refuses. `also`:
    expected values of the same profile built on other machines, combined with this build's
    (towers.verdicts.checks.across_builds). `tables`: only these tables' rows are replaced (a rebuild of one
    paper's jobs), every other row of the committed file kept as it is. `seeds`: expected values of some cells at
    other seeds (benchmarks/figure3_seeds.py): those cells' tolerances widened to the spread over seeds
    (towers.verdicts.checks.across_seeds)."""
    from ..verdicts import checks

    config = merge_configs(*(yaml.safe_load(path.read_text()) for path in (params, overlay) if path))
    target = Path(config["check"]["expected"])
    if target.suffix != ".csv":
        sys.exit(f"error: {target}: a policy of paper values, not written from a build")
    if not also and not tables and not seeds:
        shutil.copyfile(built, target)
        return target
    try:
        builds = [checks.read_expected(path) for path in (built, *also)]
        combined = checks.across_builds(builds) if also else builds[0]
        if seeds:
            combined = checks.across_seeds(combined, [checks.read_expected(path) for path in seeds], len(builds))
        if tables:
            unknown = sorted(set(tables) - set(combined["table"]))
            if unknown:
                sys.exit(f"error: {built}: no cells of {', '.join(unknown)} in this build")
            combined = replaced_rows(checks.read_expected(target), combined, "table", tables)
    except StageError as err:
        sys.exit(f"error: {err}")
    except ValueError as err:   # builds that disagree: no one file is at fault
        sys.exit(f"error: {', '.join(map(str, (built, *also)))}: {err}")
    with atomic_path(target) as tmp:
        combined.to_csv(tmp, index=False)
    return target


def declared_paper(paper_id: str) -> dict:
    """A paper of data/papers/papers.yaml, or one line naming the file and the papers it has."""
    from ..reports import papers as paper_list

    papers = paper_list.load()
    if paper_id not in papers:
        sys.exit(f"error: {paper_list.PAPERS_FILE}: no paper {paper_id!r} ({', '.join(papers)})")
    return papers[paper_id]


def as_text(path: Path):
    """A CSV read as text, so its rows are written back as they were."""
    import pandas as pd

    return pd.read_csv(path, dtype=str, keep_default_na=False)


def replaced_rows(kept, fresh, key: str, values: list[str]):
    """The committed rows (a frame) with those whose `key` is one of `values` replaced by the fresh frame's, in
    the committed order (new values last)."""
    import pandas as pd

    columns = list(kept.columns) + [c for c in fresh.columns if c not in kept.columns]
    order = list(dict.fromkeys([*kept[key], *values]))
    parts = [fresh[fresh[key] == v] if v in values else kept[kept[key] == v] for v in order]
    return pd.concat(parts, ignore_index=True).reindex(columns=columns, fill_value="")


def paper_verdicts(paper_id: str, params: Path, overlay: Path | None, expected_out: Path | None = None) -> None:
    """One paper's rebuilt tables read into the verdicts: its claims tested and its cells checked, replacing its
    rows of results/claims.csv (and claims.json) and results/check.csv, every other paper's rows kept as
    committed (their per-query files are no part of a rebuild of one paper's jobs); `expected_out`: this build's
    expected values of its tables (for keep-expected --tables)."""
    import tempfile

    from ..io import read_json, write_json
    from ..plan.verdicts import named_tables, question_files, unexposed_stats
    from ..reports.common import write_metrics
    from ..verdicts import checks
    from ..verdicts.claims import verdict_counts

    config = merge_configs(*(yaml.safe_load(path.read_text()) for path in (params, overlay) if path))
    paper = declared_paper(paper_id)
    csvs = [t["path"] for t in paper["tables"]] + [f["csv"] for f in paper["figures"]]
    names = [csv[len("results/"):-len(".csv")] for csv in csvs]
    tables = shlex.split(named_tables(csvs))

    def towers(*args) -> None:
        done = subprocess.run([sys.executable, "-m", "towers", *map(str, args)], capture_output=True, text=True)
        if done.returncode:
            sys.exit(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"error: towers {args[0]} failed")

    with tempfile.TemporaryDirectory(prefix="paper-verdicts-") as folder:
        tmp = Path(folder)
        unexposed = unexposed_stats(config, [paper_id])
        towers("claims", "--claims", paper["claims"], "--schema", "workflow/schemas/claims.schema.yaml", *tables,
               "--profile", config["profile"], "--test", config["claims"]["test"], "--alpha", config["claims"]["alpha"],
               *(["--unexposed", *unexposed] if unexposed else []),
               *(arg for triple in question_files(config) for arg in ("--articles", *triple)),
               "--csv", tmp / "claims.csv", "--json", tmp / "claims.json")
        expected = checks.read_expected(config["check"]["expected"])
        expected[expected["table"].isin(names)].to_csv(tmp / "expected.csv", index=False)
        towers("check-cells", *tables, "--expected", tmp / "expected.csv", "--csv", tmp / "check.csv", "--quiet")
        if expected_out:
            towers("expected", *tables, "--basis", config["check"].get("basis", "estimate"), "--out", expected_out)
        claims = replaced_rows(as_text(Path("results/claims.csv")), as_text(tmp / "claims.csv"), "paper", [paper_id])
        check = replaced_rows(as_text(Path("results/check.csv")), as_text(tmp / "check.csv"), "table", names)
        for target, frame, fresh in (("results/claims.csv", claims, "claims.csv"), ("results/check.csv", check, "check.csv")):
            with atomic_path(target) as out:
                frame.to_csv(out, index=False)
            write_json(f"{target}.meta.json", {"stage": "paper-verdicts", "paper": paper_id, "rows": len(frame),
                                                "rebuilt": read_json(tmp / f"{fresh}.meta.json"),
                                                "kept": "every other row as the committed file had it"})
        write_metrics("results/claims.json", verdict_counts(claims))


DVC_HEADER = """\
# Generated from data/papers/papers.yaml by `make dvc-yaml` (python -m towers.ops.ci dvc-yaml): edit that file, not
# this one (tests/workflow/test_ci_reuse.py checks that they agree).
# Thin on purpose: Snakemake owns the DAG and its caching; DVC tracks the whole params file
# and the tables' metrics, so `dvc params diff` / `dvc metrics diff` / `dvc exp run -S` work.
# One stage per paper table (a paper's tables under results/<paper>/: <paper>@<table>), one for its figures;
# each calls snakemake for its targets (shared jobs are built once).
stages:
"""
# data/enwiki-mini: both embedded question sets (SQuAD-like and NQ-like) and their notes
DVC_DEPS = ["Snakefile", "workflow", "src/towers", "data/enwiki-mini"]


def dvc_stage(indent: str, targets: list[str], deps: list[str], outs: list[str], metrics: list[str]) -> list[str]:
    """A stage's body (cmd, deps, the whole params.yaml, outs and metrics uncached) at `indent`."""
    lines = [f"{indent}cmd: .venv/bin/snakemake {' '.join(targets)} --cores 2", f"{indent}deps:"]
    lines += [f"{indent}  - {d}" for d in deps] + [f"{indent}params:", f"{indent}  - params.yaml:"]
    for key, paths in (("outs", outs), ("metrics", metrics)):
        if paths:
            lines.append(f"{indent}{key}:")
            lines += [line for path in paths for line in (f"{indent}  - {path}:", f"{indent}      cache: false")]
    return lines


def dvc_yaml(papers: dict[str, dict], zeroshot_datasets: list[str]) -> str:
    """dvc.yaml's text: per paper, its tables (one `foreach` stage <paper>@<table> when they all lie under
    results/<paper>/, else a stage <paper>_<table> each) and its figures (<paper>_<figure>, or <paper>_figures
    for several); then the zero-shot tables and the verdicts."""
    lines = []
    for paper in papers.values():
        lines.append(f"  # {paper['title']}")
        tables, figures, pid = paper["tables"], paper["figures"], paper["id"]
        values = list(dict.fromkeys(t["values"] for t in tables))
        deps = DVC_DEPS + ["data/papers/papers.yaml"]
        if tables and all(Path(t["path"]).parent == Path("results", pid) for t in tables):
            items = [Path(t["path"]).stem for t in tables]
            lines += [f"  {pid}:", f"    foreach: [{', '.join(items)}]", "    do:"]
            lines += dvc_stage("      ", [f"results/{pid}/${{item}}.csv"], deps + values,
                               [f"results/{pid}/${{item}}.csv"], [f"results/{pid}/${{item}}.json"])
        else:
            for table in tables:
                lines.append(f"  {pid}_{Path(table['path']).stem}:")
                lines += dvc_stage("    ", [table["path"]], deps + [table["values"]], [table["path"]],
                                   [str(Path(table["path"]).with_suffix(".json"))])
        if figures:
            lines.append(f"  {pid}_{Path(figures[0]['path']).stem if len(figures) == 1 else 'figures'}:")
            outs = [path for f in figures for path in (f["path"], f["csv"], f.get("curves")) if path]
            lines += dvc_stage("    ", [f["path"] for f in figures], deps, outs, [])
    lines += ["  zeroshot:                       # pretrained checkpoints evaluated as they are: zeroshot@<dataset>",
              f"    foreach: [{', '.join(zeroshot_datasets)}]", "    do:"]
    lines += dvc_stage("      ", ["results/zeroshot/${item}.csv"], DVC_DEPS + ["data/papers/papers.yaml"],
                       ["results/zeroshot/${item}.csv"], ["results/zeroshot/${item}.json"])
    lines.append("  verdicts:                       # did it reproduce: every claim's verdict, every cell against its "
                 "expected value")
    verdicts = ["results/claims.csv", "results/check.csv"]
    lines += dvc_stage("    ", verdicts, DVC_DEPS[:3] + ["data/papers", "data/expected"], verdicts, ["results/claims.json"])
    curves = [f for paper in papers.values() for f in paper["figures"] if "plot" in f]
    if curves:   # `dvc plots show`: each CSV of a figure's curves folder
        lines.append("plots:")
        lines += [line for f in curves for line in (f"  - {f['curves']}:", f"      x: {json.dumps(f['plot']['x'])}",
                                                      f"      y: {json.dumps(f['plot']['y'])}")]
    return DVC_HEADER + "\n".join(lines) + "\n"


def write_dvc_yaml(root: Path = Path("."), check: bool = False) -> bool:
    """dvc.yaml from data/papers/papers.yaml (and params.yaml's zeroshot.datasets); True when it was that already."""
    from ..reports import papers

    text = dvc_yaml(papers.load(root=root), yaml.safe_load((root / "params.yaml").read_text())["zeroshot"]["datasets"])
    current = (root / "dvc.yaml").read_text() if (root / "dvc.yaml").exists() else ""
    if not check and current != text:
        with atomic_path(root / "dvc.yaml") as tmp:
            tmp.write_text(text)
    return current == text


def clean_tree(root: Path, into: Path) -> Path:
    """The files git tracks under `root`, as they are in the working tree, copied into a new repository at `into`;
    outside a git checkout, exit with one line naming `root`."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True)
    if listed.returncode != 0:
        sys.exit(f"error: {root.resolve()}: not a git checkout; dvc.lock is recorded from the files git tracks, "
                 "so run this in the project's checkout")
    for name in filter(None, listed.stdout.decode().split("\0")):
        source, target = root / name, into / name
        if source.is_file():   # a tracked file deleted in the working tree is not part of the tree
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)
    for command in (["git", "init", "-q"], ["git", "add", "-A"]):
        subprocess.run(command, cwd=into, capture_output=True, check=True)
    return into


def stale_dvc_stages(root: Path = Path(".")) -> dict:
    """`dvc status` of a clean copy of the tracked tree: {stage: what changed}, empty when dvc.lock is current."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="dvc-lock-") as folder:
        return json.loads(dvc("status", "--json", cwd=clean_tree(root, Path(folder))) or "{}")


def record_dvc_lock(root: Path = Path(".")) -> None:
    """dvc.lock as a clean copy of the tracked tree records it (`dvc commit --force`), written back to `root`."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="dvc-lock-") as folder:
        copy = clean_tree(root, Path(folder))
        dvc("commit", "--force", "--quiet", cwd=copy)
        with atomic_path(root / "dvc.lock") as tmp:
            shutil.copyfile(copy / "dvc.lock", tmp)


def parser() -> argparse.ArgumentParser:
    """The commands the Makefile and CI call, each with its arguments."""
    parser = argparse.ArgumentParser(prog="python -m towers.ops.ci", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    diff = sub.add_parser("metrics-diff", help="build the tables, then params and metrics diff against --base")
    diff.add_argument("--base", default="main", help="git revision to compare with (default: main)")
    diff.add_argument("--out", type=Path, default=Path("metrics-diff.md"))
    diff.add_argument("--cores", type=int, default=2)
    diff.add_argument("--no-repro", action="store_true", help="diff what is there, rebuild nothing")
    for action in ("cache-pull", "cache-push"):
        share = sub.add_parser(action, help=f"{action[6:]} artifacts/ and their Snakemake records (towers.ops.cache)")
        share.add_argument("--folder", type=Path, help="CI's cache folder: the last build's pointer (and remote)")
        share.add_argument("--remote-url", default=os.environ.get("DVC_REMOTE_URL") or None,
                           help="a DVC remote's URL (default: $DVC_REMOTE_URL, else the default remote)")
    keep = sub.add_parser("keep-expected", help="a build's expected values become the profile's committed file")
    keep.add_argument("--built", type=Path, default=Path("results/expected-values.csv"))
    keep.add_argument("--params", type=Path, default=Path("params.yaml"))
    keep.add_argument("--configfile", type=Path, help="the overlay the build ran with, if any")
    keep.add_argument("--also", type=Path, nargs="+", default=[],
                      help="expected values of the same profile built on other machines, to combine with this build's")
    keep.add_argument("--seeds", type=Path, nargs="+", default=[],
                      help="expected values of some cells at other seeds: their tolerances sized by the seeds' spread")
    keep.add_argument("--tables", nargs="+", default=[],
                      help="replace only these tables' rows (e.g. table1 table2: a rebuild of one paper's jobs)")
    targets = sub.add_parser("paper-targets", help="a paper's tables and figures, one a line")
    targets.add_argument("paper")
    verdicts = sub.add_parser("paper-verdicts", help="one rebuilt paper's claims and check rows renewed, the rest kept")
    verdicts.add_argument("--paper", required=True)
    verdicts.add_argument("--params", type=Path, default=Path("params.yaml"))
    verdicts.add_argument("--configfile", type=Path, help="the overlay the build ran with, if any")
    verdicts.add_argument("--expected-out", type=Path, help="also write this build's expected values of its tables")
    generate = sub.add_parser("dvc-yaml", help="write dvc.yaml from data/papers/papers.yaml")
    generate.add_argument("--check", action="store_true", help="only say whether dvc.yaml is up to date (exit 1: not)")
    lock = sub.add_parser("dvc-lock", help="record dvc.lock from a clean copy of the tracked tree")
    lock.add_argument("--check", action="store_true", help="only list the stages a fresh clone finds changed (exit 1)")
    return parser


def main(argv=None) -> None:
    args = parser().parse_args(argv)
    if args.command == "dvc-lock":
        stale = stale_dvc_stages() if args.check else record_dvc_lock()   # dvc's failure: one line, exit 1
        if stale:
            sys.exit(f"error: dvc.lock: {len(stale)} stages changed in a fresh clone ({', '.join(sorted(stale)[:5])}"
                     f"{', ...' if len(stale) > 5 else ''}); run `make dvc-lock`")
        print("dvc.lock: current" if args.check else "dvc.lock: recorded from a clean copy of the tracked tree")
    elif args.command == "paper-targets":
        from ..reports import papers as paper_list

        print("\n".join(paper_list.targets(declared_paper(args.paper))))
    elif args.command == "paper-verdicts":
        paper_verdicts(args.paper, args.params, args.configfile, args.expected_out)
        print(f"results/claims.csv, results/check.csv: {args.paper}'s rows renewed, the others kept")
    elif args.command == "dvc-yaml":
        from ..config.params_check import ParamsError

        try:
            fresh = write_dvc_yaml(check=args.check)
        except ParamsError as err:
            sys.exit(f"error: {err}")
        if args.check and not fresh:
            sys.exit("error: dvc.yaml: not what data/papers/papers.yaml makes; run `make dvc-yaml`")
        print("dvc.yaml: up to date" if fresh else "dvc.yaml: written from data/papers/papers.yaml")
    elif args.command == "keep-expected":
        target = keep_expected(args.built, args.params, args.configfile, args.also, args.tables, args.seeds)
        print(f"{args.built} -> {target}")
    elif args.command == "cache-pull":
        pull_build(args.folder, args.remote_url)
    elif args.command == "cache-push":
        push_build(args.folder, args.remote_url)
    else:
        print(metrics_diff(args.base, args.out, repro=not args.no_repro, cores=args.cores))


if __name__ == "__main__":
    main()
