"""One table shape: every table stage takes one argument set (towers.stages.tables.TABLE_ARGS), and each table's
row fields and options are declared once, in its paper's module (towers.reports.<paper>.LAYOUTS), listed here."""
import importlib

from towers.stages import load_all
from towers.stages.tables import table_layouts

ARGUMENTS = ["--table", "--paper", "--profile", "--note", "--row", "--option", "--csv", "--json"]
CHANG = ("split", "encoder", "pretraining", "eval")
SEEDED = ("dataset", "paper_dataset", "split", "model", "margin", "index", "evals")
FUSION = ("first", "second", "fusion", "eval")
# (module, table): (row fields, options); '*' is a layout whatever the table's name (a zero-shot dataset's)
LAYOUTS = {
    ("chang2020", "table1"): (("stats",), ()),
    ("chang2020", "table2"): (("dataset", "paper_dataset", "stats"), ()),
    ("chang2020", "table3"): (CHANG, ("dataset", "metrics")),
    ("chang2020", "table4"): (CHANG, ("dataset", "metrics")),
    ("chang2020", "table5"): (("index", "layers", "pretraining", "emb_dim", "split", "eval"), ("dataset", "metric")),
    ("chang2020", "table6"): (CHANG, ("dataset", "metrics")),
    ("quadrupletbert", "table1"): (SEEDED, ("metrics", "exact_index")),
    ("quadrupletbert", "table2"): (SEEDED, ("metrics", "exact_index")),
    ("repbert", "table1"): (("method", "eval", "latency"), ()),
    ("repbert", "table2"): (("method", "depth", "eval"), ()),
    ("repbert", "table3"): (FUSION, ()),
    ("repbert", "table4"): (FUSION, ()),
    ("ltre", "table1"): (("key", "eval", "graded"), ()),
    ("ltre", "table3"): (("key", "eval", "steps", "index", "before"), ()),
    ("ltre", "table4"): (("train", "test", "eval", "graded"), ()),
    ("zeroshot", "*"): (("model", "label", "caveat", "eval"), ("split", "metrics", "published")),
}


def test_every_table_stage_takes_the_one_argument_set():
    stages = load_all()
    tables = sorted(name for name in stages if name.endswith("-table"))
    assert tables == [f"{module}-table" for module in table_layouts()] == [
        "chang2020-table", "ltre-table", "quadrupletbert-table", "repbert-table", "zeroshot-table"]
    for name in tables:
        assert [flag for flag, _ in stages[name][1]] == ARGUMENTS, name


def test_each_tables_rows_and_options_are_declared_once_in_its_papers_module():
    declared = {(module, table): (layout.fields, tuple(o.name for o in layout.options))
                for module in table_layouts()
                for table, layout in importlib.import_module(f"towers.reports.{module}").LAYOUTS.items()}
    assert declared == LAYOUTS
    for module in table_layouts():   # one signature: build(rows, paper, table, profile, note, **options)
        for layout in importlib.import_module(f"towers.reports.{module}").LAYOUTS.values():
            code = layout.build.__code__
            assert code.co_varnames[:5] == ("rows", "paper_csv", "table", "profile", "note"), layout.build
            assert code.co_kwonlyargcount == len(layout.options), layout.build
