"""The benchmarks: speed, memory, scale, faults and reference runs of the workflow, each a module run from the
repository root as `python -m benchmarks.<name>`; what they measure is kept in benchmarks/results.json."""
