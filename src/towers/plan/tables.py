"""The one shape of a paper's plan module (and of the zero-shot tables', the tables of no paper): what each of its
tables' rules reads and passes its stage, asked for by the table's name as its output names it ("table3" for
results/chang2020/table3.csv, the dataset for results/zeroshot/<dataset>.csv). A table rule's shell spells out its
command; these give the variable parts (tests/plan/test_plan_layers.py checks every paper offers them)."""
from __future__ import annotations

from abc import ABC, abstractmethod


class Tables(ABC):
    @abstractmethod
    def rows(self, table: str) -> list[dict]:
        """The table's rows ({field: value}, the files each reads among the values), in the order it shows them;
        the rule passes them as --row words (towers.plan.shell.row_flags); empty where the stage takes none."""

    @abstractmethod
    def inputs(self, table: str) -> list[str]:
        """Every file the table's stage reads but the paper's values and the profile marker."""

    @abstractmethod
    def note(self, table: str) -> str:
        """The table's note: what the profile scales down and, for a table of evaluations, how its metrics are
        computed."""

    @abstractmethod
    def command(self, table: str) -> dict:
        """The table's options, the rest of its command beside its rows, note and profile: {name: a value, a list of
        values or a list of JSON objects}, as its layout declares them (towers.reports.common.Option); the rule
        passes them as --option words (towers.plan.shell.option_flags); empty when there are none."""
