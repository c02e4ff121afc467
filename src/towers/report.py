"""One self-contained HTML page of every result: each table with the paper's value beside the reproduced one
and their difference coloured, each figure inline, the workflow's rule graph, and the software and
hardware it ran on (`snakemake results/report.html`).

Tables follow one convention (towers.tables and the paper reports): a metric column "M" and, where the
paper reports it, "M paper"; the profile note that every row repeats is shown once above the table."""
from __future__ import annotations

import base64
import html
import os
import platform
import re
import subprocess
from collections import Counter
from importlib import metadata
from pathlib import Path

import pandas as pd

from .io import atomic_path

PACKAGES = ["torch", "transformers", "tokenizers", "faiss-cpu", "faiss-gpu-cu12", "pyserini", "ir_measures",
            "pytrec-eval-terrier", "pandas", "snakemake", "dvc"]
STYLE = """body{font-family:sans-serif;margin:2em;max-width:110em}table{border-collapse:collapse;font-size:12px}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#f3f3f3}
.note{color:#555;font-size:12px;max-width:100em}img{max-width:100%;border:1px solid #ddd}"""


def parse_rulegraph(dot: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Node id -> rule name and the (from, to) edges of `snakemake --rulegraph` output."""
    nodes = dict(re.findall(r'^\s*(\d+)\[label = "([^"]+)"', dot, re.M))
    edges = re.findall(r"^\s*(\d+) -> (\d+)", dot, re.M)
    return nodes, edges


def draw_rulegraph(dot: str, png: Path) -> None:
    """The rule graph in layers (a rule's inputs' rules to its left), drawn with networkx and matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    nodes, edges = parse_rulegraph(dot)
    graph = nx.DiGraph()
    graph.add_nodes_from(nodes.values())
    graph.add_edges_from((nodes[a], nodes[b]) for a, b in edges)
    # rules can form cycles (a model's run feeds the mining that trains the next model): layer the
    # graph of its strongly connected parts, which has none
    parts = nx.condensation(graph)
    for layer, members in enumerate(nx.topological_generations(parts)):
        for part in members:
            for name in parts.nodes[part]["members"]:
                graph.nodes[name]["layer"] = layer
    position = nx.multipartite_layout(graph, subset_key="layer")
    sizes = Counter(nx.get_node_attributes(graph, "layer").values())
    fig, ax = plt.subplots(figsize=(1.6 * len(sizes) + 1, 0.55 * max(sizes.values(), default=1) + 1))
    nx.draw_networkx_edges(graph, position, ax=ax, edge_color="#bbb", arrows=True, arrowsize=8, node_size=1500)
    nx.draw_networkx_labels(graph, position, ax=ax, font_size=7,
                            bbox={"boxstyle": "round", "fc": "#eef3fb", "ec": "#7a9cc6"})
    ax.set_axis_off()
    fig.tight_layout()
    with atomic_path(png) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def with_differences(table: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The table with a "M diff" column (reproduced - paper) after each "M paper"; the diff columns' names."""
    out, diffs = table.copy(), []
    for column in table.columns:
        if column.endswith(" paper") and column[:-6] in table.columns:
            base = column[:-6]
            diff = pd.to_numeric(table[base], errors="coerce") - pd.to_numeric(table[column], errors="coerce")
            out.insert(out.columns.get_loc(column) + 1, f"{base} diff", diff.round(4))
            diffs.append(f"{base} diff")
    return out, diffs


# which way is better for a metric column: costs are better lower, ranking quality higher; the rest
# (counts and sizes of the data, model shapes) are facts to compare, neither better nor worse
LOWER_IS_BETTER = re.compile(r"ms/query|hours|seconds|memory|bytes|GB\b")
HIGHER_IS_BETTER = re.compile(r"^(MRR|RR|R@|nDCG|MAP|P@|quality|speed-up)")


def better(metric: str) -> int:
    """+1 when a higher value of `metric` is better, -1 when lower, 0 when neither."""
    if LOWER_IS_BETTER.search(metric):
        return -1
    return 1 if HIGHER_IS_BETTER.search(metric) else 0


def colour(value, sign: int) -> str:
    """Green where the reproduction beats the paper, red where it falls short (`sign`: better())."""
    if pd.isna(value) or value == 0 or sign == 0:
        return ""
    return "background-color:#d9f2d9" if value * sign > 0 else "background-color:#f7d4d4"


def table_html(path: Path) -> str:
    table = pd.read_csv(path)
    notes = table.pop("note").dropna().unique().tolist() if "note" in table.columns else []
    table, diffs = with_differences(table)
    styled = table.style.hide(axis="index").format(precision=4, na_rep="")
    for diff in diffs:
        styled = styled.map(colour, sign=better(diff[:-len(" diff")]), subset=[diff])
    note = "".join(f'<p class="note">{html.escape(str(n))}</p>' for n in notes)
    return f"<h3>{html.escape(str(path))}</h3>{note}{styled.to_html()}"


def image_html(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<h3>{html.escape(str(path))}</h3><img src="data:image/png;base64,{data}" alt="{html.escape(path.name)}">'


def environment() -> dict[str, str]:
    import torch

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return {"python": platform.python_version(), **versions,
            "machine": f"{platform.platform()}, {os.cpu_count()} CPU cores ({platform.processor() or platform.machine()})",
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
            "git commit": commit.stdout.strip() if commit.returncode == 0 else "not a git checkout"}


def write(tables: list[Path], figures: list[Path], dag_png: Path, out: Path, title: str, profile_note: str) -> None:
    env = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in environment().items())
    body = [f"<h1>{html.escape(title)}</h1>", f'<p class="note">{html.escape(profile_note)}</p>',
            "<p>Each metric M stands beside the paper's (M paper); M diff = reproduced - paper, green where "
            "the reproduction is better (higher ranking quality, lower cost: ms/query, hours, memory), red "
            "where worse, uncoloured for counts and sizes.</p>",
            "<h2>Tables</h2>", *map(table_html, tables), "<h2>Figures</h2>", *map(image_html, figures),
            "<h2>Workflow</h2>", image_html(dag_png), f"<h2>Software and hardware</h2><table>{env}</table>"]
    page = f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>" \
           f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>"
    with atomic_path(out) as tmp:
        tmp.write_text(page)
