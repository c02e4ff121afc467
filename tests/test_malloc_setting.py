"""The stages' malloc settings, opt-in (TOWERS_MALLOC=keep): a large block freed and asked for again is reused,
not faulted in anew; without the variable glibc's defaults hold in every stage."""
import os
import subprocess
import sys
import textwrap

import pytest

from towers.cli import MALLOC_SETTINGS

REUSE = textwrap.dedent("""
    import ctypes, resource, sys
    from towers.cli import keep_freed_memory
    print(int(keep_freed_memory(sys.argv[1])))
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        block = libc.malloc(64 << 20)   # above glibc's largest adaptive mmap threshold (32 MB), as torch asks
        ctypes.memset(block, 1, 64 << 20)
        libc.free(block)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def faults(stage="encode-candidates", **env) -> tuple[bool, int]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "TOWERS_MALLOC"))}
    done = subprocess.run([sys.executable, "-c", REUSE, stage], env={**clean, **env}, capture_output=True, text=True,
                          check=True)
    applied, count = done.stdout.split()
    return applied == "1", int(count)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_freed_large_block_is_reused_when_asked_for_and_glibc_defaults_are_the_default():
    applied, kept = faults(TOWERS_MALLOC="keep")
    skipped, fresh = faults()
    assert applied and not skipped
    assert fresh > 10 * (64 << 20) // 4096 * 0.9   # glibc maps each block afresh, the kernel faults it in by page
    assert kept < fresh / 5
    for other in ("", "glibc", "1", "KEEP"):   # only the one word turns it on
        assert not faults(TOWERS_MALLOC=other)[0]
    own_knob, _ = faults(TOWERS_MALLOC="keep", MALLOC_MMAP_THRESHOLD_="131072")   # a user's own setting is left alone
    assert own_knob


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_asked_for_it_applies_only_to_the_stages_it_was_measured_to_help():
    assert faults("rerank", TOWERS_MALLOC="keep")[0]
    assert not faults("dense-search", TOWERS_MALLOC="keep")[0] and not faults("train-ltre", TOWERS_MALLOC="keep")[0]
    assert not faults("rerank")[0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_benchmarks_glibc_knobs_force_the_setting_on_any_stage():
    """benchmarks/malloc_setting.py measures every heavy stage with the setting: through glibc's own environment knobs,
    the values of cli.MALLOC_SETTINGS, whatever the stage."""
    from benchmarks import malloc_setting   # benchmarks/ (pytest's pythonpath)

    knobs = malloc_setting.setting_env(True)
    assert knobs.keys() == MALLOC_SETTINGS.keys() and malloc_setting.setting_env(False) == {}
    assert faults("dense-search", **knobs)[1] < faults("dense-search")[1] / 5
