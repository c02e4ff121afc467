"""Shell words of the rules' commands: values quoted, settings as stage flags, table rows as JSON objects, a
wildcard pattern of names, and the command of a paper's table rule."""
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


def one_of(names) -> str:
    """A wildcard pattern matching exactly these names; one that matches nothing when there are none."""
    return "|".join(re.escape(name) for name in names) or "(?!)"


def paper_table(stage: str, rows: str = "{params.rows}", before_note: str = "", table: bool = True) -> str:
    """The shell of a paper's table rule: its stage with the paper's values (input.paper), the profile and the
    note (params), the table's own flags; CSV and JSON out (output.csv, output.json), the log kept."""
    which = " --table {wildcards.table}" if table else ""
    return "".join(["{TOWERS} ", stage, which, " --paper {input.paper} --profile {params.profile}", before_note,
                    " --note {params.note:q} ", rows, " --csv {output.csv} --json {output.json} 2>&1 | tee {log}"])
