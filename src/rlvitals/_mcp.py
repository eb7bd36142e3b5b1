"""The MCP server behind ``rlvitals mcp``: the library's verbs as tools, its catalogues as resources.

An agent (Claude Code, Cursor, any MCP client) starts ``rlvitals mcp`` and talks JSON-RPC to it
over stdin/stdout (the official ``mcp`` SDK, the ``mcp`` extra). Each tool is one call of the
library, as each CLI command is, and returns JSON:

- ``doctor``: :func:`rlvitals.diagnose_path` → the JSON report (``render(diagnosis, "json")``);
- ``inspect``: :func:`rlvitals.load` → :func:`rlvitals.describe`;
- ``scan``: :func:`rlvitals.scan.scan` → the scan's JSON table;
- ``compare``: :func:`rlvitals.compare.compare_paths` → the comparison's JSON;
- ``explain``: a detector's page (Markdown) with its ID, severity, family and knobs, or a
  condition's page (the causes the doctor names), as ``rlvitals explain``;
- ``acr``: :func:`rlvitals.doctor.acr_table.acr_table` → the paper's summaries and per-step rows;
- ``detectors``: the detector catalogue (also the resource ``rlvitals://detectors``).

Resources: ``rlvitals://detectors`` (the catalogue as JSON), ``rlvitals://detectors/{id}`` (a
page), ``rlvitals://conditions`` (the cause vocabulary: :func:`conditions_catalogue`).

Bad input (:class:`~rlvitals.InputError`, an unknown detector, a bad argument) is a tool error
carrying the one line the CLI would print; an unexpected exception is a tool error naming its
type. The server never stops on a tool's failure. The functions here are plain Python (the SDK
is imported only by :func:`build_server`), so the library can call them too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect as _pyinspect  # the name inspect is the tool's
import json
import os
import typing
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from rlvitals._version import __version__
from rlvitals.errors import InputError, MissingExtraError

__all__ = [
    "TOOLS",
    "acr",
    "build_server",
    "compare",
    "conditions_catalogue",
    "detector_catalogue",
    "doctor",
    "explain",
    "inspect",
    "scan",
    "serve",
]

INSTRUCTIONS = """\
rlvitals reads GRPO / RLVR training logs (TRL, veRL, OpenRLHF, NeMo-RL, prime-rl, SkyRL, \
ms-swift, W&B, MLflow, TensorBoard, trackio, JSONL/CSV) and diagnoses them. Start with \
`inspect` to see what a log holds, then `doctor` for which failure, since which step and what \
to try; `explain` prints a detector's or a condition's page. Paths are read on the server's machine: give \
absolute paths."""

_STDIN_REFUSED = "the MCP server reads files and folders; its standard input is the protocol"


class ToolFailure(Exception):
    """A tool's failure as the agent reads it: one line (the SDK's ``ToolError`` carries it)."""


@contextlib.contextmanager
def _one_line_errors() -> Iterator[None]:
    """Turn whatever a tool raises into :class:`ToolFailure` with one sanitised line."""
    from rlvitals.report.common import one_line

    try:
        yield
    except ToolFailure:
        raise
    except (InputError, MissingExtraError, ValueError, OSError) as err:
        raise ToolFailure(one_line(err)) from None
    except Exception as err:  # a bug in a reader or detector: said, and the server goes on
        raise ToolFailure(f"internal error: {type(err).__name__}: {one_line(err)}") from None


def _source(path: str | None, example: str | None) -> str:
    """The file to read: ``path``, or the bundled example ``example``; exactly one."""
    from rlvitals.examples import example_path

    if (path is None) == (example is None):
        raise InputError(None, "give exactly one of path and example")
    if example is not None:
        return os.fspath(example_path(example))
    if path == "-":
        raise InputError("-", _STDIN_REFUSED)
    return os.path.expanduser(path)


def _config(**flags: Any):
    """The doctor's configuration from the flags ``rlvitals doctor`` has (``config``,
    ``select``, ``ignore``, ``metric``, ``group_size``, ``reward_range``, ``fail_on``), built
    and validated as the CLI builds it."""
    from rlvitals.cli.doctor import FAIL_ON, config_from_args

    fail_on = flags.get("fail_on")
    if fail_on is not None and fail_on not in FAIL_ON:
        raise InputError(None, f"fail_on must be one of {', '.join(FAIL_ON)}, got {fail_on!r}")
    names = ("config", "select", "ignore", "metric", "group_size", "reward_range", "fail_on")
    return config_from_args(
        SimpleNamespace(allow_unjudged=None, **{n: flags.get(n) for n in names})
    )


# --- the tools -----------------------------------------------------------------------------


def doctor(
    path: str | None = None,
    example: str | None = None,
    run: str | None = None,
    input_format: str | None = None,
    group_size: int | None = None,
    reward_range: str | None = None,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    metric: list[str] | None = None,
    lenient: bool = False,
    config: str | None = None,
) -> dict[str, Any]:
    """Diagnose a training run: which failure, since which step, what it cost, what to try.

    Returns the doctor's JSON report (docs/report-json.md): run facts, vitals, incidents (the
    first is the headline, with its root cause and advice), findings with their numbers, what
    could not be judged and why.

    Args:
        path: a log file or run folder (absolute path on the server's machine).
        example: instead of path, a bundled example run ("collapse", "length").
        run: which run of a store holding several (MLflow, wandb/, trackio); inspect lists them.
        input_format: force the input format instead of sniffing it (inspect names formats).
        group_size: completions per prompt, when the log does not say it.
        reward_range: the reward's range as "MIN,MAX" (e.g. "0,1"), when the log does not say it.
        select: run only these detector IDs or families.
        ignore: skip these detector IDs or families.
        metric: "KEY=NAME" pairs reading the log's KEY as the rlvitals metric NAME.
        lenient: skip damaged records instead of refusing the input (each skip is a warning).
        config: an rlvitals.toml or pyproject.toml to read.
    """
    from rlvitals.doctor import diagnose_path
    from rlvitals.report import render

    with _one_line_errors():
        cfg = _config(
            config=config,
            select=select,
            ignore=ignore,
            metric=metric,
            group_size=group_size,
            reward_range=reward_range,
        )
        source = _source(path, example)
        d = diagnose_path(source, fmt=input_format, config=cfg, run=run, lenient=lenient)
        return json.loads(render(d, "json"))


def inspect(
    path: str,
    run: str | None = None,
    input_format: str | None = None,
    lenient: bool = False,
) -> dict[str, Any]:
    """What rlvitals reads from a run: format, trainer, steps, series with coverage, groups.

    Use it first on an unfamiliar log: it names the format, the configuration facts found
    (group size, estimator, KL), the runs of a store holding several, keys not understood, and
    warnings.

    Args:
        path: a log file or run folder (absolute path on the server's machine).
        run: which run of a store holding several.
        input_format: force the input format instead of sniffing it.
        lenient: skip damaged records instead of refusing the input.
    """
    from rlvitals.doctor.inspection import describe
    from rlvitals.importers import load

    with _one_line_errors():
        return describe(load(_source(path, None), input_format, run=run, lenient=lenient))


def scan(
    paths: list[str],
    sort: str | None = None,
    reverse: bool = False,
    eval_key: str | None = None,
    against: str = "auto",
    fail_on: str | None = None,
    engine: str = "serial",
    jobs: int | None = None,
    cache: bool = True,
) -> dict[str, Any]:
    """Scan many runs (a sweep, a tracking store, a shared disk): one row per run.

    Each row has the run's ACR_100, worst incident and final metric, or the error that kept it
    from being read; the summary correlates ACR_100 with the final metric.

    Args:
        paths: files, folders (walked) or globs.
        sort: sort rows by this key (acr_100, acr_mean, worst, onset, eval, reward, steps,
            path, ...).
        reverse: sort descending.
        eval_key: the eval series to report as the final metric.
        against: what ACR_100 is correlated with: "auto", "eval" or "reward".
        fail_on: lowest severity counted as failing ("info", "warn", "critical", "never").
        engine: "serial" (default here), "process" (a pool of forked workers) or "ray".
        jobs: worker processes for the process engine.
        cache: reuse rows of runs whose files are unchanged.
    """
    from rlvitals.scan import render_scan
    from rlvitals.scan import scan as scan_runs

    with _one_line_errors():
        if not paths:
            raise InputError(None, "paths is empty: give files, folders or globs")
        if jobs is not None and jobs < 1:
            raise InputError(None, f"jobs must be 1 or more, got {jobs}")
        cfg = _config(fail_on=fail_on)
        paths = [os.path.expanduser(p) for p in paths]
        result = scan_runs(
            paths, jobs=jobs, engine=engine, config=cfg, cache=cache, eval_key=eval_key
        )
        text = render_scan(
            result,
            "json",
            sort=sort,
            reverse=reverse,
            fail_on=cfg.fail_on,
            allow_unjudged=bool(cfg.allow_unjudged),
            against=against,
        )
        return json.loads(text)


def compare(
    a: str,
    b: str,
    run_a: str | None = None,
    run_b: str | None = None,
    input_format: str | None = None,
    config: str | None = None,
) -> dict[str, Any]:
    """Compare two runs: configuration differences, the first step their vitals diverge, and
    the incidents each has alone or both share.

    Args:
        a: the first run (file or folder).
        b: the second run.
        run_a: which run of a, when it holds several.
        run_b: which run of b, when it holds several.
        input_format: force the input format of both.
        config: an rlvitals.toml or pyproject.toml to read.
    """
    from rlvitals.compare import compare_paths, render_compare

    with _one_line_errors():
        cfg = _config(config=config)
        a, b = _source(a, None), _source(b, None)
        c = compare_paths(a, b, run_a=run_a, run_b=run_b, fmt=input_format, config=cfg)
        return json.loads(render_compare(c, "json"))


def explain(id: str) -> dict[str, Any]:
    """A detector's page (what is happening, what it looks like, how it decides, what to try)
    or a condition's (the cause the doctor names: what it is, its signs, how to tell it apart).

    Returns ``kind`` ("detector" or "condition") and the page (Markdown); for a detector also
    its ID, severity, family, key metrics and knobs with defaults, for a condition its ID and
    title.

    Args:
        id: a detector ID ("ADV_COLLAPSE") or a condition ID ("RUNAWAY_LENGTH"),
            case-insensitive; the detectors tool and the conditions resource list them.
    """
    from rlvitals.report.pages import catalogue_row, condition_page, detector_page, explained

    with _one_line_errors():
        kind, subject = explained(id)
        if kind == "condition":
            page = condition_page(subject)
            return {"id": subject.id, "kind": kind, "title": subject.title, "page": page}
        return {**catalogue_row(subject), "kind": kind, "page": detector_page(subject, links=False)}


def acr(
    path: str | None = None,
    example: str | None = None,
    run: str | None = None,
    input_format: str | None = None,
    tau: float = 1e-6,
    every: int = 1,
    lenient: bool = False,
) -> dict[str, Any]:
    """The Advantage Collapse Rate of every step of a run with per-group rewards.

    Returns the paper's summaries (mean ACR, ACR_100, last windowed ACR, stalls) and one row
    per step: the ACR, its split (solve_all, solve_none, flat) and the expected ACR.

    Args:
        path: a run with per-group rewards (groups JSONL, a recording, ...).
        example: instead of path, a bundled example run ("collapse").
        run: which run of a store holding several.
        input_format: force the input format instead of sniffing it.
        tau: collapse tolerance on a group's reward std.
        every: keep every Nth step row.
        lenient: skip damaged records instead of refusing the input.
    """
    from rlvitals.cli.acr import json_rows, load_table

    with _one_line_errors():
        source = _source(path, example)
        t = load_table(source, input_format, run, lenient, tau, every, flag="")
        return {"summary": t.summary(), "notes": t.notes, "steps": json_rows(t, every)}


def detectors(family: str | None = None) -> dict[str, Any]:
    """The detector catalogue: each detector's ID, severity, family, key metrics, what it
    finds and its knobs with defaults (the resource rlvitals://detectors, as a tool).

    Args:
        family: only this family (collapse, entropy, length, ...).
    """
    with _one_line_errors():
        return detector_catalogue(family)


TOOLS = (doctor, inspect, scan, compare, explain, acr, detectors)
"""The tools the server offers, in the order it lists them."""


# --- the catalogues ------------------------------------------------------------------------


def _detector(det_id: str):
    """The detector class of ``det_id``; InputError naming the valid IDs."""
    from rlvitals.detectors import DETECTORS, load_all

    load_all()
    key = det_id.strip().upper().replace("-", "_")
    if key not in DETECTORS:
        raise InputError(
            None, f"unknown detector {det_id!r}; valid: {', '.join(DETECTORS.names())}"
        )
    return DETECTORS.get(key)


def detector_catalogue(family: str | None = None) -> dict[str, Any]:
    """The detector catalogue as JSON-ready data (what ``rlvitals detectors --json`` lists).

    >>> cat = detector_catalogue("collapse")
    >>> "ADV_COLLAPSE" in [d["id"] for d in cat["detectors"]]
    True
    """
    from rlvitals.report.pages import catalogue_row, detectors_of

    return {"version": __version__, "detectors": [catalogue_row(c) for c in detectors_of(family)]}


def conditions_catalogue() -> dict[str, Any]:
    """The causes the doctor names (:data:`rlvitals.conditions.CONDITIONS`) as JSON-ready data:
    each with its ``id``, ``title``, ``what``, ``signs`` and ``tell_apart``.

    >>> cat = conditions_catalogue()
    >>> cat["source"], "TOO_HARD" in [c["id"] for c in cat["conditions"]]
    ('conditions', True)
    """
    from rlvitals.conditions import CONDITIONS

    rows = [dataclasses.asdict(c) for c in CONDITIONS.values()]
    return {"source": "conditions", "conditions": json.loads(json.dumps(rows))}


# --- the server ----------------------------------------------------------------------------


def build_server():
    """The MCP server (``mcp.server.mcpserver.MCPServer``) with the tools and resources.

    Raises:
        MissingExtraError: the ``mcp`` package is not installed.
    """
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError as err:
        raise MissingExtraError("rlvitals mcp", "mcp", "mcp") from err

    # WARNING: a tool refusing bad input is an answer to the agent, not a server event to log.
    server = MCPServer(
        "rlvitals", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )

    def tool(fn):
        def call(**kwargs: Any) -> dict[str, Any]:
            try:
                return fn(**kwargs)
            except ToolFailure as err:
                raise ToolError(str(err)) from None

        # The SDK reads the arguments' schema from the signature and the description from the
        # docstring: the wrapper shows the tool's own, with its annotations evaluated.
        hints = typing.get_type_hints(fn)
        sig = _pyinspect.signature(fn)
        params = [p.replace(annotation=hints[p.name]) for p in sig.parameters.values()]
        call.__signature__ = sig.replace(parameters=params, return_annotation=hints["return"])  # type: ignore[attr-defined]
        call.__annotations__ = hints
        call.__doc__, call.__name__ = fn.__doc__, fn.__name__
        return call

    for fn in TOOLS:
        server.add_tool(tool(fn), name=fn.__name__, structured_output=True)

    @server.resource(
        "rlvitals://detectors",
        name="detectors",
        description="The detector catalogue: ID, severity, family, key metrics, summary, knobs.",
        mime_type="application/json",
    )
    def _detectors() -> str:
        return json.dumps(detector_catalogue(), indent=1, default=str)

    @server.resource(
        "rlvitals://conditions",
        name="conditions",
        description="The causes the doctor names (the condition catalogue, else the incident "
        "themes); 'source' says which.",
        mime_type="application/json",
    )
    def _conditions() -> str:
        return json.dumps(conditions_catalogue(), indent=1, default=str)

    @server.resource(
        "rlvitals://detectors/{id}",
        name="detector page",
        description="One detector's page (Markdown), e.g. rlvitals://detectors/ADV_COLLAPSE.",
        mime_type="text/markdown",
    )
    def _page(id: str) -> str:
        from rlvitals.report.pages import detector_page

        try:
            return detector_page(_detector(id), links=False)
        except InputError as err:
            from mcp.server.mcpserver.exceptions import ResourceNotFoundError

            raise ResourceNotFoundError(str(err)) from None

    return server


def serve() -> None:
    """Run the server on stdin/stdout until the client closes the stream."""
    build_server().run("stdio")
