"""The warm-start server (towers.launch.warm): a stage forked from it writes what a process of its own writes, exits
with its status, dies with its job, and the server stops with the Snakemake it watches."""
import errno
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import FIXTURES
from benchmarks.workflow_harness import copy_workflow

from towers.launch import warm

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
            probe.connect(name)
            return True
        except OSError:
            return False


@pytest.fixture
def server(tmp_path):
    """A server watching a stand-in for Snakemake (a sleep): (socket path, server process, stand-in); its
    messages go to tmp_path/server.log."""
    name = warm.socket_path()
    snakemake = subprocess.Popen(["sleep", "300"])
    with open(tmp_path / "server.log", "w") as log:
        process = subprocess.Popen([sys.executable, "-m", "towers.launch.warm", name, "--watch", str(snakemake.pid),
                                    "--idle", "60"], stderr=log)
    assert wait_for(lambda: listening(name)), "the server never listened"
    yield name, process, snakemake
    process.terminate()   # as `kill` would: the server clears its folder
    assert process.wait(timeout=30) == 0 and not os.path.exists(Path(name).parent)
    snakemake.kill()
    snakemake.wait()


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
    assert not os.path.exists(Path(name).parent)   # its private folder goes with it
    assert warm.forward(name, ["fuse-runs"]) is None   # nothing answered: the caller runs the stage itself
    alone = towers(["fuse-runs"], tmp_path, name)
    _, err = alone.communicate(timeout=60)
    assert alone.returncode == 2 and "required" in err


class ForeignServer:
    """A listener at a socket of this user's, standing in for another checkout's warm-start server that a shell
    left in TOWERS_WARM: it counts the connections it gets, reads each request and answers "pid 1, exit 0" (a
    stage it ran)."""

    def __init__(self):
        self.path, self.connections = warm.socket_path(), 0
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(8)
        self.listener.settimeout(0.2)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            with conn:
                conn.settimeout(10)
                request = b""
                while not request.endswith(b"\n") and (more := conn.recv(1 << 16)):
                    request += more
                conn.sendall(b"1\n0\n")

    def close(self):
        self.stopped.set()
        self.thread.join()
        self.listener.close()
        shutil.rmtree(Path(self.path).parent)


def test_a_run_uses_no_warm_start_server_it_did_not_start(tmp_path):
    """Issue 56: a TOWERS_WARM inherited from the shell sent every job of a `warm_start: false` run to another
    checkout's server (its code ran; the records said warm_start true). The Snakefile clears it."""
    work = copy_workflow(tmp_path)
    shutil.copytree(FIXTURES, work / "fixtures")
    foreign = ForeignServer()
    try:
        done = subprocess.run([sys.executable, "-m", "snakemake", "artifacts/enwiki-mini/corpus/stats.json", "--cores",
                               "1", "--configfile", "fixtures/tiny.yaml", "--config", "warm_start=False"], cwd=work,
                              env={**os.environ, warm.ENV: foreign.path}, capture_output=True, text=True)
    finally:
        foreign.close()
    assert done.returncode == 0, done.stderr[-3000:]
    assert foreign.connections == 0
    record = json.loads((work / "artifacts/enwiki-mini/corpus/articles.jsonl.meta.json").read_text())
    assert record["stage"] == "parse-wiki" and record["warm_start"] is False


def test_an_unwritable_runtime_folder_falls_back_to_the_next(tmp_path, monkeypatch, capsys):
    """Issue 56: an XDG_RUNTIME_DIR this user cannot write (another login's) stopped every local build in a
    traceback, after the clean-up had removed the outputs; now the next folder takes the socket, and where
    none can, the run goes on without warm starts, saying so in one line."""
    locked = tmp_path / "runtime"
    locked.mkdir(mode=0o500)   # root writes it anyway: mkdtemp refuses it here as the kernel refuses others
    made = tempfile.mkdtemp

    def refusing(*args, dir=None, **kw):
        if dir is not None and Path(dir) in refused:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(dir))
        return made(*args, dir=dir, **kw)

    refused = {locked}
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(locked))
    monkeypatch.setattr(tempfile, "mkdtemp", refusing)
    path = Path(warm.socket_path())
    assert path.parent.parent == Path(tempfile.gettempdir()) and path.parent.stat().st_mode & 0o777 == 0o700
    path.parent.rmdir()
    refused |= {Path(tempfile.gettempdir()), Path("/tmp")}
    with open(tmp_path / "warm-start.log", "w") as log:
        assert warm.launch(os.getpid(), log) is None
    warning = capsys.readouterr().err.strip()
    assert "\n" not in warning and warning.startswith("warning: no warm starts: none of $XDG_RUNTIME_DIR")


def test_without_idle_the_server_outlives_a_quiet_spell_and_stops_with_snakemake():
    # a run's first jobs may start on their own before the server listens and keep it jobless for minutes; an
    # idle limit of 60 s once left LTRe's whole step without warm starts (75 jobs paying torch's import)
    name = warm.socket_path()
    snakemake = subprocess.Popen(["sleep", "300"])
    process = subprocess.Popen([sys.executable, "-m", "towers.launch.warm", name, "--watch", str(snakemake.pid)])
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


# --- only its own user ------------------------------------------------------------------------------------
# Issue 40's attacks, from a second user (uid 65534) where the test runs as root and can switch to one

NOBODY = 65534
another_user = pytest.mark.skipif(os.getuid() != 0, reason="switching to a second uid needs root")


@functools.cache
def python_for_nobody() -> str | None:
    """An interpreter the second user may run (the venv's may sit under a folder only root can enter): the
    attacks need nothing but the standard library."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", sys.executable):
        try:
            if subprocess.run([candidate, "-I", "-c", "pass"], user=NOBODY, group=NOBODY, extra_groups=[], cwd="/",
                              capture_output=True, timeout=60).returncode == 0:
                return candidate
        except OSError:
            continue
    return None


def as_nobody(code: str, **kw):
    if not python_for_nobody():
        pytest.skip(f"no Python that uid {NOBODY} may run")
    return subprocess.Popen([python_for_nobody(), "-I", "-c", code], user=NOBODY, group=NOBODY, extra_groups=[],
                            cwd="/", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def two_runs(folder):
    for run in ("a", "b"):
        (folder / f"{run}.trec").write_text("".join(f"q1 Q0 d{i}{run} {i} {10 - i} t\n" for i in range(1, 4)))


def test_a_socket_folder_of_ones_own_is_private_and_credentials_are_the_kernels(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir(mode=0o700)
    assert warm.private_problem(folder) is None
    folder.chmod(0o711)
    assert "open to other users (mode 711" in warm.private_problem(folder)
    made = Path(warm.socket_path()).parent
    assert made.stat().st_mode & 0o777 == 0o700
    made.rmdir()
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert warm.peer_uid(a) == os.getuid()
        warm.require_own_peer(a, "client")   # no error: the same user


@another_user
def test_another_user_cannot_reach_the_server(server):
    name, _, _ = server
    assert name in Path("/proc/net/unix").read_text()   # its name is public; the folder that holds it is not
    probe = as_nobody(f"import socket; socket.socket(socket.AF_UNIX).connect({name!r})")
    _, err = probe.communicate(timeout=60)
    assert probe.returncode != 0 and "PermissionError" in err


@another_user
def test_the_server_runs_nothing_for_another_user_even_where_the_socket_is_reachable(server, tmp_path):
    name, process, _ = server
    os.chmod(Path(name).parent, 0o711)   # as if the file permissions had failed: the credentials must still refuse
    os.chmod(name, 0o777)
    two_runs(tmp_path)
    written = tmp_path / "written.trec"   # tmp_path: a folder only the build's user can write
    request = {"argv": ["fuse-runs", "--runs", "a.trec", "b.trec", "--method", "rrf", "--out", str(written)],
               "cwd": str(tmp_path), "env": {"PATH": "/nonexistent"}}
    attack = as_nobody(f"""import json, socket
conn = socket.socket(socket.AF_UNIX)
conn.connect({name!r})
data = json.dumps({request!r}).encode() + b"\\n"
try:
    socket.send_fds(conn, [data], [0, 1, 2])
    print("reply:", conn.makefile("r").readline().strip() or "none")
except OSError as err:
    print("reply: none", err)
""")
    out, err = attack.communicate(timeout=60)
    assert attack.returncode == 0, err   # it connected: only the server's own check stands in the way
    assert out.startswith("reply: none")
    time.sleep(1)
    assert not written.exists() and process.poll() is None
    assert f"refused a connection: the client runs as uid {NOBODY}, not as you" in (tmp_path / "server.log").read_text()


@another_user
def test_another_user_cannot_take_the_servers_name_first():
    path = warm.socket_path()
    squat = as_nobody(f"import socket; socket.socket(socket.AF_UNIX).bind({path!r})")
    _, err = squat.communicate(timeout=60)
    assert squat.returncode != 0 and "PermissionError" in err
    os.rmdir(Path(path).parent)


SQUATTER = """import os, select, socket, sys, tempfile
folder = tempfile.mkdtemp(prefix="squat-", dir="/tmp")
listener = socket.socket(socket.AF_UNIX)
listener.bind(os.path.join(folder, "socket"))
listener.listen(4)
print(os.path.join(folder, "socket"), flush=True)
got = 0
while True:   # until the test closes our standard input
    ready, _, _ = select.select([listener, sys.stdin], [], [], 60)
    if not ready or sys.stdin in ready:
        break
    conn, _ = listener.accept()   # answer "pid 1, exit 0", as the squatter of issue 40 did
    conn.settimeout(3)
    try:
        got += len(conn.recv(1 << 16))
        conn.sendall(b"1\\n0\\n")
    except OSError:
        pass
    conn.close()
print("received", got, flush=True)
"""


@another_user
def test_a_stage_refuses_a_server_of_another_user_and_sends_it_nothing(tmp_path, monkeypatch):
    squatter = as_nobody(SQUATTER, stdin=subprocess.PIPE)
    path = squatter.stdout.readline().strip()
    try:
        monkeypatch.setenv("HF_TOKEN", "a-secret-of-the-builds-user")
        # the folder's owner gives it away first; where it did not, the server's credentials do
        assert warm.forward(path, ["fuse-runs"]) is None
        monkeypatch.setattr(warm, "private_problem", lambda folder: None)
        assert warm.forward(path, ["fuse-runs"]) is None
        two_runs(tmp_path)
        job = towers(["fuse-runs", "--runs", "a.trec", "b.trec", "--method", "rrf", "--out", "o.trec"], tmp_path, path)
        _, err = job.communicate(timeout=120)
        assert job.returncode == 0, err   # run in its own process, and says why
        assert f"not used, {Path(path).parent}: belongs to uid {NOBODY}, not to you" in err
        assert not json.loads((tmp_path / "o.trec.meta.json").read_text())["warm_start"]
    finally:
        out, _ = squatter.communicate(timeout=60)   # closes its standard input: it says what it was sent
    assert out.strip() == "received 0"
