"""towers.plan's modules in layers, lowest first: a module uses only modules of the layers below it, through the
shared Plan (`self.plan.<family>`, `plan.<family>`) or an import (`from .<module> import`), so that no call runs
back up through the Plan. And one shape for a paper: every paper's module, and the zero-shot tables' (the tables of
no paper), offers INTERFACE, each taking the table's name."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

from plan_configs import PAPERS, ROOT, mini_plan

from towers.plan.tables import Tables

PLAN = ROOT / "src/towers/plan"
TABLES = ("zeroshot", *PAPERS)   # each paper's module is named after its id in data/papers/papers.yaml
LAYERS = [
    {"paths", "shell", "files", "software", "tables"},   # names, shell words, file reads, interpreters, a shape
    {"datasets"},
    {"training"},
    {"checkpoints"},
    {"retrieval"},
    {"evaluation"},
    set(TABLES),   # the papers' tables and the zero-shot tables: none uses another
    {"verdicts"},
]
INTERFACE = ("rows", "inputs", "note", "command")
# the prefixes a paper's methods once carried (chang_rows, qb_model, rb_rows, lt_files, zeroshot_rows)
PREFIXES = {"chang2020": ("chang",), "quadrupletbert": ("qb", "quadrupletbert"), "repbert": ("rb", "repbert"),
            "ltre": ("lt", "ltre"), "zeroshot": ("zs", "zeroshot")}


def families(init: Path = PLAN / "__init__.py") -> dict[str, str]:
    """{family: module} of the Plan: `self.data = Datasets(self)` with `from .datasets import Datasets` gives
    data -> datasets."""
    tree = ast.parse(init.read_text())
    module_of = {alias.asname or alias.name: node.module for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module for alias in node.names}
    return {target.attr: module_of[node.value.func.id] for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name) and node.value.func.id in module_of
            for target in node.targets
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"}


def uses(path: Path, family_module: dict[str, str]) -> list[tuple[int, str, str]]:
    """(line, module, how) of each plan module a module uses: a family of the Plan (self.plan.x or plan.x; the
    Plan's own values, config or papers, are no module's) or a relative import."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            modules = [node.module] if node.module else [alias.name for alias in node.names]
            found += [(node.lineno, module, f"from .{module} import") for module in modules]
        elif isinstance(node, ast.Attribute) and node.attr in family_module:
            owner = node.value
            via_plan = isinstance(owner, ast.Name) and owner.id == "plan"
            via_self = (isinstance(owner, ast.Attribute) and owner.attr == "plan" and isinstance(owner.value, ast.Name)
                        and owner.value.id == "self")
            if via_plan or via_self:
                found.append((node.lineno, family_module[node.attr], f"{'self.' * via_self}plan.{node.attr}"))
    return found


def layer_violations(plan: Path = PLAN, layers: list[set[str]] = LAYERS, papers=()) -> list[str]:
    """`papers`: the families the Plan builds by a paper's id (plan.<paper>, from towers.plan.<paper>)."""
    rank = {module: i for i, layer in enumerate(layers) for module in layer}
    family_module = {**families(plan / "__init__.py"), **{paper: paper for paper in papers}}
    found = []
    for path in sorted(plan.glob("*.py")):
        module = path.stem
        if module == "__init__" or module not in rank:
            continue
        for line, used, how in uses(path, family_module):
            if used != module and rank.get(used, len(layers)) >= rank[module]:
                way = "beside it" if rank.get(used) == rank[module] else "above it"
                found.append(f"plan/{path.name}:{line}: {module} uses {used} ({how}), {way}")
    return found


def test_every_plan_module_has_a_layer():
    modules = {path.stem for path in PLAN.glob("*.py")} - {"__init__"}
    declared = set().union(*LAYERS)
    assert modules == declared, f"without a layer: {sorted(modules - declared)}; gone: {sorted(declared - modules)}"
    assert sum(map(len, LAYERS)) == len(declared)   # no module in two layers


def test_plan_modules_use_only_the_layers_below_them():
    assert layer_violations(papers=PAPERS) == []
    assert set(PAPERS) <= {m for layer in LAYERS for m in layer}   # each paper's family has its layer


def test_the_check_sees_a_call_back_up_through_the_plan_and_an_import_from_above(tmp_path):
    (tmp_path / "__init__.py").write_text("from .low import Low\nfrom .high import High\n\n\nclass Plan:\n"
                                          "    def __init__(self):\n        self.low = Low(self)\n"
                                          "        self.high = High(self)\n")
    (tmp_path / "low.py").write_text("class Low:\n    def __init__(self, plan):\n        self.plan = plan\n\n"
                                     "    def f(self):\n        return self.plan.high.g()\n")
    (tmp_path / "high.py").write_text("from .low import Low\n\n\nclass High:\n    def __init__(self, plan):\n"
                                      "        self.config = plan.low.config\n")
    (tmp_path / "side.py").write_text("from .high import High\n")
    layers = [{"low"}, {"high", "side"}]
    assert layer_violations(tmp_path, layers) == [
        "plan/low.py:6: low uses high (self.plan.high), above it",
        "plan/side.py:1: side uses high (from .high import), beside it"]
    assert families(tmp_path / "__init__.py") == {"low": "low", "high": "high"}


def test_every_paper_and_the_zero_shot_tables_offer_one_interface_taking_a_tables_name():
    mini = mini_plan()
    for name in TABLES:
        tables = getattr(mini, name)
        assert isinstance(tables, Tables), name
        methods = [m for m in dir(type(tables)) if not m.startswith("_")]
        assert not [m for m in methods for p in PREFIXES.get(name, (name,)) if m.startswith(f"{p}_")], (name, methods)
        names = mini.config["zeroshot"]["datasets"] if name == "zeroshot" else \
            [Path(t["path"]).stem for t in PAPERS[name]["tables"]]
        for table in names:
            rows, inputs = tables.rows(table), tables.inputs(table)
            assert isinstance(rows, list) and all(isinstance(row, dict) for row in rows), (name, table)
            assert inputs and all(isinstance(f, str) and f for f in inputs), (name, table, inputs)
            assert isinstance(tables.note(table), str) and tables.note(table), (name, table)
            # the rows and options are the layout's, declared once (towers.reports.<name>.LAYOUTS)
            layouts = importlib.import_module(f"towers.reports.{name}").LAYOUTS
            layout = layouts.get(table) or layouts["*"]
            assert all(list(row) == list(layout.fields) for row in rows), (name, table, layout.fields)
            assert list(tables.command(table)) == [o.name for o in layout.options], (name, table)


def test_the_interface_is_what_the_shape_declares():
    assert set(INTERFACE) == set(Tables.__abstractmethods__)
