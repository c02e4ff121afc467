# What workflow/rules/verdicts.smk's rules call: every results CSV the claims and the check read, the profile's
# claims files.

RESULT_CSVS = PAPER_TABLES + ZEROSHOT_TABLES + [f["csv"] for paper in PAPERS.values() for f in paper["figures"]]
CLAIMS = config["claims"]
CLAIMS_FILES = [PAPERS[paper]["claims"] for paper in CLAIMS["papers"]]   # the profile's choice of papers.yaml's


def named_tables(paths):
    """--table name=path for each results CSV (name: its path under results/ without .csv)."""
    names = {p: p[len("results/"):-len(".csv")] for p in paths}
    return " ".join(f"--table {q(f'{names[p]}={p}')}" for p in paths)
