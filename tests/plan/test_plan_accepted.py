"""Every setting the params check accepts plans (issue 68). From params.yaml (the mini profile) and the tiny test
overlay, each value is changed, one at a time, to what the params schema allows there (an enum's every value, a
bound of a number, the other boolean, a list of an enum's values, strings its pattern matches: short ones made from
it and the names the profiles use); the params check then refuses the setting in one line, or the plan of every
target is computed without an exception. (Hypothesis is not in the environment: the values are enumerated.)"""
import copy
import itertools
import random
import re
import re._parser as regex_parser   # the standard library's own parse of a pattern: strings made from it
from pathlib import Path
from types import SimpleNamespace

import yaml

from plan_configs import PAPERS, PARAMS, ROOT, plan_of

from towers.config.params_check import ParamsError, check, load_schema, merge_configs
from towers.plan import ART

SCHEMA_FILE = str(ROOT / "workflow/schemas/params.schema.yaml")
SCHEMA = load_schema(SCHEMA_FILE)
TINY = yaml.safe_load((ROOT / "tests/fixtures/tiny.yaml").read_text())
PROFILE_FILES = [ROOT / "params.yaml", ROOT / "tests/fixtures/tiny.yaml", ROOT / "config/paper.yaml"]
EVAL = re.compile(rf"{ART}/(?P<dataset>[^/]+)/eval/(?P<model>[^/]+)/(?P<split>[^/]+)/(?P<index>[^/]+)\.json")
# the plan's calls a rule file makes as Snakemake reads it (no wildcards among their arguments)
READ_TIME_CALLS = sorted({call.group(0) for rules in (ROOT / "workflow/rules").glob("*.smk")
                          for call in re.finditer(r"plan\.\w+\.\w+\(([^()]*)\)", rules.read_text())
                          if not re.search(r"\b(w|input|wildcards)\b", call.group(1))})


def names(tree, path=()) -> set[str]:
    """The names a config tree gives: the keys of its named collections (datasets, splits, indexes, checkpoints:
    the schema's `propertyNames`) and the `name` of an entry of a list other than a dataset's files."""
    if isinstance(tree, list):
        return set().union(*(names(value, (*path, i)) for i, value in enumerate(tree)))
    if not isinstance(tree, dict):
        return set()
    own = set(map(str, tree)) if "propertyNames" in schema_at(path) and path[:1] != ("resources",) else set()
    own |= {tree["name"]} if "name" in tree and "files" not in path else set()
    return own.union(*(names(value, (*path, key)) for key, value in tree.items()))


def made(items) -> list[str]:
    """Strings a parsed pattern matches: each repeat 0 to 2 times past its minimum, a class's first character."""
    out = [""]
    for op, av in items:
        if op == regex_parser.LITERAL:
            options = [chr(av)]
        elif op == regex_parser.IN:
            first = av[-1] if av[0][0] == regex_parser.NEGATE else av[0]
            options = [chr(first[1]) if first[0] == regex_parser.LITERAL else
                       chr(first[1][0]) if first[0] == regex_parser.RANGE else "0"]
        elif op == regex_parser.ANY:
            options = ["a"]
        elif op == regex_parser.BRANCH:
            options = [s for branch in av[1] for s in made(branch)]
        elif op == regex_parser.SUBPATTERN:
            options = made(av[3])
        elif op in (regex_parser.MAX_REPEAT, regex_parser.MIN_REPEAT):
            low, high, inner = av
            counts = range(low, min(high, low + 2) + 1)
            options = ["".join(parts) for n in counts for parts in itertools.product(made(inner), repeat=n)]
        else:   # ^ and $
            options = [""]
        out = [a + b for a, b in itertools.product(out, options)][:200]
    return out


def matching(pattern: str, few: int = 3) -> list[str]:
    """A few strings made from `pattern` (the same ones every run), and the profiles' names it matches."""
    own = sorted(set(made(regex_parser.parse(pattern))))
    return random.Random(pattern).sample(own, min(few, len(own))) + \
        [name for name in PROFILE_NAMES if re.search(pattern, name)]


def resolved(node):
    while isinstance(node, dict) and "$ref" in node:
        node = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node if isinstance(node, dict) else {}


def schema_at(path) -> dict:
    node = SCHEMA
    for part in path:
        node = resolved(node)
        if isinstance(part, int):
            prefix = node.get("prefixItems", [])
            node = prefix[part] if part < len(prefix) else node.get("items")
        else:
            node = node.get("properties", {}).get(part, node.get("additionalProperties"))
    return resolved(node)


def allowed(node: dict, value) -> list:
    """Values the schema allows in place of `value` at `node`."""
    kind = node.get("type")
    if "enum" in node:
        values = node["enum"]
    elif kind == "boolean":
        values = [not value]
    elif kind in ("integer", "number"):
        values = [node[bound] for bound in ("minimum", "maximum") if bound in node]
    elif kind == "string" and "pattern" in node:
        values = matching(node["pattern"])
    elif kind == "array" and "enum" in resolved(node.get("items")):
        items = resolved(node["items"])["enum"]
        values = [[item] for item in items] + [list(items)]
    else:
        values = []
    return [v for v in values if v != value]


def leaves(tree, path=()):
    """(path, value) of every value in a config tree, each list as a whole too."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from leaves(value, (*path, key))
        return
    yield path, tree
    if isinstance(tree, list):
        for i, value in enumerate(tree):
            yield from leaves(value, (*path, i))


PROFILE_NAMES = sorted(set(PAPERS).union(*(names(yaml.safe_load(f.read_text())) for f in PROFILE_FILES)))


def changed(tree, path, value):
    tree = copy.deepcopy(tree)
    at = tree
    for part in path[:-1]:
        at = at[part]
    at[path[-1]] = value
    return tree


def mutations():
    """(what changed, the merged config, its sources): params.yaml's every value, then the tiny overlay's."""
    for path, value in leaves(PARAMS):
        for other in allowed(schema_at(path), value):
            tree = changed(PARAMS, path, other)
            yield f"params.yaml {path}={other!r}", tree, [("params.yaml", tree)]
    for path, value in leaves(TINY):
        for other in allowed(schema_at(path), value):
            tree = changed(TINY, path, other)
            yield f"tiny.yaml {path}={other!r}", merge_configs(PARAMS, tree), [("params.yaml", PARAMS), ("tiny.yaml", tree)]


def plan_everything(plan) -> None:
    """What Snakemake asks of the plan for every target: the calls its rule files make as it reads them, every
    table's rows, inputs, note and command, and for every evaluation a table reads its run, questions, metrics and
    recall convention, its model's folder and search files, and a Chang et al. model's towers, start and pairs."""
    for call in READ_TIME_CALLS:
        eval(call, {"plan": plan})   # the rule files' own calls, as written there
    tables = [(getattr(plan, paper), Path(t["path"]).stem) for paper in plan.papers for t in plan.papers[paper]["tables"]]
    evaluations = set()
    for family, table in tables + [(plan.zeroshot, dataset) for dataset in plan.config["zeroshot"]["datasets"]]:
        family.note(table), family.command(table)
        files = family.inputs(table) + [v for row in family.rows(table) for v in row.values() if isinstance(v, str)]
        evaluations |= {m.groups() for m in map(EVAL.fullmatch, files) if m}
    chang = plan.chang2020
    for dataset, model, split, index in sorted(evaluations):
        w = SimpleNamespace(dataset=dataset, model=model, split=split, index=index)
        run = plan.evaluation.run_path(w)
        plan.evaluation.test_questions(w), plan.evaluation.recall_convention(dataset, model)
        plan.evaluation.eval_metrics(dataset, split), plan.data.corpus_of(dataset)
        if "/dense/" in run:
            plan.dense.model_dir(w), plan.dense.dense_files(dataset, model, split, index)
        if re.fullmatch(chang.model_re, model):
            base = SimpleNamespace(dataset=plan.data.base_of(dataset), model=model)
            chang.towers(model), chang.init(base.dataset, chang.parse_model(model)), chang.start(base)
            chang.pretraining_pairs(SimpleNamespace(dataset=chang.settings["pretraining"]["corpus"], model=model))


def test_every_setting_the_params_check_accepts_plans(tmp_path, monkeypatch):
    # the tiny overlay's files lie under fixtures/, params.yaml's under data/, as in a copy of the workflow
    for folder, target in (("data", ROOT / "data"), ("fixtures", ROOT / "tests/fixtures")):
        (tmp_path / folder).symlink_to(target)
    monkeypatch.chdir(tmp_path)
    failures, tried, refused = [], 0, 0
    for what, config, sources in mutations():
        tried += 1
        try:
            check(config, SCHEMA_FILE, sources, PAPERS)
        except ParamsError as error:
            refused += 1
            assert "\n" not in str(error), (what, str(error))
            continue
        try:
            plan_everything(plan_of(config))
        except Exception as error:   # any exception is what this test looks for
            failures.append(f"{what}: {type(error).__name__}: {error}")
    assert not failures, f"{len(failures)} of {tried - refused} accepted settings do not plan:\n" + "\n".join(failures[:30])
    assert tried > 500 and 0 < refused < tried   # the enumeration reaches both sides
