"""The papers' rows (towers.plan.chang2020, quadrupletbert, repbert, ltre, zeroshot): each row names the files its
table stage reads, in the order the table shows them; and the papers' grammar the lower families are handed
(QuadrupletBERT's recall convention, LTRe's fixed doc side)."""

from plan_configs import mini_plan

from towers.plan.evaluation import RECALL_NOTE


def test_chang2020s_evaluation_rows_are_bm25_then_each_encoder_for_each_split():
    mini = mini_plan()
    rows = mini.chang2020.rows("table3")
    splits = mini.config["chang2020"]["table3"]["splits"]
    assert len(rows) == 6 * len(splits)
    assert rows[0] == {"split": splits[0], "encoder": "BM-25", "pretraining": "No Pretraining",
                       "eval": f"artifacts/enwiki-mini/eval/bm25/{splits[0]}/lucene.json"}
    assert [r["pretraining"] for r in rows[1:6]] == ["No Pretraining", "ICT+BFS+WLP", "No Pretraining", "MLM",
                                                     "ICT+BFS+WLP"]
    assert rows[5]["eval"] == f"artifacts/enwiki-mini/eval/transformer-ict+bfs+wlp-l2-d128/{splits[0]}/flat.json"
    assert mini.chang2020.inputs("table3") == [row["eval"] for row in rows]
    ablation = mini.chang2020.rows("table5")
    assert ablation[0]["eval"].startswith("artifacts/enwiki-mini-nq/eval/transformer-ict-l1-d32/")   # NQ, as the paper
    assert mini.chang2020.command("table5") == {"metric": "R@100", "dataset": "enwiki-mini-nq"}
    # Table 1: a row a pair task, its statistics file
    assert mini.chang2020.rows("table1") == [{"stats": path} for path in mini.chang2020.inputs("table1")]
    assert len(mini.chang2020.inputs("table1")) == 3
    assert mini.chang2020.note("table1") == mini.config["profile_note"] != mini.chang2020.note("table3")


def test_quadrupletbert_rows_hold_every_seeds_evaluation():
    mini = mini_plan()
    qb = mini.quadrupletbert
    assert qb.model("Three-T Emb", 2, 13) == f"threet-emb-m{mini.config['quadrupletbert']['three_t_emb']['margin']}-s13"
    assert qb.model("QuadrupletBERT", 0.1, 14) == "quadbert-m0.1-s14"
    row = qb.rows("table1")[0]
    assert row["model"] == "Three-T Emb" and len(row["evals"]) == len(mini.config["quadrupletbert"]["seeds"])
    settings = mini.config["quadrupletbert"]
    sweep = qb.rows("table2")
    assert len(sweep) == len(settings["margins"]) * len(settings["splits"]) * len(settings["datasets"])
    assert all(len(row["evals"]) == len(settings["sweep_seeds"]) for row in sweep)   # Table 2: one run a cell
    settings["sweep_seeds"] = []
    assert all(len(row["evals"]) == len(settings["seeds"]) for row in qb.rows("table2"))
    assert set(qb.command("table1")) == {"metrics", "exact_index"}


def test_quadrupletberts_models_count_recall_as_its_paper_does_on_a_question_set():
    mini = mini_plan()
    conventions, evaluation = mini.config["conventions"], mini.evaluation
    assert conventions["quadrupletbert_recall"] != conventions["reqa_recall"]   # else this test could not fail
    for kind in ("Three-T Emb", "Three-T BERT", "QuadrupletBERT"):
        model = mini.quadrupletbert.model(kind, 0.1, 13)
        assert evaluation.recall_convention("enwiki-mini", model) == conventions["quadrupletbert_recall"], model
    assert evaluation.recall_convention("enwiki-mini", "transformer-mlm-l2-d128") == conventions["reqa_recall"]
    assert RECALL_NOTE[conventions["quadrupletbert_recall"]] in mini.quadrupletbert.note("table1")   # its tables say so


def test_repbert_rows():
    mini = mini_plan()
    rb = mini.repbert
    assert rb.rows("table1")[1] == {"method": "RepBERT",
                                    "eval": "artifacts/enwiki-mini-passages/eval/repbert/dev/flat.json",
                                    "latency": "artifacts/enwiki-mini-passages/latency/repbert/dev.json"}
    fused = [r for r in rb.rows("table4") if r["fusion"] != "none"]
    assert {r["fusion"] for r in fused} == {"alternate", "rrf", "combsum", "union"}
    assert all(f.startswith("artifacts/") for f in rb.inputs("table3"))


def test_ltre_rows_and_figure():
    mini = mini_plan()
    lt = mini.ltre
    assert lt.rows("table1")[0] == {"key": "BM25", "eval": "artifacts/enwiki-mini-passages/eval/bm25/dev/lucene.json",
                                    "graded": ""}
    assert len(lt.rows("table4")) == len(lt.indexes) ** 2
    assert lt.inputs("table3")[:2] == ["artifacts/enwiki-mini-passages/eval/neg-bm25/dev/flat.json",
                                         "artifacts/enwiki-mini-passages/ltre/steps/neg-bm25-dev.jsonl"]
    assert lt.figure3_runs()[0][1].endswith(f"-{lt.start}-flat-dev.jsonl")
    assert lt.note("table1").endswith(lt.data_note) and lt.figure_note.endswith(lt.data_note)


def test_a_model_against_a_fixed_doc_side_searches_its_starts_indexes():
    dense = mini_plan().dense
    for method in ("ltre", "qrand", "qbm25", "qasync"):
        files = dense.dense_files("enwiki-mini-passages", f"{method}-bm25.async-ivf", "dev", "flat")
        assert files["index"] == "artifacts/enwiki-mini-passages/dense/neg-bm25.async/dev/index-flat.faiss", method
        assert files["model"] == f"artifacts/enwiki-mini-passages/dense/{method}-bm25.async-ivf/dev/model"
    own = dense.dense_files("enwiki-mini-passages", "neg-bm25", "dev", "flat")
    assert own["index"] == "artifacts/enwiki-mini-passages/dense/neg-bm25/dev/index-flat.faiss"


def test_zeroshot_rows_are_bm25_then_each_checkpoint():
    mini = mini_plan()
    rows = mini.zeroshot.rows("enwiki-mini")
    assert [r["model"] for r in rows] == ["bm25", *(f"ckpt-{n}" for n in mini.config["zeroshot"]["checkpoints"])]
    assert mini.checkpoints.split("enwiki-mini") == "all"
    assert mini.checkpoints.split("enwiki-mini-passages") == "dev"
    assert mini.zeroshot.command("enwiki-mini")["split"] == "all" and mini.zeroshot.inputs("enwiki-mini") == \
        [r["eval"] for r in rows]
