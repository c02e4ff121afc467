"""The H200's own rates (benchmarks.gpu_stages, benchmarks.encode_overlap in results.json) that benchmarks.host_side
sets its host-side figures against."""
from __future__ import annotations

ENCODE_LENGTHS = (64, 256)   # the doc lengths encoding is measured at


def model_rates() -> dict:
    """What the model itself did on one H200: rate / GPU busy share (`gpu_stages`, `encode_overlap` at 256 tokens),
    the higher where two runs measured it."""
    from .workflow_harness import RESULTS, read_results, refuse

    results = read_results()
    try:
        stages, overlap = results["gpu_stages"], results["encode_overlap"]["gpu"]
        encoding = {length: stages["encoding"][str(length)]["passages_per_s"]
                    / stages["encoding"][str(length)]["gpu_busy_share"] for length in ENCODE_LENGTHS}
        run = overlap["torch_threads_8"]["overlapped"]
        if overlap["doc_length"] in encoding:
            encoding[overlap["doc_length"]] = max(encoding[overlap["doc_length"]],
                                                  run["passages_per_s"] / run["gpu_busy_share"][0])
        rerank = stages["reranking"]["base"]
        return {"device": stages["device"], "encoding": encoding,
                "reranking": rerank["pairs_per_s"] / rerank["gpu_busy_share"], "regimes": stages["regimes"]}
    except KeyError as err:   # one line, before any measuring
        refuse(RESULTS, f"no {err.args[0]!r} entry: the H200's own rates (gpu_stages, encode_overlap) are needed")
