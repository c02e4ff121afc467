"""The stages' malloc settings: a large block freed and asked for again is reused, not faulted in anew."""
import os
import subprocess
import sys
import textwrap

import pytest

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
def test_a_freed_large_block_is_reused_and_glibc_defaults_stay_a_switch_away():
    applied, kept = faults()
    skipped, fresh = faults(TOWERS_MALLOC="glibc")
    assert applied and not skipped
    assert fresh > 10 * (64 << 20) // 4096 * 0.9   # glibc maps each block afresh, the kernel faults it in by page
    assert kept < fresh / 5
    own_knob, _ = faults(MALLOC_MMAP_THRESHOLD_="131072")   # a user's own setting is left alone
    assert own_knob


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_only_the_stages_it_was_measured_to_help_keep_freed_memory_unless_asked():
    assert faults("rerank")[0] and not faults("dense-search")[0] and not faults("train-ltre")[0]
    applied, kept = faults("dense-search", TOWERS_MALLOC="keep")
    assert applied and kept < faults("dense-search")[1] / 5
