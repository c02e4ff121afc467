"""One self-contained HTML page that answers "did it reproduce?" (`snakemake results/report.html`).

It opens with the profile (what it is and what it stands in for, said once) and a summary per paper: how
many of its claims hold, and how many table cells pass the expected-value check. Then one block per paper:
its claims with their verdicts (green: holds; amber: same direction, not significant; light red: not
supported; red: contradicted; grey: not measurable) and the comparisons behind them folded away; each of
its tables laid out like the paper's (the reproduced value with the paper's in brackets in one cell,
cells outside the check's tolerance marked); a plot of reproduced against paper values; its figures; the
raw CSVs folded away. Last: the workflow's rule graph, and the software and hardware it ran on."""
from __future__ import annotations

import base64
import html
import io
import os
import platform
import re
import shutil
import subprocess
from collections import Counter
from functools import partial
from importlib import metadata
from pathlib import Path

import pandas as pd

from ..io import atomic_path, read_json
from .common import p_text, wide_again
from .papers import in_words

PACKAGES = ["torch", "transformers", "tokenizers", "faiss-cpu", "faiss-gpu", "pyserini", "ir_measures",
            "pytrec-eval-terrier", "scipy", "statsmodels", "pandas", "snakemake", "dvc"]

VERDICT_STYLE = {"holds": ("#1e7b34", "#e3f4e6"), "same direction, not significant": ("#8a5a00", "#fff1d0"),
                 "not supported": ("#9b3b3b", "#fbe3e3"), "contradicted": ("#ffffff", "#c0392b"),
                 "not measurable": ("#555555", "#ececec")}
CHECK_STYLE = {"OKish": "background:#fff1d0", "FAIL": "background:#f6c9c9;font-weight:bold",
               "MISSING": "background:#f6c9c9"}
STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:86em;color:#222;line-height:1.35}
h1{margin-bottom:.2em}h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:2.2em}
table{border-collapse:collapse;font-size:13px;margin:.6em 0}td,th{border:1px solid #d4d4d4;padding:3px 7px}
th{background:#f4f4f4;text-align:left}td.n{text-align:right;white-space:nowrap}.paper{color:#888}
.note{color:#555;font-size:13px;max-width:80em}.badge{display:inline-block;border-radius:3px;padding:1px 6px;
font-size:12px;white-space:nowrap}.profile{background:#f6f8fb;border:1px solid #d8e0ea;padding:.8em 1em;
border-radius:4px}details{margin:.4em 0}summary{cursor:pointer;color:#345}img{max-width:100%;border:1px solid #eee}
.grid{display:flex;flex-wrap:wrap;gap:1.5em;align-items:flex-start}"""


def badge(verdict: str) -> str:
    colour, background = VERDICT_STYLE.get(verdict, ("#222", "#eee"))
    return f'<span class="badge" style="color:{colour};background:{background}">{html.escape(verdict)}</span>'


def owners(papers: list[dict]) -> dict[str, str]:
    """{table or figure name (table_name): the id of the paper it belongs to}. papers: each {'id', 'title',
    'tables', 'figures'} (paths), as the report rule passes them from data/papers/papers.yaml."""
    return {table_name(path): paper["id"] for paper in papers for path in [*paper["tables"], *paper["figures"]]}


def table_name(path: Path) -> str:
    """results/chang2020/table3.csv -> chang2020/table3."""
    parts = Path(path).with_suffix("").parts
    return "/".join(parts[parts.index("results") + 1:]) if "results" in parts else Path(path).stem


# --- tables as the paper lays them out -------------------------------------------------------------------

def fmt(value) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) >= 1e4 else f"{value:.4g}"
    return html.escape(str(value))


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def paper_layout(table: pd.DataFrame, status_of) -> str:
    """The table (its printed text) with each reproduced value and the paper's in one cell ('12.40 (77.00)', sd as
    '± 2.10'), the cells the check flags shaded (`status_of(row number, column)`: the check's status of that cell)."""
    paired = {f"{c} paper" for c in table.columns} | {f"{c} sd" for c in table.columns}
    columns = [c for c in table.columns if c not in paired]   # a paper column with no value of its own stays
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for i, (_, row) in enumerate(table.iterrows()):
        cells = []
        for c in columns:
            shown = html.escape(row[c])
            if row.get(f"{c} sd", ""):
                shown += f" ± {html.escape(row[f'{c} sd'])}"
            if row.get(f"{c} paper", ""):
                shown += f' <span class="paper">({html.escape(row[f"{c} paper"])})</span>'
            state = status_of(i, c)
            style = f' style="{CHECK_STYLE[state]}"' if state in CHECK_STYLE else ""
            cells.append(f'<td class="{"n" if is_number(row[c]) else ""}"{style}>{shown}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def row_texts(path: Path) -> list[str]:
    """Each CSV row's labels as the check names them (from the table's cells, in row order)."""
    from ..verdicts.checks import row_text

    meta = Path(f"{path}.meta.json")
    if not meta.exists():
        return []
    seen = []
    for c in read_json(meta).get("cells", []):
        text = row_text(c["row"])
        if text not in seen:
            seen.append(text)
    return seen


def scatter(cells: list[dict], title: str) -> str:
    """Reproduced against paper values of a table's cells, one colour a column, with the diagonal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = [(c["paper"], c["value"], c["column"]) for c in cells
             if c.get("paper") is not None and c.get("value") is not None and c["kind"] != "timing"]
    if len(pairs) < 2:
        return ""
    figure, ax = plt.subplots(figsize=(3.6, 3.3))
    for column in dict.fromkeys(p[2] for p in pairs):
        xs = [p[0] for p in pairs if p[2] == column]
        ys = [p[1] for p in pairs if p[2] == column]
        ax.scatter(xs, ys, s=14, label=column)
    low = min(min(p[0], p[1]) for p in pairs)
    high = max(max(p[0], p[1]) for p in pairs)
    ax.plot([low, high], [low, high], color="#999", linewidth=0.8, linestyle="--")
    if low > 0 and high / low > 1e3:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("paper")
    ax.set_ylabel("reproduced")
    ax.set_title(title, fontsize=9)
    if len({p[2] for p in pairs}) <= 8:
        ax.legend(fontsize=6)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return f'<img alt="{html.escape(title)}" src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}">'


def table_block(path: Path, statuses: dict, profile_note: str) -> str:
    """A table laid out like the paper's, under its caption: what its rows share (the record's context) and its
    note, less the profile's note the page opens with."""
    name = table_name(path)
    as_printed = pd.read_csv(path, dtype=str, keep_default_na=False)
    table = wide_again(as_printed).fillna("")
    meta = Path(f"{path}.meta.json")
    record = read_json(meta) if meta.exists() else {}
    note = record.get("note", "")
    note = note[len(profile_note):].lstrip("; ") if note.startswith(profile_note) else note
    shared = ", ".join(f"{k} {v}" for k, v in (record.get("context") or {}).items() if k != "profile")
    caption = "; ".join(part for part in (f"every row: {shared}" if shared else "", note) if part)
    rows = row_texts(path)
    rows = rows if len(rows) == len(table) else []
    layout = paper_layout(table, lambda i, column: statuses.get((name, rows[i], column), "") if rows else "")
    plot = scatter(record.get("cells", []), f"{name}: reproduced vs paper")
    raw = as_printed.to_html(index=False, na_rep="", classes="raw")
    return (f"<h3>{html.escape(name)}</h3><p class=\"note\">{html.escape(caption)}</p>"
            f"<div class='grid'><div>{layout}</div>{plot}</div>"
            f"<details><summary>raw CSV ({html.escape(str(path))})</summary>{raw}</details>")


# --- claims -------------------------------------------------------------------------------------------

def detail_text(value, column: str) -> str:
    """A comparison's cell as the tables print numbers: p-values to two digits, whole numbers (n) without '.0'."""
    if isinstance(value, float) and column in ("p", "p (Holm)"):
        return p_text(value)
    return f"{value:.0f}" if isinstance(value, float) and value.is_integer() else fmt(value)


def claims_block(claims: pd.DataFrame) -> str:
    rows = []
    for claim_id, parts in claims.groupby("claim", sort=False):
        first = parts.iloc[0]
        measured = parts[parts["verdict"] != "not measurable"]
        weakest = measured.sort_values("p (Holm)", ascending=False).iloc[0] if len(measured) else None
        evidence = ""
        if weakest is not None and "higher" in parts:
            evidence = (f"{fmt(weakest['higher'])} {fmt(weakest['value higher'])} vs {fmt(weakest['lower'])} "
                        f"{fmt(weakest['value lower'])}; p (Holm) {p_text(weakest['p (Holm)'])}")
        elif len(parts):
            evidence = fmt(first.get("reason", ""))
        shown = [c for c in ("part", "bound", "higher", "lower", "value higher", "value lower", "difference",
                             "effect size", "n", "test", "p", "p (Holm)", "verdict", "detectable",
                             "detectable clustered", "articles", "paper difference",
                             "paper agrees", "reason") if c in parts]
        detail = parts[shown].to_html(index=False, na_rep="", escape=True,
                                      formatters={c: partial(detail_text, column=c) for c in shown})
        rows.append(f"<tr><td>{badge(first['claim verdict'])}</td><td>{html.escape(claim_id)}</td>"
                    f"<td>{html.escape(first['statement'])}<div class='note'>{html.escape(first['source'])}; "
                    f"{html.escape(first['claim parts'])}</div>"
                    f"<details><summary>comparisons</summary>{detail}</details></td>"
                    f"<td class='note'>{evidence}</td></tr>")
    return ("<table><tr><th>verdict</th><th>claim</th><th>finding (source; parts)</th>"
            f"<th>weakest comparison</th></tr>{''.join(rows)}</table>")


LEGEND = ("<p class='note'>Verdicts: {badges}. In the tables each cell is the reproduced value, ± its standard "
          "deviation over seeds where the row has several, and the paper's value in grey brackets; a cell shaded "
          "<span style='{okish}'>&nbsp;amber&nbsp;</span> is within 1.5 times its tolerance of this profile's expected "
          "value, <span style='{fail}'>&nbsp;red&nbsp;</span> beyond it or missing (results/check.csv): the shading "
          "says the build moved, not how far it is from the paper.</p>")


def legend() -> str:
    return LEGEND.format(badges=" ".join(badge(v) for v in VERDICT_STYLE), okish=CHECK_STYLE["OKish"],
                         fail=CHECK_STYLE["FAIL"])


def build_line(results_json: str, commit: str = "") -> str:
    """When and from which commit (default: this checkout's) the page was written, and how long the complete
    build recorded in benchmarks/results.json (key `reproduce`) took."""
    import datetime

    record = read_json(results_json).get("reproduce") if results_json and Path(results_json).is_file() else None
    line = (f"Written {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC from commit "
            f"{commit or git_revision()}.")
    if record and record.get("clean_run_seconds"):
        line += (f" The complete build of commit {str(record.get('commit', '?'))[:7]} ({record.get('date', '?')}) took "
                 f"{record['clean_run_seconds'] / 60:.1f} minutes on {record.get('cores', '?')} cores "
                 f"(benchmarks/results.json, key reproduce).")
    return f"<p class='note'>{html.escape(line)}</p>"


def summary_block(claims: pd.DataFrame, check: pd.DataFrame | None, papers: list[dict]) -> str:
    from ..verdicts.claims import VERDICTS

    head = "".join(f"<th>{badge(v)}</th>" for v in VERDICTS)
    rows, owner = [], owners(papers)
    for paper, title in ((p["id"], p["title"]) for p in papers):
        own = claims[claims["paper"] == paper].drop_duplicates("claim") if len(claims) else claims
        counts = Counter(own["claim verdict"]) if len(own) else Counter()
        checked = ""
        if check is not None:
            mine = check[check["table"].map(owner.get) == paper]
            status = Counter(mine["status"])
            checked = ", ".join(f"{status[s]} {s}" for s in ("OK", "OKish", "FAIL", "MISSING") if status[s])
        rows.append(f"<tr><td><a href='#{paper}'>{html.escape(title)}</a></td>"
                    + "".join(f"<td class='n'>{counts.get(v, 0) or ''}</td>" for v in VERDICTS)
                    + f"<td>{checked}</td></tr>")
    return (f"<table><tr><th>paper</th>{head}<th>table cells against expected values</th></tr>"
            f"{''.join(rows)}</table>")


# --- the rule graph, the environment ------------------------------------------------------------------

def parse_rulegraph(dot: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Node id -> rule name and the (from, to) edges of `snakemake --rulegraph` output."""
    nodes = dict(re.findall(r'^\s*(\d+)\[label = "([^"]+)"', dot, re.M))
    edges = re.findall(r"^\s*(\d+) -> (\d+)", dot, re.M)
    return nodes, edges


def draw_rulegraph(dot: str, png: Path) -> str:
    """The rule graph as a PNG: Graphviz's dot when it is installed, else layers drawn with networkx (a
    rule's inputs' rules to its left). Returns which drew it."""
    if shutil.which("dot"):
        with atomic_path(png) as tmp:
            done = subprocess.run(["dot", "-Tpng", "-Gdpi=80", "-o", str(tmp)], input=dot, text=True,
                                  capture_output=True)
            if done.returncode == 0:
                return "graphviz dot"
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
    return "networkx layers (Graphviz not installed)"


def image_html(path: Path, caption: str = "") -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode()
    label = caption or Path(path).name
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(label)}">'
            f"<figcaption class='note'>{html.escape(label)}</figcaption></figure>")


def environment() -> dict[str, str]:
    import torch

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return {"python": platform.python_version(), **versions,
            "machine": f"{platform.platform()}, {os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), "
                       f"torch computing with {torch.backends.cpu.get_cpu_capability()} kernels",
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none", "git commit": git_revision()}


def git_revision() -> str:
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        return commit.stdout.strip() if commit.returncode == 0 else "not a git checkout"
    except OSError:
        return "git is not installed"


# --- the page -----------------------------------------------------------------------------------------

def read_check(path: Path | None) -> tuple[pd.DataFrame | None, dict[tuple, str]]:
    if path is None or not Path(path).exists():
        return None, {}
    check = pd.read_csv(path, keep_default_na=False, na_values={"difference": [""]})
    return check, {(r.table, r.row, r.column): r.status for r in check.itertuples(index=False)}


def write(papers: list[dict], tables: list[Path], figures: list[Path], claims_csv: Path, check_csv: Path | None,
          dag_png: Path, drawn_by: str, out: Path, title: str, profile: str, profile_note: str,
          build_record: str = "") -> None:
    """The page. papers: each {'id', 'title', 'tables', 'figures'} (paths), in their order; tables and figures:
    those of no paper (the zero-shot tables); build_record: benchmarks/results.json (its key `reproduce`: the
    timed complete build)."""
    claims = pd.read_csv(claims_csv)
    check, statuses = read_check(check_csv)
    verdicts = Counter(claims.drop_duplicates(["paper", "claim"])["claim verdict"])
    lead = ", ".join(f"{verdicts[v]} {v}" for v in VERDICT_STYLE if verdicts[v])
    machine = environment()
    body = [f"<h1>{html.escape(title)}</h1>", build_line(build_record, machine["git commit"]),
            f"<div class='profile'><b>Profile: {html.escape(profile)}.</b> {html.escape(profile_note)}</div>",
            "<h2>Did it reproduce?</h2>",
            f"<p>{sum(verdicts.values())} claims of {in_words(len(papers))} papers, tested on this profile's tables: "
            f"{lead}. A claim "
            "holds when every comparison it makes is significant in the paper's direction (paired over queries, "
            "Holm-corrected within each paper); its verdict is that of its weakest comparison. Table cells are "
            "checked against this profile's expected values (results/check.csv).</p>",
            summary_block(claims, check, papers), legend()]
    for paper in papers:
        body.append(f"<h2 id='{html.escape(paper['id'])}'>{html.escape(paper['title'])}</h2>")
        own = claims[claims["paper"] == paper["id"]]
        if len(own):
            body.append(claims_block(own))
        body += [table_block(Path(t), statuses, profile_note) for t in paper["tables"]]
        body += [image_html(f, table_name(f)) for f in paper["figures"]]
    if tables:   # the zero-shot tables: pretrained checkpoints as they are, beside BM25
        body.append("<h2 id='zeroshot'>Pretrained checkpoints, zero-shot</h2><p class='note'>Reference runs, not "
                    "papers' claims: each checkpoint's caveat is in its row (a retrieval-trained checkpoint is no "
                    "BERT init, and its numbers on data it was trained on are contaminated).</p>")
        body += [table_block(t, statuses, profile_note) for t in tables]
    body += [image_html(f, table_name(f)) for f in figures]
    env = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in machine.items())
    body += ["<h2>Workflow</h2>", image_html(dag_png, f"the rule graph ({drawn_by})"),
             f"<h2>Software and hardware</h2><table>{env}</table>"]
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>")
    with atomic_path(out) as tmp:
        tmp.write_text(page)
