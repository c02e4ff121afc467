"""Shell words of the rules' commands: values quoted, settings as stage flags, table rows as JSON objects, a
table's options, and a wildcard pattern of names."""
from __future__ import annotations

import json
import re
import shlex


def q(value) -> str:
    """A value as one shell word. Every value from params reaches the shell through this or Snakemake's
    `:q` (which leaves an empty string out, where a flag needs it as '')."""
    return shlex.quote(str(value))


def flags(settings: dict) -> str:
    """{'batch_size': 32, 'shared': True} -> '--batch-size 32 --shared 1' for a stage command."""
    return " ".join(f"--{k.replace('_', '-')} {q(int(v) if isinstance(v, bool) else v)}" for k, v in settings.items())


def row_flags(rows, flag="--row") -> str:
    """A table stage's rows ({field: value}, every value a string or, where the stage takes one, a list of them)
    as --row words, each row a JSON object."""
    return " ".join(f"{flag} {q(json.dumps(row))}" for row in rows)


def option_flags(options: dict) -> str:
    """A table's options ({name: a value, a list of values, or a list of JSON objects}) as --option NAME=VALUE
    words, a list's values one word each (towers.stages.tables.parse_options reads them back)."""
    words = []
    for name, value in options.items():
        for one in value if isinstance(value, list) else [value]:
            words.append(f"--option {q(f'{name}={json.dumps(one) if isinstance(one, dict) else one}')}")
    return " ".join(words)


def one_of(names) -> str:
    """A wildcard pattern matching exactly these names; one that matches nothing when there are none."""
    return "|".join(re.escape(name) for name in names) or "(?!)"

