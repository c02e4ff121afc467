"""benchmarks/host_side.py (issue 54): the GPU stages' host side measured on the CPU with the model taken out, before
and after in one run. Its --quick mode gives every figure; the padding it times as "after" is the old padding's."""
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from benchmarks.workflow_harness import RESULTS, ROOT

SCRIPT = ["-m", "benchmarks.host_side"]   # run from the repository root


def test_the_gather_pads_every_batch_as_the_old_row_by_row_padding(tmp_path):
    """tokens.Tokenised.batch against the benchmark's `before` (each row sliced, then tokens.pad_right): the same
    int64 tensors for texts and pairs, sorted and shuffled rows, a single row, rows of one token."""
    from benchmarks import host_side, host_side_before
    from transformers import AutoTokenizer

    from towers.retrieval.encode import length_order
    from towers.modeling.tokens import Tokenised
    from towers.modeling.tokenizer import train_wordpiece

    texts = host_side.passages(300)
    train_wordpiece(texts, tmp_path / "tok", vocab_size=400, min_frequency=1, lowercase=True)
    tok = AutoTokenizer.from_pretrained(tmp_path / "tok")
    rng = np.random.default_rng(0)
    for items, kind in ((texts + ["", "a"], "doc"), ([(t[:40], t) for t in texts], "doc")):
        tokens = Tokenised(tok, items, kind, 64)
        for idx in (length_order(tokens.lengths)[:64], rng.permutation(len(items))[:50], np.array([7]),
                    np.array([len(items) - 2, len(items) - 1])):
            old, new = host_side_before.old_batch(tokens, idx), tokens.batch(idx)
            assert list(old) == list(new)
            assert all(new[k].dtype == torch.int64 and torch.equal(old[k], new[k]) for k in old)


@pytest.mark.extended
def test_the_quick_run_gives_every_figure_before_and_after(tmp_path):
    kept = RESULTS.read_bytes()
    out = tmp_path / "host_side.json"
    done = subprocess.run([sys.executable, *SCRIPT, "--quick", "--out", out], capture_output=True, text=True,
                          cwd=ROOT, env={"PATH": "/usr/bin:/bin", "TOWERS_DEVICE": "cpu"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(out.read_text())
    assert RESULTS.read_bytes() == kept   # only --record writes there
    for length in ("64", "256"):
        encoding = found["encoding"][length]
        assert encoding["padding_identical"] is True
        assert all(encoding["per_batch_host_per_s"][v] > 0 for v in ("before", "after"))
        assert encoding["h200_model_per_s"] > 0 and encoding["after_over_model"] > 0
    assert found["encoding"]["stage_from_token_cache"]["bytes_identical"] is True
    rerank = found["reranking"]
    assert rerank["scores_identical"] is True and all(v > 0 for v in rerank["per_batch_host_per_s"].values())
    assert rerank["tokenised_ahead_pairs_per_s_one_core"] > 0
    cores = found["tokenising"]["cores"]
    for threads in sorted({1, cores}):
        per_core = found["tokenising"][f"cores_{threads}"]["per_s_a_core"]
        assert per_core["before"] > 0 and per_core["after"] > 0
    training = found["training"]
    assert len(training) == 3 and any(key.startswith("pretrain-mlm") for key in training)
    for key, entry in training.items():
        for mode in ("ids_tokenised_once", "tokenised_in_the_step"):
            assert 0 < entry[mode]["before"] < 1 and 0 < entry[mode]["after"] < 1, (key, entry)
        assert entry["share_of_h200_step"] == pytest.approx(entry["ids_tokenised_once"]["after"]
                                                            / entry["h200_seconds_a_step"], abs=1e-3)
    assert set(found["goals_met"]) == {"encoding 64 tokens", "encoding 256 tokens", "reranking 512 tokens",
                                       *(f"training {key}" for key in training)}


def test_record_is_refused_for_a_quick_run():
    done = subprocess.run([sys.executable, *SCRIPT, "--quick", "--record"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and "--record keeps a full run's figures" in done.stderr


@pytest.fixture
def results(tmp_path, monkeypatch):
    """benchmarks/results.json stood in for by a copy (the H200's rates the benchmark reads from it)."""
    from benchmarks import workflow_harness

    path = tmp_path / "results.json"
    path.write_bytes(RESULTS.read_bytes())
    monkeypatch.setattr(workflow_harness, "RESULTS", path)
    return path


def refusal(argv) -> str:
    from benchmarks import host_side

    with pytest.raises(SystemExit) as stopped:
        host_side.main([str(a) for a in argv])
    return stopped.value.code


def test_an_unknown_regime_is_refused_before_measuring(results):
    """--regimes nosuchregime --record measured no regime and replaced the committed host_side with that."""
    kept = results.read_bytes()
    said = refusal(["--regimes", "finetune", "nosuchregime", "--record"])
    assert said.startswith("error: --regimes nosuchregime: no training regime the H200 measured starts so (known: "
                           "finetune batch-size=512 query-length=64 doc-length=288; train-margin ")
    assert "\n" not in said and "pretrain-two-tower" not in said   # not measured on the H200: not known here
    assert results.read_bytes() == kept


def test_a_part_that_measured_nothing_is_not_recorded(results):
    from benchmarks import host_side

    kept = results.read_bytes()
    with pytest.raises(SystemExit) as stopped:
        host_side.keep_found({"machine": "x", "encoding": {"64": {}}, "training": {}}, ["encoding", "training"])
    assert stopped.value.code == f"error: {results}: host_side not recorded: training measured nothing"
    assert results.read_bytes() == kept


def test_out_into_a_missing_folder_is_refused_before_the_run(tmp_path, results):
    out = tmp_path / "no/such/host_side.json"
    assert refusal(["--quick", "--out", out]) == f"error: --out {out}: no such folder {out.parent}"
    assert refusal(["--quick", "--out", tmp_path]) == (f"error: --out {tmp_path}: a folder: --out names the JSON file "
                                                       "to write")


def test_a_broken_results_file_is_named_in_one_line_before_the_run(results):
    results.write_text('{"gpu_stages": {,}}')
    assert refusal(["--quick"]) == f"error: {results}: not valid JSON: Expecting property name enclosed in double " \
                                   "quotes (line 1, column 17)"
    results.write_text('{"gpu_stages": {}}')
    assert refusal(["--quick"]) == (f"error: {results}: no 'encode_overlap' entry: the H200's own rates (gpu_stages, "
                                    "encode_overlap) are needed")
