"""The doctor's conditions on the real public logs against an engineer's verdicts.

    python benchmarks/real_logs.py ../shared/real-logs

Reads ``verdicts.json`` in the folder (per log: ``primary``, ``conditions``, ``not``), runs
the doctor on each log and prints its primary condition and every condition it names, then:
primary agreement over the logs that have a primary; logs where every listed condition is named
and none marked ``not`` is.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from rlvitals.conditions import CONDITIONS
    from rlvitals.doctor import DoctorConfig, diagnose_path
    from rlvitals.errors import RlvitalsError

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", help="the real-logs folder (with verdicts.json)")
    p.add_argument("--json", help="write the per-log results here")
    args = p.parse_args(argv)
    root = Path(args.folder)
    verdicts = json.loads((root / "verdicts.json").read_text())
    rows = []
    for v in verdicts:
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                dx = diagnose_path(root / v["log"], config=DoctorConfig(allow_unjudged=True))
            named = [c.id for c in dx.conditions]
            judged = dx.not_judged() is None
        except (RlvitalsError, OSError, ValueError) as err:
            named, judged = [f"ERROR {err}"], False
        want = v.get("primary") if v.get("primary") in CONDITIONS else None
        listed = set(v.get("conditions") or [])
        wrong = sorted(set(named) & set(v.get("not") or []))
        missed = sorted(listed - set(named))
        short = not v.get("conditions")
        complete = (not missed and not wrong) if not short else (not judged or not wrong)
        rows.append(
            {
                "log": v["log"],
                "expected": v.get("primary"),
                "primary": named[0] if named else "(not judged)",
                "named": named,
                "primary_ok": None if want is None else bool(named) and named[0] == want,
                "missed": missed,
                "wrong": wrong,
                "complete": complete,
            }
        )
    for r in rows:
        mark = {True: "ok", False: "--", None: "  "}[r["primary_ok"]]
        print(f"{mark} {r['log'][:70]:<70}")
        print(f"     expected {r['expected']}; named {', '.join(r['named']) or '-'}")
        if r["missed"] or r["wrong"]:
            print(f"     missed {r['missed'] or '-'}; named but 'not' {r['wrong'] or '-'}")
    have = [r for r in rows if r["primary_ok"] is not None]
    print(
        f"\nprimary agrees on {sum(r['primary_ok'] for r in have)} of {len(have)} logs with a "
        f"primary; every listed condition named and none marked 'not' on "
        f"{sum(r['complete'] for r in rows)} of {len(rows)}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
