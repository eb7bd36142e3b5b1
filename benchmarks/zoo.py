"""The doctor on the failure zoo: which cause it names first, per condition and per writer.

    python benchmarks/zoo.py --out zoo-full              # run (or read back) the full zoo
    python benchmarks/zoo.py --out zoo-full --preset dev
    python benchmarks/zoo.py --out zoo-full --json scores.json

For every run of the preset (``rlvitals.lab.failure_zoo``) and every writer it left (the
recording, trainer_state.json, the console log, TensorBoard), the primary condition the doctor
names; then, on development and held-out seeds separately: primary-condition accuracy (share of
conditions all of whose runs get the injected condition first), recall of the injected
conditions, and false conditions on the healthy controls. Runs already in ``--out`` with the
same settings are read back, not trained again.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv: list[str] | None = None) -> int:
    from rlvitals.lab import failure_zoo
    from rlvitals.lab.zoo_judge import WRITERS, judge_run, score

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="zoo folder (made or read back)")
    p.add_argument("--preset", default="full", help="smoke, dev or full (default full)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--json", help="write the per-run verdicts and the scores here")
    args = p.parse_args(argv)

    started = time.perf_counter()
    truths = failure_zoo.zoo(
        args.preset,
        args.out,
        workers=args.workers,
        progress=lambda run, done, total: print(
            f"\rzoo: {done}/{total} {run.name:<32}", end="", file=sys.stderr, flush=True
        ),
    )
    print(file=sys.stderr)
    trained = time.perf_counter() - started
    rows = []
    for truth in truths:
        name = f"{truth['condition'].lower()}-s{truth['seed']}"
        for writer in WRITERS:
            verdict = judge_run(f"{args.out}/{name}", writer)
            rows.append(
                {
                    "run": name,
                    "condition": truth["condition"],
                    "split": truth["split"],
                    "writer": writer,
                    **verdict,
                }
            )
    judged = time.perf_counter() - started - trained

    print(
        f"zoo {args.out} ({args.preset}): {len(truths)} runs, trained or read in "
        f"{trained:.0f} s, judged in {judged:.0f} s\n"
    )
    header = f"{'run':<28} {'split':<8}" + "".join(f" {w:<22}" for w in WRITERS)
    print(header)
    for truth in truths:
        name = f"{truth['condition'].lower()}-s{truth['seed']}"
        cells = []
        for writer in WRITERS:
            r = next(x for x in rows if x["run"] == name and x["writer"] == writer)
            mark = "ok " if r["primary"] == truth["condition"] else "-- "
            cells.append(f" {mark}{r['primary']:<19}")
        print(f"{name:<28} {truth['split']:<8}" + "".join(cells))
    scores = score(rows)
    print(f"\n{'split/writer':<26} {'primary':>14} {'recall':>8} {'false on healthy':>18}")
    for key, s in scores.items():
        print(
            f"{key:<26} {s['conditions_right']:>3}/{s['conditions']:<3} {s['primary_accuracy']:>6.0%}"
            f" {s['recall']:>8.0%} {s['false_on_healthy']:>10}/{s['healthy_runs']}"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"runs": rows, "scores": scores}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
