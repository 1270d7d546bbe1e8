"""kiln.compile's mode and options as typed configs per stage: presets for the modes, an
error naming the valid keys for anything unknown."""

import pytest

import kiln
from kiln._stage_configs import StageConfigs, option_names, stage_configs


def _f(x):
    return x + 1


def test_no_mode_and_no_options_give_the_defaults():
    assert stage_configs() == stage_configs("default") == StageConfigs()
    configs = stage_configs(fullgraph=True, dynamic=True)
    assert configs.capture.fullgraph and configs.capture.dynamic is True


@pytest.mark.parametrize(("mode", "cudagraphs", "max_autotune"), [
    ("reduce-overhead", True, False), ("max-autotune", True, True), ("max-autotune-no-cudagraphs", False, True)])
def test_each_mode_is_a_preset(mode, cudagraphs, max_autotune):
    inductor = stage_configs(mode).inductor
    assert (inductor.cudagraphs, inductor.max_autotune) == (cudagraphs, max_autotune)


def test_options_set_fields_of_their_stage():
    configs = stage_configs(options={"aotgrad.partitioner": "save_all", "inductor.max_autotune": True})
    assert configs.aotgrad.partitioner == "save_all" and configs.inductor.max_autotune
    assert not configs.inductor.cudagraphs


def test_an_unknown_option_is_an_error_naming_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown option 'max_autotune'") as info:
        kiln.compile(_f, backend="eager", options={"max_autotune": True})
    message = str(info.value)
    assert "did you mean 'inductor.max_autotune'" in message
    assert all(name in message for name in option_names())
    with pytest.raises(ValueError, match=r"unknown option 'capture\.fullgraph'"):
        kiln.compile(_f, backend="eager", options={"capture.fullgraph": True})  # an argument, not an option


def test_a_bad_value_is_an_error():
    with pytest.raises(ValueError, match=r"'aotgrad\.partitioner' must be one of 'min_cut', 'save_all'"):
        kiln.compile(_f, backend="eager", options={"aotgrad.partitioner": "greedy"})
    with pytest.raises(ValueError, match=r"'inductor\.cudagraphs' must be a bool, got 1"):
        kiln.compile(_f, backend="eager", options={"inductor.cudagraphs": 1})
    with pytest.raises(TypeError, match="options must be a dict"):
        kiln.compile(_f, backend="eager", options=[("inductor.cudagraphs", True)])


def test_mode_and_options_exclude_each_other():
    with pytest.raises(ValueError, match="either mode or options"):
        kiln.compile(_f, backend="eager", mode="max-autotune", options={"inductor.cudagraphs": False})
    with pytest.raises(ValueError, match=r"unknown mode 'fastest'.*reduce-overhead"):
        kiln.compile(_f, backend="eager", mode="fastest")
