"""``rlvitals scan --reports DIR``: each run's own doctor report, written beside the scan's page.

Every row that was read gets ``DIR/<its path, made a file name>.html`` (the doctor's HTML report
of that run, :func:`rlvitals.report.render`), and the row's ``report`` is that file's path
relative to the folder of the scan's page, so the page links each run to its report. The runs
are read again for it (a row, cached or not, keeps no diagnosis); a run that cannot be read
again keeps no link, and the scan says so.

>>> report_name("sweep/lr=1e-6/trainer_state.json [run 2]")
'sweep_lr=1e-6_trainer_state.json_run_2.html'
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from rlvitals.errors import InputError

if TYPE_CHECKING:
    from rlvitals.doctor import DoctorConfig
    from rlvitals.scan._core import ScanResult

__all__ = ["MAX_NAME", "report_name", "write_reports"]

MAX_NAME = 150
"""Characters of a report's file name at most (before ``.html``)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]+")


def report_name(label: str) -> str:
    """A file name for the report of the run ``label`` (letters, digits, ``._=-``)."""
    stem = _UNSAFE.sub("_", label).strip("_.") or "run"
    return stem[:MAX_NAME] + ".html"


def write_reports(
    result: ScanResult,
    directory: str | os.PathLike,
    *,
    config: DoctorConfig | None = None,
    page_dir: str | os.PathLike | None = None,
    on_report: Callable[[int, int], None] | None = None,
) -> list[str]:
    """Write the HTML report of every read row of ``result`` into ``directory`` (made when
    missing) and set each row's ``report`` to its path relative to ``page_dir`` (the folder of
    the page that links them; default: the current folder). Returns the problems (one line
    each: a run that could not be read again)."""
    from rlvitals.doctor import diagnose_path
    from rlvitals.report import render

    out = os.fspath(directory)
    if os.path.exists(out) and not os.path.isdir(out):
        raise InputError(out, "--reports: not a folder")
    os.makedirs(out, exist_ok=True)
    base = os.path.abspath(os.fspath(page_dir) if page_dir is not None else ".")
    used: set[str] = set()
    problems = []
    todo = [r for r in result.rows if not r.error]
    for k, row in enumerate(todo):
        name = report_name(row.label)
        stem, n = name[:-5], 2
        while name in used:
            name, n = f"{stem}_{n}.html", n + 1
        used.add(name)
        try:
            d = diagnose_path(row.path, row.format, config, run=row.run_id)
        except InputError as e:
            problems.append(f"report of {row.label} not written: {' '.join(str(e).split())}")
            continue
        path = os.path.join(out, name)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(render(d, "html"))
        os.replace(tmp, path)  # a reader never sees half a report
        row.report = os.path.relpath(os.path.abspath(path), base).replace(os.sep, "/")
        if on_report is not None:
            on_report(k + 1, len(todo))
    return problems
