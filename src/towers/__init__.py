"""Towers: stages of a reproducible dense-retrieval workflow (two-, three- and four-tower models)."""

__version__ = "0.1.0"
