import hashlib
import json
import subprocess
import sys

from towers.datasets import reqa
from transformers import AutoTokenizer

from conftest import ROOT


def test_wordpiece_training_is_repeatable_across_processes(tmp_path, tiny_articles):
    # Small corpora have many equally frequent merges: the case where HF tokenizers' trainer
    # used to give a different vocabulary from one process to the next.
    candidates = tmp_path / "candidates.jsonl"
    rows = [c for a in tiny_articles[0] for c in reqa.article_candidates(a)]
    candidates.write_text("".join(json.dumps(r) + "\n" for r in rows))
    digests = set()
    for run in range(4):
        out = tmp_path / f"tok{run}"
        done = subprocess.run([sys.executable, "-m", "towers", "tokenizer", "--candidates", str(candidates),
                               "--out", str(out), "--vocab-size", "150", "--min-frequency", "1"],
                              cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        digests.add(hashlib.sha256((out / "tokenizer.json").read_bytes()).hexdigest())
    assert len(digests) == 1


def test_bert_style_encoding(tmp_path):
    from towers.modeling.tokenizer import train_wordpiece

    train_wordpiece(["the harbour light burned whale oil", "the keeper lit the lamp"] * 3, tmp_path, 100, 1, True)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    pair = tok("The Keeper", "lamp")
    assert tok.convert_ids_to_tokens(pair["input_ids"]) == ["[CLS]", "the", "keeper", "[SEP]", "lamp", "[SEP]"]
    assert pair["token_type_ids"] == [0, 0, 0, 0, 1, 1]
    assert [tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id] == [0, 1, 2, 3, 4]
