"""GitHub Actions annotations: one workflow command per condition, for a CI step.

``rlvitals doctor RUN --format github`` prints, for each condition the doctor names, a line
GitHub turns into an annotation on the job (and on the file, when the run's log is in the
repository)::

    ::warning file=runs/a/trainer_state.json,title=rlvitals RUNAWAY_LENGTH since step 75::...

``warning`` for a condition (``notice`` for one that only informs, SMALL_GROUPS), ``error`` for
a run that could not be judged, one ``notice`` for a healthy run. The message is the report's
lead sentence and the first thing to try. Escaping follows GitHub's workflow-command rules
(``%``, CR and LF in messages; also ``:`` and ``,`` in properties), so nothing in a log can
start another command. The exit code is the doctor's, as for every format.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlvitals.report import Renderer, RenderOptions, register
from rlvitals.report.common import lead, one_line

if TYPE_CHECKING:
    from rlvitals.doctor import Diagnosis

__all__ = ["render_github"]


def _data(text: str) -> str:
    return one_line(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(diagnosis: Diagnosis, options: RenderOptions) -> str:
    """One ``::warning``/``::notice``/``::error`` line per condition (see the module doc).

    >>> _prop("a,b:c%"), _data("50% done")
    ('a%2Cb%3Ac%25', '50%25 done')
    """
    from rlvitals.doctor.differential import condition_severity

    d = diagnosis.to_dict()
    source = d["run"].get("source") or ""
    where = f"file={_prop(source)}," if source and source != "-" else ""
    lines = []
    if d.get("not_judged"):
        lines.append(f"::error {where}title=rlvitals: not judged::{_data(d['not_judged'])}")
    for i, c in enumerate(d.get("conditions") or []):
        if c["id"] == "HEALTHY":
            level = "notice"
        else:
            level = "warning" if condition_severity(c["id"]) == "warn" else "notice"
        since = f" since step {c['onset_step']}" if c.get("onset_step") is not None else ""
        text = lead([c]) or c["id"]
        if c.get("actions"):
            text += f" Try: {c['actions'][0]}"
        role = "" if i == 0 else " (also)"
        title = _prop(f"rlvitals {c['id']}{since}{role}")
        lines.append(f"::{level} {where}title={title}::{_data(text)}")
    return "".join(line + "\n" for line in lines)


register(
    Renderer(
        "github",
        "GitHub Actions annotations, one per condition (CI steps)",
        ".annotations",
        render_github,
    )
)
