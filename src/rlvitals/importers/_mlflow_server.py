"""An MLflow tracking server, read through the ``mlflow`` client (the ``mlflow`` extra).

URLs (``mlflow://`` speaks HTTP to the server, ``mlflow+https://`` HTTPS):

- ``mlflow://HOST:PORT/RUN_ID``: one run;
- ``mlflow://HOST:PORT/experiments/EXPERIMENT``: an experiment (its id or name): ``doctor``
  reads its most recently started active run (``--run NAME_OR_ID`` picks another), ``scan``
  reads them all;
- ``mlflow://HOST:PORT``: the whole server (``scan``: every run of every active experiment);
- the MLflow UI's own links, pasted as they are: ``http://HOST:PORT/#/experiments/1/runs/RUN_ID``
  (any ``http(s)`` URL whose fragment is ``#/experiments/...``; a path before the ``#`` is the
  server's ``--static-prefix``), or the same after ``mlflow://``.

What is read (checked against mlflow 3.17.2, ``mlflow/tracking/client.py``): ``MlflowClient.
get_run`` gives the run's name, params (strings, as MLflow keeps them) and metric keys;
``get_metric_history`` each key's whole history (``mlflow/tracking/_tracking_service/client.py``
pages through it); ``search_runs`` / ``search_experiments`` list runs. The rows are then built
exactly as the SQLite store's are (:mod:`rlvitals.importers.mlflow`): ordered by step and
timestamp, the latest value of a key at a step wins, ±1.797e308 (how MLflow stores ±inf) is
±inf; so a run read from the server and from its store gives the same findings.

Bounded waits: the client's retries and timeouts come from MLflow's own environment variables,
read at each request (``mlflow/utils/rest_utils.py``, ``http_request``): 120 s and 7 retries
with exponential backoff by default, minutes for a server that is down. Unless the user set
them, rlvitals sets ``MLFLOW_HTTP_REQUEST_TIMEOUT`` = :data:`DEFAULT_TIMEOUT_S`,
``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` = :data:`DEFAULT_RETRIES` and a backoff factor of 1 for the
duration of a read. A server that cannot be reached, a run or experiment it does not have, or a
refusal (credentials: ``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD`` or
``MLFLOW_TRACKING_TOKEN``, read by the client) is an :class:`~rlvitals.errors.InputError`
naming the URL.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from rlvitals.errors import InputError, MissingExtraError
from rlvitals.importers import Progress
from rlvitals.importers._mlflow_runs import RunInfo, add_params, add_sorted_rows, choose, finish
from rlvitals.recording.run import Manifest, Run, RunBuilder

__all__ = [
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT_S",
    "ServerURL",
    "is_mlflow_url",
    "list_server_runs",
    "load_server",
    "parse_url",
]

SCHEMES = {"mlflow": "http", "mlflow+http": "http", "mlflow+https": "https"}
"""URL scheme → the protocol the tracking server is spoken to in."""
DEFAULT_TIMEOUT_S = 10
"""Seconds one request may take (connect and answer), unless MLFLOW_HTTP_REQUEST_TIMEOUT is set."""
DEFAULT_RETRIES = 1
"""Retries of a failed request, unless MLFLOW_HTTP_REQUEST_MAX_RETRIES is set."""
_LIMITS = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": str(DEFAULT_TIMEOUT_S),
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": str(DEFAULT_RETRIES),
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
}


class _Limits:
    """The reads under way and the variables of :data:`_LIMITS` they set (the user had not)."""

    lock = threading.Lock()
    readers = 0
    names: list[str] = []  # noqa: RUF012  (one shared state, on purpose)


_WORKERS = 4
"""Metric histories fetched at once (one request each: latency, not bandwidth, is the cost)."""
_PAGE = 1000
"""Runs or experiments per search request."""
_LISTED = 5
_FORMS = (
    "mlflow://HOST:PORT/RUN_ID, mlflow://HOST:PORT/experiments/EXPERIMENT, "
    "or the UI's http://HOST:PORT/#/experiments/ID/runs/RUN_ID"
)


@dataclass(frozen=True)
class ServerURL:
    """What an MLflow server URL names.

    Attributes:
        url: as given, a password in it masked (errors, warnings and reports name it).
        tracking_uri: ``http(s)://[USER:PASSWORD@]HOST:PORT[/PREFIX]``, what the client talks
            to (never printed: :func:`_bare`).
        experiment: an experiment id or name, or None.
        run_id: a run id, or None (neither: the whole server).
    """

    url: str
    tracking_uri: str
    experiment: str | None = None
    run_id: str | None = None


def is_mlflow_url(text: Any) -> bool:
    """Whether ``text`` is an MLflow server URL (above), not a path.

    >>> is_mlflow_url("mlflow://127.0.0.1:5000/0a1b"), is_mlflow_url("runs/mlflow.db")
    (True, False)
    >>> is_mlflow_url("http://host:5000/#/experiments/1"), is_mlflow_url("http://host/x")
    (True, False)
    """
    if not isinstance(text, str):
        return False
    scheme, sep, rest = text.partition("://")
    scheme = scheme.lower()
    if not sep:
        return False
    return scheme in SCHEMES or (scheme in ("http", "https") and "#/experiments" in rest)


def parse_url(text: str) -> ServerURL:
    """The server, experiment and run ``text`` names; InputError for one that names none.

    >>> parse_url("mlflow://127.0.0.1:5000/experiments/grpo%20sweep")
    ServerURL(url='mlflow://127.0.0.1:5000/experiments/grpo%20sweep', tracking_uri='http://127.0.0.1:5000', experiment='grpo sweep', run_id=None)
    >>> parse_url("https://mlflow.lab/ml/#/experiments/3/runs/ab12").tracking_uri
    'https://mlflow.lab/ml'
    """
    u = urllib.parse.urlsplit(text)
    scheme = u.scheme.lower()
    if not is_mlflow_url(text):
        raise InputError(text, f"not an MLflow server URL ({_FORMS})")
    try:
        u.port  # noqa: B018  (raises ValueError for a port that is not a number in range)
    except ValueError:
        raise InputError(_public(text), "the port is not a number from 1 to 65535") from None
    if not u.hostname:
        raise InputError(_public(text), f"no server host in the URL ({_FORMS})")
    if u.fragment.startswith("/"):  # the UI's link: the path before '#' is a --static-prefix
        where, prefix = u.fragment.split("?", 1)[0], u.path.rstrip("/")
    else:
        where, prefix = u.path, ""
    parts = [urllib.parse.unquote(p) for p in where.split("/") if p]
    base = f"{SCHEMES.get(scheme, scheme)}://{u.netloc}{prefix}"
    shown = _public(text)
    if not parts:
        return ServerURL(shown, base)
    if parts[0] == "experiments" and len(parts) == 2:
        return ServerURL(shown, base, experiment=parts[1])
    if parts[0] == "experiments" and len(parts) >= 4 and parts[2] == "runs":
        return ServerURL(shown, base, experiment=parts[1], run_id=parts[3])
    if len(parts) == 1 and parts[0] != "experiments":
        return ServerURL(shown, base, run_id=parts[0])
    raise InputError(shown, f"names no MLflow run or experiment ({_FORMS})")


def _bare(url: str) -> str:
    """``url`` without its ``user:password@``: the server, as a report or an error names it."""
    u = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(u._replace(netloc=u.netloc.rpartition("@")[2]))


def _public(url: str) -> str:
    """``url`` with a password in it masked.

    >>> _public("mlflow://me:s3cret@mlflow.lab:5000/ab"), _public("mlflow://h:1/ab")
    ('mlflow://me:***@mlflow.lab:5000/ab', 'mlflow://h:1/ab')
    """
    u = urllib.parse.urlsplit(url)
    if u.password is None:
        return url
    netloc = f"{u.username}:***@{u.netloc.rpartition('@')[2]}"
    return urllib.parse.urlunsplit(u._replace(netloc=netloc))


# --- the client --------------------------------------------------------------------------------
def _reason(message: str) -> str:
    """The cause in an error the client wraps around requests' (``[Errno 111] Connection
    refused``), else its first line, shortened."""
    m = re.search(r"\[Errno -?\d+\] ([^'\"\)\]]+)", message)
    if m:
        return m.group(1).strip().lower()
    first = message.strip().splitlines()[0] if message.strip() else "no message"
    first = first.split(". Response body:", 1)[0]
    return first[:200] + ("..." if len(first) > 200 else "")


def _problem(err: Exception, where: ServerURL) -> str:
    code = str(getattr(err, "error_code", "") or "")
    message = str(getattr(err, "message", "") or err)
    server = f"the MLflow server at {_bare(where.tracking_uri)}"
    if code == "ENDPOINT_NOT_FOUND":
        return (
            f"{server} does not answer as an MLflow tracking server (HTTP 404 on its REST API): "
            "another service on that port, or a --static-prefix the URL lacks (paste the UI's "
            "link: http://HOST:PORT/PREFIX/#/experiments/...)"
        )
    if code in ("UNAUTHENTICATED", "PERMISSION_DENIED") or re.search(r"\b40[13]\b", message):
        return (
            f"{server} refused the request ({code or 'HTTP 401/403'}): set "
            "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, or MLFLOW_TRACKING_TOKEN"
        )
    if "timeout" in message.lower() or "timed out" in message.lower():
        limit = os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT", str(DEFAULT_TIMEOUT_S))
        return f"{server} did not answer within {limit} s (MLFLOW_HTTP_REQUEST_TIMEOUT sets it)"
    if "Max retries exceeded" in message or "Failed to establish" in message:
        return f"cannot reach {server} ({_reason(message)})"
    return f"{server}: {code + ': ' if code else ''}{_reason(message)}"


@contextlib.contextmanager
def _client(where: ServerURL) -> Iterator[Any]:
    """An ``MlflowClient`` for the server, with bounded waits (module docstring); the client's
    errors become one-line InputErrors naming the URL."""
    try:
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise MissingExtraError("reading an MLflow tracking server", "mlflow", "mlflow") from None
    with _Limits.lock:  # reads in several threads: the limits stay until the last one ends
        if _Limits.readers == 0:
            _Limits.names = [k for k in _LIMITS if k not in os.environ]
            os.environ.update({k: _LIMITS[k] for k in _Limits.names})
        _Limits.readers += 1
    try:
        yield MlflowClient(tracking_uri=where.tracking_uri)
    except MlflowException as e:
        raise InputError(where.url, _problem(e, where)) from None
    finally:
        with _Limits.lock:
            _Limits.readers -= 1
            if _Limits.readers == 0:
                for k in _Limits.names:
                    os.environ.pop(k, None)


def _missing(err: Exception) -> bool:
    return str(getattr(err, "error_code", "")) in ("RESOURCE_DOES_NOT_EXIST", "NOT_FOUND")


def _get_run(client: Any, where: ServerURL, run_id: str, must: bool = True) -> Any:
    """The run ``run_id``; None when the server has none and not ``must`` (else InputError)."""
    from mlflow.exceptions import MlflowException

    try:
        return client.get_run(run_id)
    except MlflowException as e:
        if not (_missing(e) or "INVALID_PARAMETER_VALUE" in str(getattr(e, "error_code", ""))):
            raise
        if must:
            raise InputError(where.url, f"the MLflow server has no run {run_id!r}") from None
        return None


def _paged(search: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
    """Every item an MLflow ``search_*`` call finds, page after page (:data:`_PAGE` a page)."""
    token = None
    while True:
        page = search(*args, max_results=_PAGE, page_token=token, **kwargs)
        yield from page
        token = page.token
        if not token:
            return


def _experiments(client: Any) -> list[Any]:
    from mlflow.entities import ViewType

    return list(_paged(client.search_experiments, view_type=ViewType.ACTIVE_ONLY))


def _experiment_id(client: Any, where: ServerURL) -> str:
    """The id of the experiment the URL names (an id, else a name); InputError listing the
    server's experiments when it has no such one."""
    from mlflow.exceptions import MlflowException

    name = str(where.experiment)
    if name.isdigit():
        try:
            return str(client.get_experiment(name).experiment_id)
        except MlflowException as e:
            if not _missing(e):
                raise
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return str(exp.experiment_id)
    known = [f"{e.experiment_id} ({e.name})" for e in _experiments(client)]
    shown = ", ".join(known[:_LISTED]) + (
        f" and {len(known) - _LISTED} more" if len(known) > _LISTED else ""
    )
    raise InputError(
        where.url, f"the MLflow server has no experiment {name!r} (experiments: {shown or 'none'})"
    )


def _run_infos(client: Any, experiment_ids: list[str]) -> list[RunInfo]:
    """Every run of the experiments (deleted ones too, marked not active), oldest first."""
    from mlflow.entities import ViewType

    if not experiment_ids:
        return []
    out = []
    order = ["attributes.start_time ASC"]
    for r in _paged(client.search_runs, experiment_ids, run_view_type=ViewType.ALL, order_by=order):
        i = r.info
        active = i.lifecycle_stage != "deleted"
        out.append(RunInfo(i.run_id, i.run_name or None, i.start_time or 0, active, i.run_id))
    return out


def _server_runs(client: Any, where: ServerURL) -> list[RunInfo]:
    if where.experiment is not None:
        return _run_infos(client, [_experiment_id(client, where)])
    return _run_infos(client, [str(e.experiment_id) for e in _experiments(client)])


# --- entry points -----------------------------------------------------------------------------
def _the_run(client: Any, where: ServerURL, run: str | None, builder: RunBuilder) -> Any:
    """The MLflow run to read: the URL's, else ``run`` (an id, else a name within the URL's
    experiment), else the experiment's most recent active one (:func:`_choose`)."""
    if where.run_id is not None:
        if run is not None and run != where.run_id:
            raise InputError(where.url, f"the URL names run {where.run_id}; --run names {run!r}")
        return _get_run(client, where, where.run_id)
    if run is not None:
        got = _get_run(client, where, run, must=False)
        if got is not None:
            return got
    if where.experiment is None:
        if run is not None:
            raise InputError(
                where.url,
                f"the MLflow server has no run with id {run!r} (a run name needs its "
                "experiment: mlflow://HOST:PORT/experiments/EXPERIMENT)",
            )
        known = [f"{e.experiment_id} ({e.name})" for e in _experiments(client)][:_LISTED]
        raise InputError(
            where.url,
            f"name a run or an experiment ({_FORMS}); experiments here: "
            + (", ".join(known) or "none"),
        )
    chosen = choose(where.url, _server_runs(client, where), run, builder)  # type: ignore[arg-type]
    return _get_run(client, where, chosen.run_id)


def load_server(
    url: str | ServerURL, progress: Progress | None = None, *, run: str | None = None
) -> Run:
    """Read one run of an MLflow tracking server into a ``Run`` (module docstring).

    The run's ``manifest.source`` is its page in the MLflow UI
    (``http://HOST:PORT/#/experiments/ID/runs/RUN_ID``), a URL this reader takes too.

    Args:
        url: ``mlflow://HOST:PORT/RUN_ID``, an experiment's URL, or the UI's link.
        progress: not called: ``progress`` counts bytes, and a server does not say how many
            a run's histories hold before they are read.
        run: the run (its id, or its name within the URL's experiment), for a URL that names
            an experiment or the server.
    """
    where = parse_url(url) if isinstance(url, str) else url
    builder = RunBuilder(Manifest(source=where.url, step_key="the MLflow step column"))
    with _client(where) as client:
        mr = _the_run(client, where, run, builder)
        info, data = mr.info, mr.data
        read = RunInfo(info.run_id, info.run_name or None, 0, True, None)
        # the run's page in the MLflow UI: what the report names, one click from the browser
        ui = f"{_bare(where.tracking_uri)}/#/experiments/{info.experiment_id}/runs/{info.run_id}"
        builder.manifest.source = ui
        if info.lifecycle_stage == "deleted":
            builder.warn(f"{where.url}: MLflow run {read.label()} is deleted (in the trash)")
        add_params(builder, {str(k): v for k, v in (data.params or {}).items()})
        keys = sorted(data.metrics or {})

        def history(key: str) -> list[tuple[int, int, str, float]]:
            return [
                (m.step, m.timestamp, key, m.value)
                for m in client.get_metric_history(info.run_id, key)
            ]

        rows: list[tuple[int, int, str, float]] = []
        with ThreadPoolExecutor(max_workers=max(1, min(_WORKERS, len(keys)))) as pool:
            for got in pool.map(history, keys):
                rows.extend(got)
    # as the SQLite store is read: ORDER BY step, timestamp (the latest value at a step wins)
    rows.sort(key=lambda r: (r[0], r[1]))
    n = add_sorted_rows(builder, ((k, v, s, False) for s, _, k, v in rows))
    out = finish(builder, where.url, read, n)
    out.manifest.format = "mlflow"
    return out


def list_server_runs(url: str | ServerURL) -> list[dict[str, Any]]:
    """The runs the URL names, without reading their metrics: ``[{"name", "id", "active"}]``
    (one for a run's URL; an experiment's; every active experiment's for the server)."""
    where = parse_url(url) if isinstance(url, str) else url
    with _client(where) as client:
        if where.run_id is not None:
            i = _get_run(client, where, where.run_id).info
            runs = [RunInfo(i.run_id, i.run_name or None, 0, i.lifecycle_stage != "deleted", None)]
        else:
            runs = _server_runs(client, where)
    return [r.entry() for r in runs]
