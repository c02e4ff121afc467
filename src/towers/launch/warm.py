"""Warm starts for local runs. Importing torch and transformers costs a stage process about 3 CPU seconds,
which several hundred model jobs pay again and again. One server imports them once; each stage Snakemake
starts (`python -m towers <stage>`) is forked from it instead, with the job's own working folder,
environment, arguments and standard streams (passed over a Unix socket), and hands its exit status back.

Only the user who started the server can use it, and a stage talks only to a server of its own user. The
socket is a file in a folder that `mkdtemp` made for this run (mode 0700: nobody else can reach, bind or
replace the socket, and its random name cannot be claimed first); each side also checks the other's
credentials (SO_PEERCRED) before a byte of the request (argv, folder, environment) is sent or read. A stage
that finds a server it cannot trust says so in one line and runs in its own process.

Where no server answers (a cluster node, TOWERS_WARM unset, conda environments, a server gone), a stage runs
in its own process as before. The Snakefile starts a server for local runs (params `warm_start`, `launch`) and
hands its jobs no other (a TOWERS_WARM it inherited is cleared: another checkout's server runs that code); it
stops when Snakemake is gone (or, given --idle, after that long without a job: not by default, since a run's
first jobs may start before the server listens and keep it jobless for minutes).

    python -m towers.launch.warm SOCKET --watch PID [--idle SECONDS]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import selectors
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ENV = "TOWERS_WARM"   # the server's socket, set by the Snakefile for the jobs it starts
SOCKET = "socket"     # its file's name inside the run's private folder
MAX_PATH = 107        # a Unix socket's path: at most 108 bytes with the closing NUL


class Untrusted(Exception):
    """A socket, or the process behind it, that is not this user's own."""


def private_problem(folder: Path) -> str | None:
    """Why `folder` could let another user reach or replace a socket in it; None when it is this user's alone."""
    try:
        info = os.lstat(folder)
    except OSError as err:
        return f"{folder}: {err.strerror}"
    if not stat.S_ISDIR(info.st_mode):
        return f"{folder}: not a folder"
    if info.st_uid != os.getuid():
        return f"{folder}: belongs to uid {info.st_uid}, not to you (uid {os.getuid()})"
    if info.st_mode & 0o077:
        return f"{folder}: open to other users (mode {stat.S_IMODE(info.st_mode):o}, not 700)"
    return None


def peer_uid(conn: socket.socket) -> int:
    """The user id of the process at the other end of a connected Unix socket, as the kernel recorded it."""
    _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return uid


def require_own_peer(conn: socket.socket, what: str) -> None:
    uid = peer_uid(conn)
    if uid != os.getuid():
        raise Untrusted(f"the {what} runs as uid {uid}, not as you (uid {os.getuid()})")


def socket_path() -> str | None:
    """A new socket path in a folder of this user's alone (mkdtemp: mode 0700, a random name made atomically), in
    the user's runtime folder where there is one; None where no such path fits a Unix socket or can be made."""
    for base in (os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir(), "/tmp"):
        if base and os.path.isdir(base) and len(os.path.join(base, "towers-warm-12345678", SOCKET)) <= MAX_PATH:
            try:
                return os.path.join(tempfile.mkdtemp(prefix="towers-warm-", dir=base), SOCKET)
            except OSError:   # not writable (a runtime folder of another login, a read-only /tmp): the next one
                continue
    return None


def launch(watch: int, log) -> str | None:
    """Start a server for the process `watch` (Snakemake), its output to `log`: the socket path its jobs are
    to be given in TOWERS_WARM, or None where no private socket path can be had (stages then start alone)."""
    path = socket_path()
    if path:
        subprocess.Popen([sys.executable, "-m", "towers.launch.warm", path, "--watch", str(watch)],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    else:
        print("warning: no warm starts: none of $XDG_RUNTIME_DIR, the temporary folder and /tmp takes a private "
              "folder for the server's socket; each stage starts in a process of its own", file=sys.stderr)
    return path


# --- the stage's side ---------------------------------------------------------------------------------

def forward(path: str, argv: list[str]) -> int | None:
    """Run `towers <argv>` in a fork of the server at `path`: its exit status, or None when no server of this
    user's answered (nothing was started or sent: run it here)."""
    if not os.path.lexists(Path(path).parent):   # the server has stopped and cleared its folder
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        problem = private_problem(Path(path).parent)
        if problem:
            raise Untrusted(problem)
        conn.connect(path)
        require_own_peer(conn, "warm-start server")   # before the request: it carries the job's environment
        request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode() + b"\n"
        sent = socket.send_fds(conn, [request], [0, 1, 2])
        conn.sendall(request[sent:])
        replies = conn.makefile("r")
        pid = int(replies.readline())
    except Untrusted as err:
        print(f"warning: {ENV}={path}: not used, {err}; the stage runs in its own process", file=sys.stderr)
        conn.close()
        return None
    except (OSError, ValueError):
        conn.close()
        return None
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):   # Ctrl-C or Snakemake's kill reach the stage
        signal.signal(sig, lambda number, _frame: os.kill(pid, number))
    line = replies.readline()
    if not line:
        print(f"error: the warm-start server stopped during stage {argv[0]}", file=sys.stderr)
        return 1
    status = int(line)
    if status < 0:   # killed by a signal: end the same way, as the stage's own process would have
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    return status


# --- the server's side --------------------------------------------------------------------------------

def _die_with_parent() -> None:
    """A fork must not outlive the server (its job's client would never hear of it): PR_SET_PDEATHSIG."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _run_stage(request: dict, fds: list[int]) -> int:
    """In the fork: become the job (streams, folder, environment), run the stage, return its exit status."""
    import torch

    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds:
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():   # read once at import, in the server: set it again
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    sys.argv = ["towers", *request["argv"]]
    from ..cli import main
    try:
        return main(request["argv"], warm_start=True) or 0
    except SystemExit as stop:   # argparse's usage errors
        return stop.code if isinstance(stop.code, int) else (print(stop.code, file=sys.stderr) or 1)
    except KeyboardInterrupt:   # Ctrl-C: the traceback, then die of SIGINT, as Python itself does
        traceback.print_exc()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        return 1
    except BaseException:   # a stage's own traceback, as a process of its own would print it
        traceback.print_exc()
        return 1


def _fork(request: dict, fds: list[int], listener, clients) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        return pid
    status = 1
    try:
        _die_with_parent()
        listener.close()
        for conn in clients.values():
            conn.close()
        status = _run_stage(request, fds)
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status if 0 <= status < 256 else 1)


def _read_request(conn) -> tuple[dict, list[int]]:
    conn.settimeout(10)
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while not data.endswith(b"\n"):
        more = conn.recv(1 << 16)
        if not more:
            raise ValueError("request cut short")
        data += more
    conn.settimeout(None)
    return json.loads(data), list(fds)


def serve(path: str, watch: int, idle: float) -> None:
    folder = Path(path).parent
    problem = private_problem(folder)
    if problem:   # a folder others can enter: they could reach the socket or put their own in its place
        sys.exit(f"error: {problem}: a warm-start socket belongs in a folder of your own (mode 700)")
    signal.signal(signal.SIGTERM, lambda _number, _frame: sys.exit(0))   # a plain kill clears the folder too
    try:
        _serve(path, watch, idle)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _serve(path: str, watch: int, idle: float) -> None:
    os.environ["OMP_NUM_THREADS"] = "1"   # each fork sets its job's count; the server itself never computes
    import torch  # noqa: F401  (the point of the server: imported once, shared by every fork)
    import transformers  # noqa: F401
    from transformers import BertModel  # noqa: F401
    from ..modeling import models  # noqa: F401
    from ..retrieval import encode  # noqa: F401
    from ..stages import load_all
    load_all()

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()   # one thread: forking from a threaded process is unsafe
    selector.register(listener, selectors.EVENT_READ)
    clients: dict[int, socket.socket] = {}   # the fork's pid -> its job's connection
    quiet_since = time.monotonic()
    while True:
        for key, _ in selector.select(timeout=0.2):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                try:
                    require_own_peer(conn, "client")   # before reading: argv, folder and environment come next
                    request, fds = _read_request(conn)
                except Untrusted as err:
                    print(f"refused a connection: {err}", file=sys.stderr, flush=True)
                    conn.close()
                    continue
                except (OSError, ValueError):
                    conn.close()
                    continue
                pid = _fork(request, fds, listener, clients)
                clients[pid] = conn
                conn.sendall(f"{pid}\n".encode())
                selector.register(conn, selectors.EVENT_READ, pid)
            elif not key.fileobj.recv(1):   # the job's side closed (killed): so is its stage
                selector.unregister(key.fileobj)
                if key.data in clients:
                    os.kill(key.data, signal.SIGKILL)
        _reap(clients, selector)
        if clients:
            quiet_since = time.monotonic()
        if not clients and (time.monotonic() - quiet_since > idle or not _alive(watch)):
            return


def _reap(clients: dict[int, socket.socket], selector) -> None:
    """Each finished fork's exit code sent to its job, whose connection then closes."""
    while clients:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not pid:
            return
        conn = clients.pop(pid, None)
        if conn is None:
            continue
        try:
            conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
        except OSError:
            pass
        try:
            selector.unregister(conn)
        except (KeyError, ValueError):   # already gone: its job's side closed first
            pass
        conn.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m towers.launch.warm", description=__doc__.splitlines()[0])
    parser.add_argument("socket", help="the socket's path, in a folder of your own (mode 700)")
    parser.add_argument("--watch", type=int, required=True, help="stop once this process (Snakemake) is gone")
    parser.add_argument("--idle", type=float, default=float("inf"),
                        help="also stop after this many seconds without a job (default: only when Snakemake is gone)")
    args = parser.parse_args(argv)
    serve(args.socket, args.watch, args.idle)


if __name__ == "__main__":
    main()
