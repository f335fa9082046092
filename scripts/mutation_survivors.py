"""List the surviving mutants of a cosmic-ray session: file:line, operator, and the line before and
after the mutation (from the session's own diffs, so the list holds even after the tree moved on)."""

from __future__ import annotations

import sqlite3
import sys


def main(db: str) -> None:
    con = sqlite3.connect(db)
    rows = con.execute(
        "select s.module_path, s.start_pos_row, s.operator_name, s.occurrence, r.diff from mutation_specs s"
        " join work_results r on r.job_id = s.job_id where r.test_outcome in ('SURVIVED', 'survived')"
        " order by s.module_path, s.start_pos_row")
    for module, row, operator, occurrence, diff in rows:
        lines = (diff or "").splitlines()
        before = next((x[1:].strip() for x in lines if x.startswith("-") and not x.startswith("---")), "")
        after = next((x[1:].strip() for x in lines if x.startswith("+") and not x.startswith("+++")), "")
        print(f"{module}:{row}\t{operator.split('/')[-1]}#{occurrence}\t{before}  ->  {after}")


if __name__ == "__main__":
    main(sys.argv[1])
