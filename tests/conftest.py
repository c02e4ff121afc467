import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture
def tiny_articles():
    from towers.datasets import wiki

    articles, redirects = wiki.parse_dump(FIXTURES / "tiny-wiki.xml")
    return articles, redirects


def run_stage(*args, cwd=None):
    """Run `python -m towers ...` as a Snakemake rule would: its entry point (towers.cli.main), exit status, stdout and
    stderr (an uncaught exception as its traceback and status 1), in the cwd and torch thread count it found. In this
    test process rather than a new one: torch and transformers are imported once a test worker instead of once a call
    (about 7 s each, most of a tiny stage's time). Tests that need a process of their own start it themselves."""
    import contextlib
    import io
    import os
    import subprocess
    import traceback

    import torch

    from towers.cli import main

    argv = [str(a) for a in args]
    stdout, stderr = io.StringIO(), io.StringIO()
    threads, here = torch.get_num_threads(), os.getcwd()
    try:
        os.chdir(cwd or ROOT)
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                status = main(argv)
            except SystemExit as ended:   # argparse's usage errors (2), or a stage that exits itself
                status = ended.code if isinstance(ended.code, int) else 1
                if ended.code is not None and not isinstance(ended.code, int):
                    print(ended.code, file=sys.stderr)
            except Exception:
                traceback.print_exc()
                status = 1
    finally:
        os.chdir(here)
        torch.set_num_threads(threads)
    return subprocess.CompletedProcess([sys.executable, "-m", "towers", *argv], status or 0, stdout.getvalue(),
                                       stderr.getvalue())


def lighthouse_world(root, texts: list[str], arch: dict, train: int):
    """A tokenizer (root/tok) trained on `texts`, a random encoder of shape `arch` (root/enc, seed 1) and the QA
    world of write_lighthouse_split: what the training tests start from. Returns `root`."""
    from towers.modeling.models import random_encoder
    from towers.modeling.tokenizer import train_wordpiece

    train_wordpiece(texts, root / "tok", vocab_size=200, min_frequency=1, lowercase=True)
    random_encoder(root / "tok", root / "enc", arch, seed=1)
    write_lighthouse_split(root, texts, train)
    return root


def write_lighthouse_split(root, texts: list[str], train: int) -> None:
    """A QA world over `texts`: candidate d<i> holds text i, q<i> asks for it (qrels), the first
    `train` questions are the training split and the rest the validation split."""
    import json

    (root / "candidates.jsonl").write_text("".join(
        json.dumps({"id": f"d{i}", "contents": t, "sentence": t, "paragraph": t, "title": "T"}) + "\n"
        for i, t in enumerate(texts)))
    (root / "qrels.txt").write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(len(texts))))
    (root / "train.tsv").write_text("".join(f"q{i}\twhen was lighthouse {i} lit?\n" for i in range(train)))
    (root / "valid.tsv").write_text("".join(f"q{i}\twhen was lighthouse {i} lit?\n" for i in range(train, len(texts))))
