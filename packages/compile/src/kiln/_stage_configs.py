"""Stage configs: what ``kiln.compile``'s ``mode`` and ``options`` mean, as one typed, frozen
config per stage of the pipeline.

``stage_configs(mode, options, fullgraph=, dynamic=)`` is called once, by ``kiln.compile``,
and its result travels with every frame's ``CompileContext`` (``context.configs``); a stage
reads its own config there and nothing else (no config read from the environment, no global).

- ``capture`` (``CaptureConfig``): the frontend's, from ``kiln.compile``'s own arguments
  (``fullgraph``, ``dynamic``).
- ``aotgrad`` (``kiln.aotgrad.AotgradConfig``) and ``inductor``
  (``kiln.inductor.InductorConfig``): each owned by its package; this module only builds them.

``options`` keys are ``"<stage>.<field>"`` (``{"aotgrad.partitioner": "save_all"}``); an
unknown key, or a value of the wrong type or outside a field's choices, is a ValueError
naming the valid ones. A ``mode`` is a preset of those fields (``MODE_PRESETS``); as under
torch.compile, ``mode`` and ``options`` exclude each other.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kiln.aotgrad import AotgradConfig
from kiln.inductor import InductorConfig

__all__ = ["DEFAULT_CONFIGS", "MODE_PRESETS", "AotgradConfig", "CaptureConfig", "InductorConfig", "StageConfigs",
           "stage_configs"]


@dataclass(frozen=True, slots=True)
class CaptureConfig:
    """The frontend's (kiln.symexec and the policy around it)."""

    fullgraph: bool = field(default=False, metadata={
        "help": "a graph break in the compiled function is an error (kiln.Unsupported)"})
    dynamic: bool | None = field(default=None, metadata={
        "help": "None: sizes and numbers become dynamic when they change; True: dynamic "
                "from the first compile; False: everything specialized"})


@dataclass(frozen=True, slots=True)
class StageConfigs:
    """One config per stage: ``capture``, ``aotgrad``, ``inductor``."""

    capture: CaptureConfig = CaptureConfig()
    aotgrad: AotgradConfig = field(default_factory=AotgradConfig)
    inductor: InductorConfig = field(default_factory=InductorConfig)


DEFAULT_CONFIGS = StageConfigs()  # no mode, no options (frozen: shared freely)

# The stages whose fields ``options`` may set (the frontend's come from kiln.compile's arguments).
_OPTION_STAGES: dict[str, type] = {"aotgrad": AotgradConfig, "inductor": InductorConfig}

MODE_PRESETS: dict[str | None, dict[str, Any]] = {
    None: {},
    "default": {},
    "reduce-overhead": {"inductor.cudagraphs": True},
    "max-autotune": {"inductor.max_autotune": True, "inductor.cudagraphs": True},
    "max-autotune-no-cudagraphs": {"inductor.max_autotune": True},
}


def option_names() -> list[str]:
    """Every valid ``options`` key."""
    return [f"{stage}.{name}" for stage in _OPTION_STAGES for name in _fields(stage)]


def stage_configs(mode: str | None = None, options: Mapping[str, Any] | None = None, *,
                  fullgraph: bool = False, dynamic: bool | None = None) -> StageConfigs:
    """The stage configs for ``kiln.compile``'s arguments; a ValueError for an unknown mode,
    an unknown option key or a bad value (naming the valid ones), and for ``mode`` and
    ``options`` together."""
    if mode not in MODE_PRESETS:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(m for m in MODE_PRESETS if m)}")
    if mode is not None and options:
        raise ValueError("pass either mode or options, not both (as torch.compile)")
    if options is not None and not isinstance(options, Mapping):
        raise TypeError(f"options must be a dict, got {type(options).__name__}")
    chosen = {**MODE_PRESETS[mode], **(options or {})}
    by_stage: dict[str, dict[str, Any]] = {stage: {} for stage in _OPTION_STAGES}
    for key, value in chosen.items():
        stage, _, name = key.partition(".") if isinstance(key, str) else ("", "", "")
        if stage not in by_stage or name not in _fields(stage):
            raise ValueError(f"unknown option {key!r}{_suggestion(key)}; valid options: {', '.join(option_names())}")
        _check_value(key, _fields(stage)[name], value)
        by_stage[stage][name] = value
    return StageConfigs(CaptureConfig(fullgraph=fullgraph, dynamic=dynamic),
                        **{stage: cls(**by_stage[stage]) for stage, cls in _OPTION_STAGES.items()})


def _fields(stage: str) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(_OPTION_STAGES[stage])}


def _check_value(key: str, f: dataclasses.Field, value: Any) -> None:
    choices = f.metadata.get("choices")
    if choices is not None:
        if value not in choices:
            raise ValueError(f"option {key!r} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    elif type(value) is not type(f.default):
        raise ValueError(f"option {key!r} must be a {type(f.default).__name__}, got {value!r}")


def _suggestion(key: Any) -> str:
    close = difflib.get_close_matches(str(key), option_names(), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
