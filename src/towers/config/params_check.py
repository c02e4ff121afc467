"""params.yaml (with profile overrides) checked before the workflow plans anything: against the JSON schema,
then every name one section gives to another (datasets, splits, indexes). A problem is one line naming the
file that sets the key, the key's path and what is wrong, e.g.
`params.yaml: datasets.enwiki-mini-passages: unknown key 'ict_querys' (did you mean 'ict_queries'?)`."""
from __future__ import annotations

import difflib
import math
import os


# the YAML reader's names that callers have long imported from here (ParamsError, bounded, read_yaml, ...)
from .config_yaml import PAPERS_FILE
from .config_yaml import (ParamsError, _key_path, _shown, bounded, dotted, load_schema, read_yaml,  # noqa: F401
                          tree_problem)

QA_KINDS = ("wikipedia-qa", "squad", "nq")
ARTICLE_KINDS = ("wikipedia-qa", "wikipedia")   # datasets with parsed articles (pre-training pairs, passages)
PASSAGE_KINDS = ("msmarco-passage", "msmarco-tsv", "beir", "wikipedia-passages")
# datasets with evaluation queries: a zero-shot table takes any of them (a wikipedia dataset has none)
ZEROSHOT_KINDS = (*QA_KINDS, *PASSAGE_KINDS, "open-domain", "graded-passages")


def merge_configs(*trees: dict) -> dict:
    """Config trees merged as Snakemake merges --configfile files: mappings key by key, anything else replaced
    (the trees are left as they are)."""
    import copy

    def update(into, other):
        for key, value in other.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                update(into[key], value)
            else:
                into[key] = copy.deepcopy(value)
        return into
    out: dict = {}
    for tree in trees:
        update(out, tree)
    return out




def _has(tree, path) -> bool:
    for part in path:
        if isinstance(part, int) and isinstance(tree, list) and part < len(tree):
            tree = tree[part]
        elif isinstance(tree, dict) and part in tree:
            tree = tree[part]
        else:
            return False
    return True


def source_of(path, sources: list[tuple[str, dict]]) -> str:
    """The last of the config sources (later ones override earlier ones) that sets `path`, else the first."""
    for name, tree in reversed(sources):
        if _has(tree, path):
            return name
    return sources[0][0] if sources else "params.yaml"


def _unknown(keys, allowed) -> str:
    """"unknown key 'x' (did you mean 'y'?)" for the first of `keys` not in `allowed`."""
    key = next(k for k in sorted(keys, key=str) if k not in allowed)
    close = difflib.get_close_matches(str(key), [str(a) for a in allowed], n=1)
    return f"unknown key {bounded(key, 80)!r}" + (f" (did you mean {close[0]!r}?)" if close else "")


def _required_choice(error) -> list[str] | None:
    """The keys of a oneOf/anyOf whose branches each require one key (a file's checksum, files or local_dir)."""
    branches = error.validator_value if error.validator in ("oneOf", "anyOf") else None
    if branches and all(len(b.get("required", [])) == 1 for b in branches):
        return [b["required"][0] for b in branches]
    return None


def describe(error) -> tuple[list, str]:
    """(path, one-line problem) of a jsonschema error; unknown keys said as such, not as schema dumps."""
    import jsonschema

    if choice := _required_choice(error):
        exactly = "exactly " if error.validator == "oneOf" else ""
        return list(error.absolute_path), f"needs {exactly}one of the keys {', '.join(choice)}"
    while error.context:   # the most relevant failure inside a oneOf/anyOf
        error = jsonschema.exceptions.best_match(error.context)
    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        return path, _unknown([k for k in error.instance if k not in allowed], allowed)
    types = error.validator_value if error.validator == "type" else ()
    if "integer" in types and isinstance(error.instance, float) and error.instance.is_integer():
        return path, f"{error.instance!r} is a float; this key takes an integer, written as one ({int(error.instance)})"
    if "propertyNames" in error.schema_path and error.validator == "enum":   # a key this kind of dataset does not take
        return path, _unknown([error.instance], error.validator_value)
    return path, bounded(error.message.splitlines()[0] if error.message else error.validator)


def _control(c: str) -> bool:
    """A C0/C1 control character other than tab and line ends (Unicode category Cc)."""
    return (ord(c) < 32 and c not in "\t\n\r") or 127 <= ord(c) < 160


def _key_problem(key) -> str:
    if isinstance(key, bool):   # YAML 1.1: a bare on/off/yes/no/true/false
        return (f"the key {str(key).lower()} is not a name: YAML read the bare word (on, off, yes, no, true or false) "
                f"as the boolean {str(key).lower()}; quote it, e.g. 'on'")
    shown = "null" if key is None else bounded(key, 80)
    return f"the key {shown} is {'a number, ' if isinstance(key, (int, float)) else ''}not a name; quote it: '{shown}'"


def text_problems(tree, path=()) -> list[tuple[list, ...]]:
    """Values no key takes: a string holding a NUL or another control character (tabs and line ends aside; no
    file name, shell word or table cell can carry one), NaN or an infinity (a range test is false for NaN), a
    mapping key that is not a string (path of its mapping, problem, path of the key: its file is named)."""
    if isinstance(tree, dict):
        keys = [(list(path), _key_problem(key), [*path, key]) for key in tree if not isinstance(key, str)]
        return keys + [p for key, value in tree.items()
                       for p in text_problems(key, (*path, "(a key)")) + text_problems(value, (*path, key))]
    if isinstance(tree, list):
        return [p for i, value in enumerate(tree) for p in text_problems(value, (*path, i))]
    if isinstance(tree, float) and not math.isfinite(tree):
        return [(list(path), f"{'.nan' if math.isnan(tree) else '-.inf' if tree < 0 else '.inf'} is not a finite number")]
    bad = next((c for c in tree if _control(c)), None) if isinstance(tree, str) else None
    if bad is not None:
        return [(list(path), f"holds the control character {bad!r} in '{bounded(tree, 120)}'")]
    return []


def schema_problems(config: dict, schema: dict) -> list[tuple[list, str]]:
    import jsonschema

    base = jsonschema.Draft202012Validator   # `integer` as written: the schema's takes 10.0, which argparse refuses
    integer = base.TYPE_CHECKER.redefine("integer", lambda _, v: isinstance(v, int) and not isinstance(v, bool))
    errors = jsonschema.validators.extend(base, type_checker=integer)(schema).iter_errors(config)
    # the deepest first (an item's own problem says more than its list's), and a misspelt key before the
    # required key it leaves missing
    return sorted((describe(e) for e in errors),
                  key=lambda p: (-len(p[0]), list(map(str, p[0])), not p[1].startswith("unknown key"), p[1]))


def reference_problems(config: dict) -> list[tuple[list, str]]:
    """Names one section gives to another that do not exist, or name the wrong kind of thing (or a folder where
    a file is meant), and values another key bounds: each dataset's, the runs' settings', then each paper's
    (PAPER_REFERENCES)."""
    refs = References(config)
    for name, spec in refs.datasets.items():
        dataset_references(refs, ["datasets", name], spec)
    run_references(refs)
    for section, check in PAPER_REFERENCES.items():
        if config.get(section):
            check(refs, config[section])
    return refs.problems


class References:
    """The names a config defines (datasets, splits, indexes, checkpoints), the checks of a name against them, and
    the problems found so far: (key path, problem)."""

    def __init__(self, config: dict):
        self.config, self.problems = config, []
        self.datasets = config.get("datasets", {})
        self.splits = set(config.get("splits", {}))
        self.indexes = set(config.get("faiss", {}).get("indexes", {})) | {
            i["name"] for i in config.get("ltre", {}).get("indexes", [])}
        self.checkpoints = config.get("checkpoints", {})

    def add(self, path: list, problem: str) -> None:
        self.problems.append((path, problem))

    def dataset(self, path, name, kinds, what) -> None:
        if name not in self.datasets:
            self.add(path, f"dataset {name!r} is not defined under datasets ({', '.join(self.datasets)})")
        elif self.datasets[name].get("kind") not in kinds:
            self.add(path, f"dataset {name!r} is of kind {self.datasets[name].get('kind')}; {what} needs one of kind "
                           f"{', '.join(kinds)}")

    def split_names(self, path, names) -> None:
        for i, split in enumerate(names):
            if split not in self.splits:
                self.add([*path, i], f"split {split!r} is not defined under splits ({', '.join(sorted(self.splits))})")

    def index(self, path, name) -> None:
        if name and name not in self.indexes:
            self.add(path, f"index {name!r} is not defined under faiss.indexes or ltre.indexes "
                           f"({', '.join(sorted(self.indexes))})")

    def checkpoint(self, path, name) -> None:
        if name not in self.checkpoints:
            self.add(path, f"checkpoint {name!r} is not defined under checkpoints "
                           f"({', '.join(self.checkpoints) or 'none'})")


def dataset_references(refs: References, where: list, spec: dict) -> None:
    """A dataset's links to others, its file names, a split dump's parts, and the files and folders it names."""
    kind = spec.get("kind")
    if kind == "open-domain":
        refs.dataset([*where, "base"], spec["base"], QA_KINDS, "an open-domain dataset's base")
        refs.dataset([*where, "extra"], spec["extra"], ("wikipedia",), "its extra candidates")
    elif kind == "wikipedia-passages":
        refs.dataset([*where, "articles"], spec["articles"], ARTICLE_KINDS, "its passages")
    elif kind == "graded-passages":
        refs.dataset([*where, "base"], spec["base"], PASSAGE_KINDS, "a graded set's base")
    names = [f["name"] for f in spec.get("files", [])]
    # "." and ".." pass the file-name pattern (no separators) but name folders: the download's path would be
    # the dataset's folder or its parent, and Snakemake would report a missing input
    file_keys = [(["files", i, "name"], name) for i, name in enumerate(names)] + \
        [([key], spec[key]) for key in ("queries", "qrels") if spec.get(key)]
    for key, name in file_keys:
        if name in (".", ".."):
            refs.add([*where, *key], f"{name!r} names a folder, not a file")
    keys = ["archive", "triples"] + (["queries", "qrels"] if kind == "graded-passages" and not spec.get("local_dir")
                                     else [])
    for key in keys:
        if spec.get(key) and spec[key] not in names:
            refs.add([*where, key], f"{spec[key]!r} is not one of its files ({', '.join(names) or 'none'})")
    if kind == "wikipedia" and spec.get("index"):   # a multistream dump parsed in parts: its first file, read whole
        if spec["index"] not in names[1:]:
            refs.add([*where, "index"], f"{spec['index']!r} is not one of its files after the dump (the first: "
                                        f"{names[0] if names else 'none'})")
        if spec.get("dump"):
            refs.add([*where, "dump"], "a dump parsed in parts (index) is its first file, not a `dump` path")
        if spec.get("max_articles", 0):
            refs.add([*where, "max_articles"], "must be 0 where the dump is parsed in parts (index)")
    local_references(refs, where, spec)


def local_references(refs: References, where: list, spec: dict) -> None:
    """Files and folders params name: missing ones said here, not as Snakemake's missing-input report."""
    for key in ("questions", "test_questions", "judgements", "dump"):
        value = spec.get(key)
        if value and not (key == "dump" and (value == "gensim" or value.startswith("gensim:"))) \
                and not os.path.isfile(value):
            refs.add([*where, key], f"no such file: {value!r}")
    local = spec.get("local_dir")
    if not local:
        return
    wanted = [f["name"] for f in spec.get("files", [])] + [spec[k] for k in ("queries", "qrels") if spec.get(k)]
    if not os.path.isdir(local):
        refs.add([*where, "local_dir"], f"no such folder: {local!r}" + ("" if os.path.isabs(local) else
                 f" (a relative path is read against the repository root, {os.getcwd()})"))
    elif missing := [w for w in wanted if not os.path.exists(os.path.join(local, w))]:
        refs.add([*where, "local_dir"], f"{local!r} holds no {missing[0]!r}"
                 + (f" (nor {len(missing) - 1} more of its files)" if len(missing) > 1 else ""))


def run_references(refs: References) -> None:
    """Settings of the runs themselves: length buckets, encoding and BM25 shards."""
    config, datasets = refs.config, refs.datasets
    # a bucket past the encoders' positions pads batches to more tokens than a BERT trained here takes: every
    # training job would stop in an index error, after the run's clean-up had removed the old models
    positions = config.get("encoder", {}).get("max_positions")
    for i, bucket in enumerate(config.get("gpu", {}).get("length_buckets", [])):
        if positions and bucket > positions:
            refs.add(["gpu", "length_buckets", i], f"{bucket} is longer than the {positions} positions of the "
                                                   "encoders trained here (encoder.max_positions)")
    for name in config.get("encode", {}).get("shards", {}):
        if name not in datasets:
            refs.add(["encode", "shards", name], f"dataset {name!r} is not defined under datasets")
    split_runs = config.get("bm25", {}).get("split_runs", [])
    for name, parts in config.get("bm25", {}).get("query_shards", {}).items():
        if parts > 1 and name not in split_runs:   # only a run per query set is searched in parts
            refs.add(["bm25", "query_shards", name], f"dataset {name!r} is not in bm25.split_runs "
                                                    f"({', '.join(split_runs) or 'none'}): only split runs are sharded")


def chang2020_references(refs: References, chang: dict) -> None:
    refs.dataset(["chang2020", "table1", "dataset"], chang["table1"]["dataset"], ARTICLE_KINDS, "pre-training pairs")
    refs.dataset(["chang2020", "pretraining", "corpus"], chang["pretraining"]["corpus"], ARTICLE_KINDS,
                 "pre-training pairs")
    for i, row in enumerate(chang["table2"]["datasets"]):
        refs.dataset(["chang2020", "table2", "datasets", i, "name"], row["name"], QA_KINDS, "Table 2")
    for table in ("table3", "table4", "table5", "table6"):
        spec = chang[table]
        refs.dataset(["chang2020", table, "dataset"], spec["dataset"],
                     ("open-domain",) if table == "table6" else QA_KINDS, f"Table {table[-1]}")
        refs.split_names(["chang2020", table, "splits"], spec["splits"])
        refs.index(["chang2020", table, "index"], spec["index"])
        for i, name in enumerate(spec.get("checkpoints", [])):
            refs.checkpoint(["chang2020", table, "checkpoints", i], name)
    # pre-training mixtures: each pair task's file is read once; MLM pre-trains the encoder of encoder.layers only
    mixtures = [(["chang2020", "table6", "pretraining", i], p) for i, p in enumerate(chang["table6"]["pretraining"])]
    layers_here = refs.config["encoder"]["layers"]
    for i, (_, layers, pretraining, _) in enumerate(chang["table5"]["rows"]):
        mixtures.append((["chang2020", "table5", "rows", i, 2], pretraining))
        if pretraining == "mlm" and layers != layers_here:
            refs.add(["chang2020", "table5", "rows", i, 1], f"an MLM row has encoder.layers ({layers_here}) layers, "
                                                            f"not {layers}: only that encoder is MLM-pre-trained")
    for path, pretraining in mixtures:
        tasks = pretraining.split("+")
        if len(set(tasks)) < len(tasks):
            refs.add(path, f"{pretraining!r} names a pair task twice; a mixture takes each of ict, bfs and wlp at most "
                           "once")


def mining_references(refs: References, mining: dict) -> None:
    refs.index(["mining", "index"], mining.get("index"))


def quadrupletbert_references(refs: References, qb: dict) -> None:
    for i, row in enumerate(qb["datasets"]):
        refs.dataset(["quadrupletbert", "datasets", i, "name"], row["name"], QA_KINDS, "QuadrupletBERT's tables")
    refs.split_names(["quadrupletbert", "splits"], qb["splits"])
    refs.index(["quadrupletbert", "index"], qb["index"])
    refs.index(["quadrupletbert", "quantized_index"], qb["quantized_index"])


def repbert_references(refs: References, repbert: dict) -> None:
    refs.dataset(["repbert", "dataset"], repbert["dataset"], PASSAGE_KINDS, "RepBERT's tables")
    refs.index(["repbert", "index"], repbert["index"])


def zeroshot_references(refs: References, zs: dict) -> None:
    """Checked here, not after hours of encoding when the table is written."""
    for i, name in enumerate(zs.get("checkpoints", [])):
        refs.checkpoint(["zeroshot", "checkpoints", i], name)
    for i, name in enumerate(zs.get("datasets", [])):
        refs.dataset(["zeroshot", "datasets", i], name, ZEROSHOT_KINDS, "a zero-shot table (evaluation queries)")
    models = ["bm25", *(f"ckpt-{name}" for name in zs.get("checkpoints", []))]
    for i, row in enumerate(zs.get("published", [])):
        where = ["zeroshot", "published", i]
        if row.get("model") not in models:
            refs.add([*where, "model"], f"model {row.get('model')!r} is not a row of the zero-shot tables "
                                        f"({', '.join(models)}: bm25 or ckpt-<a name in zeroshot.checkpoints>)")
        if row.get("metric") not in zs.get("metrics", []):
            refs.add([*where, "metric"], f"metric {row.get('metric')!r} is not in zeroshot.metrics "
                                         f"({', '.join(zs.get('metrics', []))})")
        if row.get("dataset") not in refs.datasets:
            refs.add([*where, "dataset"], f"dataset {row.get('dataset')!r} is not defined under datasets")


def ltre_references(refs: References, lt: dict) -> None:
    refs.dataset(["ltre", "dataset"], lt["dataset"], PASSAGE_KINDS, "LTRe's tables")
    if lt["graded_dataset"]:
        refs.dataset(["ltre", "graded_dataset"], lt["graded_dataset"], ("graded-passages",), "nDCG@10's queries")
    for i, spec in enumerate(lt["indexes"]):   # one name, one meaning: ltre.indexes join faiss.indexes
        factory = refs.config.get("faiss", {}).get("indexes", {}).get(spec["name"], spec["factory"])
        if factory != spec["factory"]:
            refs.add(["ltre", "indexes", i, "factory"], f"index {spec['name']!r} means {factory!r} in faiss.indexes "
                                                        f"but {spec['factory']!r} here")


# each paper's section (and hard-negative mining's, the zero-shot tables') declares the names it gives other
# sections; checked in this order, the first problem the one said
PAPER_REFERENCES = {"chang2020": chang2020_references, "mining": mining_references,
                    "quadrupletbert": quadrupletbert_references, "repbert": repbert_references,
                    "zeroshot": zeroshot_references, "ltre": ltre_references}


def paper_problems(config: dict, papers: dict) -> list[tuple[list, str]]:
    """claims.papers that data/papers/papers.yaml (`papers`, as towers.reports.papers.load reads it) does not declare."""
    return [(["claims", "papers"], f"{paper!r} is not a paper of {PAPERS_FILE} ({', '.join(papers)})")
            for paper in config["claims"]["papers"] if paper not in papers]


def check(config: dict, schema_path, sources: list[tuple[str, dict]], papers: dict | None = None) -> None:
    """Raise ParamsError (one line) for the first problem; the count of the others follows it.

    `sources`: (name, parsed YAML) of every config file in the order they apply (params.yaml, then
    --configfile files, then --config), used to name the file that sets a wrong key; `papers`: the declared
    papers, whose ids claims.papers picks from."""
    problems = [p for p in [tree_problem(config)] if p] or text_problems(config) \
        or schema_problems(config, load_schema(str(schema_path)))   # bounded first (--config): the others walk it all
    if not problems:   # names are only looked up in a config whose shape is right
        problems = reference_problems(config) + (paper_problems(config, papers) if papers is not None else [])
    if problems:
        path, problem, *key = problems[0]
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise ParamsError(f"{source_of(key[0] if key else path, sources)}: {_key_path(path)}: {bounded(problem)}{more}")


def load_sources(files, overrides: dict | None = None) -> list[tuple[str, dict]]:
    """The config files (and --config values, a profile's `config:` among them) as `check` wants them."""
    if folders := [f for f in files[1:] if os.path.isdir(f)]:   # Snakemake itself fails on one before the Snakefile
        raise ParamsError(f"{_shown(folders[0]).rstrip('/')}/: --configfile names a folder, not a YAML file")
    sources = [(_shown(f), read_yaml(str(f)) or {}) for f in files] + ([("--config", overrides)] if overrides else [])
    for name, tree in sources:
        if not isinstance(tree, dict):
            raise ParamsError(f"{name}: (top level): a config file is a mapping of keys, not a {type(tree).__name__}")
    return sources
