"""benchmarks/training_switches.py and stage_pairs.py: a stage's command rebuilt from its record, and the rule
seconds a speed-up is applied to."""
import json
import sys
from pathlib import Path

from benchmarks import stage_pairs   # benchmarks/ (pytest's pythonpath)
from benchmarks import training_switches


def test_a_record_gives_back_its_command_with_the_outputs_moved_and_changes_applied(tmp_path):
    record = {"stage": "finetune", "arguments": {"encoder": "a/enc", "out": "artifacts/x/model", "steps": 100,
                                                 "state_dir": "s/x", "log": None, "pairs": ["p1", "p2"], "flag": True}}
    argv = stage_pairs.command(record, {"steps": 7}, ("out", "state_dir", "log"), tmp_path)
    assert argv[:4] == [sys.executable, "-m", "towers", "finetune"]
    assert argv[4:] == ["--encoder", "a/enc", "--out", str(tmp_path / "model"), "--steps", "7",
                        "--state-dir", str(tmp_path / "x"), "--pairs", "p1", "p2", "--flag"]


def test_a_rule_is_the_records_of_its_stage_in_its_folders(tmp_path):
    def record(path, stage, seconds):
        path = tmp_path / path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"stage": stage, "seconds": seconds}))

    record("artifacts/a/dense/threet-emb-m0.1-s13/5-95/model.meta.json", "train-margin", 20.0)
    record("artifacts/b/dense/threet-emb-m0.1-s14/80-20/model.meta.json", "train-margin", 30.5)
    record("artifacts/a/dense/threet-emb-m0.1-s13/5-95/candidates.npy.meta.json", "encode-candidates", 9.0)
    record("artifacts/a/dense/threet-bert-m0.1-s13/5-95/model.meta.json", "train-margin", 40.0)
    assert training_switches.rule_seconds(tmp_path, "train-margin", "/dense/threet-emb-") == 50.5
    assert training_switches.rule_seconds(Path(tmp_path), "finetune", "/dense/threet-emb-") == 0


def test_each_switch_names_an_on_and_an_off_side_that_differ():
    for name, (on, off, removed) in training_switches.SWITCHES.items():
        assert on != off and set(on) | set(off) <= removed, name
