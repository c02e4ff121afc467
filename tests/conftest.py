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
    """Run `python -m towers ...` in a subprocess, as a Snakemake rule would."""
    import subprocess

    return subprocess.run([sys.executable, "-m", "towers", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT)


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
