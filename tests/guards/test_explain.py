from kiln.guards import (
    AttrSource,
    EqualsMatch,
    GuardSet,
    ItemSource,
    LocalSource,
    TypeMatch,
    evaluate,
    explain_all,
    explain_failure,
)


class Box:
    pass


class RaisingProperty:
    @property
    def value(self):
        raise ValueError("boom")


def test_fetch_failure_names_the_step_that_failed():
    src = AttrSource(AttrSource(LocalSource("self"), "cfg"), "eps")
    guard = EqualsMatch(src, 1.0)
    assert evaluate(guard, {}) == "L['self']: could not fetch (KeyError: 'self')"
    assert evaluate(guard, {"self": Box()}) == (
        "L['self'].cfg: could not fetch (AttributeError: 'Box' object has no attribute 'cfg')"
    )


def test_raising_property_is_reported_not_raised():
    guard = EqualsMatch(AttrSource(LocalSource("x"), "value"), 1)
    text = evaluate(guard, {"x": RaisingProperty()})
    assert text == "L['x'].value: could not fetch (ValueError: boom)"


def test_explain_failure_reports_first_in_check_order():
    gs = GuardSet([EqualsMatch(LocalSource("a"), 1), TypeMatch(LocalSource("b"), int)])
    # the type guard is cheaper, so it runs (and is reported) first
    assert explain_failure(gs, {"a": 2, "b": "x"}) == "L['b'] type: expected int, got str"
    assert explain_all(gs, {"a": 2, "b": "x"}) == [
        "L['b'] type: expected int, got str",
        "L['a'] == 1: expected 1, got 2",
    ]
    assert explain_all(gs, {"a": 1, "b": 0}) == []


def test_explain_accepts_plain_lists_and_items():
    guards = [EqualsMatch(ItemSource(LocalSource("d"), "k"), "v")]
    assert explain_failure(guards, {"d": {"k": "w"}}) == "L['d']['k'] == 'v': expected 'v', got 'w'"
    assert explain_failure(guards, {"d": {"k": "v"}}) is None


def test_explain_never_raises_on_bad_repr():
    class BadRepr:
        def __repr__(self):
            raise RuntimeError

    text = explain_failure([EqualsMatch(LocalSource("x"), 1)], {"x": BadRepr()})
    assert text.startswith("L['x'] == 1: expected 1, got <")
    assert "BadRepr object at 0x" in text
