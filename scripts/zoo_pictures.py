"""The pictures of docs/doctor.md's Conditions: each condition as one real zoo run shows it.

    python scripts/zoo_pictures.py --zoo zoo-full     # extract from a finished zoo, then draw
    python scripts/zoo_pictures.py                    # redraw from the committed extracts
    python scripts/zoo_pictures.py --check            # fail when a picture is out of date

An extract (``docs/zoo/<ID>.json``, a few KB) holds the series the picture draws, read by the
doctor from the run's rlvitals recording (development seed 0 of ``rlvitals lab zoo --preset
full``), the injected step and the primary condition the doctor named; the pictures
(``docs/zoo/<ID>.svg``, and ``<ID>-sign.svg`` for the series that tells the condition apart)
are drawn from the extracts, so the docs build without TRL.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "zoo"
SEED = 0
SIGN: dict[str, str | None] = {
    "HEALTHY": None,
    "VERIFIER_CONSTANT": None,
    "IDENTICAL_COMPLETIONS": None,
    "SATURATED": None,
    "TOO_HARD": None,
    "SMALL_GROUPS": None,
    "ADVANTAGE_PIPELINE": "adv_std",
    "POLICY_DEGRADATION": None,
    "ENTROPY_COLLAPSE": "entropy",
    "ENTROPY_BLOWUP": "entropy",
    "RUNAWAY_LENGTH": "truncation_frac",
    "LENGTH_LIMIT": "truncation_frac",
    "KL_BLOWUP": "kl",
    "REWARD_HACKING": "eval/accuracy",
}
"""Per condition, the series besides the pass rate and ACR that shows it (None: those two do)."""
_STYLE = (
    "<style>.ptitle{font:600 12px monospace}.frame{fill:none;stroke:#e5e7eb}"
    ".grid{stroke:#f1f5f9}.ytick,.xtick,.legend{font-size:10px;fill:#6b7280;font-family:sans-serif}"
    ".ytick{text-anchor:end}.xtick{text-anchor:middle}.series{fill:none;stroke-width:1.5}"
    ".lg{stroke-width:2}.band{opacity:.12}</style>"
)


def extract(zoo: Path) -> dict[str, dict]:
    """The extracts of a finished zoo folder (its development seed 0 run of each condition)."""
    from rlvitals.doctor import DoctorConfig, diagnose_path

    out = {}
    for cid in SIGN:
        run = zoo / f"{cid.lower()}-s{SEED}"
        truth = json.loads((run / "truth.json").read_text())
        dx = diagnose_path(run / "rlvitals", config=DoctorConfig(allow_unjudged=True))
        v = dx.vitals
        series = {}
        for name in ("pass_rate", "acr", SIGN[cid]):
            if name is None:
                continue
            steps, values = (
                (v.eval_steps, v.eval_series.get(name))
                if name.startswith("eval/")
                else (v.steps, v.series.get(name))
            )
            if values is None:
                continue
            series[name] = {
                "steps": [int(s) for s in steps],
                "values": [None if not np.isfinite(x) else round(float(x), 4) for x in values],
            }
        out[cid] = {
            "condition": cid,
            "run": run.name,
            "injected_step": truth["injected_step"],
            "named": [c.id for c in dx.conditions],
            "series": series,
        }
    return out


def draw(doc: dict) -> dict[str, str]:
    """File name -> SVG of one extract."""
    from rlvitals.report.svg import Layer, Marker, plot

    cid, k = doc["condition"], doc["injected_step"]
    markers = [Marker(k, None, "warn", f"injected at step {k}")] if k > 1 else []

    def layer(name: str, color: str) -> Layer:
        s = doc["series"][name]
        values = np.array([np.nan if x is None else x for x in s["values"]], dtype=float)
        return Layer(name, np.array(s["steps"]), values, color=color)

    pics = {}
    main = [
        layer(n, c) for n, c in (("pass_rate", "#2563eb"), ("acr", "#dc2626")) if n in doc["series"]
    ]
    pics[f"{cid}.svg"] = plot(f"{cid}: pass rate and ACR", main, markers, y_include=(0, 1))
    sign = SIGN[cid]
    if sign and sign in doc["series"]:
        pics[f"{cid}-sign.svg"] = plot(f"{cid}: {sign}", [layer(sign, "#7c3aed")], markers)
    return {
        name: svg.replace(
            '<svg class="plot"', '<svg xmlns="http://www.w3.org/2000/svg" class="plot"', 1
        ).replace(">", ">" + _STYLE, 1)
        + "\n"
        for name, svg in pics.items()
        if svg
    }


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zoo", type=Path, help="a finished zoo folder to extract from first")
    ap.add_argument("--check", action="store_true", help="check instead of writing")
    args = ap.parse_args(argv)
    if args.zoo:
        OUT.mkdir(parents=True, exist_ok=True)
        for cid, doc in extract(args.zoo).items():
            (OUT / f"{cid}.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    problems, written = [], 0
    for cid in SIGN:
        path = OUT / f"{cid}.json"
        if not path.exists():
            problems.append(
                f"{path.name}: missing extract (python scripts/zoo_pictures.py --zoo DIR)"
            )
            continue
        for name, svg in draw(json.loads(path.read_text())).items():
            target = OUT / name
            if args.check:
                if not target.exists() or _NUMBER.sub("#", target.read_text()) != _NUMBER.sub(
                    "#", svg
                ):
                    problems.append(f"{name}: picture out of date (python scripts/zoo_pictures.py)")
            elif not target.exists() or target.read_text() != svg:
                target.write_text(svg)
                written += 1
    for p in problems:
        print(p, file=sys.stderr)
    if not args.check:
        print(f"wrote {written} picture(s) under {OUT}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
