"""Scan many runs: one row per run across a sweep, a tracking store or a cluster's shared disk.

Usage (the CLI is ``rlvitals scan``)::

    import rlvitals.scan as s
    result = s.scan(["sweep/", "mlruns/"], jobs=8)
    print(s.render_scan(result, "text", sort="acr_100"))
    result.correlation()    # ACR_100 against the final metric, with the paper's line

How runs are found: :mod:`rlvitals.scan._discover`; the cache: :mod:`rlvitals.scan._cache`;
where the work runs (process pool, Ray): :mod:`rlvitals.scan._engines`; the row:
:class:`ScanRow`; the statistics: :mod:`rlvitals.scan._stats`. The page ``docs/scan.md``
tells the whole story.
"""

from rlvitals.scan._cache import ScanCache, default_cache_dir
from rlvitals.scan._core import ScanResult, scan
from rlvitals.scan._discover import Discovery, Target, discover
from rlvitals.scan._engines import ENGINES
from rlvitals.scan._progress import Counter
from rlvitals.scan._render import FORMATS, SORT_KEYS, render_scan, suffix_format
from rlvitals.scan._reports import report_name, write_reports
from rlvitals.scan._row import (
    FINAL_WINDOW,
    Job,
    ScanRow,
    choose_eval_key,
    row_from_diagnosis,
    scan_one,
)
from rlvitals.scan._stats import PAPER, Correlation, correlate, correlate_rows

__all__ = [
    "ENGINES",
    "FINAL_WINDOW",
    "FORMATS",
    "PAPER",
    "SORT_KEYS",
    "Correlation",
    "Counter",
    "Discovery",
    "Job",
    "ScanCache",
    "ScanResult",
    "ScanRow",
    "Target",
    "choose_eval_key",
    "correlate",
    "correlate_rows",
    "default_cache_dir",
    "discover",
    "render_scan",
    "report_name",
    "row_from_diagnosis",
    "scan",
    "scan_one",
    "suffix_format",
    "write_reports",
]
