"""Claims: each form on hand-made cells, the statistics against scipy, the verdicts, and the claims files."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from towers.datasets.reqa import query_articles
from towers.io import StageError
from towers.verdicts import claims as checker

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow/schemas/claims.schema.yaml"


def evaluation(path: Path, values: dict[str, float], measure: str = "R@10") -> str:
    """An evaluation JSON as the evaluate stage writes it: per-query values of one measure."""
    path.write_text(json.dumps({"metrics": {measure: float(np.mean(list(values.values())))},
                                "per_query": {q: {measure: v} for q, v in values.items()}}))
    return str(path)


def cell(row, column, files, paper=None, scale=100, measure="R@10"):
    files = files if isinstance(files, list) else [files]
    values = [json.loads(Path(f).read_text())["metrics"][measure] for f in files]
    return {"row": row, "column": column, "value": round(scale * float(np.mean(values)), 2), "kind": "metric",
            "paper": paper, "samples": {"kind": "queries", "files": files, "measure": measure, "scale": scale}}


@pytest.fixture()
def table(tmp_path):
    """Models on 40 queries: 'strong' finds 30, 'weak' 10, 'same' exactly what 'weak' finds."""
    rng = np.random.default_rng(0)
    qids = [f"q{i}" for i in range(40)]
    strong = {q: float(i < 30) for i, q in enumerate(qids)}
    weak = {q: float(i < 10) for i, q in enumerate(qids)}
    noisy = {q: float(rng.random() < 0.3) for q in qids}
    files = {name: evaluation(tmp_path / f"{name}.json", values)
             for name, values in (("strong", strong), ("weak", weak), ("same", weak), ("noisy", noisy))}
    cells = {"t": [cell({"split": "a", "model": name}, "R@10", path, paper={"strong": 50.0, "weak": 20.0}.get(name))
                   for name, path in files.items()]}
    return cells, files


def run(claims, cells, test="wilcoxon"):
    document = {"paper": "p", "title": "t", "claims": claims}
    return checker.evaluate([document], cells, test, 0.05)


def claim(**form):
    return {"id": "p-1", "source": "Table 1", "statement": "s", "table": "t", "metrics": ["R@10"], **form}


def test_a_clear_win_holds_and_the_reverse_is_contradicted(table):
    cells, _ = table
    (won,) = run([claim(higher={"model": "strong"}, lower={"model": "weak"})], cells)
    assert won["verdict"] == "holds" and won["claim verdict"] == "holds"
    assert won["difference"] == pytest.approx(50.0) and won["n"] == 40 and won["paper agrees"] == "yes"
    # scipy's own test on the same differences gives the same p-value (one part: Holm leaves it)
    differences = np.array([100.0] * 20 + [0.0] * 20)
    assert won["p"] == pytest.approx(stats.wilcoxon(differences, zero_method="wilcox").pvalue, rel=1e-3)
    assert won["effect size"] == 1.0 and won["test"] == "Wilcoxon signed-rank, two-sided"
    (lost,) = run([claim(higher={"model": "weak"}, lower={"model": "strong"})], cells)
    assert lost["verdict"] == "contradicted" and lost["paper agrees"] == "no"


def test_ties_are_not_supported_and_missing_rows_not_measurable(table):
    cells, _ = table
    tie, gone = run([claim(higher={"model": "same"}, lower={"model": "weak"}),
                     {**claim(higher={"model": "nobody"}, lower={"model": "weak"}), "id": "p-2"}], cells)
    assert tie["verdict"] == "not supported" and tie["p"] == 1.0
    assert gone["verdict"] == "not measurable" and gone["reason"] == "no R@10 of model=nobody in t"
    assert gone["claim verdict"] == "not measurable"


def test_paired_t_and_holm_over_the_papers_parts(table):
    cells, _ = table
    parts = run([claim(higher={"model": "strong"}, lower=[{"model": "weak"}, {"model": "noisy"}])], cells, "ttest")
    raw = [p["p"] for p in parts]
    assert parts[0]["test"] == "paired t, two-sided"
    # Holm: the smaller p doubled, the larger kept (when that keeps them ordered)
    low, high = sorted(raw)
    adjusted = sorted(p["p (Holm)"] for p in parts)
    assert adjusted[0] == pytest.approx(min(1, 2 * low), rel=1e-3)
    assert adjusted[1] == pytest.approx(max(min(1, 2 * low), high), rel=1e-3)


def test_a_claim_is_as_strong_as_its_weakest_part(table):
    cells, _ = table
    parts = run([claim(order=[{"model": "strong"}, {"model": "weak"}, {"model": "same"}])], cells)
    assert [p["verdict"] for p in parts] == ["holds", "not supported"]
    assert {p["claim verdict"] for p in parts} == {"not supported"}
    assert parts[0]["claim parts"] == "1 holds, 1 not supported"


def test_the_same_cells_twice_count_once(table):
    cells, _ = table
    cells["u"] = [dict(c) for c in cells["t"]]   # a second table over the same evaluations (Tables 3 and 4)
    parts = run([{**claim(higher={"model": "strong"}, lower={"model": "weak"}), "tables": ["t", "u"]}], cells)
    assert parts[1]["reason"].startswith("same cells as p-1") and parts[1]["p (Holm)"] == parts[0]["p (Holm)"]
    assert parts[0]["p (Holm)"] == parts[0]["p"]   # one comparison, no correction


def test_gain_not_worse_and_by(table):
    cells, _ = table
    gain, close, far, by = run([
        claim(higher={"gain": [{"model": "strong"}, {"model": "weak"}]},
              lower={"gain": [{"model": "same"}, {"model": "weak"}]}),
        {**claim(not_worse={"model": "same"}, than={"model": "weak"}, within=5), "id": "p-2"},
        {**claim(not_worse={"model": "weak"}, than={"model": "strong"}, within=5), "id": "p-3"},
        {**claim(higher={"model": "strong"}, lower={"model": "weak"}, by=60), "id": "p-4"}], cells)
    assert gain["verdict"] == "holds" and gain["difference"] == pytest.approx(50.0)
    assert close["verdict"] == "holds" and close["bound"] == "not worse by more than 5"
    assert far["verdict"] == "contradicted"
    assert by["verdict"] in ("not supported", "contradicted") and by["bound"] == "by at least 60"


def test_a_mean_past_the_bound_against_most_items_is_not_significant(tmp_path):
    # 4 of 40 queries found by one model only: a 10-point mean, 5 past the bound of 5, but 36 queries 5 below it,
    # so the signed-rank test rejects the other way; neither direction is shown
    qids = [f"q{i}" for i in range(40)]
    files = {name: evaluation(tmp_path / f"{name}.json", {q: float(i < found) for i, q in enumerate(qids)})
             for name, found in (("more", 14), ("less", 10))}
    cells = {"t": [cell({"model": name}, "R@10", path) for name, path in files.items()]}
    [part] = run([claim(higher={"model": "more"}, lower={"model": "less"}, by=5)], cells)
    assert part["difference"] == pytest.approx(10.0) and part["p (Holm)"] < 0.05 and part["effect size"] < 0
    assert part["verdict"] == "same direction, not significant"
    [part] = run([claim(higher={"model": "more"}, lower={"model": "less"}, by=5)], cells, test="ttest")
    assert part["effect size"] > 0   # the t test tests the mean: no disagreement to resolve


def test_sweep_picks_best_inside_and_outside_the_range(tmp_path):
    qids = [f"q{i}" for i in range(30)]
    found = {"0": 10, "0.1": 25, "0.2": 20, "1": 5}
    cells = {"t": [cell({"margin": m}, "R@10", evaluation(tmp_path / f"m{m}.json",
                                                         {q: float(i < n) for i, q in enumerate(qids)}),
                        paper={"0": 4.0, "0.1": 6.0, "0.2": 5.0, "1": 4.3}[m]) for m, n in found.items()]}
    best, spread = run([claim(sweep={"over": "margin", "best_in": [0, 0.5]}),
                        {**claim(sweep={"over": "margin", "spread_at_least": 30}), "id": "p-2"}], cells)
    assert best["picked"] == "margin=0.1 vs margin=0" and best["verdict"] == "holds"
    assert best["paper picked"] == "margin=0.1 vs margin=1" and best["paper agrees"] == "yes"
    assert spread["picked"] == "margin=0.1 vs margin=1" and spread["difference"] == pytest.approx(200 / 3, abs=0.01)


def test_diagonal_compares_each_column_with_its_own_index(tmp_path):
    qids = [f"q{i}" for i in range(20)]
    hits = {("a", "a"): 15, ("b", "a"): 5, ("a", "b"): 5, ("b", "b"): 15}
    cells = {"t": [cell({"train index": tr, "eval index": ev}, "R@10",
                        evaluation(tmp_path / f"{tr}{ev}.json", {q: float(i < n) for i, q in enumerate(qids)}))
                   for (tr, ev), n in hits.items()]}
    parts = run([claim(diagonal={"rows": "train index", "columns": "eval index"})], cells)
    assert [(p["higher"], p["lower"]) for p in parts] == [("train index=a", "train index=b"),
                                                         ("train index=b", "train index=a")]
    assert {p["verdict"] for p in parts} == {"holds"}


def test_ratio_within_bounds_on_latencies(tmp_path):
    fast, slow = tmp_path / "fast.json", tmp_path / "slow.json"
    fast.write_text(json.dumps({"per_query_ms": {f"q{i}": 5.0 + 0.1 * i for i in range(30)}}))
    slow.write_text(json.dumps({"per_query_ms": {f"q{i}": 50.0 + i for i in range(30)}}))
    cells = {"t": [{"row": {"method": m}, "column": "ms/query", "value": v, "kind": "timing", "paper": p,
                    "samples": {"kind": "latency", "file": str(f)}}
                   for m, v, p, f in (("dense", 6.0, 80.0, fast), ("bm25", 64.0, 50.0, slow))]}
    low, high = run([{**claim(ratio={"of": {"method": "dense"}, "to": {"method": "bm25"}, "within": [0.1, 10]}),
                      "metrics": ["ms/query"]}], cells)
    assert low["bound"] == "ratio at least 0.1" and high["bound"] == "ratio at most 10"
    assert high["verdict"] == "holds" and low["verdict"] in ("holds", "not supported", "contradicted")
    assert low["ratio"] == pytest.approx(6.0 / 64.0, rel=1e-3) and low["paper ratio"] == pytest.approx(1.6)


def test_steps_windows_compare_the_start_with_the_end(tmp_path):
    log = tmp_path / "steps.jsonl"
    log.write_text("".join(json.dumps({"step": s, "mrr": 0.1 + 0.01 * s}) + "\n" for s in range(1, 51)))
    cells = {"t": [{"row": {"method": "ltre", "window": w}, "column": "MRR@10", "value": 0.0, "kind": "metric",
                    "paper": None, "samples": {"kind": "steps", "file": str(log), "field": "mrr", "window": w}}
                   for w in ("first", "last")]}
    (part,) = run([{**claim(higher={"window": "last"}, lower={"window": "first"}), "metrics": ["MRR@10"]}], cells)
    # the first and last fifth (steps 1-10, 41-50) share no step: an unpaired test
    assert part["pairing"] == "unpaired" and part["n"] == 20 and part["verdict"] == "holds"
    assert part["test"] == "Mann-Whitney U, two-sided" and part["difference"] == pytest.approx(0.4)
    assert part["detectable"] is None and part["detectable clustered"] is None   # power is stated for paired tests
    # two methods over the same steps are paired over them: power from their differences, with no article
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({"step": s, "mrr": 0.1 + 0.01 * s + 0.01 * (s % 3)}) + "\n"
                             for s in range(1, 51)))
    cells["t"].append({**cells["t"][0], "row": {"method": "other", "window": "first"},
                       "samples": {**cells["t"][0]["samples"], "file": str(other)}})
    (part,) = run([{**claim(higher={"method": "other"}, lower={"method": "ltre"}, where={"window": "first"}),
                    "metrics": ["MRR@10"]}], cells)
    assert part["pairing"] == "steps" and part["detectable"] > 0 and part["detectable clustered"] is None


def test_each_part_states_the_difference_its_own_queries_detect(tmp_path):
    from towers.verdicts.significance import detectable, detectable_clustered

    # 12 questions of three articles (X, Y, Z: four each), numbered as the question file numbers its rows
    questions = tmp_path / "questions.tsv"
    questions.write_text("article\tquestion\tanswer\tsentence_start\n"
                         + "".join(f"{'XYZ'[i // 4]}\tquestion {i}?\tan answer\ta start\n" for i in range(12)))
    articles = query_articles([("ds", "q", str(questions))])
    assert articles == {"ds": {f"q{i + 1:04d}": "XYZ"[i // 4] for i in range(12)}}
    folder = tmp_path / "artifacts/ds/eval"   # where the evaluate stage writes: the queries are dataset ds's
    folder.mkdir(parents=True)
    qids = list(articles["ds"])
    a = {q: float(i % 2) for i, q in enumerate(qids)}
    b = {q: float(i % 3 == 0) for i, q in enumerate(qids)}
    cells = {"t": [cell({"model": n}, "R@10", evaluation(folder / f"{n}.json", v), scale=1)
                   for n, v in (("a", a), ("b", b))]}
    spec = [claim(higher={"model": "a"}, lower={"model": "b"})]
    (part,) = checker.evaluate([{"paper": "p", "title": "t", "claims": spec}], cells, "wilcoxon", 0.05,
                               articles=articles)
    d = [a[q] - b[q] for q in qids]
    assert part["detectable"] == pytest.approx(detectable(d), abs=1e-4) and part["articles"] == 3
    assert part["detectable clustered"] == pytest.approx(detectable_clustered(d, [articles["ds"][q] for q in qids]),
                                                         abs=1e-4)
    # the articles of another dataset's queries (or none) say nothing of these: no clustered value
    (elsewhere,) = checker.evaluate([{"paper": "p", "title": "t", "claims": spec}], cells, "wilcoxon", 0.05,
                                    articles={"other": articles["ds"]})
    assert elsewhere["detectable"] == part["detectable"]
    assert elsewhere["detectable clustered"] is None and elsewhere["articles"] is None
    # a query whose article is unknown leaves the clustered value empty rather than guessed
    some = {"ds": {q: v for q, v in articles["ds"].items() if q != "q0001"}}
    (partly,) = checker.evaluate([{"paper": "p", "title": "t", "claims": spec}], cells, "wilcoxon", 0.05,
                                 articles=some)
    assert partly["detectable clustered"] is None
    # read on a subset of the queries, beside the whole set's
    records = checker.evaluate([{"paper": "p", "title": "t", "claims": spec}], cells, "wilcoxon", 0.05,
                               articles=articles)
    subset = checker.evaluate([{"paper": "p", "title": "t", "claims": spec}], cells, "wilcoxon", 0.05,
                              only=set(qids[:8]), articles=articles)
    checker.add_subset_reading(records, subset, "unexposed")
    assert records[0]["unexposed detectable"] == pytest.approx(detectable(d[:8]), abs=1e-4)
    assert records[0]["unexposed detectable clustered"] == subset[0]["detectable clustered"] is not None


def test_the_articles_of_a_datasets_queries_come_from_its_question_files():
    from towers.plan.verdicts import articles_args, question_files

    config = {"datasets": {
        "qa": {"kind": "wikipedia-qa", "questions": "data/q.tsv"},
        "qa-open": {"kind": "open-domain", "base": "qa", "extra": "x"},
        "passages": {"kind": "wikipedia-passages", "questions": "data/q.tsv", "test_questions": "data/n.tsv"},
        "squad": {"kind": "squad"}, "x": {"kind": "wikipedia"}}}
    assert question_files(config) == [("qa", "q", "data/q.tsv"), ("qa-open", "q", "data/q.tsv"),
                                      ("passages", "q", "data/q.tsv"), ("passages", "n", "data/n.tsv")]
    assert articles_args(question_files(config)[:1]) == "--articles qa q data/q.tsv"


def test_every_claims_file_loads_and_each_paper_has_at_least_six(tmp_path):
    from towers.reports import papers

    for paper in papers.load(root=ROOT).values():   # data/papers/papers.yaml
        document = checker.load_claims(ROOT / paper["claims"], SCHEMA)
        assert document["paper"] == paper["id"] and len(document["claims"]) >= 6
        assert all(c["source"] and c["statement"] for c in document["claims"])


def test_bad_claims_files_are_refused_in_one_line(tmp_path):
    good = yaml.safe_load((ROOT / "data/papers/repbert.claims.yaml").read_text())
    bad = dict(good, claims=[dict(good["claims"][0], lower=None)])
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(StageError, match=r"bad.yaml: claims/0/lower"):
        checker.load_claims(path, SCHEMA)
    twice = dict(good, claims=[good["claims"][0], good["claims"][0]])
    path.write_text(yaml.safe_dump(twice))
    with pytest.raises(StageError, match="claim id repbert-1 is used twice"):
        checker.load_claims(path, SCHEMA)
    typo = dict(good, claims=[dict(good["claims"][0], metric=["RR@10"])])
    path.write_text(yaml.safe_dump(typo))
    with pytest.raises(StageError, match="metric"):
        checker.load_claims(path, SCHEMA)


def test_make_expected_keeps_a_builds_values_as_the_profiles_file_and_refuses_paper_policies(tmp_path):
    from towers.ops.ci import keep_expected

    built = tmp_path / "expected-values.csv"
    built.write_text("table,row,column,expected\n")
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"check": {"expected": str(tmp_path / "mini.csv"), "basis": "estimate"}}))
    overlay = tmp_path / "tiny.yaml"
    overlay.write_text(yaml.safe_dump({"check": {"expected": str(tmp_path / "tiny.csv")}}))
    assert keep_expected(built, params, None) == tmp_path / "mini.csv"
    assert keep_expected(built, params, overlay) == tmp_path / "tiny.csv"
    assert (tmp_path / "tiny.csv").read_text() == built.read_text()
    overlay.write_text(yaml.safe_dump({"check": {"expected": str(tmp_path / "paper.yaml")}}))
    with pytest.raises(SystemExit, match="paper.yaml: a policy of paper values"):
        keep_expected(built, params, overlay)
    assert not (tmp_path / "paper.yaml").exists()


EXPECTED_HEADER = "table,row,column,kind,expected,tolerance,basis\n"


def expected_files(tmp_path, committed_rows: str, built_rows: str):
    """The profile's committed expected values, a build's, and a params.yaml naming the committed file."""
    built, committed = tmp_path / "expected-values.csv", tmp_path / "mini.csv"
    built.write_text(EXPECTED_HEADER + built_rows)
    committed.write_text(EXPECTED_HEADER + committed_rows)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"check": {"expected": str(committed), "basis": "estimate"}}))
    return built, committed, params


def test_make_expected_with_another_machines_file_combines_the_two(tmp_path):
    from towers.ops.ci import keep_expected

    built, other, params = expected_files(tmp_path, "t,a,RR@10,metric,0.09,0.01,bootstrap over 60 steps\n",
                                          "t,a,RR@10,metric,0.06,0.01,bootstrap over 60 steps\n")
    assert keep_expected(built, params, None, also=[other]) == other   # the committed file, read before it is written
    written = pd.read_csv(other)
    assert written.loc[0, "expected"] == pytest.approx(0.075) and written.loc[0, "tolerance"] == pytest.approx(0.03)


def test_make_expected_for_some_tables_keeps_every_other_row_as_committed(tmp_path):
    """A rebuild of one paper's jobs: only its tables' expected values move, the other papers' rows (from two
    machines' builds) stay as they were."""
    from towers.ops.ci import keep_expected

    built, committed, params = expected_files(
        tmp_path, "ltre/table1,a,RR@10,metric,0.5,0.2,two builds\ntable1,b,R@1,metric,5.0,1.0,x\n",
        "ltre/table1,a,RR@10,metric,0.1,0.01,one build\ntable1,b,R@1,metric,7.0,0.5,y\n")
    keep_expected(built, params, None, tables=["table1"])
    written = pd.read_csv(committed)
    assert written.set_index("table")["expected"].to_dict() == {"ltre/table1": 0.5, "table1": 7.0}
    with pytest.raises(SystemExit, match="no cells of table9"):
        keep_expected(built, params, None, tables=["table9"])


def test_one_papers_rows_are_replaced_and_the_rest_kept_byte_for_byte(tmp_path):
    from towers.ops.ci import as_text, replaced_rows

    kept, fresh = tmp_path / "claims.csv", tmp_path / "fresh.csv"
    kept.write_text("paper,claim,p,unexposed n\na,a-1,0.0100000001,\nq,q-1,0.5,\nz,z-1,1e-120,12\n")
    fresh.write_text("paper,claim,p\nq,q-1,0.25\nq,q-2,0.75\n")
    frame = replaced_rows(as_text(kept), as_text(fresh), "paper", ["q"])
    out = tmp_path / "out.csv"
    frame.to_csv(out, index=False)
    assert out.read_text() == "paper,claim,p,unexposed n\na,a-1,0.0100000001,\nq,q-1,0.25,\nq,q-2,0.75,\nz,z-1,1e-120,12\n"


def test_a_subset_of_queries_gets_its_own_verdict(table):
    # strong finds q0-q29, weak q0-q9: on q0-q9 alone the two tie; on q10-q29 strong wins more clearly
    cells, _ = table
    spec = [claim(higher={"model": "strong"}, lower={"model": "weak"})]
    (tied,) = checker.evaluate([{"paper": "p", "title": "t", "claims": spec}], cells, "wilcoxon", 0.05,
                               only={f"q{i}" for i in range(10)})
    assert tied["verdict"] == "not supported" and tied["n"] == 10 and tied["difference"] == 0.0
    (won,) = checker.evaluate([{"paper": "p", "title": "t", "claims": spec}], cells, "wilcoxon", 0.05,
                              only={f"q{i}" for i in range(10, 30)})
    assert won["verdict"] == "holds" and won["n"] == 20 and won["difference"] == pytest.approx(100.0)
    (elsewhere,) = checker.evaluate([{"paper": "p", "title": "t", "claims": spec}], cells, "wilcoxon", 0.05,
                                    only={"other-query"})
    assert elsewhere["verdict"] == "not measurable" and elsewhere["reason"] == "none of its queries is in the subset"
