"""Where the workflow's files live: the artifacts folder, a dataset's collection, an evaluation's JSON, a passage
dataset's one split, and the marker of the profile every table depends on. Names only: nothing here reads the
config."""
from __future__ import annotations

ART = "artifacts"
PASSAGE_SPLIT = "dev"   # the split name of a passage dataset (never a key of `splits`: those are "<n>-<n>")
DENSE = f"{ART}/{{dataset}}/dense/{{model}}/{{split}}"   # a model's folder of encodings, indexes and runs


def collection(dataset, name=""):
    """A dataset's collection (its candidates, queries, qrels and statistics, whichever builder made them: ReQA,
    open-domain, MS MARCO, BEIR), or one file of it; `dataset` may be the wildcard "{dataset}"."""
    return f"{ART}/{dataset}/collection/{name}" if name else f"{ART}/{dataset}/collection"


def collection_files(dataset, *more):
    """{name: path} of a collection's candidates, queries and qrels (and "stats" if asked): the outputs every
    collection builder writes, the inputs of one that starts from another's."""
    suffix = {"candidates": "jsonl", "queries": "tsv", "qrels": "txt", "stats": "json"}
    return {name: collection(dataset, f"{name}.{suffix[name]}") for name in ("candidates", "queries", "qrels", *more)}


def eval_json(dataset, model, split, index):
    return f"{ART}/{dataset}/eval/{model}/{split}/{index}.json"


def model_folder(dataset, model, split):
    """A trained model (its training record lies beside it as model.meta.json)."""
    return f"{DENSE.format(dataset=dataset, model=model, split=split)}/model"


def profile_marker(profile: str) -> str:
    """The marker file of a profile, an input of every table and figure (workflow/rules/common.smk)."""
    return f"{ART}/profile-{profile}.json"
