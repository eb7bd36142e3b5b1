"""Console logs captured with colour codes and through Ray (issue 25.2): every console importer
reads them as it reads the plain log, and its pre-check passes whatever its sniffer takes.

The fixtures are the plain console writers of ``tests/_format_producers.py`` with what Ray's
log monitor adds to each line (``ray/_private/worker.py`` ``print_worker_logs``: dim + colour,
``(name pid=N)`` or ``(name pid=N, ip=A)``, reset, a space) and loguru's colours (SkyRL).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import rlvitals_tests_format_producers as F  # loaded by conftest.py

from rlvitals.importers import SNIFF_BYTES, get_importer, load, sniff
from rlvitals.importers._catalogue import CATALOGUE
from rlvitals.importers._console_lines import clean_bytes, split_ray_prefix

_OLD_PREFIX = re.compile(r"^(?:\x1b\[[0-9;]*m)*\([^()\n]*pid=\d+\)(?:\x1b\[[0-9;]*m)* ")


def ray_prefix(name: str, ip: bool) -> str:
    where = ", ip=10.0.0.7" if ip else ""
    return f"\x1b[2m\x1b[36m({name} pid=2411{where})\x1b[0m "


def through_ray(path: Path, name: str, ip: bool) -> Path:
    """Every line of ``path`` as Ray relays it (a prefix the writer printed is replaced)."""
    lines = path.read_bytes().decode().split("\n")
    out = [(ray_prefix(name, ip) + _OLD_PREFIX.sub("", line)) if line else line for line in lines]
    path.write_text("\n".join(out), encoding="utf-8")
    return path


RUN = F.simulate(30)
WRITERS = {
    "skyrl_console": ("skyrl_entrypoint", lambda p: F.write_skyrl(p, RUN, ansi=True)),
    "slime_console": ("RolloutManager", lambda p: F.write_slime(p, RUN)),
    "verl_console": ("TaskRunner", lambda p: F.write_verl_console(p, RUN)),
    "openrlhf_console": ("PPORayActor", lambda p: F.write_openrlhf(p, RUN)),
    "trl_console": ("RayTrainWorker", lambda p: F.write_trl_console(p, RUN)),
}


@pytest.mark.parametrize("ip", [False, True], ids=["pid", "pid+ip"])
@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_every_console_importer_reads_colour_and_ray_prefixes(tmp_path, fmt, ip):
    name, write = WRITERS[fmt]
    plain = load(write(tmp_path / "plain.log"))
    p = through_ray(write(tmp_path / "ray.log"), name, ip)
    assert "\x1b[" in p.read_text() and f"({name} pid=2411" in p.read_text()
    assert sniff(p).name == fmt
    head = p.read_bytes()[:SNIFF_BYTES]
    for other, (_, pre, _) in CATALOGUE.items():  # a pre-check never rejects what is sniffed
        if get_importer(other).sniff(p, head) > 0:
            assert pre(p, head), f"{other}'s pre-check rejects a file its sniffer takes"
    r = load(p)
    assert r.manifest.format == fmt
    assert r.steps.tolist() == plain.steps.tolist()
    assert sorted(r.series) == sorted(plain.series)
    for k, col in plain.series.items():
        assert np.allclose(r.series[k], col, equal_nan=True), k
    assert r.manifest.group_size == plain.manifest.group_size


def test_skyrl_dict_lines_of_other_processes_amid_a_step_are_skipped(tmp_path):
    """Through Ray another actor's lines land between the lines of one pretty-printed dict;
    they carry another prefix and are not part of the step."""
    p = through_ray(F.write_skyrl(tmp_path / "sky.log", RUN, ansi=True), "skyrl_entrypoint", True)
    lines = p.read_text().split("\n")
    noisy: list[str] = []
    for line in lines:
        noisy.append(line)
        if "'policy/grad_norm'" in line:
            noisy.append(ray_prefix("AsyncVLLMInferenceEngine", True) + "INFO 12-01 throughput 9.1")
            noisy.append("\x1b[33m(raylet)\x1b[0m [2026-12-01] spilled 3 objects")
    p.write_text("\n".join(noisy))
    r = load(p)
    assert r.steps.tolist() == list(range(1, 31))
    assert np.allclose(r.series["grad_norm"], 0.3)


def test_a_ray_repeat_suffix_does_not_hide_a_step_line(tmp_path):
    p = F.write_slime(tmp_path / "slime.log", RUN)
    text = p.read_text().replace("}\n", "} \x1b[32m[repeated 2x across cluster]\x1b[0m\n", 3)
    p.write_text(text)
    assert load(p).steps.tolist() == list(range(30))


def test_clean_bytes_and_split_ray_prefix():
    raw = b"\x1b[2m\x1b[36m(W pid=1, ip=10.0.0.2)\x1b[0m a\n  (pid=22) b\n(not ray) c\n"
    assert clean_bytes(raw) == b"a\nb\n(not ray) c\n"
    assert clean_bytes(b"plain") == b"plain"
    assert split_ray_prefix("(W pid=1) (x) y") == ("(W pid=1)", "(x) y")
    assert split_ray_prefix("(x) y") == ("", "(x) y")


def test_a_dict_coloured_token_by_token_is_read_and_passes_the_pre_check(tmp_path):
    """rich-style highlighting puts codes between ``{`` and ``'loss'``: nothing of the plain
    marks is left in the bytes, and the pre-check must still pass what the sniffer takes."""

    def rich(logs: dict) -> str:
        items = ", ".join(f"\x1b[32m{k!r}\x1b[0m: \x1b[36m{v!r}\x1b[0m" for k, v in logs.items())
        return "\x1b[1m{\x1b[0m" + items + "\x1b[1m}\x1b[0m"

    rows = [
        {"loss": "0.01", "reward": f"{0.1 * k:.4g}", "epoch": f"{k / 20:.4g}"} for k in range(1, 21)
    ]
    p = tmp_path / "rich.log"
    p.write_text("\n".join(rich(r) for r in rows) + "\n")
    head = p.read_bytes()[:SNIFF_BYTES]
    assert b"{'" not in head and b"trl" not in head
    assert get_importer("trl_console").sniff(p, head) > 0 and CATALOGUE["trl_console"][1](p, head)
    r = load(p)
    assert r.manifest.format == "trl_console" and r.n_steps == 20
    assert np.allclose(r.series["reward_mean"], [0.1 * k for k in range(1, 21)])


def test_skyrl_says_where_g_came_from(tmp_path):
    """The report's G source: SkyRL logs no G, its pass@n key names it."""
    from rlvitals.vitals import compute_vitals

    r = load(F.write_skyrl(tmp_path / "sky.log", RUN, g=4))
    assert r.manifest.group_size == 4
    assert compute_vitals(r).group_size_from == "the name of reward/avg_pass_at_{n}"
