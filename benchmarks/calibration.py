"""Each detector knob's margins on the calibration sets: where its findings change.

    python benchmarks/calibration.py --zoo /tmp/zoo-v2 --real ../shared/real-logs
    python benchmarks/calibration.py --zoo /tmp/zoo-v2 --real ../shared/real-logs \\
        --corpus-seed 7 --detector ENTROPY_COLLAPSE

Every detector knob with a numeric default is swept over multiples of its default (x0.25 ..
x4, integers rounded) and the detector is run on three sets, reading each run once:

- ``zoo``: the failure zoo's *development* runs (``truth.json`` split ``dev``; held-out seeds
  are never read), through the rlvitals recording;
- ``real``: the public logs of ``--real`` with their expected verdicts (``verdicts.json``);
- ``corpus``: the synthetic corpus (``collapse_suite("ci", seed)`` and ``other_suite("ci",
  seed)``, in memory), when ``--corpus-seed`` is given.

A detector *fires* on a run when it returns a finding at its own severity or above. Runs are
grouped by what the detector should say: ``sign`` (zoo: the injected condition, real: a listed
condition, corpus: a label, of which the detector is a sign — the differential's
``SIGN_DETECTORS``), ``healthy`` (zoo controls, real logs judged HEALTHY, corpus healthy runs)
and, on the real logs, ``against`` (every condition the detector is a sign of is marked
``not``). Each line prints fired/total per group at each value; ``*`` marks the default.

``--stats`` prints, per run, the statistic behind the gates that carry one (entropy's lowest
smoothed share of its early level, ...), the numbers the knobs' docstrings quote.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dev"))  # rlvitals_corpus: dev only

MULTIPLES = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0)


def _zoo_runs(root: Path) -> list[dict[str, Any]]:
    out = []
    for truth_path in sorted(root.glob("*/truth.json")):
        truth = json.loads(truth_path.read_text())
        if truth.get("split") != "dev":
            continue  # held-out seeds are the test set: never read here
        cond = truth["condition"]
        out.append(
            {
                "set": "zoo",
                "name": truth_path.parent.name,
                "path": truth_path.parent / "rlvitals",
                "conditions": {cond},
                "not": set(),
                "healthy": cond == "HEALTHY",
                "labels": set(),
            }
        )
    return out


def _real_runs(root: Path) -> list[dict[str, Any]]:
    out = []
    for v in json.loads((root / "verdicts.json").read_text()):
        conds = set(v.get("conditions") or [])
        out.append(
            {
                "set": "real",
                "name": v["log"].split("/")[-2] if "/" in v["log"] else v["log"],
                "path": root / v["log"],
                "conditions": conds,
                "not": set(v.get("not") or []),
                "healthy": conds == {"HEALTHY"},
                "labels": set(),
            }
        )
    return out


def _corpus_runs(seed: int) -> list[dict[str, Any]]:
    from rlvitals_corpus import generate, to_run
    from rlvitals_corpus.other import other_suite
    from rlvitals_corpus.scenarios import collapse_suite

    out = []
    for i, (name, params) in enumerate(collapse_suite("ci", seed) + other_suite("ci", seed)):
        params = dict(params)
        lr = generate(name, seed=params.pop("seed", i), **params)
        out.append(
            {
                "set": "corpus",
                "name": lr.name,
                "run": to_run(lr),
                "conditions": set(),
                "not": set(),
                "healthy": lr.healthy,
                "labels": {lab.id for lab in lr.expect},
            }
        )
    return out


def _prepare(item: dict[str, Any]) -> None:
    """Attach the run's vitals and every detector's default findings to ``item``."""
    from rlvitals.doctor import prepare
    from rlvitals.importers import load
    from rlvitals.vitals import compute_vitals

    run = item.pop("run", None)
    if run is None:
        with contextlib.redirect_stderr(io.StringIO()):
            run = load(item["path"])
    vitals = compute_vitals(run)
    results: dict[str, list] = {}
    for cls in prepare().order:
        det = cls()
        results[cls.id] = det.check(vitals, results) if cls.requires else det.check(vitals)
    item["vitals"], item["results"] = vitals, results


def _fires(cls: type, findings: list) -> bool:
    from rlvitals.detectors import Severity

    return any(Severity(f.severity).rank >= cls.severity.rank for f in findings)


def _group(item: dict[str, Any], det_id: str, signs: dict[str, set[str]]) -> str | None:
    """``sign``, ``healthy``, ``against`` or None (a run that says nothing about ``det_id``)."""
    mine = {c for c, dets in signs.items() if det_id in dets}
    if item["set"] == "corpus":
        if det_id in item["labels"]:
            return "sign"
        return "healthy" if item["healthy"] else None
    if item["healthy"]:
        return "healthy"
    if item["conditions"] & mine:
        return "sign"
    if item["set"] == "real" and mine and mine <= item["not"]:
        return "against"
    return None


def _values(default: Any) -> list[Any]:
    if isinstance(default, bool) or not isinstance(default, (int, float)) or default == 0:
        return []
    vals = []
    for m in MULTIPLES:
        v = default * m
        v = max(1, round(v)) if isinstance(default, int) else round(v, 6)
        if v not in vals:
            vals.append(v)
    return vals


def sweep(items: list[dict[str, Any]], det_ids: list[str]) -> dict[str, Any]:
    """``{det_id: {knob: {"default", "rows": [(value, {set/group: [fired, total]})]}}}``."""
    import dataclasses

    from rlvitals.detectors import DETECTORS
    from rlvitals.doctor.differential import SIGN_DETECTORS

    out: dict[str, Any] = {}
    for det_id in det_ids:
        cls = DETECTORS.get(det_id)
        groups = {id(it): _group(it, det_id, SIGN_DETECTORS) for it in items}
        knobs: dict[str, Any] = {}
        for fld in dataclasses.fields(cls.Knobs):
            default = getattr(cls.Knobs(), fld.name)
            rows = []
            for value in _values(default):
                counts: dict[str, list[int]] = {}
                for it in items:
                    g = groups[id(it)]
                    if g is None:
                        continue
                    if value == default:
                        found = it["results"][det_id]
                    else:
                        det = cls(**{fld.name: value})
                        v = it["vitals"]
                        try:
                            found = det.check(v, it["results"]) if cls.requires else det.check(v)
                        except Exception as err:  # a knob value the detector cannot take
                            e = counts.setdefault(f"ERROR {type(err).__name__}", [0, 0])
                            e[0] += 1
                            e[1] += 1
                            continue
                    c = counts.setdefault(f"{it['set']} {g}", [0, 0])
                    c[0] += _fires(cls, found)
                    c[1] += 1
                rows.append((value, counts))
            knobs[fld.name] = {"default": default, "rows": rows}
        out[det_id] = knobs
    return out


def _stats(items: list[dict[str, Any]]) -> None:
    """The statistic behind the entropy, KL, length and gradient gates on each run."""
    import numpy as np

    from rlvitals._median import median
    from rlvitals.detectors.kit import points, rolling_median

    print("\nper run: entropy min/early (smoothed 5) | kl max/early | length max/early, min/early")
    for it in items:
        if it["set"] == "corpus":
            continue
        v = it["vitals"]
        cells = []
        ent = points(v, "entropy")
        if ent is not None and ent.n >= 10:
            x = ent.values
            if (x <= 0).all():
                x = -x
            e0 = float(median(x[:5]))
            sm = rolling_median(x, 5, edges="pad")
            cells.append(f"entropy {float(np.nanmin(sm)) / e0:.2f}" if e0 > 0 else "entropy -")
        for name in ("kl", "length_mean"):
            p = points(v, name)
            if p is not None and p.n >= 10:
                b = float(median(p.values[:20]))
                if b > 0:
                    sm = rolling_median(p.values, 3, edges="pad")
                    cells.append(
                        f"{name} max {float(np.nanmax(sm)) / b:.2f} min {float(np.nanmin(sm)) / b:.2f}"
                    )
        conds = ",".join(sorted(it["conditions"])) or "-"
        print(f"  {it['set']:<4} {it['name'][:44]:<44} {conds[:40]:<40} {'; '.join(cells)}")


def main(argv: list[str] | None = None) -> int:
    from rlvitals.detectors import catalogue

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zoo", help="a failure-zoo folder (only its dev runs are read)")
    ap.add_argument("--real", help="the real-logs folder (with verdicts.json)")
    ap.add_argument("--corpus-seed", type=int, help="add the synthetic ci corpus of this seed")
    ap.add_argument("--detector", action="append", help="only these detector IDs")
    ap.add_argument("--stats", action="store_true", help="print per-run gate statistics")
    ap.add_argument("--json", help="write the sweep here")
    args = ap.parse_args(argv)
    items: list[dict[str, Any]] = []
    if args.zoo:
        items += _zoo_runs(Path(args.zoo))
    if args.real:
        items += _real_runs(Path(args.real))
    if args.corpus_seed is not None:
        items += _corpus_runs(args.corpus_seed)
    if not items:
        ap.error("give --zoo, --real and/or --corpus-seed")
    for it in items:
        _prepare(it)
    ids = args.detector or [c.id for c in catalogue()]
    res = sweep(items, ids)
    for det_id, knobs in res.items():
        print(f"\n{det_id}")
        for name, k in knobs.items():
            if not k["rows"]:
                print(f"  {name} = {k['default']!r}: not swept")
                continue
            print(f"  {name} = {k['default']!r}")
            for value, counts in k["rows"]:
                mark = "*" if value == k["default"] else " "
                cells = "  ".join(f"{g} {a}/{b}" for g, (a, b) in sorted(counts.items()))
                print(f"   {mark}{value!s:>9}  {cells}")
    if args.stats:
        _stats(items)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
