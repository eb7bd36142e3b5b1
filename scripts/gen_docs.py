"""Generate the docs pages that come from code, or check that they are up to date.

    python scripts/gen_docs.py           # write docs/detectors/*.md and docs/metrics.md
    python scripts/gen_docs.py --check   # exit 1 listing every stale page or page problem

Pages: ``docs/detectors/<ID>.md`` per detector (its docstring, a header and its knob table),
``docs/detectors/index.md`` (the catalogue) and ``docs/metrics.md`` (every canonical metric and
alias). ``--check`` also fails when a detector's page names a knob that does not exist, a knob
is undocumented, a section is missing, or ``docs/detectors/`` holds a page for a detector that
is gone.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlvitals.detectors import catalogue
from rlvitals.report.pages import (
    GENERATED,
    catalogue_page,
    detector_page,
    metrics_page,
    page_problems,
)

ROOT = Path(__file__).resolve().parents[1]


def pages(docs: Path) -> dict[Path, str]:
    """Every generated page: path → content."""
    out = {docs / "metrics.md": metrics_page(), docs / "detectors" / "index.md": catalogue_page()}
    for cls in catalogue():
        out[docs / "detectors" / f"{cls.id}.md"] = detector_page(cls)
    return {p: text.rstrip("\n") + "\n\n" + GENERATED + "\n" for p, text in out.items()}


def problems(docs: Path) -> list[str]:
    """Everything ``--check`` complains about (empty when the docs are in sync)."""
    found = [p for cls in catalogue() for p in page_problems(cls)]
    want = pages(docs)
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
    for path, text in pages(args.docs).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written += 1
    for path in sorted((args.docs / "detectors").glob("*.md")):
        if path not in pages(args.docs) and GENERATED in path.read_text(encoding="utf-8"):
            path.unlink()
            written += 1
    print(f"wrote {written} page(s) under {args.docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
