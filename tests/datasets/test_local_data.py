"""A dataset given by local_dir needs no url: its files are checked when a checksum is given, and the stage's
meta file says "not verified" when none is."""
import hashlib
import json
import shutil
import subprocess
import sys

import pytest
import yaml

from benchmarks.workflow_harness import copy_workflow, job_counts

from conftest import FIXTURES, run_stage
from test_reqa import SQUAD


def _squad(tmp_path):
    folder = tmp_path / "local"
    folder.mkdir(parents=True)
    (folder / "dev.json").write_text(json.dumps(SQUAD))
    return folder


def test_reqa_squad_records_whether_each_file_was_verified(tmp_path):
    folder = _squad(tmp_path)
    digest = hashlib.sha256((folder / "dev.json").read_bytes()).hexdigest()
    assert run_stage("reqa-squad", "--json", folder / "dev.json", "--sha256", "none", "--out-dir", tmp_path / "a").returncode == 0
    meta = json.loads((tmp_path / "a/candidates.jsonl.meta.json").read_text())
    assert meta["counts"]["checksum"] == {str(folder / "dev.json"): "not verified (no checksum given)"}
    assert run_stage("reqa-squad", "--json", folder / "dev.json", "--sha256", digest, "--out-dir", tmp_path / "b").returncode == 0
    meta = json.loads((tmp_path / "b/candidates.jsonl.meta.json").read_text())
    assert meta["counts"]["checksum"] == {str(folder / "dev.json"): "sha256 verified"}
    bad = run_stage("reqa-squad", "--json", folder / "dev.json", "--sha256", "0" * 64, "--out-dir", tmp_path / "c")
    assert bad.returncode == 1 and bad.stderr.strip().count("\n") == 0 and "sha256 mismatch" in bad.stderr
    assert not (tmp_path / "c/candidates.jsonl").exists()


def _plan(work, datasets, *targets, run=False):
    (work / "local.yaml").write_text(yaml.safe_dump({"datasets": datasets}))
    return subprocess.run([sys.executable, "-m", "snakemake", *targets, "--configfile", "local.yaml",
                           *(["--cores", "1"] if run else ["-n"])], cwd=work, capture_output=True, text=True)


@pytest.mark.snakemake
def test_a_local_dataset_needs_no_url_and_a_download_still_does(tmp_path):
    (tmp_path / "work").mkdir()
    work = copy_workflow(tmp_path / "work")
    shutil.copytree(FIXTURES, work / "fixtures")
    folder = _squad(tmp_path)
    local = {"kind": "squad", "local_dir": str(folder), "files": [{"name": "dev.json"}]}
    done = _plan(work, {"squad-local": local}, "artifacts/squad-local/collection/qrels.txt", run=True)
    assert done.returncode == 0, done.stderr[-2000:]
    meta = json.loads((work / "artifacts/squad-local/collection/candidates.jsonl.meta.json").read_text())
    assert meta["counts"]["checksum"] == {f"{folder}/dev.json": "not verified (no checksum given)"}
    # a BEIR folder given only by local_dir plans without a download
    plan = _plan(work, {"beir-local": {"kind": "beir", "local_dir": "fixtures/beir-tiny"}},
                 "artifacts/beir-local/splits/dev/test.tsv")
    assert plan.returncode == 0 and job_counts(plan.stdout) == {"passages": 1}
    # without local_dir a file is downloaded: it needs its url (and a checksum)
    refused = _plan(work, {"squad-remote": {"kind": "squad", "files": [{"name": "dev.json", "sha256": "0" * 64}]}},
                    "artifacts/squad-remote/collection/qrels.txt")
    assert refused.returncode != 0 and "'url' is a required property" in refused.stdout + refused.stderr


def test_a_local_graded_set_is_checked_against_its_digest(tmp_path):
    queries, qrels, candidates = tmp_path / "q.tsv", tmp_path / "qrels.txt", tmp_path / "candidates.jsonl"
    queries.write_text("1\tfirst query\n")
    qrels.write_text("1 Q0 p1 3\n1 Q0 p2 0\n")
    candidates.write_text("".join(json.dumps({"id": p, "contents": f"passage {p}"}) + "\n" for p in ("p1", "p2")))
    md5 = hashlib.md5(qrels.read_bytes()).hexdigest()

    def graded(out, digest):
        return run_stage("passages-graded", "--queries", queries, "--qrels", qrels, "--candidates", candidates,
                         "--qrels-digest", digest, "--out-dir", out / "collection", "--split-dir", out / "split")

    assert graded(tmp_path / "a", f"md5:{md5}").returncode == 0
    meta = json.loads((tmp_path / "a/collection/qrels.txt.meta.json").read_text())
    assert meta["counts"]["checksum"] == {str(queries): "not verified (no checksum given)", str(qrels): "md5 verified"}
    bad = graded(tmp_path / "b", "md5:" + "0" * 32)
    assert bad.returncode == 1 and "md5 mismatch" in bad.stderr and not (tmp_path / "b/collection/qrels.txt").exists()
