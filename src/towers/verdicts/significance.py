"""The statistics of a claim's comparison: a difference of per-item values tested paired (over common queries
or steps) or unpaired, Holm's correction over a paper's parts, and the verdict a part and a claim get. The paired
test (`paired_p`) is the one QuadrupletBERT's tables report too (reports.quadrupletbert)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .cells import Term, minus


def paired_p(differences: np.ndarray, test: str) -> float:
    """Two-sided p-value of a paired test of per-item differences (a - b, item by item) against zero: Wilcoxon's
    signed-rank test (zero differences dropped) or the paired t test. Its callers decide the degenerate cases
    (no difference at all, one difference everywhere) before they call it."""
    from scipy import stats

    if test == "wilcoxon":
        return float(stats.wilcoxon(differences, zero_method="wilcox").pvalue)
    if test == "ttest":
        return float(stats.ttest_1samp(differences, 0.0).pvalue)
    raise ValueError(f"unknown test {test!r}")


@dataclass
class Test:
    """A difference's test: the claimed direction is 'higher minus lower (minus a shift) is above zero'."""
    name: str
    n: int
    pairing: str
    effect: float | None           # mean difference, in the table's unit (before the shift)
    effect_size: float | None
    effect_size_name: str
    p: float | None


def test_difference(higher: Term, lower: Term, shift: float, test: str) -> Test:
    """Is higher - lower - shift above zero? Paired over common items (queries, steps); unpaired when the two
    sides share none (different test sets); no test when a side has no per-item values."""
    from scipy import stats

    if higher.samples is None or lower.samples is None:
        return Test("none (no per-item values)", 0, "none", minus(higher.value, lower.value), None, "", None)
    paired = paired_differences(higher, lower)
    if paired:
        d = np.array(list(paired.values()))
        shifted = d - shift
        if len(d) < 2 or np.allclose(shifted, 0):
            return Test(_paired_name(test), len(d), higher.pairing, float(d.mean()), 0.0, _paired_size(test), 1.0)
        if np.allclose(shifted, shifted[0]):   # the same difference everywhere: no doubt about its sign
            return Test(_paired_name(test), len(d), higher.pairing, float(d.mean()), float(np.sign(shifted[0])),
                        _paired_size(test), 0.0)
        p = paired_p(shifted, test)
        if test == "wilcoxon":
            size = rank_biserial(shifted)
        else:
            size = float(shifted.mean() / shifted.std(ddof=1)) if shifted.std(ddof=1) > 0 else 0.0
        return Test(_paired_name(test), len(d), higher.pairing, float(d.mean()), size, _paired_size(test), p)
    a = np.array(list(higher.samples.values())) - shift
    b = np.array(list(lower.samples.values()))
    effect = float(a.mean() + shift - b.mean()) if len(a) and len(b) else None
    if len(a) < 2 or len(b) < 2:   # nothing to test: never significant
        return Test(_unpaired_name(test), len(a) + len(b), "unpaired", effect, None, "", 1.0)
    if np.allclose(np.concatenate([a, b]), a[0]):
        return Test(_unpaired_name(test), len(a) + len(b), "unpaired", effect, 0.0, "", 1.0)
    if test == "wilcoxon":
        result = stats.mannwhitneyu(a, b, alternative="two-sided")
        size, size_name = float(2 * result.statistic / (len(a) * len(b)) - 1), "rank-biserial r"
    else:
        result = stats.ttest_ind(a, b, equal_var=False)
        pooled = math.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2)
        size, size_name = (float((a.mean() - b.mean()) / pooled) if pooled > 0 else 0.0), "Cohen's d"
    return Test(_unpaired_name(test), len(a) + len(b), "unpaired", effect, size, size_name, float(result.pvalue))


def paired_differences(higher: Term, lower: Term) -> dict[str, float]:
    """higher - lower item by item over the items both sides have ({} where a side has no per-item values or
    they share none: different test sets are compared unpaired)."""
    if higher.samples is None or lower.samples is None:
        return {}
    return {k: higher.samples[k] - lower.samples[k] for k in higher.samples if k in lower.samples}


def _paired_name(test: str) -> str:
    return {"wilcoxon": "Wilcoxon signed-rank, two-sided", "ttest": "paired t, two-sided"}[test]


def _paired_size(test: str) -> str:
    return {"wilcoxon": "rank-biserial r", "ttest": "Cohen's d_z"}[test]


def _unpaired_name(test: str) -> str:
    return {"wilcoxon": "Mann-Whitney U, two-sided", "ttest": "Welch t, two-sided"}[test]


def rank_biserial(d: np.ndarray) -> float:
    """Matched-pairs rank-biserial correlation of non-zero differences: (R+ - R-) / (R+ + R-)."""
    from scipy.stats import rankdata

    nonzero = d[d != 0]
    if not len(nonzero):
        return 0.0
    ranks = rankdata(np.abs(nonzero))
    return float((ranks[nonzero > 0].sum() - ranks[nonzero < 0].sum()) / ranks.sum())


def holm(p_values: list[float]) -> list[float]:
    """Holm-adjusted p-values (statsmodels)."""
    from statsmodels.stats.multitest import multipletests

    if not p_values:
        return []
    return [float(p) for p in multipletests(p_values, method="holm")[1]]


def verdict(shifted_effect: float | None, p_adjusted: float | None, alpha: float,
            effect_size: float | None = None) -> str:
    """A part's verdict from its effect beyond the claimed bound (positive = the claimed direction). A significant
    test counts only when its effect size points the way the mean does: a rank test can reject because most items
    lie a little on one side while the mean, pulled by a few large differences, lies on the other (a spread of at
    least 5 points on 0/1 recall); then neither direction is shown."""
    if shifted_effect is None:
        return "not measurable"
    if p_adjusted is None:   # no per-item values: a deterministic comparison
        return "holds" if shifted_effect > 0 else "contradicted"
    opposed = effect_size is not None and effect_size * shifted_effect < 0
    if p_adjusted < alpha and shifted_effect != 0 and not opposed:
        return "holds" if shifted_effect > 0 else "contradicted"
    return "same direction, not significant" if shifted_effect > 0 else "not supported"


def weakest(verdicts: list[str]) -> str:
    """A claim's verdict: its weakest measurable part (not measurable only when no part is)."""
    measured = [v for v in verdicts if v != "not measurable"]
    if not measured:
        return "not measurable"
    order = ["contradicted", "not supported", "same direction, not significant", "holds"]
    return next(v for v in order if v in measured)


# 80% power, alpha 0.05 two-sided: z_{0.975} + z_{0.8}
DETECTABLE_Z = 1.959964 + 0.841621


def detectable(d) -> float | None:
    """The smallest mean difference a paired test over these per-item differences detects with 80% power at
    alpha 0.05 (two-sided, normal approximation): 2.80 sd(d) / sqrt(n), from the spread of the differences
    themselves (the paired SD), not of either side's values. None below two items."""
    d = np.asarray(d, dtype=float)
    if len(d) < 2:
        return None
    return DETECTABLE_Z * float(np.std(d, ddof=1)) / math.sqrt(len(d))


def clustered_se(d, clusters) -> float:
    """Cluster-robust standard error of the mean of d, the items of one cluster (the questions of one article)
    free to be correlated: OLS on a constant with statsmodels' cluster covariance (CR1: sqrt(G / (G - 1) *
    sum over clusters of (sum of d - mean d)^2) / n). With every item its own cluster it is sd(d) / sqrt(n)."""
    from statsmodels.regression.linear_model import OLS

    d = np.asarray(d, dtype=float)
    codes = np.unique(np.asarray(clusters, dtype=str), return_inverse=True)[1]   # statsmodels wants integer groups
    fit = OLS(d, np.ones(len(d))).fit(cov_type="cluster", cov_kwds={"groups": codes})
    return float(fit.bse[0])


def detectable_clustered(d, clusters) -> float | None:
    """detectable, with the standard error counted clustered (clustered_se): questions of one article tend to be
    won or lost together, so n of them tell less than n independent ones. None below two clusters."""
    if len(set(clusters)) < 2:
        return None
    return DETECTABLE_Z * clustered_se(d, clusters)


def detectable_differences(cells: list[dict]) -> dict[str, dict[int, tuple[float, float]]]:
    """For each measure of a table and each of its query sets (a split's test questions), the smallest and the
    largest over pairs of its rows of the difference a paired test over those queries detects (`detectable`):
    alike rows (one model on two indexes) need little, dissimilar ones much more, so one figure for all would
    understate one or the other. Pairs with identical per-query values have nothing to detect and are left out.
    {measure: {queries: (smallest, largest) in the table's unit}}; a measure with no two rows on the same queries
    is left out."""
    from .cells import samples_of

    by_measure: dict[str, list[dict]] = {}
    for c in cells:
        if c["kind"] == "metric" and (c.get("samples") or {}).get("kind") == "queries":
            by_measure.setdefault(c["column"], []).append(samples_of(c["samples"]))
    found = {}
    for measure, samples in by_measure.items():
        sizes: dict[int, list[float]] = {}
        for i, a in enumerate(samples):
            for b in samples[i + 1:]:
                if a.keys() == b.keys() and len(a) > 1:
                    size = detectable([a[q] - b[q] for q in a])
                    if size > 0:
                        sizes.setdefault(len(a), []).append(size)
        if sizes:
            found[measure] = {n: (min(s), max(s)) for n, s in sorted(sizes.items(), reverse=True)}
    return found


def power_note(cells: list[dict]) -> str:
    """A table note's sentence on what its query counts can resolve ('' where no two rows share queries)."""
    found = detectable_differences(cells)
    if not found:
        return ""

    def span(low, high):
        return f"{low:.2g}" if f"{low:.2g}" == f"{high:.2g}" else f"{low:.2g} to {high:.2g}"

    shown = "; ".join(f"{measure} " + ", ".join(f"{span(*pair)} at {n}" for n, pair in sizes.items())
                      for measure, sizes in found.items())
    return ("difference between two rows that a paired test over their queries detects at 80% power (alpha 0.05, "
            "two-sided, 2.8 paired SD / sqrt(queries)), from the most to the least alike pair of rows, by query "
            f"count: {shown}")
