"""Screenshots of the three HTML pages for the docs (docs/img/*.png), taken by headless Chromium.

The doctor's report of the bundled example ``collapse_groups.jsonl``; scan's page over a sweep
of twelve synthetic runs whose early ACR and final accuracy follow the paper's line plus noise
(every other run collapses after step 100), written with ``--reports``; compare's page of two
runs of that sweep. Each page at 1400 px (desktop) and the doctor's also at 390 px (a phone),
the top of the page, quantised to a small palette so the PNGs stay small.

    python scripts/page_screenshots.py            # writes docs/img/
    python scripts/page_screenshots.py --check    # fails when a page no longer renders
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from rlvitals.cli import main as rlvitals

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "img"
SHOTS = (
    ("doctor", 1400, 1000),
    ("doctor", 390, 844),
    ("scan", 1400, 900),
    ("compare", 1400, 1700),
)
COLOURS = 96
"""Palette size of the written PNGs (the pages are flat colours; 96 keeps them crisp)."""


def sweep(folder: Path, n: int = 12, seed: int = 0) -> list[Path]:
    """``n`` JSONL runs of 150 steps: ACR level rising with the run index, final accuracy on the
    paper's line (51.4 - 29.6 ACR_100, as a fraction) plus noise."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        level = 0.05 + 0.8 * i / (n - 1)
        acr = np.clip(level + rng.normal(0, 0.02, 150), 0, 1).round(4)
        if i % 2:
            acr[100:] = 0.98
        acc = (51.4 - 29.6 * acr[:100].mean() + rng.normal(0, 2)) / 100
        path = folder / f"lr{i:02d}" / "metrics.jsonl"
        path.parent.mkdir(parents=True)
        with open(path, "w") as f:
            for s in range(1, 151):
                row = {
                    "step": s,
                    "reward": round(0.3 + s / 1000 - level / 5 + rng.normal(0, 0.01), 4),
                    "frac_reward_zero_std": acr[s - 1],
                    "entropy": round(0.6 - s / 600 + rng.normal(0, 0.01), 4),
                }
                f.write(json.dumps(row) + "\n")
            f.write(json.dumps({"step": 150, "eval_accuracy": round(acc, 4)}) + "\n")
        out.append(path)
    return out


def pages(work: Path) -> dict[str, Path]:
    """The three pages, made in ``work`` with paths relative to it (as a user in that folder)."""
    import os
    from importlib.resources import files

    here = os.getcwd()
    os.chdir(work)
    try:
        example = Path("collapse_groups.jsonl")
        example.write_bytes(files("rlvitals.examples").joinpath(example.name).read_bytes())
        quiet = ["--no-progress"]
        rlvitals(["doctor", str(example), "-o", "doctor.html", *quiet])
        runs = sweep(Path("sweep"))
        Path("site").mkdir()
        flags = ["--no-cache", "--fail-on", "never", "-j", "1", *quiet]
        rlvitals(["scan", "sweep", "-o", "site/scan.html", "--reports", "site", *flags])
        rlvitals(["compare", str(runs[2]), str(runs[3]), "-o", "compare.html"])
    finally:
        os.chdir(here)
    return {
        k: work / f
        for k, f in (
            ("doctor", "doctor.html"),
            ("scan", "site/scan.html"),
            ("compare", "compare.html"),
        )
    }


def shoot(page: Path, png: Path, width: int, height: int, profile: Path) -> None:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        sys.exit("page_screenshots: Debian 'chromium' is required (apt-get install -y chromium)")
    subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--disable-background-networking",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            f"--screenshot={png}",
            page.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    img = Image.open(png).convert("RGB")
    img.quantize(COLOURS, method=Image.Quantize.FASTOCTREE).save(png, optimize=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true", help="render into a temporary folder only")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        found = pages(work)
        out = work / "shots" if args.check else args.out
        out.mkdir(parents=True, exist_ok=True)
        for name, width, height in SHOTS:
            png = out / f"{name}-{width}.png"
            shoot(found[name], png, width, height, work / "profile")
            px = np.asarray(Image.open(png).convert("L"), dtype=float)
            if px.std() < 10:
                sys.exit(f"page_screenshots: {png.name} is blank")
            print(f"{png.relative_to(out.parent)}: {png.stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
