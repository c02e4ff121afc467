"""The warm-start server (towers.warm): a stage forked from it writes what a process of its own writes, exits
with its status, dies with its job, and the server stops with the Snakemake it watches."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

from towers import warm

pytestmark = pytest.mark.slow   # a server start (torch's import) a test: out of make test-fast


def wait_for(check, seconds=60.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


def listening(name):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(warm.address(name))
            return True
        except OSError:
            return False


@pytest.fixture
def server():
    """A server watching a stand-in for Snakemake (a sleep): (name, server process, stand-in)."""
    name = uuid.uuid4().hex
    snakemake = subprocess.Popen(["sleep", "300"])
    process = subprocess.Popen([sys.executable, "-m", "towers.warm", name, "--watch", str(snakemake.pid), "--idle", "60"])
    assert wait_for(lambda: listening(name)), "the server never listened"
    yield name, process, snakemake
    for p in (process, snakemake):
        p.kill()
        p.wait()


def towers(args, tmp_path, name=None, **kw):
    env = {k: v for k, v in os.environ.items() if k != warm.ENV}
    if name:
        env[warm.ENV] = name
    return subprocess.Popen([sys.executable, "-m", "towers", *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_a_forked_stage_writes_and_says_what_its_own_process_does(server, tmp_path):
    name, _, _ = server
    for run in ("a", "b"):
        (tmp_path / f"{run}.trec").write_text("".join(f"q1 Q0 d{i}{run} {i} {10 - i} t\n" for i in range(1, 4)))
    outputs = {}
    for how, via in (("own", None), ("warm", name)):
        done = towers(["fuse-runs", "--runs", "a.trec", "b.trec", "--method", "rrf", "--out", f"{how}.trec"], tmp_path, via)
        out, err = done.communicate(timeout=120)
        assert done.returncode == 0, err
        outputs[how] = ((tmp_path / f"{how}.trec").read_text(), json.loads(out)["queries"])
    assert outputs["own"] == outputs["warm"]
    meta = json.loads((tmp_path / "warm.trec.meta.json").read_text())
    assert meta["arguments"]["out"] == "warm.trec"   # ran in the job's folder, with its arguments
    # the record says which paid torch's import (the reproduce benchmark splits start-up from work by it)
    assert meta["warm_start"] and not json.loads((tmp_path / "own.trec.meta.json").read_text())["warm_start"]


def test_exit_statuses_and_error_lines_come_back(server, tmp_path):
    name, _, _ = server
    missing = towers(["fuse-runs", "--runs", "x.trec", "y.trec", "--method", "rrf", "--out", "o.trec"], tmp_path, name)
    _, err = missing.communicate(timeout=60)
    assert missing.returncode == 1 and err.strip().splitlines()[-1].startswith("error: x.trec")
    usage = towers(["fuse-runs"], tmp_path, name)
    _, err = usage.communicate(timeout=60)
    assert usage.returncode == 2 and "required" in err


def forks_of(server_process):
    listed = subprocess.run(["pgrep", "-P", str(server_process.pid)], capture_output=True, text=True).stdout
    return [int(pid) for pid in listed.split()]


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGKILL, -signal.SIGKILL)])
def test_a_killed_job_takes_its_fork_with_it(server, tmp_path, sig, status):
    name, process, _ = server
    with open(tmp_path / "big.trec", "w") as run:   # runs long enough to be killed part-way (seconds)
        run.writelines(f"q{q} Q0 d{d} {d + 1} {1000 - d} t\n" for q in range(800) for d in range(1000))
    job = towers(["fuse-runs", "--runs", "big.trec", "big.trec", "--method", "rrf", "--out", "o.trec"], tmp_path, name)
    assert wait_for(lambda: forks_of(process), 30), "no fork started"
    job.send_signal(sig)
    job.wait(timeout=30)
    assert job.returncode == status
    assert wait_for(lambda: not forks_of(process), 30), "the fork outlived its job"


def test_the_server_stops_with_snakemake_and_stages_then_run_alone(server, tmp_path):
    name, process, snakemake = server
    snakemake.kill()
    snakemake.wait()   # reaped, as Snakemake's own parent would
    process.wait(timeout=30)
    assert warm.forward(name, ["fuse-runs"]) is None   # nothing answered: the caller runs the stage itself
    alone = towers(["fuse-runs"], tmp_path, name)
    _, err = alone.communicate(timeout=60)
    assert alone.returncode == 2 and "required" in err


def test_without_idle_the_server_outlives_a_quiet_spell_and_stops_with_snakemake():
    # a run's first jobs may start on their own before the server listens and keep it jobless for minutes; an
    # idle limit of 60 s once left LTRe's whole step without warm starts (75 jobs paying torch's import)
    name = uuid.uuid4().hex
    snakemake = subprocess.Popen(["sleep", "300"])
    process = subprocess.Popen([sys.executable, "-m", "towers.warm", name, "--watch", str(snakemake.pid)])
    try:
        assert wait_for(lambda: listening(name)), "the server never listened"
        time.sleep(3)
        assert process.poll() is None and listening(name)
        snakemake.kill()
        snakemake.wait()
        assert process.wait(timeout=30) == 0
    finally:
        for p in (process, snakemake):
            p.kill()
            p.wait()
