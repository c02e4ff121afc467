"""The papers' rows (towers.plan.chang2020, quadrupletbert, repbert, ltre, zeroshot): each row names the files its
table stage reads, in the order the table shows them."""

from plan_configs import mini_plan


def test_chang_rows_are_bm25_then_each_encoder_for_each_split():
    mini = mini_plan()
    rows = mini.chang2020.chang_rows("table3")
    splits = mini.config["chang2020"]["table3"]["splits"]
    assert len(rows) == 6 * len(splits)
    assert rows[0] == {"split": splits[0], "encoder": "BM-25", "pretraining": "No Pretraining",
                       "eval": f"artifacts/enwiki-mini/eval/bm25/{splits[0]}/lucene.json"}
    assert [r["pretraining"] for r in rows[1:6]] == ["No Pretraining", "ICT+BFS+WLP", "No Pretraining", "MLM",
                                                     "ICT+BFS+WLP"]
    assert rows[5]["eval"] == f"artifacts/enwiki-mini/eval/transformer-ict+bfs+wlp-l2-d128/{splits[0]}/flat.json"
    ablation = mini.chang2020.ablation_rows()
    assert ablation[0]["eval"].startswith("artifacts/enwiki-mini-nq/eval/transformer-ict-l1-d32/")   # NQ, as the paper


def test_quadrupletbert_rows_hold_every_seeds_evaluation():
    mini = mini_plan()
    qb = mini.quadrupletbert
    assert qb.qb_model("Three-T Emb", 2, 13) == f"threet-emb-m{mini.config['quadrupletbert']['three_t_emb']['margin']}-s13"
    assert qb.qb_model("QuadrupletBERT", 0.1, 14) == "quadbert-m0.1-s14"
    row = qb.qb_table1_rows()[0]
    assert row["model"] == "Three-T Emb" and len(row["evals"]) == len(mini.config["quadrupletbert"]["seeds"])
    settings = mini.config["quadrupletbert"]
    sweep = qb.qb_table2_rows()
    assert len(sweep) == len(settings["margins"]) * len(settings["splits"]) * len(settings["datasets"])
    assert all(len(row["evals"]) == len(settings["sweep_seeds"]) for row in sweep)   # Table 2: one run a cell
    settings["sweep_seeds"] = []
    assert all(len(row["evals"]) == len(settings["seeds"]) for row in qb.qb_table2_rows())
    assert "--compare QuadrupletBERT 'Three-T BERT'" in qb.table


def test_repbert_rows():
    mini = mini_plan()
    rb = mini.repbert
    assert rb.rb_rows("table1")[1] == {"method": "RepBERT", "eval": "artifacts/enwiki-mini-passages/eval/repbert/dev/flat.json",
                                       "latency": "artifacts/enwiki-mini-passages/latency/repbert/dev.json"}
    fused = [r for r in rb.rb_rows("table4") if r["fusion"] != "none"]
    assert {r["fusion"] for r in fused} == {"alternate", "rrf", "combsum", "union"}
    assert all(f.startswith("artifacts/") for f in rb.rb_table_files("table3"))


def test_ltre_rows_and_figure():
    mini = mini_plan()
    lt = mini.ltre
    assert lt.lt_rows("table1")[0] == {"key": "BM25", "eval": "artifacts/enwiki-mini-passages/eval/bm25/dev/lucene.json",
                                       "graded": ""}
    assert len(lt.lt_rows("table4")) == len(lt.indexes) ** 2
    assert lt.lt_files("table3")[:2] == ["artifacts/enwiki-mini-passages/eval/neg-bm25/dev/flat.json",
                                         "artifacts/enwiki-mini-passages/ltre/steps/neg-bm25-dev.jsonl"]
    assert lt.figure3_runs()[0][1].endswith(f"-{lt.start}-flat-dev.jsonl")


def test_zeroshot_rows_are_bm25_then_each_checkpoint():
    mini = mini_plan()
    rows = mini.zeroshot.zeroshot_rows("enwiki-mini")
    assert [r["model"] for r in rows] == ["bm25", *(f"ckpt-{n}" for n in mini.config["zeroshot"]["checkpoints"])]
    assert mini.zeroshot.checkpoint_split("enwiki-mini") == "all"
    assert mini.zeroshot.checkpoint_split("enwiki-mini-passages") == "dev"
