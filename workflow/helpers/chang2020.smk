# What workflow/rules/chang2020.smk's rules call: the rows and params of Chang et al.'s tables.

LABEL = {"none": "No Pretraining", "mlm": "MLM", "ict": "ICT", "bfs": "BFS", "wlp": "WLP", "ict+bfs+wlp": "ICT+BFS+WLP"}


def chang_rows(table):
    """The rows (split, encoder, pretraining, eval: the evaluation JSON) of Chang et al.'s Tables 3, 4 (main
    results) and 6 (open domain: the candidates enlarged, the models of the dataset it enlarges)."""
    t = CHANG[table]
    if table == "table6":
        encoders = [("Transformer", p) for p in t["pretraining"]]
    else:
        encoders = [("BoW-MLP", "none"), ("BoW-MLP", "ict+bfs+wlp"),
                    ("Transformer", "none"), ("Transformer", "mlm"), ("Transformer", "ict+bfs+wlp")]
    rows = []
    for split in t["splits"]:
        rows.append(chang_row(split, "BM-25", LABEL["none"], eval_json(t["dataset"], "bm25", split, "lucene")))
        for encoder, pretraining in encoders:
            if encoder == "BoW-MLP":
                model = chang_model("bowmlp", pretraining, CHANG["bow_mlp"]["embedding_dim"])
            else:
                model = chang_model("transformer", pretraining, config["two_tower"]["embedding_dim"])
            rows.append(chang_row(split, encoder, LABEL[pretraining], eval_json(t["dataset"], model, split, t["index"])))
        for name in t.get("checkpoints", []):   # pretrained checkpoints, evaluated as they are (zeroshot.smk)
            rows.append(chang_row(split, checkpoint_cfg(f"ckpt-{name}")["label"], CHECKPOINT_ROW,
                                  eval_json(t["dataset"], f"ckpt-{name}", split, t["index"])))
    return rows


def chang_row(split, encoder, pretraining, evaluation):
    return {"split": split, "encoder": encoder, "pretraining": pretraining, "eval": evaluation}


CHECKPOINT_ROW = "retrieval-trained checkpoint (not a BERT init)"


def chang_table_params(table):
    return {"rows": row_flags(chang_rows(table)),
            "metrics": " ".join(q(m) for m in config["metrics"] if m.startswith("R@")),
            "profile": config["profile"], "dataset": CHANG[table]["dataset"],
            "note": table_note(CHANG[table]["dataset"])}


CHANG_TABLE = paper_table("table", "--metrics {params.metrics} {params.rows}", " --dataset {params.dataset}")


def ablation_rows():
    """Table 5's rows: index, layers, pretraining, emb_dim, split and eval (the evaluation JSON)."""
    t = CHANG["table5"]
    return [{"index": str(index), "layers": str(layers), "pretraining": LABEL[pretraining], "emb_dim": str(dim),
             "split": split,
             "eval": eval_json(t["dataset"], chang_model("transformer", pretraining, dim, layers), split, t["index"])}
            for index, layers, pretraining, dim in t["rows"] for split in t["splits"]]
