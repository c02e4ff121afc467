"""Table and figure logic, one module a paper (and zeroshot.py for any checkpoint), built on common.py.
A paper's module never imports another's; stages/tables.py runs them."""
