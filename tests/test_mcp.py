"""``rlvitals mcp``: a real MCP client session over stdio against the server process.

The client is the official SDK's (``stdio_client`` + ``ClientSession``); the server is
``python -m rlvitals mcp``, spawned as an agent would. The tools must return what the library
returns (the doctor's JSON report is ``render(diagnosis, "json")``), and bad input must be a tool
error with the CLI's one line while the server goes on answering.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import rlvitals_tests_format_producers as F
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from rlvitals import _mcp
from rlvitals.cli import main
from rlvitals.errors import MissingExtraError

TOOLS = {"doctor", "inspect", "scan", "compare", "explain", "acr", "detectors"}
SESSION_TIMEOUT_S = 120
"""The whole session (start-up, seven calls, shutdown) takes ~3 s; a hung server fails here."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A TRL ``trainer_state.json`` whose groups saturate, and its per-group rewards."""
    d = tmp_path_factory.mktemp("mcp_runs")
    sim = F.simulate(steps=60, groups=8, g=4, seed=0)
    (d / "trl").mkdir()
    (d / "groups").mkdir()
    return {
        "dir": d,
        "trl": F.write_trl_state(d / "trl" / "trainer_state.json", sim),
        "groups": F.write_groups_jsonl(d / "groups" / "groups.jsonl", sim),
    }


def _session(cwd: Path, body) -> Any:
    """Run ``body(session)`` in a client session with a freshly spawned ``rlvitals mcp``."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "rlvitals", "mcp"], cwd=cwd)

    async def go():
        with anyio.fail_after(SESSION_TIMEOUT_S):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                return await body(s)

    return anyio.run(go)


def _json(result) -> Any:
    """A tool result's JSON: its structured content, which its text content must repeat."""
    assert not result.is_error, result.content[0].text
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def test_a_client_session_lists_the_tools_and_catalogues_and_runs_the_doctor(runs):
    from rlvitals.doctor import diagnose_path
    from rlvitals.report import render

    async def body(s: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {"tools": (await s.list_tools()).tools}
        out["resources"] = (await s.list_resources()).resources
        out["detectors"] = await s.read_resource("rlvitals://detectors")
        out["conditions"] = await s.read_resource("rlvitals://conditions")
        out["page"] = await s.read_resource("rlvitals://detectors/adv_collapse")
        t0 = time.perf_counter()
        out["doctor"] = await s.call_tool("doctor", {"path": str(runs["trl"])})
        out["doctor_s"] = time.perf_counter() - t0
        out["missing"] = await s.call_tool("doctor", {"path": str(runs["dir"] / "nope.jsonl")})
        # the server survived the bad input and answers the next call
        out["inspect"] = await s.call_tool("inspect", {"path": str(runs["trl"])})
        out["acr"] = await s.call_tool("acr", {"path": str(runs["groups"]), "every": 10})
        out["explain"] = await s.call_tool("explain", {"id": "NO_SUCH_DETECTOR"})
        out["cause"] = await s.call_tool("explain", {"id": "runaway-length"})
        out["compare"] = await s.call_tool(
            "compare", {"a": str(runs["trl"]), "b": str(runs["trl"])}
        )
        out["scan"] = await s.call_tool("scan", {"paths": [str(runs["dir"])], "cache": False})
        return out

    out = _session(runs["dir"], body)

    tools = {t.name: t for t in out["tools"]}
    assert set(tools) == TOOLS
    for t in tools.values():
        assert t.description and t.input_schema["type"] == "object", t.name
    assert set(tools["doctor"].input_schema["properties"]) >= {"path", "run", "group_size"}
    assert {str(r.uri) for r in out["resources"]} >= {
        "rlvitals://detectors",
        "rlvitals://conditions",
    }
    ids = [d["id"] for d in json.loads(out["detectors"].contents[0].text)["detectors"]]
    assert "ADV_COLLAPSE" in ids and "ACR_STALL" in ids
    conditions = json.loads(out["conditions"].contents[0].text)
    assert conditions["source"] == "conditions" and conditions["conditions"]
    assert all(c["id"] for c in conditions["conditions"])
    assert out["page"].contents[0].text.startswith("# ADV_COLLAPSE")

    # the doctor's JSON report, exactly as the library renders it
    report = _json(out["doctor"])
    assert report == json.loads(render(diagnose_path(runs["trl"]), "json"))
    assert report["run"]["format"] == "trl_state" and report["findings"]

    missing = out["missing"]
    assert missing.is_error and not missing.structured_content
    (line,) = missing.content[0].text.splitlines()
    assert "nope.jsonl: no such file or directory" in line

    assert _json(out["inspect"])["steps"]["count"] == 60
    acr = _json(out["acr"])
    assert acr["summary"]["steps"] == 60 and [r["step"] for r in acr["steps"]][:2] == [1, 11]
    explain = out["explain"]
    assert explain.is_error
    assert "unknown detector or condition 'NO_SUCH_DETECTOR'; detectors: " in (
        explain.content[0].text
    )
    assert "; conditions: " in explain.content[0].text
    cause = _json(out["cause"])  # a condition's page, as 'rlvitals explain' prints it
    assert cause["kind"] == "condition" and cause["id"] == "RUNAWAY_LENGTH"
    assert cause["page"].startswith("# RUNAWAY_LENGTH: ") and "Signs:" in cause["page"]
    assert _json(out["compare"])["first_divergence"] is None  # a run against itself
    assert len(_json(out["scan"])["runs"]) == 2
    assert out["doctor_s"] < 30


def test_tools_are_plain_functions_and_refuse_standard_input():
    """The library can call the tools; '-' (the server's protocol stream) is refused."""
    report = _mcp.doctor(example="collapse")
    assert report["schema"] >= 1 and report["worst"]
    assert _mcp.explain("adv-collapse")["id"] == "ADV_COLLAPSE"
    assert _mcp.explain("adv-collapse")["kind"] == "detector"
    for call in (
        lambda: _mcp.doctor(path="-"),
        lambda: _mcp.doctor(),
        lambda: _mcp.scan(paths=["-"]),
        lambda: _mcp.acr(example="collapse", every=0),
        lambda: _mcp.doctor(example="collapse", reward_range="one"),
    ):
        with pytest.raises(_mcp.ToolFailure) as e:
            call()
        assert "\n" not in str(e.value)


def test_conditions_are_the_catalogue_the_doctor_names():
    from rlvitals.conditions import CONDITIONS

    cat = _mcp.conditions_catalogue()
    assert cat["source"] == "conditions"
    assert [c["id"] for c in cat["conditions"]] == list(CONDITIONS)
    too_hard = next(c for c in cat["conditions"] if c["id"] == "TOO_HARD")
    assert too_hard["title"] == CONDITIONS["TOO_HARD"].title
    assert too_hard["signs"] == list(CONDITIONS["TOO_HARD"].signs)


def test_a_missing_mcp_package_names_the_pip_command(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mcp.server.mcpserver", None)
    with pytest.raises(MissingExtraError, match=r"pip install -e '\.\[mcp\]'"):
        _mcp.build_server()
    assert main(["mcp"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("rlvitals: error: rlvitals mcp needs the 'mcp' package")
        and "docs/install.md" in err
    )


def test_the_agents_page_lists_every_tool_with_its_arguments():
    import inspect

    text = (Path(__file__).resolve().parents[1] / "docs" / "agents.md").read_text()
    rows = {ln.split("|")[1].strip(" `"): ln for ln in text.splitlines() if ln.startswith("| `")}
    for fn in _mcp.TOOLS:
        row = rows.get(fn.__name__)
        assert row, f"docs/agents.md: no row for the tool {fn.__name__}"
        for name in inspect.signature(fn).parameters:
            assert f"`{name}`" in row, f"docs/agents.md: {fn.__name__} does not name {name}"
