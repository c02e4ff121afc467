"""QuadrupletBERT's parts: mining, negative draws, hashed bag-of-words towers, NSP pairs, early
stopping and the seeded table with its significance test."""
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from towers.modeling.models import FeatureHasher, HashedBagOfWords, load_encoder, load_tokenizer
from towers.stages.search import exclude_positives
from towers.training.margin import draw
from towers.training.mlm import next_sentence_batch


def test_mining_removes_gold_and_keeps_rank_order():
    run = {"q1": [("d3", 9.0), ("d1", 8.0), ("d7", 7.0), ("d2", 6.0)], "q2": [("d1", 1.0)]}
    qrels = {"q1": {"d1": 1, "d2": 1, "d3": 0}, "q2": {"d1": 2}}
    # d3 is judged non-relevant (0), so it stays a candidate
    assert exclude_positives(run, qrels) == {"q1": ["d3", "d7"], "q2": []}


def test_draws_never_return_a_gold_candidate():
    rng = np.random.default_rng(0)
    example = {"qid": "q", "positives": [0, 1, 2]}
    mined = {"q": [5, 6]}
    for _ in range(500):
        p, n, hn = draw(example, rng, 8, mined)
        assert p in (0, 1, 2) and n not in (0, 1, 2) and hn in (5, 6)
    # an empty mined list falls back to a second random negative, distinct from n and from gold
    for _ in range(200):
        _, n, hn = draw({"qid": "q", "positives": [0]}, rng, 4, {"q": []})
        assert hn not in (0, n)


def test_feature_hasher_is_the_same_in_another_process(tmp_path):
    hasher = FeatureHasher(buckets=1000)
    text = "Where was the lighthouse built?"
    code = f"from towers.modeling.models import FeatureHasher; print(FeatureHasher(1000).features({text!r}))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(other) == hasher.features(text)
    words = 5
    assert len(hasher.features(text)) == words + (words - 1) + sum(len(w) for w in ["where", "was", "the", "lighthouse", "built"])
    batch = hasher(["a b", "a b c d"], return_tensors="pt")
    assert batch["input_ids"].shape == batch["attention_mask"].shape and batch["attention_mask"][0].sum() < batch["attention_mask"][1].sum()


def test_bag_of_words_encoder_round_trips(tmp_path):
    torch.manual_seed(0)
    model = HashedBagOfWords(64, 8)
    model.save_pretrained(tmp_path)
    FeatureHasher(64).save_pretrained(tmp_path)
    again, hasher = load_encoder(tmp_path), load_tokenizer(tmp_path)
    ids = hasher(["hello world"], return_tensors="pt")["input_ids"]
    assert torch.equal(again(ids).last_hidden_state, model(ids).last_hidden_state)


def test_next_sentence_pairs_follow_the_paragraph_or_come_from_another():
    paragraphs = [["a1", "a2", "a3"], ["b1", "b2"], ["c1"]]
    positions = [(0, 0), (0, 1), (1, 0)]
    rng = np.random.default_rng(1)
    firsts, seconds, labels = next_sentence_batch(paragraphs, positions, list(range(3)) * 20, rng)
    assert set(labels.tolist()) == {0, 1}
    for first, second, label in zip(firsts, seconds, labels.tolist()):
        same_paragraph = first[0] == second[0]
        if label == 0:
            assert same_paragraph and int(second[1]) == int(first[1]) + 1
        else:
            assert not same_paragraph


def test_early_stopping_keeps_the_best_checkpoint(tmp_path):
    from towers.training.settings import Schedule
    from towers.training import loop

    model = torch.nn.Linear(2, 1)
    valid = iter([0.9, 0.5, 0.3, 0.4, 0.45, 0.6, 0.1])    # the start, then best at the 2nd check; patience 2 stops at the 4th
    seen = {}

    def on_checkpoint(step):
        seen[step] = {k: v.clone() for k, v in model.state_dict().items()}
        return {"valid_loss": next(valid)}

    schedule = Schedule(steps=12, batch_size=1, lr=0.1, warmup_ratio=0.0, checkpoint_every=2)
    report = loop.run(model, lambda step: model(torch.ones(1, 2)).sum(), schedule, loop.Run(0, tmp_path),
                      identity={}, on_checkpoint=on_checkpoint, patience=2)
    assert report["stopped_at_step"] == 8 and report["best_step"] == 4 and report["history"][0]["step"] == 0
    assert all(torch.equal(model.state_dict()[k], v) for k, v in seen[4].items())


def test_a_run_whose_checks_are_all_worse_than_its_start_keeps_the_start(tmp_path):
    """Phase 2 that only moves its phase-1 start away from what validation likes returns that start."""
    from towers.training.settings import Schedule
    from towers.training import loop

    model = torch.nn.Linear(2, 1)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    valid = iter([0.2, 0.3, 0.4, 0.5])
    schedule = Schedule(steps=12, batch_size=1, lr=0.1, warmup_ratio=0.0, checkpoint_every=2)
    report = loop.run(model, lambda step: model(torch.ones(1, 2)).sum(), schedule, loop.Run(0, tmp_path),
                      identity={}, on_checkpoint=lambda step: {"valid_loss": next(valid)}, patience=2)
    assert report["best_step"] == 0 and report["stopped_at_step"] == 4
    assert all(torch.equal(model.state_dict()[k], v) for k, v in start.items())



def train_linear(state, stop_after_step=None, resume_seconds=60.0):
    """A 12-step run validated every 2 steps (best at step 4, early stop at 8) through the shared loop."""
    from towers.training.settings import Schedule
    from towers.training import loop

    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    losses = {0: 0.9, 2: 0.5, 4: 0.3, 6: 0.4, 8: 0.45, 10: 0.6, 12: 0.1}
    schedule = Schedule(steps=12, batch_size=1, lr=0.1, warmup_ratio=0.0, checkpoint_every=2)
    report = loop.run(model, lambda step: model(torch.ones(1, 2)).sum(), schedule,
                      loop.Run(0, state, stop_after_step=stop_after_step, resume_seconds=resume_seconds), identity={},
                      on_checkpoint=lambda step: {"valid_loss": losses[step]}, patience=2)
    return model, report


def test_a_resumed_run_returns_the_best_weights_it_saw_before_the_stop(tmp_path):
    whole, report = train_linear(tmp_path / "whole")
    with pytest.raises(SystemExit):
        train_linear(tmp_path / "part", stop_after_step=6)   # the best (step 4) lies before the stop
    resumed, again = train_linear(tmp_path / "part")
    assert report["best_step"] == again["best_step"] == 4 and again["resumed_from"] == 6
    assert all(torch.equal(whole.state_dict()[k], v) for k, v in resumed.state_dict().items())


def test_a_short_run_writes_one_checkpoint_to_resume_from(tmp_path, monkeypatch):
    from towers.training import loop

    written = []
    saver = loop.save_atomic
    monkeypatch.setattr(loop, "save_atomic", lambda state, path: written.append(state["step"]) or saver(state, path))
    train_linear(tmp_path / "short")
    assert written == [2]   # the first checkpoint step; the rest within a minute of it
    written.clear()
    train_linear(tmp_path / "every", resume_seconds=0)
    assert written == [2, 4, 6]   # each checkpoint step until the early stop at 8


def write_eval(path, values: dict):
    per_query = {q: {"R@1": v} for q, v in values.items()}
    path.write_text(json.dumps({"queries": len(values), "metrics": {"R@1": float(np.mean(list(values.values())))},
                                "per_query": per_query}))
    return str(path)


def test_seeded_table_means_sds_and_paper_values(tmp_path):
    from towers.reports.quadrupletbert import seeded_table

    paper = tmp_path / "paper.csv"
    paper.write_text("table,dataset,split,model,margin,R@1\ntable1,squad,5-95,QuadrupletBERT,,6.28\n"
                     "table1,squad,5-95,Three-T BERT,,1.13\n")
    qids = [f"q{i}" for i in range(12)]
    quad = [{q: float(i % 2 == 0 or i < 9) for i, q in enumerate(qids)}, {q: float(i < 10) for i, q in enumerate(qids)}]
    base = [{q: float(i < 2) for i, q in enumerate(qids)}, {q: float(i < 3) for i, q in enumerate(qids)}]
    rows = []
    for label, runs, index in (("QuadrupletBERT", quad, "flat"), ("Three-T BERT", base, "flat"),
                               ("QuadrupletBERT", base, "ivfpq")):
        evals = [write_eval(tmp_path / f"{label}{index}{s}.json", r) for s, r in enumerate(runs)]
        rows.append({"dataset": "mini", "paper_dataset": "squad", "split": "5-95", "model": label, "margin": "0.1",
                     "index": index, "evals": evals})
    frame, twin, cells = seeded_table(rows, paper, "table1", "mini", "note", metrics=["R@1"], exact_index="flat")
    top = frame.iloc[0]
    means = [100 * np.mean(list(r.values())) for r in quad]
    assert top["R@1"] == round(np.mean(means), 2) and top["R@1 sd"] == round(np.std(means, ddof=1), 2)
    assert top["R@1 paper"] == 6.28 and frame.iloc[1]["R@1 paper"] == 1.13
    assert pd.isna(frame.iloc[2]["R@1 paper"])       # the paper reports exact search only
    # a row is named by the paper's dataset; Table 1's margin is a setting, in the note; no p-value columns
    assert top["dataset"] == "squad" and "margin" not in frame and not [c for c in frame if c.endswith(" p")]
    assert cells[0]["row"] == {"dataset": "squad", "split": "5-95", "model": "QuadrupletBERT", "index": "flat"}
    note = top["note"]
    assert "squad: mini" in note and "QuadrupletBERT 0.1 on squad" in note and "ivfpq: no paper value" in note
    # one margin per model: the twin's row names leave it out, so editing it changes values, not rows
    assert twin["rows"]["mini/squad/5-95/QuadrupletBERT/flat"]["R@1"] == top["R@1"]
    assert twin["rows"]["mini/squad/5-95/QuadrupletBERT/ivfpq"]["R@1 lost to quantization"] > 0


def test_seeded_table_rejects_seeds_on_different_queries(tmp_path):
    from towers.io import StageError
    from towers.reports.quadrupletbert import seed_summary

    a = write_eval(tmp_path / "a.json", {"q1": 1.0, "q2": 0.0})
    b = write_eval(tmp_path / "b.json", {"q1": 1.0})
    with pytest.raises(StageError, match="other queries"):
        seed_summary([a, b], ["R@1"])


def test_a_table_of_one_seed_a_row_has_no_sd_columns(tmp_path):
    """Table 2's sweep at one seed: an sd column would read 0.00 on every row."""
    from towers.reports.quadrupletbert import seeded_table

    paper = tmp_path / "paper.csv"
    paper.write_text("table,dataset,split,model,margin,R@1\ntable2,squad,5-95,QuadrupletBERT,0.1,6.28\n")
    rows = [{"dataset": "mini", "paper_dataset": "squad", "split": "5-95", "model": "QuadrupletBERT", "margin": m,
             "index": "flat", "evals": [write_eval(tmp_path / f"m{m}.json", {"q1": 1.0, "q2": float(m == "0.1")})]}
            for m in ("0.1", "1")]
    frame, _, _ = seeded_table(rows, paper, "table2", "mini", "note", metrics=["R@1"], exact_index="flat")
    assert "R@1 sd" not in frame and frame["margin"].tolist() == ["0.1", "1"] and "one seed a row" in frame["note"].iloc[0]
    rows[0]["evals"].append(write_eval(tmp_path / "again.json", {"q1": 0.0, "q2": 1.0}))
    frame, _, _ = seeded_table(rows, paper, "table2", "mini", "note", metrics=["R@1"], exact_index="flat")
    assert "R@1 sd" in frame and "standard deviation over seeds" in frame["note"].iloc[0]


def test_a_validation_grid_holds_every_positive_and_fixed_negatives():
    from towers.training.margin import validation_grid

    example = {"qid": "q", "positives": [0, 1]}
    positives, randoms, hard = validation_grid(example, np.random.default_rng(0), 50, {"q": [7, 8, 9]}, 4)
    assert positives == [0, 1] and len(randoms) == 4 and not set(randoms) & {0, 1}
    assert len(hard) == 4 and set(hard) <= {7, 8, 9}
    # a long list gives distinct hard negatives; no list gives random ones; no mining, no hard ones
    assert len(set(validation_grid(example, np.random.default_rng(0), 50, {"q": list(range(10, 30))}, 4)[2])) == 4
    assert not set(validation_grid(example, np.random.default_rng(0), 50, {"q": []}, 4)[2]) & {0, 1}
    assert validation_grid(example, np.random.default_rng(0), 50, None, 4)[2] is None
    again = validation_grid(example, np.random.default_rng(0), 50, {"q": [7, 8, 9]}, 4)
    assert again == (positives, randoms, hard)   # the same draw at every check


def test_the_grid_validation_loss_is_each_questions_mean_over_its_grid_then_the_mean_over_questions():
    from towers.training.losses import quadruplet
    from towers.training.margin import grid_valid_loss

    torch.manual_seed(0)
    queries, docs = torch.randn(2, 8), torch.randn(10, 8)
    grids = [([0], [2, 3], [4, 5, 6]), ([1, 7], [8], [9])]
    expected = []
    for row, (positives, negatives, hard) in enumerate(grids):
        terms = [float(quadruplet(queries[row:row + 1], docs[[p]], docs[[n]], docs[[h]], 0.2))
                 for p in positives for n in negatives for h in hard]
        expected.append(np.mean(terms))
    assert grid_valid_loss(queries, docs, grids, 0.2) == pytest.approx(np.mean(expected))
    triplets = [(positives, negatives, None) for positives, negatives, _ in grids]
    plain = np.mean([np.mean([float(quadruplet(queries[r:r + 1], docs[[p]], docs[[n]], None, 0.2)) for p in g[0]
                              for n in g[1]]) for r, g in enumerate(triplets)])
    assert grid_valid_loss(queries, docs, triplets, 0.2) == pytest.approx(plain)


def test_phase2_frames_read_each_runs_checks_and_stopping_step(tmp_path):
    from towers.io import StageError
    from towers.reports.quadrupletbert import phase2_cells, phase2_frames

    history = [{"step": 25, "loss": 0.3, "valid_loss": 0.20}, {"step": 50, "loss": 0.2, "valid_loss": 0.15},
               {"step": 75, "loss": 0.1, "valid_loss": 0.16}, {"step": 100, "loss": 0.1, "valid_loss": 0.17}]
    (tmp_path / "model.meta.json").write_text(json.dumps({"counts": {
        "history": history, "steps": 300, "best_step": 50, "stopped_at_step": 100, "train_questions": 31,
        "valid_questions": 4}}))
    run = {"dataset": "mini", "split": "5-95", "seed": "13", "model": str(tmp_path / "model")}
    checks, summary = phase2_frames([run])
    assert checks["valid loss"].tolist() == [0.20, 0.15, 0.16, 0.17]
    row = summary.iloc[0]
    assert (row["best step"], row["stopped at"], row["steps"], row["valid questions"], row["best valid loss"]) == (
        50, 100, 300, 4, 0.15)
    assert {(c["column"], c["value"]) for c in phase2_cells(summary)} == {("best step", 50), ("best valid loss", 0.15)}
    (tmp_path / "model.meta.json").write_text(json.dumps({"counts": {}}))
    with pytest.raises(StageError, match="no training history"):
        phase2_frames([run])
