"""The package's layers: every import of the project (module-level or inside a function) runs from a higher layer
to a lower one, never up and never sideways into another part of the same layer, and no module is over MAX_LINES.

    io                          shared file handling: imports nothing of the project
    ground                      runtime, digests; config (params.yaml and YAML read within bounds, checked)
    modeling                    towers, tokenizers, checkpoints: the HF models and what feeds them tokens
    parts                       datasets, retrieval, verdicts
    training, reports           the training regimes (with their settings and losses); tables and the report
    stages, plan                `python -m towers <stage>`; the workflow's planning (what each rule reads, writes and
                                passes its stage, for a config: towers.plan, built by the Snakemake files)
    entry points                cli; ops (ci: the Makefile's and CI's commands; cache)
    launch                      warm (the warm-start server, which runs cli in its forks); scheduler and slurm
                                (fixes to Snakemake's scheduler and Slurm executor, applied by the workflow)
    __main__

A new top-level module or package has to be given its layer here."""
from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "towers"
MAX_LINES = 450
LAYERS = [
    {"towers", "io"},
    {"runtime", "digests", "config"},
    {"modeling"},
    {"datasets", "retrieval", "verdicts"},
    {"training", "reports"},
    {"stages", "plan"},
    {"cli", "ops"},
    {"launch"},
    {"__main__"},
]
RANK = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of the project in a file, relative ones resolved; `from package import
    module` names the module."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                is_module = any((root.parent / submodule.replace(".", "/")).with_suffix(s).exists() for s in (".py", ""))
                found.append((node.lineno, submodule if is_module else source))
    return [(line, module) for line, module in found if module == root.name or module.startswith(root.name + ".")]


def part_of(module: str) -> str:
    """The layer's part a module belongs to: its top-level module or package ('towers' for the package's own)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def violations(root: Path = SRC) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root.parent)
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            found.append(f"{where}: {lines} lines, over {MAX_LINES}: split it")
        importer = part_of(module_name(path, root))
        if importer not in RANK:
            found.append(f"{where}: {importer} has no layer (tests/test_layers.py LAYERS)")
            continue
        for line, module in project_imports(path, root):
            imported = part_of(module)
            if imported == importer:
                continue
            if imported not in RANK:
                found.append(f"{where}:{line}: imports {module}, which has no layer")
            elif RANK[imported] >= RANK[importer]:
                way = "up" if RANK[imported] > RANK[importer] else "sideways"
                found.append(f"{where}:{line}: {importer} imports {module}: {way} (layer {RANK[importer]} -> "
                             f"{RANK[imported]})")
    return found


def test_imports_run_down_the_layers_and_modules_stay_short():
    assert violations() == []


def test_the_check_sees_an_upward_import_a_lazy_one_and_a_long_module(tmp_path):
    root = tmp_path / "towers"
    (root / "retrieval").mkdir(parents=True)
    (root / "training").mkdir()
    for name in ("__init__.py", "io.py", "retrieval/__init__.py", "training/__init__.py", "training/loop.py"):
        (root / name).write_text("")
    (root / "retrieval" / "encode.py").write_text("from ..io import x\nfrom ..training import loop\n")
    (root / "retrieval" / "rerank.py").write_text("def f():\n    from towers.training.loop import run\n")
    (root / "io.py").write_text("\n" * (MAX_LINES + 1))
    found = violations(root)
    assert len(found) == 3
    assert "encode.py:2: retrieval imports towers.training.loop: up" in found[1]
    assert "rerank.py:2: retrieval imports towers.training.loop: up" in found[2]
    assert f"io.py: {MAX_LINES + 1} lines" in found[0]


MAX_FUNCTION_LINES = 60
TOP_LEVEL = {"__init__", "__main__", "cli", "io", "runtime", "digests"}   # the rest of the package lives in rooms


def test_no_function_is_over_sixty_lines():
    long = [f"{path.relative_to(SRC.parent)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path in sorted(SRC.rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, long


def test_the_top_level_holds_only_the_entry_points_and_the_ground():
    loose = sorted(p.stem for p in SRC.glob("*.py"))
    assert set(loose) == TOP_LEVEL, set(loose) ^ TOP_LEVEL
    assert {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()} == {
        "config", "modeling", "datasets", "retrieval", "verdicts", "training", "reports", "stages", "plan", "ops",
        "launch"}
