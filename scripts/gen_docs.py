"""Generate the docs pages that come from code, or check that they are up to date.

    python scripts/gen_docs.py           # write docs/detectors/*.md and docs/metrics.md
    python scripts/gen_docs.py --check   # exit 1 listing every stale page or page problem

Pages: ``docs/detectors/<ID>.md`` per detector (its docstring, a header and its knob table),
``docs/detectors/index.md`` (the catalogue) and ``docs/metrics.md`` (every canonical metric and
alias). Pictures: ``docs/detectors/img/<ID>.svg``, the detector's ``bad`` test run from its pair
(``dev/rlvitals_corpus/fixtures.py``, development only) with what the detector found on it.
``--check`` also fails when a detector's page names a knob that does not exist, a knob is
undocumented, a section is missing, a picture is missing or stale, or ``docs/detectors/`` holds
a page for a detector that is gone.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dev"))  # rlvitals_corpus: dev only

from rlvitals.detectors import Detector, catalogue
from rlvitals.report.pages import (
    GENERATED,
    catalogue_page,
    detector_page,
    metrics_page,
    page_problems,
)
from rlvitals.report.svg import Layer, Marker, plot
from rlvitals.vitals import compute_vitals
from rlvitals_corpus.fixtures import PAIRS

ROOT = Path(__file__).resolve().parents[1]
FALLBACK_SERIES = ("reward_mean",)
"""Drawn when a finding names no series the run has (RECORDING_LOSS reads events)."""

_STYLE = (
    "<style>.ptitle{font:600 12px monospace}.frame{fill:none;stroke:#e5e7eb}"
    ".grid{stroke:#f1f5f9}.ytick,.xtick{font-size:10px;fill:#6b7280;font-family:sans-serif}"
    ".ytick{text-anchor:end}.xtick{text-anchor:middle}.series{fill:none;stroke:#334155;"
    "stroke-width:1.4}.onset{stroke-width:1.5;stroke-dasharray:5 3}.end{stroke-width:1.5;"
    "stroke-dasharray:2 3}.thr{stroke-width:1.2;stroke-dasharray:2 2}"
    ".thrlabel{font-size:10px;text-anchor:end;font-family:sans-serif}</style>"
)
"""The report's plot styles, inlined: the SVG is a file of its own on the docs site."""


def bad_run_picture(cls: type[Detector]) -> str | None:
    """An SVG plot of the detector's ``bad`` test run (its pair in ``rlvitals_corpus.fixtures``)
    with what the detector found on it, or None when it has no pair or finds nothing there."""
    pair = PAIRS.get(cls.id)
    if pair is None:
        return None
    vitals = compute_vitals(pair.bad_run())
    findings = [f.to_dict() for f in cls().check(vitals)]
    if not findings:
        return None
    available = {n for n in vitals.series if vitals.get(n) is not None}
    available |= {n for n in vitals.eval_series if vitals.get(n) is not None}
    names = [n for n in findings[0]["series"] if n in available]
    names = names or [n for n in FALLBACK_SERIES if n in available]
    if not names:
        return None
    name = names[0]
    steps, values = (
        (vitals.eval_steps, vitals.eval_series[name])
        if name.startswith("eval/")
        else (vitals.steps, vitals.series[name])
    )
    markers = [
        Marker(
            f["onset_step"] or 0,
            f["end_step"],
            f["severity"],
            f"{cls.id}: {f['message']}",
            [f["thresholds"][name]] if name in f["thresholds"] else [],
        )
        for f in findings
    ]
    title = f"{name} in the bad test run"
    svg = plot(title, [Layer(title, steps, values)], markers)
    return svg.replace(
        '<svg class="plot"', '<svg xmlns="http://www.w3.org/2000/svg" class="plot"', 1
    ).replace(">", ">" + _STYLE, 1)


@functools.cache
def _pictures() -> dict[str, str]:
    out = {}
    for cls in catalogue():
        svg = bad_run_picture(cls)
        if svg is not None:
            out[cls.id] = svg + "\n"
    return out


def pictures(docs: Path) -> dict[Path, str]:
    """SVG pictures of the detectors' bad test runs: path → content."""
    return {docs / "detectors" / "img" / f"{i}.svg": svg for i, svg in _pictures().items()}


def _zoo_pictures(docs: Path, det_id: str) -> list[tuple[str, str]]:
    """``(condition, ../zoo/<ID>.svg)`` for the zoo pictures of the conditions this detector is
    a sign of (:data:`rlvitals.doctor.differential.SIGN_DETECTORS`), those drawn so far."""
    from rlvitals.doctor.differential import SIGN_DETECTORS

    return [
        (cid, f"../zoo/{cid}.svg")
        for cid, signs in SIGN_DETECTORS.items()
        if det_id in signs and (docs / "zoo" / f"{cid}.svg").exists()
    ]


def pages(docs: Path, pics: dict[Path, str] | None = None) -> dict[Path, str]:
    """Every generated page: path → content."""
    pics = pictures(docs) if pics is None else pics
    out = {docs / "metrics.md": metrics_page(), docs / "detectors" / "index.md": catalogue_page()}
    for cls in catalogue():
        img = docs / "detectors" / "img" / f"{cls.id}.svg"
        out[docs / "detectors" / f"{cls.id}.md"] = detector_page(
            cls,
            picture=f"img/{cls.id}.svg" if img in pics else None,
            real=_zoo_pictures(docs, cls.id),
        )
    return {p: text.rstrip("\n") + "\n\n" + GENERATED + "\n" for p, text in out.items()}


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _skeleton(svg: str) -> str:
    """An SVG with its numbers masked: pictures are compared by structure, since the last digit
    of a plotted coordinate may differ between machines (vectorised exp/log)."""
    return _NUMBER.sub("#", svg)


def problems(docs: Path) -> list[str]:
    """Everything ``--check`` complains about (empty when the docs are in sync)."""
    found = [p for cls in catalogue() for p in page_problems(cls)]
    pics = pictures(docs)
    want = pages(docs, pics)
    for path, svg in pics.items():
        if not path.exists():
            found.append(f"{path.name}: missing picture (run python scripts/gen_docs.py)")
        elif _skeleton(path.read_text(encoding="utf-8")) != _skeleton(svg):
            found.append(f"{path.name}: picture out of date (run python scripts/gen_docs.py)")
    for path, text in want.items():
        rel = path.relative_to(docs.parent) if docs.parent in path.parents else path
        if not path.exists():
            found.append(f"{rel}: missing (run python scripts/gen_docs.py)")
        elif path.read_text(encoding="utf-8") != text:
            found.append(f"{rel}: out of date (run python scripts/gen_docs.py)")
    det_dir = docs / "detectors"
    if det_dir.is_dir():
        for path in sorted(det_dir.glob("*.md")):
            if path not in want and GENERATED in path.read_text(encoding="utf-8"):
                found.append(f"{path.name}: page of a detector that no longer exists")
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="check instead of writing")
    ap.add_argument("--docs", type=Path, default=ROOT / "docs", help="docs directory")
    args = ap.parse_args(argv)
    if args.check:
        found = problems(args.docs)
        for p in found:
            print(p, file=sys.stderr)
        if not found:
            print(f"docs up to date ({len(pages(args.docs))} generated pages)")
        return 1 if found else 0
    bad = [p for cls in catalogue() for p in page_problems(cls)]
    for p in bad:
        print(p, file=sys.stderr)
    if bad:
        return 1
    written = 0
    pics = pictures(args.docs)
    want = pages(args.docs, pics)
    for path, text in {**want, **pics}.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written += 1
    for path in sorted((args.docs / "detectors").glob("*.md")):
        if path not in want and GENERATED in path.read_text(encoding="utf-8"):
            path.unlink()
            written += 1
    print(f"wrote {written} page(s) under {args.docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
