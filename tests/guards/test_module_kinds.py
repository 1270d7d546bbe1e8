"""ModuleStructureMatch without torch: any object laid out like an nn.Module (the real
nn.Module case is in test_torch_module_kinds.py)."""

from kiln.guards import GuardSet, LocalSource, ModuleStructureMatch, evaluate

M = LocalSource("m")


class Layout:
    """The attributes nn.Module keeps its structure in."""

    def __init__(self, modules=(), parameters=(), buffers=(), training=True):
        self.training = training
        self._modules = {name: None for name in modules}
        self._parameters = {name: None for name in parameters}
        self._buffers = {name: None for name in buffers}


class OtherLayout(Layout):
    pass


def test_holds_on_traced_structure():
    m = Layout(modules=["a"], parameters=["w", "b"], buffers=[])
    guard = ModuleStructureMatch.from_module(M, m)
    assert guard.modules == ("a",) and guard.parameters == ("w", "b") and guard.buffers == ()
    check = GuardSet([guard]).compile()
    assert check({"m": m})
    assert check({"m": Layout(modules=["a"], parameters=["w", "b"])})
    assert evaluate(guard, {"m": m}) is None


def test_fails_on_each_change():
    m = Layout(modules=["a"], parameters=["w", "b"], buffers=["r"])
    guard = ModuleStructureMatch.from_module(M, m)
    check = GuardSet([guard]).compile()
    name = f"{Layout.__module__}.Layout"
    cases = [
        (OtherLayout(["a"], ["w", "b"], ["r"]),
         f"module L['m'] type: expected {name}, got {OtherLayout.__module__}.OtherLayout"),
        (Layout(["a"], ["w", "b"], ["r"], training=False),
         "module L['m'] training: expected True, got False"),
        (Layout([], ["w", "b"], ["r"]), "module L['m'] modules names: expected ['a'], got []"),
        (Layout(["a"], ["w"], ["r"]),
         "module L['m'] parameters names: expected ['w', 'b'], got ['w']"),
        (Layout(["a"], ["w", "c"], ["r"]),
         "module L['m'] parameters names: expected ['w', 'b'], got ['w', 'c']"),
        (Layout(["a"], ["w", "b", "c"], ["r"]),
         "module L['m'] parameters names: expected ['w', 'b'], got ['w', 'b', 'c']"),
        (Layout(["a"], ["w", "b"], []), "module L['m'] buffers names: expected ['r'], got []"),
    ]
    for value, text in cases:
        assert check({"m": value}) is False
        assert evaluate(guard, {"m": value}) == text


def test_empty_parts_detect_additions():
    m = Layout()
    guard = ModuleStructureMatch.from_module(M, m)
    check = GuardSet([guard]).compile()
    assert check({"m": m})
    m._buffers["new"] = None
    assert not check({"m": m})
    assert evaluate(guard, {"m": m}) == "module L['m'] buffers names: expected [], got ['new']"


def test_training_must_be_the_bool():
    m = Layout()
    guard = ModuleStructureMatch.from_module(M, m)
    m.training = 1
    assert not GuardSet([guard]).compile()({"m": m})
    assert evaluate(guard, {"m": m}) == "module L['m'] training: expected True, got 1"


def test_hostile_module_objects(hostile_values):
    guard = ModuleStructureMatch.from_module(M, Layout())
    check = GuardSet([guard]).compile()
    for value in hostile_values:
        assert check({"m": value}) is False
        assert evaluate(guard, {"m": value}) is not None


def test_names_are_sets_and_order_is_a_separate_guard():
    from kiln.guards import AttrSource, DictKeysMatch

    m = Layout(modules=["a", "b"], parameters=["w", "b"])
    guard = ModuleStructureMatch.from_module(M, m)
    reordered = Layout(modules=["b", "a"], parameters=["b", "w"])
    assert GuardSet([guard]).compile()({"m": reordered})
    order = DictKeysMatch(AttrSource(M, "_modules"), tuple(m._modules))
    check = GuardSet([guard, order]).compile()
    assert check({"m": m})
    assert not check({"m": reordered})
    assert GuardSet([guard, order]).explain({"m": reordered}) == (
        "L['m']._modules keys: expected ('a', 'b'), got ('b', 'a')")


def test_ordered_structure_pins_the_order():
    m = Layout(modules=["a", "b"], parameters=["w", "v"])
    guard = ModuleStructureMatch.from_module(M, m, ordered=True)
    check = GuardSet([guard]).compile()
    assert check({"m": Layout(modules=["a", "b"], parameters=["w", "v"])})
    for changed, text in (
        (Layout(modules=["b", "a"], parameters=["w", "v"]),
         "module L['m'] modules names: expected ['a', 'b'], got ['b', 'a']"),
        (Layout(modules=["a", "b"], parameters=["v", "w"]),
         "module L['m'] parameters names: expected ['w', 'v'], got ['v', 'w']"),
        (Layout(modules=["a"], parameters=["w", "v"]),
         "module L['m'] modules names: expected ['a', 'b'], got ['a']"),
    ):
        assert check({"m": changed}) is False
        assert evaluate(guard, {"m": changed}) == text
    assert guard != ModuleStructureMatch.from_module(M, m)
    assert guard.describe().endswith(", in order")
