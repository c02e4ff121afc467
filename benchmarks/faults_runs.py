"""Fault cases, group "fault": kills, Ctrl-C, failures during a change, read-only outputs, edits inside a
local_dir collection, a tampered checkpoint: what a run leaves and how it resumes."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from towers.config.params_check import merge_configs as merged

from .faults_harness import CHANG2, CHANG3, LTRE_MODEL, MLM_MODEL, TINY, Workspace, classify_failure, edit, error_lines
from .workflow_harness import spaced_python

TABLE3_MODELS = ["bm25", "bowmlp-none-d8", "bowmlp-ict+bfs+wlp-d8", "transformer-none-l1-d16",
                 "transformer-mlm-l1-d16", "transformer-ict+bfs+wlp-l1-d16"]


def fault_cases(ws: Workspace, tmp: Path) -> list[dict]:
    cases = []

    def record(name, outcome, detail=""):
        cases.append({"group": "fault", "case": name, "outcome": outcome, "message": str(detail)[:300]})

    def guarded(name, check):
        try:
            record(name, *check())
        except Exception as err:   # a harness problem is reported, not hidden
            record(name, "harness error", f"{type(err).__name__}: {err}")

    def changed_then_killed(name, old, new, kill, target=CHANG3, cores=1, via_dvc=False, signal_snakemake=None):
        work = ws.clone(tmp / re.sub(r"[^a-z0-9]+", "-", name.lower()))
        edit(work / "fixtures/tiny.yaml", old, new)
        if via_dvc:   # the tiny configuration as params.yaml, which DVC tracks
            params = merged(yaml.safe_load((work / "params.yaml").read_text()),
                            yaml.safe_load((work / "fixtures/tiny.yaml").read_text()))
            (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
            (work / ".venv/bin").mkdir(parents=True)
            (work / ".venv/bin/snakemake").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m snakemake "$@"\n')
            (work / ".venv/bin/snakemake").chmod(0o755)
            shutil.copytree(ws.src, work / "src")   # a dependency of every dvc.yaml stage
            dvc = Path(sys.executable).with_name("dvc")
            ws.run([dvc, "init", "--no-scm", "-q"], cwd=work)
            stage = "chang2020@table3"
            first = ws.run([dvc, "repro", stage], cwd=work, kill=kill)
            again = ws.run([dvc, "repro", stage], cwd=work)
        elif signal_snakemake:
            proc = subprocess.Popen([sys.executable, "-m", "snakemake", target, *TINY, "--cores", str(cores)], cwd=work,
                                    env=ws.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if wait_for_stage(kill, 600) is None:
                proc.kill()
                return "harness error", "the job to interrupt never started"
            proc.send_signal(signal_snakemake)
            proc.wait(timeout=300)
            first = subprocess.CompletedProcess([], proc.returncode or 1, "", "")
            # the recovery in docs/workflow.md: let the orphaned jobs end, unlock, rerun what is marked incomplete
            deadline = time.time() + 300
            while wait_for_stage(kill, 0.1) is not None and time.time() < deadline:
                time.sleep(1)
            ws.snake("--unlock", *TINY, cwd=work)
            again = ws.snake(target, *TINY, "--cores", cores, "--rerun-incomplete", cwd=work)
        else:
            first = ws.snake(target, *TINY, "--cores", cores, cwd=work, kill=kill)
            again = ws.snake(target, *TINY, "--cores", cores, cwd=work)
        if first.returncode == 0:
            return "harness error", "the fault did not stop the first run"
        if again.returncode != 0:
            return "unclear error", (error_lines(again) or [""])[-1]
        stale = stale_rows(work, TABLE3_MODELS)
        shutil.rmtree(work, ignore_errors=True)
        return ("silent wrong result", f"rows not current after the rerun: {', '.join(stale)}") if stale else \
            ("handled", "every row of the table current after the rerun")

    # 1-2: kill -9 during training, resumed: bit-identical weights (stage level, as test_training does)
    guarded("kill -9 during fine-tuning, resumed", lambda: resumed_identical(ws, tmp, "finetune"))
    guarded("kill -9 during MLM pre-training, resumed", lambda: resumed_identical(ws, tmp, "pretrain-mlm"))
    # 3-8: a job that fails part-way through a params change
    guarded("bm25.depth change, bm25_search killed", lambda: changed_then_killed(
        "bm25 depth", "bm25: {k1: 0.9, b: 0.4, depth: 10}", "bm25: {k1: 0.9, b: 0.4, depth: 1}", "bm25-search"))
    guarded("bm25.k1 change through dvc repro, bm25_search killed", lambda: changed_then_killed(
        "bm25 k1 dvc", "bm25: {k1: 0.9,", "bm25: {k1: 1.2,", "bm25-search", via_dvc=True))
    guarded("finetune.lr change, one of five fine-tunings killed", lambda: changed_then_killed(
        "finetune lr", "finetune: {steps: 4, batch_size: 4, lr: 1.0e-3", "finetune: {steps: 4, batch_size: 4, lr: 2.0e-3",
        "artifacts/enwiki-mini/dense/transformer-mlm-l1-d16/50-50/model", cores=2))
    guarded("metrics change, one of six evaluations killed", lambda: changed_then_killed(
        "eval killed", "chang2020:\n", "metrics: [R@1, R@5, R@10, R@50, R@100]\nchang2020:\n",
        "artifacts/enwiki-mini/eval/transformer-none-l1-d16/50-50/flat.json"))
    guarded("faiss.depth change, Ctrl-C during a search", lambda: changed_then_killed(
        "ctrl c", "faiss: {indexes: {flat: Flat, ivf: \"IVF2,SQ8\"}, nprobe: 1, depth: 10}",
        "faiss: {indexes: {flat: Flat, ivf: \"IVF2,SQ8\"}, nprobe: 1, depth: 8}",
        "artifacts/enwiki-mini/dense/transformer-none-l1-d16/50-50/run-flat.trec", signal_snakemake=signal.SIGINT))
    guarded("faiss change, kill -9 of Snakemake then a rerun", lambda: changed_then_killed(
        "snakemake killed", "faiss: {indexes: {flat: Flat, ivf: \"IVF2,SQ8\"}, nprobe: 1, depth: 10}",
        "faiss: {indexes: {flat: Flat, ivf: \"IVF2,SQ8\"}, nprobe: 1, depth: 9}",
        "artifacts/enwiki-mini/dense/bowmlp-none-d8/50-50/run-flat.trec", signal_snakemake=signal.SIGKILL))
    # 9: a dry run after a change removes nothing
    guarded("a dry run after a change", lambda: dry_run_keeps(ws, tmp))
    # 10: kill -9 of Snakemake: its orphaned job and a duplicate after --unlock
    guarded("kill -9 of Snakemake, then --unlock and a rerun beside the orphan", lambda: orphan_duplicate(ws, tmp))
    # 11: LTRe's step log across a resume under Snakemake
    guarded("kill -9 during LTRe training, rerun", lambda: ltre_log_after_resume(ws, tmp))
    # 12: edits inside a local_dir collection
    guarded("an edit inside a local_dir collection", lambda: local_dir_edit(ws, tmp))
    # 13: a read-only output folder
    guarded("a read-only output folder", lambda: read_only_output(ws, tmp))
    # 14: an intermediate file damaged between runs
    guarded("candidates cut short between runs", lambda: damaged_between_runs(ws, tmp))
    # 15: kill -9 of an encoding mid-write: no partial output
    guarded("kill -9 during encoding", lambda: killed_encoding(ws, tmp))
    # 16: a virtualenv whose path holds a space
    guarded("a virtualenv path with a space", lambda: spaced_venv(ws, tmp))
    # 17: two fresh copies give byte-identical tables
    guarded("two fresh copies, the same tables", lambda: same_tables(ws, tmp))
    return cases


def wait_for_stage(wanted: str, timeout: float) -> int | None:
    """The pid of the first process whose command line holds `wanted` (a stage's output path)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    command = (entry / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if wanted.encode() in command and b"towers" in command:
                    return int(entry.name)
        time.sleep(0.2)
    return None


def kill_stages(wanted: str) -> None:
    """Kill -9 every stage process whose command line holds `wanted` (the harness's own clean-up)."""
    while (pid := wait_for_stage(wanted, 0.1)) is not None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        time.sleep(0.2)


def resumed_identical(ws: Workspace, tmp: Path, stage: str) -> tuple[str, str]:
    import torch
    from safetensors.torch import load_file

    art = ws.root / "artifacts/enwiki-mini"
    f = tmp / f"resume-{stage}"
    f.mkdir()
    if stage == "finetune":
        common = ["finetune", "--encoder", art / "encoders/random-l1", "--candidates", art / "collection/candidates.jsonl",
                  "--qrels", art / "collection/qrels.txt", "--train", art / "splits/50-50/train.tsv", "--valid",
                  art / "splits/50-50/valid.tsv", "--seed", 1, "--steps", 40, "--batch-size", 4, "--lr", 1e-3,
                  "--warmup-ratio", 0.1, "--checkpoint-every", 2, "--query-length", 16, "--doc-length", 32,
                  "--embedding-dim", 8]
        weights = "query/model.safetensors"
    else:
        common = ["pretrain-mlm", "--candidates", art / "collection/candidates.jsonl", "--tokenizer", art / "tokenizer",
                  "--seed", 1, "--steps", 40, "--batch-size", 4, "--lr", 1e-3, "--warmup-ratio", 0.1, "--max-length",
                  32, "--checkpoint-every", 2, "--hidden", 32, "--layers", 1, "--heads", 2, "--intermediate", 64,
                  "--max-positions", 128]
        weights = "model.safetensors"
    whole = ws.stage(*common, "--out", f / "whole", "--state-dir", f / "whole.state")
    if whole.returncode != 0:
        return "unclear error", (whole.stderr.strip().splitlines() or [""])[-1]
    args = [sys.executable, "-m", "towers", *map(str, common), "--out", str(f / "killed"), "--state-dir",
            str(f / "killed.state")]
    proc = subprocess.Popen(args, cwd=ws.root, env=ws.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not (f / "killed.state/checkpoint.pt").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if (f / "killed").exists():
        return "harness error", "the run ended before the kill"
    again = ws.stage(*common, "--out", f / "killed", "--state-dir", f / "killed.state")
    if again.returncode != 0:
        return "unclear error", (again.stderr.strip().splitlines() or [""])[-1]
    a, b = load_file(str(f / "whole" / weights)), load_file(str(f / "killed" / weights))
    same = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    resumed = "resumed from step" in again.stdout + again.stderr
    return ("handled", "resumed, bit-identical weights") if same and resumed else \
        ("silent wrong result", f"resumed: {resumed}, identical: {same}")


def dry_run_keeps(ws: Workspace, tmp: Path) -> tuple[str, str]:
    work = ws.clone(tmp / "dry")
    edit(work / "fixtures/tiny.yaml", "bm25: {k1: 0.9,", "bm25: {k1: 1.1,")
    before = sorted(p for p in work.rglob("*") if p.is_file() and ".snakemake" not in p.parts)
    plan = ws.snake(CHANG3, *TINY, "-n", cwd=work)
    after = sorted(p for p in work.rglob("*") if p.is_file() and ".snakemake" not in p.parts)
    shutil.rmtree(work, ignore_errors=True)
    if plan.returncode != 0:
        return "unclear error", (error_lines(plan) or [""])[-1]
    return ("handled", "nothing removed") if before == after else \
        ("silent wrong result", f"{len(set(before) - set(after))} files removed by a dry run")


def orphan_duplicate(ws: Workspace, tmp: Path) -> tuple[str, str]:
    """Snakemake killed while a (slow) fine-tuning runs; after --unlock, a rerun must not start a second writer."""
    work = ws.clone(tmp / "orphan")
    edit(work / "fixtures/tiny.yaml", "finetune: {steps: 4,", "finetune: {steps: 3000,")
    target = "artifacts/enwiki-mini/dense/transformer-none-l1-d16/50-50/model"
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", target, *TINY, "--cores", "1"], cwd=work, env=ws.env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    orphan = wait_for_stage(target, 300)
    try:
        if orphan is None:
            return "harness error", "the fine-tuning never started"
        time.sleep(3)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        ws.snake("--unlock", *TINY, cwd=work)
        again = ws.snake(target, *TINY, "--cores", 1, "--rerun-incomplete", cwd=work, timeout=900)
        alive = Path(f"/proc/{orphan}").exists()
        if again.returncode == 124:
            return "silent wrong result", "a second fine-tuning ran beside the orphan"
        if again.returncode == 0:
            return "silent wrong result", "a duplicate finished beside the orphan"
        message = next((l for l in reversed(again.stderr.splitlines()) if "is writing it" in l), "")
        return ("clear error", message) if message and alive else ("unclear error", (error_lines(again) or [""])[-1])
    finally:
        kill_stages(target)
        shutil.rmtree(work, ignore_errors=True)


def ltre_log_after_resume(ws: Workspace, tmp: Path) -> tuple[str, str]:
    steps = 400
    work = ws.clone(tmp / "ltre")
    edit(work / "fixtures/tiny.yaml", "train: {steps: 4, batch_size: 4, lr: 1.0e-3, warmup_ratio: 0.1, checkpoint_every: 2, top_n",
         f"train: {{steps: {steps}, batch_size: 4, lr: 1.0e-3, warmup_ratio: 0.1, checkpoint_every: 20, top_n")
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", LTRE_MODEL, *TINY, "--cores", "1"], cwd=work,
                            env=ws.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoint = work / "artifacts/enwiki-mini-passages/train-state/ltre-bm25-flat-dev/checkpoint.pt"
    deadline = time.time() + 600
    while not checkpoint.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    time.sleep(1.0)
    kill_stages(LTRE_MODEL)   # the training only, as the out-of-memory killer would
    if proc.wait(timeout=300) == 0:
        return "harness error", "the kill came after training ended"
    steps_log = work / "artifacts/enwiki-mini-passages/ltre/steps/ltre-bm25-flat-dev.jsonl"
    again = ws.snake(LTRE_MODEL, *TINY, "--cores", 1, cwd=work)
    if again.returncode != 0:
        return "unclear error", (error_lines(again) or [""])[-1]
    resumed = "resumed from step" in (work / "logs/enwiki-mini-passages/train_ltre-bm25-flat_dev.log").read_text()
    logged = [json.loads(l)["step"] for l in steps_log.read_text().splitlines()]
    shutil.rmtree(work, ignore_errors=True)
    if logged != list(range(1, steps + 1)):
        return "silent wrong result", f"the step log holds steps {logged[:2]}...{logged[-2:]} ({len(logged)} of {steps})"
    return "handled", f"resumed: {resumed}; all {steps} steps logged once"


def local_dir_edit(ws: Workspace, tmp: Path) -> tuple[str, str]:
    work = ws.clone(tmp / "local")
    (work / "fixtures/local.yaml").write_text(yaml.safe_dump({"datasets": {"tiny-msmarco": {
        "kind": "msmarco-tsv", "local_dir": "fixtures/msmarco-tiny", "max_valid": 1}}}))
    target = "artifacts/tiny-msmarco/collection/stats.json"
    built = ws.snake(target, *TINY, "fixtures/local.yaml", "--cores", 1, cwd=work)
    if built.returncode != 0:
        return "unclear error", (error_lines(built) or [""])[-1]
    queries = work / "fixtures/msmarco-tiny/queries.dev.small.tsv"
    queries.write_text(queries.read_text().replace("\n", " \n", 1))
    plan = ws.snake(target, *TINY, "fixtures/local.yaml", "-n", cwd=work)
    shutil.rmtree(work, ignore_errors=True)
    return ("silent wrong result", "nothing to be done after the edit") if "Nothing to be done" in plan.stdout else \
        ("handled", "the edit replans the collection")


def read_only_output(ws: Workspace, tmp: Path) -> tuple[str, str]:
    folder = tmp / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        (folder / ".probe").write_text("")
        (folder / ".probe").unlink()
        folder = Path("/sys/kernel")   # root writes anywhere the permission bits forbid: the kernel's folder refuses
    except OSError:
        pass
    art = ws.root / "artifacts/enwiki-mini"
    out = folder / "eval.json"
    result = ws.stage("evaluate", "--run", art / "bm25/run.trec", "--qrels", art / "collection/qrels.txt", "--queries",
                      art / "splits/50-50/test.tsv", "--metrics", "R@1", "--out", out)
    return classify_failure(result, [str(out)], [out])


def damaged_between_runs(ws: Workspace, tmp: Path) -> tuple[str, str]:
    work = ws.clone(tmp / "damaged")
    candidates = work / "artifacts/enwiki-mini/collection/candidates.jsonl"
    data = candidates.read_bytes()
    candidates.write_bytes(data[:len(data) // 2])   # cut mid-line, as a full disk might
    result = ws.snake(CHANG3, *TINY, "--cores", 1, cwd=work)
    outcome = classify_failure(result, [str(candidates.relative_to(work)), "candidates.jsonl"])
    shutil.rmtree(work, ignore_errors=True)
    return outcome


def killed_encoding(ws: Workspace, tmp: Path) -> tuple[str, str]:
    art = ws.root / "artifacts/enwiki-mini"
    f = tmp / "encode-killed"
    f.mkdir()
    many = f / "many.jsonl"   # the tiny candidates 300 times over: long enough to be killed mid-way
    many.write_text("".join(l.replace('"id": "', f'"id": "r{i}-', 1) + "\n"
                            for i in range(300) for l in (art / "collection/candidates.jsonl").read_text().splitlines()))
    out = tmp / "encode-out"
    args = [sys.executable, "-m", "towers", "encode-candidates", "--model", str(ws.root / MLM_MODEL), "--candidates",
            str(many), "--embeddings", str(out / "e.npy"), "--ids", str(out / "e.ids"), "--batch-size", "1"]
    proc = subprocess.Popen(args, cwd=ws.root, env=ws.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(15)
    if proc.poll() is not None:
        return "harness error", "the encoding ended before the kill"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    f = out
    if not f.exists():
        return "handled", "nothing that looks finished"
    left = [p.name for p in f.iterdir() if not p.name.startswith(".")]
    return ("partial output", f"left {left}") if left else ("handled", "nothing that looks finished")


def spaced_venv(ws: Workspace, tmp: Path) -> tuple[str, str]:
    python = spaced_python(tmp)
    work = ws.clone(tmp / "spaced")
    shutil.rmtree(work / "artifacts/enwiki-mini/corpus")
    result = ws.run([python, "-m", "snakemake", "artifacts/enwiki-mini/corpus/stats.json", *TINY,
                     "--cores", 1], cwd=work)
    shutil.rmtree(work, ignore_errors=True)
    if result.returncode == 0:
        return "handled", "every job ran"
    return "unclear error", f"a valid setup fails: {(error_lines(result) or [''])[-1][:200]}"


def same_tables(ws: Workspace, tmp: Path) -> tuple[str, str]:
    from .workflow_harness import copy_workflow

    root = tmp / "second"
    root.mkdir()
    copy_workflow(root, ws.src.parent)
    shutil.copytree(ws.src.parent / "tests/fixtures", root / "fixtures")
    done = ws.snake(CHANG2, *TINY, "--cores", 2, cwd=root, timeout=3600)
    if done.returncode != 0:
        return "unclear error", (error_lines(done) or [""])[-1]
    same = all((root / t).read_bytes() == (ws.root / t).read_bytes() for t in (CHANG2, CHANG2.replace(".csv", ".json")))
    shutil.rmtree(root, ignore_errors=True)
    return ("handled", "byte-identical") if same else ("silent wrong result", "the tables differ")


def stale_rows(work: Path, models: list[str], split: str = "50-50", index: str = "flat") -> list[str]:
    """Models of table 3 whose chain (model -> candidates -> index -> run -> evaluation -> table) is not current:
    a file missing, or older than the one it was made from."""
    stale = []
    table = work / CHANG3
    for model in models:
        if model == "bm25":
            chain = [work / "artifacts/enwiki-mini/bm25/index", work / "artifacts/enwiki-mini/bm25/run.trec"]
        else:
            dense = work / f"artifacts/enwiki-mini/dense/{model}/{split}"
            chain = [dense / "model", dense / "candidates.npy", dense / f"index-{index}.faiss",
                     dense / f"run-{index}.trec"]
        chain += [work / f"artifacts/enwiki-mini/eval/{model}/{split}/{'lucene' if model == 'bm25' else index}.json",
                  table]
        if any(not p.exists() for p in chain) or any(a.stat().st_mtime > b.stat().st_mtime
                                                       for a, b in zip(chain, chain[1:])):
            stale.append(model)
    return stale
