"""Verdicts on a profile's tables: the cells every table records (cells.py), the papers' claims tested on them
(claims.py, with significance.py's tests) and the check of every cell against its expected value (checks.py)."""
