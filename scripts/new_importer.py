"""Scaffold a new importer: its module with its declaration, a fixture, a test and a docs entry.

    python scripts/new_importer.py acme_console --prefix acme --writer "Acme's console logger"
    python scripts/new_importer.py acme_console --prefix acme --dry-run   # print, write nothing

Writes, from the repository root (or ``--root``):

- ``src/rlvitals/importers/<name>.py``: a working importer of a text log whose lines read
  ``<prefix> step=N key=value ...`` (one logged step a line): ``_sniff`` and the pre-check built
  from the same mark, ``load_<name>`` reading the lines in bounded memory through
  :func:`rlvitals.importers._lines.iter_lines` (so gzip, zstd, pipes and standard input work),
  every key handed to ``RunBuilder`` (which maps it onto a canonical metric), a bad line an
  ``InputError`` naming the file and the line, a torn last line skipped with a warning, and the
  ``register(Importer(...))`` declaration: name, description, pre-check, file patterns;
- ``tests/importer_fixtures/<name>/``: a 40-step log of the format and ``expected.json`` (what
  ``rlvitals scan`` and ``rlvitals inspect`` must say of it); the scan tree, the stream tests and
  the pre-check test read every folder there, so the new format has its fixture everywhere;
- ``tests/test_import_<name>.py``: the importer on its fixture, bad input, a torn line, the
  doctor's report;
- a row in the table of ``docs/importers.md`` ("Every format");
- ``src/rlvitals/importers/_catalogue.py``, regenerated (``scripts/gen_importers.py``).

The output passes the suite as generated (``tests/test_scaffold.py`` checks this in a copy of
the repository). Then make it read the real format: replace the parsing, the mark and the
fixture with a file from the real writer (CONTRIBUTING.md, "Add an importer").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAME_RE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
PREFIX_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_./-]*$")
STEPS = 40
"""Logged steps in the fixture."""
ONSET = 26
"""From this step the fixture's groups collapse (zero_std_frac 0.2 -> 0.9)."""
TABLE_END = "| `recording` | the rlvitals recorder |"
"""The last row of docs/importers.md's format table: the new row goes after it."""

IMPORTER = '''"""{writer}: ``{prefix} step=N key=value ...`` lines, one logged step a line.

Written by scripts/new_importer.py: replace this paragraph with the writer (its file and
version, the line that writes the log) and what the importer reads of it.

- **Step**: ``step=N``.
- **Metrics**: every other ``key=value`` pair with a numeric value; ``RunBuilder`` maps the
  keys onto canonical metrics (``docs/metrics.md``: ``frac_reward_zero_std`` is the
  trainer's zero-variance group share, the collapse evidence).
- **Bad input**: a line that is not ``{prefix} step=N key=value ...`` is an ``InputError``
  naming the file and the line; a torn last line (a writer stopped mid-line) is skipped with a
  warning.
"""

from __future__ import annotations

from pathlib import Path

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, register
from rlvitals.importers._lines import iter_lines
from rlvitals.recording.run import Manifest, Run, RunBuilder

__all__ = ["load_{name}"]

MARK = b"{prefix} step="
"""Every line of the format starts with this: the sniffer and the pre-check look for it."""
CONF = 0.9
"""How sure the sniffer is of a file whose first line starts with :data:`MARK`."""


def _sniff(path: Path, head: bytes) -> float:
    first = head.lstrip(b"\\xef\\xbb\\xbf \\t\\r\\n").split(b"\\n", 1)[0]
    return CONF if first.startswith(MARK) else 0.0


def _parse(line: str) -> tuple[int, dict[str, float]] | None:
    """``(step, metrics)`` of one line, or None when it is not one of the format.

    >>> _parse("{prefix} step=3 reward=0.5 loss=0.1")
    (3, {{'reward': 0.5, 'loss': 0.1}})
    """
    words = line.split()
    if len(words) < 2 or words[0] != "{prefix}" or not words[1].startswith("step="):
        return None
    try:
        step = int(words[1][len("step=") :])
        metrics = {{}}
        for word in words[2:]:
            key, eq, value = word.partition("=")
            if not (key and eq):
                return None
            metrics[key] = float(value)
    except ValueError:
        return None
    return step, metrics


def load_{name}(path: Path, progress: Progress | None = None) -> Run:
    """Read a {name} log into a ``Run`` (module docstring)."""
    builder = RunBuilder(Manifest(source=str(path), step_key="step"))
    rows = 0
    for lineno, raw, complete in iter_lines(path, progress):
        line = raw.decode("utf-8", "replace").strip()
        if not line:
            continue
        row = _parse(line)
        if row is None:
            if not complete:
                builder.warn(f"{{path}}: the last line (line {{lineno}}) is incomplete: skipped")
                break
            raise InputError(path, "expected '{prefix} step=N key=value ...'", f"line {{lineno}}")
        builder.add_row(*row)
        rows += 1
    if rows == 0:
        raise InputError(path, "no '{prefix} step=N' lines found")
    return builder.build()


register(
    Importer(
        name="{name}",
        description="{writer} ({prefix} step=N key=value lines)",
        sniff=_sniff,
        load=load_{name},
        precheck=Precheck(text=True, marks=(MARK,)),
        files=(".log",),
    )
)
'''

TEST = '''"""The {name} importer (written by scripts/new_importer.py) on its fixture
(``tests/importer_fixtures/{name}/``): steps and metrics read, bad input one line naming the
file and the line, a torn last line skipped, the doctor's report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rlvitals
from rlvitals.errors import InputError
from rlvitals.importers import load, sniff

FIXTURE = Path(__file__).parent / "importer_fixtures" / "{name}" / "{name}.log"


def test_the_fixture_is_read_step_by_step():
    run = load(FIXTURE)
    assert sniff(FIXTURE).name == "{name}" and run.manifest.format == "{name}"
    assert run.steps.tolist() == list(range(1, {steps} + 1))
    zero = run.series["zero_std_frac"]
    assert zero[0] == 0.2 and zero[-1] == 0.9


def test_bad_input_is_one_line_naming_the_file_and_the_line(tmp_path):
    bad = tmp_path / "bad.log"
    bad.write_text("{prefix} step=1 reward=0.5\\n{prefix} step=two reward=0.5\\n")
    with pytest.raises(InputError) as e:
        load(bad, fmt="{name}")
    assert str(e.value).startswith(f"{{bad}}:line 2: ") and "\\n" not in str(e.value)


def test_a_torn_last_line_is_skipped_with_a_warning(tmp_path):
    torn = tmp_path / "torn.log"
    torn.write_bytes(FIXTURE.read_bytes() + b"{prefix} step={steps}1 rew")
    run = load(torn, fmt="{name}")
    assert run.steps.size == {steps} and any("incomplete" in w for w in run.warnings)


def test_the_doctor_reads_the_collapse_from_it():
    d = rlvitals.diagnose(load(FIXTURE))
    assert d.vitals.evidence == "zero_std_frac"
    acr = d.vitals.series["acr"]
    assert acr[: {onset} - 1].max() == 0.2 and acr[{onset} - 1 :].min() == 0.9
    json.dumps(d.to_dict())
'''


def fixture_text(prefix: str) -> str:
    """:data:`STEPS` lines of the format: healthy until :data:`ONSET`, then collapsed groups."""
    lines = []
    for s in range(1, STEPS + 1):
        late = s >= ONSET
        zero = 0.9 if late else 0.2
        reward = 0.95 if late else 0.3 + 0.01 * s
        lines.append(
            f"{prefix} step={s} reward={reward:.4f} reward_std={0.05 if late else 0.4} "
            f"frac_reward_zero_std={zero} loss={0.02 if late else 0.1} grad_norm=0.3"
        )
    return "\n".join(lines) + "\n"


def docs_row(name: str, prefix: str, writer: str) -> str:
    return (
        f"| `{name}` | {writer} | `{prefix} step=N key=value` lines: every numeric key | "
        f"`step=N` | `src/rlvitals/importers/{name}.py` |"
    )


def _with_row(page: str, row: str) -> str:
    at = page.find(TABLE_END)
    if at < 0:
        raise SystemExit(f"docs/importers.md: the row starting {TABLE_END!r} is not there")
    end = page.index("\n", at)
    return page[: end + 1] + row + "\n" + page[end + 1 :]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("name", help="the format's name, lower_snake (e.g. acme_console)")
    ap.add_argument("--prefix", required=True, help="the word every line starts with")
    ap.add_argument("--writer", default=None, help="who writes the log (docs and docstring)")
    ap.add_argument("--root", type=Path, default=ROOT, help="repository root")
    ap.add_argument("--dry-run", action="store_true", help="print the files, write nothing")
    args = ap.parse_args(argv)
    if not NAME_RE.match(args.name):
        ap.error(f"the name must be lower_snake (e.g. acme_console), got {args.name!r}")
    if not PREFIX_RE.match(args.prefix):
        ap.error(f"--prefix must be one word of letters, digits, _ . / -, got {args.prefix!r}")
    writer = args.writer or f"The {args.name} log"
    if any(c in writer for c in '"\\|\n'):
        ap.error('--writer may not hold ", \\, | or a newline')
    sys.path.insert(0, str(args.root / "src"))
    from rlvitals.importers._catalogue import CATALOGUE

    if args.name in CATALOGUE:
        ap.error(f"{args.name} is already a format")
    fields = {
        "name": args.name,
        "prefix": args.prefix,
        "writer": writer,
        "steps": STEPS,
        "onset": ONSET,
    }
    module = args.root / "src" / "rlvitals" / "importers" / f"{args.name}.py"
    fixtures = args.root / "tests" / "importer_fixtures" / args.name
    test = args.root / "tests" / f"test_import_{args.name}.py"
    docs = args.root / "docs" / "importers.md"
    expected = {
        "file": f"{args.name}.log",
        "format": args.name,
        "trainer": None,
        "group_size": None,
        "steps": [1, STEPS],
        "n_steps": STEPS,
        "step_key": "step",
        "evidence": "zero_std_frac",
    }
    files = {
        module: IMPORTER.format(**fields),
        fixtures / f"{args.name}.log": fixture_text(args.prefix),
        fixtures / "expected.json": json.dumps(expected, indent=2) + "\n",
        test: TEST.format(**fields),
        docs: _with_row(docs.read_text(), docs_row(args.name, args.prefix, writer)),
    }
    for path in (module, fixtures, test):
        if path.exists():
            ap.error(f"{path} exists already")
    if args.dry_run:
        for path, text in files.items():
            print(f"==> {path}\n{text}")
        return 0
    fixtures.mkdir(parents=True)
    for path, text in files.items():
        path.write_text(text)
        print(f"wrote {path.relative_to(args.root)}")
    env = {**os.environ, "PYTHONPATH": str(args.root / "src")}
    done = subprocess.run(
        [sys.executable, str(args.root / "scripts" / "gen_importers.py")],
        cwd=args.root,
        check=False,
        env=env,
    )
    if done.returncode:
        return done.returncode
    print(
        f"next: make it read the real format, then: pytest {test.relative_to(args.root)} "
        "tests/test_declarations.py tests/test_scan.py tests/test_import_streams.py"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
