"""List the surviving mutants of a cosmic-ray session: file:line, operator, the mutated source line."""

from __future__ import annotations

import pathlib
import sqlite3
import sys


def main(db: str) -> None:
    root = pathlib.Path(__file__).resolve().parent.parent
    con = sqlite3.connect(db)
    rows = con.execute(
        "select s.module_path, s.start_pos_row, s.operator_name, s.occurrence from mutation_specs s"
        " join work_results r on r.job_id = s.job_id where r.test_outcome in ('SURVIVED', 'survived')"
        " order by s.module_path, s.start_pos_row")
    for module, row, operator, occurrence in rows:
        line = (root / module).read_text().splitlines()[row - 1].strip()
        print(f"{module}:{row}\t{operator.split('/')[-1]}#{occurrence}\t{line}")


if __name__ == "__main__":
    main(sys.argv[1])
