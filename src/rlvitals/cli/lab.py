"""``rlvitals lab``: real GRPO training on CPU that measures the paper's claims (docs/lab.md)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator

from rlvitals.errors import InputError, MissingExtraError

HELP = "real GRPO runs on CPU that measure the AVSPO paper's claims (predict, compare, ablate)"
EXAMPLE = """examples:
  rlvitals lab compare --preset quick --out lab-out
  rlvitals lab predict --preset full --out docs/lab/predict
  rlvitals lab train --method avspo --level 5 --out runs && rlvitals doctor runs/avspo/rlvitals
  rlvitals lab zoo --preset smoke --out zoo && rlvitals doctor zoo/runaway_length-s0/rlvitals"""

_EXPERIMENTS = {
    "predict": (
        "a grid of short GRPO runs (level x G x temperature x seed): does ACR_100 predict "
        "final accuracy?",
        "rlvitals lab predict --preset quick --out lab-out/predict",
    ),
    "compare": (
        "GRPO, Dr. GRPO, AVSPO, released AVSPO, zero-variance filter, DAPO dynamic sampling "
        "and a history baseline at an equal budget of completions, over seeds",
        "rlvitals lab compare --preset quick --out lab-out/compare",
    ),
    "ablate": (
        "AVSPO's virtual rewards, threshold and alpha, each against the paper's default",
        "rlvitals lab ablate --preset quick --out lab-out/ablate",
    ),
}


def register(p: argparse.ArgumentParser) -> None:
    lab = p.add_subparsers(dest="lab_command", metavar="EXPERIMENT", parser_class=type(p))
    for name, (text, example) in _EXPERIMENTS.items():
        e = lab.add_parser(name, help=text, description=text + ".", epilog=f"example: {example}")
        e.add_argument(
            "--preset",
            default="quick",
            help="smoke (seconds, tests), quick (< 3 min on 2 cores), full (< 45 min); "
            "default quick",
        )
        e.add_argument("--out", required=True, help="folder for the results (resumable)")
        e.add_argument("--workers", type=int, default=2, help="runs training at once (default 2)")
        e.add_argument("--seeds", type=int, help="use only the first N seeds of the preset")
        _common(e)
        e.set_defaults(func=run_experiment, experiment=name)
    b = lab.add_parser(
        "base",
        help="build (or read from cache) the base policy and print its pass rates",
        description="Warm-start the tiny model (or measure --model) and print its pass rate "
        "per task size and per level.",
        epilog="example: rlvitals lab base --task sum",
    )
    _common(b)
    b.add_argument(
        "--preset", default="quick", help="the run preset whose warm start to use (default quick)"
    )
    b.add_argument("--json", action="store_true", help="print JSON")
    b.set_defaults(func=run_base)
    t = lab.add_parser(
        "train",
        help="one lab run, recorded for the doctor",
        description="Train one lab run and record it (per-group rewards, prompt ids).",
        epilog="example: rlvitals lab train --method avspo --level 5 --out runs",
    )
    t.add_argument("--out", required=True, help="parent folder of the run")
    t.add_argument("--preset", default="quick", help="smoke, quick (default) or full")
    t.add_argument("--method", default="grpo", help="lab method or estimator (default grpo)")
    t.add_argument(
        "--level",
        type=int,
        help="difficulty level 0..6, or 7 (LM: the paper regime, sizes 3/10/13)",
    )
    t.add_argument("--seed", type=int, help="run seed")
    t.add_argument("--budget", type=int, help="completions to generate")
    t.add_argument("--lr", type=float, help="learning rate")
    t.add_argument("--group-size", type=int, help="G")
    t.add_argument("--temperature", type=float, help="rollout temperature")
    t.add_argument("--reward", choices=("binary", "partial"), help="reward kind")
    _common(t)
    t.set_defaults(func=run_train)
    z = lab.add_parser(
        "zoo",
        help="real GRPO runs with one known failure injected into each (the failure zoo)",
        description="Train one TRL GRPO run per condition with the failure injected from "
        "inside the run (docs/doctor.md, Conditions), each recorded by every writer "
        "(recording, trainer_state.json, console, TensorBoard) with its ground truth in "
        "truth.json; then say what the doctor names first on each.",
        epilog="example: rlvitals lab zoo --preset smoke --out zoo",
    )
    z.add_argument("--preset", default="smoke", help="smoke (4 runs), dev or full; default smoke")
    z.add_argument("--out", required=True, help="folder of the zoo (resumable)")
    z.add_argument("--workers", type=int, default=2, help="runs training at once (default 2)")
    z.add_argument(
        "--condition", action="append", help="only this condition (repeatable; its dev seeds)"
    )
    _common(z)
    z.set_defaults(func=run_zoo)
    p.set_defaults(func=lambda args: _no_experiment(p))


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", default="sum", help="sum (default) or sort")
    p.add_argument(
        "--model", help="a local Hugging Face causal-LM directory instead of the tiny model"
    )
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda (the first visible GPU)")
    p.add_argument("--cache", help="cache of base policies (default ~/.cache/rlvitals/lab)")
    p.add_argument(
        "--no-progress", action="store_true", help="no progress bars (default: on a terminal)"
    )


def _no_experiment(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return 2


def _require() -> None:
    for module in ("torch", "trl", "matplotlib", "scipy"):
        try:
            __import__(module)
        except ImportError as err:
            raise MissingExtraError("the lab", "lab", module) from err


@contextlib.contextmanager
def lab_errors() -> Iterator[None]:
    """What the lab refuses (a ValueError or FileNotFoundError: a bad preset value, a model
    folder that is not there) is bad input: one line, exit 2. Shared with ``rlvitals demo``."""
    try:
        yield
    except (ValueError, FileNotFoundError) as err:
        raise InputError(None, str(err)) from err


def _setup(args: argparse.Namespace, **more):
    """The lab's :class:`~rlvitals.lab.experiments.Setup` from the flags of :func:`_common`."""
    from rlvitals.lab.experiments import Setup

    return Setup(
        task=args.task,
        model=args.model,
        device=args.device,
        cache_dir=args.cache,
        show=False if args.no_progress else None,
        **more,
    )


def _preset(name: str):
    """The lab run preset ``name``; an unknown one is bad input listing the valid ones."""
    from rlvitals.lab.train import PRESETS

    if name not in PRESETS:
        raise InputError(None, f"unknown preset {name!r}; valid: {', '.join(PRESETS)}")
    return PRESETS[name]


def run_experiment(args: argparse.Namespace) -> int:
    _require()
    from rlvitals.lab import experiments

    fn = getattr(experiments, args.experiment)
    with lab_errors():
        setup = _setup(args, out=args.out, workers=args.workers, seeds=args.seeds)
        _check_setup(args)
        doc = fn(args.preset, setup)
    with open(doc["files"]["markdown"], encoding="utf-8") as f:
        sys.stdout.write(f.read())
    print(f"\nwritten: {', '.join(_files(doc['files']))}")
    return 0


def _check_setup(args: argparse.Namespace) -> None:
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    if args.seeds is not None and args.seeds < 1:
        raise ValueError(f"--seeds must be >= 1, got {args.seeds}")


def _files(files: dict) -> list[str]:
    out = []
    for v in files.values():
        out.extend(v.values() if isinstance(v, dict) else [v])
    return out


def run_base(args: argparse.Namespace) -> int:
    _require()
    from rlvitals.lab.experiments import _base

    preset = _preset(args.preset)
    with lab_errors():
        base = _base(_setup(args, out="."), preset)
    if args.json:
        json.dump(base.to_dict(), sys.stdout, indent=1)
        print()
        return 0
    from rlvitals.lab.tasks import LEVEL_TARGETS

    print(f"base policy: {base.path}")
    meta = base.meta
    print(f"built in {meta.get('seconds')} s (warm start {meta.get('warm_start_seconds', '-')} s)")
    print(
        "pass rate per size (T = 1.0): "
        + ", ".join(f"{k}: {v:.3f}" for k, v in base.pass_rates.items())
    )
    for i, (mix, rate) in enumerate(zip(base.levels, base.level_rates)):
        sizes = " + ".join(f"{w:.2f} x size {s}" for s, w in mix.items())
        print(f"L{i}: target {LEVEL_TARGETS[i]:.2f}, held-out {rate:.3f}  ({sizes})")
    return 0


def run_train(args: argparse.Namespace) -> int:
    _require()
    import dataclasses

    from rlvitals.lab.train import train

    fields = {
        "level": args.level,
        "seed": args.seed,
        "budget": args.budget,
        "learning_rate": args.lr,
        "group_size": args.group_size,
        "temperature": args.temperature,
        "reward": args.reward,
    }
    run = dataclasses.replace(
        _preset(args.preset),
        name=args.method,
        method=args.method,
        out=args.out,
        task=args.task,
        model=args.model,
        device=args.device,
        cache_dir=args.cache,
        **{k: v for k, v in fields.items() if v is not None},
    )
    with lab_errors():
        result = train(run)
    json.dump(result["summary"], sys.stdout, indent=1)
    print(f"\nrecording: {result['recording']}  (rlvitals doctor {result['recording']})")
    return 0


def run_zoo(args: argparse.Namespace) -> int:
    _require()
    from rlvitals.lab import failure_zoo as zoo_mod
    from rlvitals.lab.zoo_judge import judge_run

    if args.workers < 1:
        raise InputError(None, f"--workers must be >= 1, got {args.workers}")
    if args.task != "sum":
        raise InputError(None, "the zoo runs the sum task only (--task sum)")
    preset: str | list = args.preset
    if args.condition:
        unknown = [c for c in args.condition if c not in zoo_mod.ZOO_CONDITIONS]
        if unknown:
            raise InputError(
                None,
                f"no zoo run for {', '.join(unknown)}; valid: {', '.join(zoo_mod.ZOO_CONDITIONS)}",
            )
        preset = zoo_mod.runs_of(args.condition, heldout=False)
    elif args.preset not in zoo_mod.PRESETS:
        raise InputError(
            None, f"unknown zoo preset {args.preset!r}; valid: {', '.join(zoo_mod.PRESETS)}"
        )
    show = not args.no_progress and sys.stderr.isatty()

    def progress(run, done, total):
        if show:
            print(f"\rzoo: {done}/{total} runs ({run.name})\033[K", end="", file=sys.stderr)

    with lab_errors():
        truths = zoo_mod.zoo(
            preset,
            args.out,
            workers=args.workers,
            model=args.model,
            device=args.device,
            cache_dir=args.cache,
            progress=progress,
        )
    if show:
        print(file=sys.stderr)
    print(f"{'run':<28} {'injected':<22} {'at':>3}  the doctor names first (recording)")
    right = 0
    for truth in truths:
        name = f"{truth['condition'].lower()}-s{truth['seed']}"
        verdict = judge_run(f"{args.out}/{name}", "recording")
        right += verdict["primary"] == truth["condition"]
        print(
            f"{name:<28} {truth['condition']:<22} {truth['injected_step']:>3}  {verdict['named']}"
        )
    print(
        f"\nzoo: {args.out} (each run: rlvitals/, trainer_state.json, console.log, "
        "tensorboard/, truth.json); score it: python benchmarks/zoo.py --out " + args.out
    )
    print(f"zoo: {right} of {len(truths)} runs named their injected condition first")
    return 0
