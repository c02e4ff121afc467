import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture
def tiny_articles():
    from towers import wiki

    articles, redirects = wiki.parse_dump(FIXTURES / "tiny-wiki.xml")
    return articles, redirects


def run_stage(*args, cwd=None):
    """Run `python -m towers ...` in a subprocess, as a Snakemake rule would."""
    import subprocess

    return subprocess.run([sys.executable, "-m", "towers", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT)
