"""rlvitals.toml / [tool.rlvitals]: parsing, search, strict validation with useful errors."""

from __future__ import annotations

import pytest

from rlvitals.doctor import DoctorConfig
from rlvitals.doctor.config import find_config, load_config
from rlvitals.errors import InputError


def _write(path, text):
    path.write_text(text)
    return path


def test_rlvitals_toml(tmp_path):
    p = _write(
        tmp_path / "rlvitals.toml",
        """
select = ["collapse"]
ignore = ["ACR_VOLATILE"]
fail-on = "critical"
tau = 1e-5
window = 10

[detectors.ADV_COLLAPSE]
collapse_below = 0.05
sustain = 3

[detectors.ACR_STALL]
enabled = false
""",
    )
    c = load_config(p)
    assert isinstance(c, DoctorConfig)
    assert c.select == ["collapse"] and c.ignore == ["ACR_VOLATILE"] and c.fail_on == "critical"
    assert c.tau == 1e-5 and c.window == 10
    assert c.knobs == {"ADV_COLLAPSE": {"collapse_below": 0.05, "sustain": 3}}
    assert c.disabled == ["ACR_STALL"] and c.source == str(p)


def test_pyproject_tool_table_and_search_upward(tmp_path):
    (tmp_path / ".git").mkdir()
    _write(
        tmp_path / "pyproject.toml",
        """
[project]
name = "x"

[tool.rlvitals]
fail_on = "info"

[tool.rlvitals.detectors.DEGENERATE_GROUPS]
acr_above = 0.9
""",
    )
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    assert find_config(sub) == tmp_path / "pyproject.toml"
    c = load_config(start_dir=sub)
    assert c.fail_on == "info" and c.knobs == {"DEGENERATE_GROUPS": {"acr_above": 0.9}}
    # a dedicated file closer to the start wins
    _write(sub / "rlvitals.toml", 'fail-on = "never"\n')
    assert load_config(start_dir=sub).fail_on == "never"


def test_no_config_gives_defaults_and_search_stops_at_project_root(tmp_path):
    (tmp_path / "proj" / ".git").mkdir(parents=True)
    _write(tmp_path / "rlvitals.toml", 'fail-on = "never"\n')  # outside the project
    c = load_config(start_dir=tmp_path / "proj")
    assert c == DoctorConfig()
    # a pyproject without [tool.rlvitals] is not a config
    _write(tmp_path / "proj" / "pyproject.toml", "[project]\nname = 'x'\n")
    assert find_config(tmp_path / "proj") is None


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("selekt = ['ALL']\n", r"unknown key\(s\) selekt; valid: select, ignore, fail-on"),
        ("fail-on = 'sometimes'\n", r"fail-on 'sometimes' is not one of info, warn"),
        ("select = ['NOT_A_DETECTOR']\n", r"unknown detector 'NOT_A_DETECTOR'.*ADV_COLLAPSE"),
        ("[detectors.NOPE]\nx = 1\n", r"\[detectors.NOPE\]: unknown detector 'NOPE'; valid:"),
        (
            "[detectors.ADV_COLLAPSE]\ncolapse_below = 1\n",
            r"\[detectors.ADV_COLLAPSE\]: unknown knob\(s\) colapse_below; valid: enabled, "
            r"collapse_below, healthy_early, sustain",
        ),
        ("[detectors.ADV_COLLAPSE]\nsustain = 2.5\n", r"knob sustain must be an integer, got 2.5"),
        (
            "[detectors.ADV_COLLAPSE]\ncollapse_below = 'low'\n",
            r"knob collapse_below must be a finite number, got 'low'",
        ),
        ("[detectors.ADV_COLLAPSE]\nenabled = 'no'\n", r"'enabled' must be true or false"),
        ("tau = -1\n", r"tau must be a finite number >= 0, got -1"),
        ("window = 0\n", r"window must be an integer >= 1, got 0"),
        ("select = 3\n", r"'select' must be a list of detector IDs, got 3"),
        ("detectors = 3\n", r"'detectors' must be a table"),
        ("x = [\n", r"invalid TOML"),
        ("metrics = 3\n", r"'metrics' must be a table"),
        (
            "[metrics]\n'my/r' = 'reward_avg'\n",
            r"\[metrics\]: metric name 'my/r' -> 'reward_avg': no such metric \(closest: .*reward_mean",
        ),
    ],
)
def test_errors_name_the_file_and_list_valid_values(tmp_path, text, pattern):
    p = _write(tmp_path / "rlvitals.toml", text)
    with pytest.raises(InputError, match=pattern) as e:
        load_config(p)
    assert str(e.value).startswith(str(p))


def test_int_knob_value_for_float_knob_is_accepted(tmp_path):
    p = _write(tmp_path / "rlvitals.toml", "[detectors.ADV_COLLAPSE]\ncollapse_below = 0\n")
    c = load_config(p)
    assert c.knobs["ADV_COLLAPSE"]["collapse_below"] == 0.0
    assert isinstance(c.knobs["ADV_COLLAPSE"]["collapse_below"], float)


def test_select_as_comma_string_and_missing_file(tmp_path):
    p = _write(tmp_path / "rlvitals.toml", 'select = "ADV_COLLAPSE, DEGENERATE_GROUPS"\n')
    assert load_config(p).select == ["ADV_COLLAPSE", "DEGENERATE_GROUPS"]
    with pytest.raises(InputError, match="no such config file"):
        load_config(tmp_path / "nope.toml")


def test_config_changes_the_diagnosis(tmp_path):
    from rlvitals.doctor import diagnose
    from rlvitals_corpus import generate, to_run

    run = to_run(generate("collapse_floor", seed=3, view="zero_std_frac", steps=200, onset=100))
    assert diagnose(run).by_id("DEGENERATE_GROUPS")
    p = _write(tmp_path / "rlvitals.toml", "[detectors.DEGENERATE_GROUPS]\nenabled = false\n")
    assert not diagnose(run, load_config(p)).by_id("DEGENERATE_GROUPS")


def test_metrics_table_maps_custom_keys_onto_metrics(tmp_path):
    from rlvitals.doctor import diagnose
    from rlvitals.recording.run import RunBuilder

    b = RunBuilder()
    for step in range(1, 81):  # zero-variance groups jump from 10% to 95% at step 41
        b.add_row(
            step, {"my/zero": 0.1 if step <= 40 else 0.95, "my/pass": 0.6, "eval_my/pass": 0.5}
        )
    run = b.build()
    assert not diagnose(run).findings  # nothing known: nothing judged
    p = _write(
        tmp_path / "rlvitals.toml",
        '[metrics]\n"my/zero" = "frac_reward_zero_std"\n"my/pass" = "reward_mean"\n',
    )
    cfg = load_config(p)
    assert cfg.metrics == {"my/zero": "zero_std_frac", "my/pass": "reward_mean"}
    d = diagnose(run, cfg)
    assert d.by_id("DEGENERATE_GROUPS")[0].onset_step == 41
    assert d.run.unknown_keys == [] and "eval/reward_mean" in d.run.eval_series
    assert "my/zero" in run.series  # the run handed in is not modified
    pp = _write(tmp_path / "pyproject.toml", '[tool.rlvitals.metrics]\n"my/zero" = "acr"\n')
    assert load_config(pp).metrics == {"my/zero": "acr"}


def test_a_mapped_key_fills_only_the_missing_steps_and_absent_keys_are_noted():
    import numpy as np

    from rlvitals.recording.run import RunBuilder

    b = RunBuilder()
    b.add_row(1, {"reward": 0.2, "my/r": 0.9})
    b.add_row(2, {"my/r": 0.7})
    run = b.build().with_metric_names({"my/r": "reward_mean", "typo": "kl"})
    np.testing.assert_array_equal(run.series["reward_mean"], [0.2, 0.7])
    assert "my/r" not in run.series and any("'typo'" in w for w in run.warnings)
