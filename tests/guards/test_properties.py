"""Hypothesis: the compiled checker agrees with evaluating its guards one by one, on random
frames (including hostile objects), and guards built from a frame hold on that frame."""

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st

from kiln.guards import (
    AttrSource,
    DictKeysMatch,
    EqualsMatch,
    GuardSet,
    HasAttr,
    IdMatch,
    IsNone,
    ItemSource,
    LengthMatch,
    LocalSource,
    ModuleStructureMatch,
    NoAliasing,
    NoHasAttr,
    NotNone,
    ObjectAliasing,
    TypeMatch,
    evaluate,
)

NAMES = ("a", "b", "c")
ATTRS = ("p", "q")
KEYS = ("k", 0, 1)


class Box:
    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __repr__(self):
        return f"Box({self.__dict__})"


class Layout:
    """Laid out like an nn.Module (what ModuleStructureMatch reads)."""

    def __init__(self, training, modules, parameters):
        self.training = training
        self._modules = dict.fromkeys(modules)
        self._parameters = dict.fromkeys(parameters)
        self._buffers = {}

    def __repr__(self):
        return f"Layout({self.training}, {list(self._modules)}, {list(self._parameters)})"


class Hostile:
    def __getattr__(self, name):
        raise RuntimeError(name)

    def __eq__(self, other):
        raise RuntimeError("eq")

    def __len__(self):
        raise RuntimeError("len")

    __hash__ = object.__hash__


constants = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=True, width=16)
    | st.sampled_from(["", "x", "y"]) | st.sampled_from([b"", b"x"]),
    lambda inner: st.tuples(inner) | st.tuples(inner, inner),
    max_leaves=4,
)
names_lists = st.lists(st.sampled_from(["a", "b", "c"]), max_size=3, unique=True)
layouts = st.builds(Layout, st.booleans(), names_lists, names_lists)
values = st.recursive(
    constants | st.builds(Hostile) | layouts,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)
    | st.builds(lambda kw: Box(**kw), st.dictionaries(st.sampled_from(ATTRS), inner, max_size=2)),
    max_leaves=6,
)
frames = st.fixed_dictionaries({}, optional={n: values for n in NAMES})

roots = st.sampled_from([LocalSource(n) for n in NAMES])
sources = roots | st.builds(AttrSource, roots, st.sampled_from(ATTRS)) | st.builds(
    ItemSource, roots, st.sampled_from(KEYS))
types = st.sampled_from([int, float, str, bytes, bool, type(None), tuple, list, dict, Box, Hostile,
                         Layout])


def guard_strategy(pool):
    return st.one_of(
        st.builds(TypeMatch, sources, types),
        st.builds(EqualsMatch, sources, constants),
        st.builds(IsNone, sources),
        st.builds(NotNone, sources),
        st.builds(LengthMatch, sources, st.integers(0, 3)),
        st.builds(DictKeysMatch, sources, st.lists(st.sampled_from(KEYS), max_size=3,
                                                   unique=True).map(tuple)),
        st.builds(HasAttr, sources, st.sampled_from(ATTRS)),
        st.builds(NoHasAttr, sources, st.sampled_from(ATTRS)),
        st.builds(ObjectAliasing, sources, sources),
        st.builds(lambda s: NoAliasing(tuple(s)), st.lists(sources, min_size=2, max_size=6)),
        st.builds(IdMatch, sources, st.sampled_from(pool)),
        st.builds(ModuleStructureMatch.from_module, sources, layouts, ordered=st.booleans()),
    )


POOL = [None, True, Box(), (1,)]


@settings(max_examples=300, deadline=None)
@given(frame=frames, guards=st.lists(guard_strategy(POOL), max_size=8))
def test_compiled_checker_agrees_with_one_by_one(frame, guards):
    gs = GuardSet(guards)
    check = gs.compile()
    expected = all(evaluate(g, frame) is None for g in gs.ordered())
    assert check(frame) is expected
    assert (check.explain(frame) is None) is expected


def traced_guards(frame):
    """Guards a tracer would install for every value reachable one step from the frame."""
    out = []
    for name, value in frame.items():
        src = LocalSource(name)
        out.append(TypeMatch(src, type(value)))
        if isinstance(value, Hostile):
            out.append(IdMatch(src, value))
            continue
        with contextlib.suppress(TypeError):
            out.append(EqualsMatch(src, value))
        if type(value) in (list, dict, tuple):
            out.append(LengthMatch(src, len(value)))
        if type(value) is dict:
            out.append(DictKeysMatch(src, tuple(value)))
        if type(value) is Layout:
            out.append(ModuleStructureMatch.from_module(src, value))
        if type(value) is Box:
            for attr in ATTRS:
                out.append((HasAttr if hasattr(value, attr) else NoHasAttr)(src, attr))
        out.append(IsNone(src) if value is None else NotNone(src))
    return out


@settings(max_examples=200, deadline=None)
@given(frame=frames)
def test_traced_guards_hold_on_the_traced_frame(frame):
    gs = GuardSet(traced_guards(frame))
    check = gs.compile()
    assert check(frame), check.explain(frame)


def sample_function(a, b=1, *, c=2):
    return a + b + c


@settings(max_examples=100, deadline=None)
@given(frame=frames, defaults=st.sampled_from([None, (1,), (2,), ("x",)]))
def test_function_match_agrees_on_random_functions(frame, defaults):
    from kiln.guards import FunctionMatch

    def fn(a, b=1):
        return frame, a, b

    fn.__defaults__ = defaults
    guard = FunctionMatch.from_function(LocalSource("a"), fn)
    check = GuardSet([guard]).compile()
    for value in [fn, sample_function, *frame.values()]:
        trial = {"a": value}
        assert check(trial) is (evaluate(guard, trial) is None)
    assert check({"a": fn})
