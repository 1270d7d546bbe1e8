"""Walking and rebuilding trees of nested code objects."""

from __future__ import annotations

from kiln.symexec.bytecode import decode, map_code, walk_code

SOURCE = """
def outer(x):
    def inner(y):
        return [z for z in y] + [lambda: x]
    class K:
        def m(self):
            return x
    return inner, K
"""


def test_walk_visits_parents_first():
    top = compile(SOURCE, "<walk>", "exec")
    names = [c.co_name for c in walk_code(top)]
    assert names[:3] == ["<module>", "outer", "inner"]
    assert {"K", "m", "<lambda>"} <= set(names)


def test_map_code_rebuilds_children_first():
    top = compile(SOURCE, "<walk>", "exec")
    seen: list[str] = []

    def rename(code):
        seen.append(code.co_name)
        return code.replace(co_name=code.co_name.upper())

    new = map_code(top, rename)
    assert seen[-1] == "<module>" and seen.index("inner") < seen.index("outer")
    assert [c.co_name for c in walk_code(new)] == [n.upper() for n in (c.co_name for c in walk_code(top))]
    outer = next(c for c in new.co_consts if hasattr(c, "co_name"))
    assert any(getattr(i.arg, "co_name", None) == "INNER" for i in decode(outer).instructions())


def test_identity_map_keeps_the_tree():
    top = compile(SOURCE, "<walk>", "exec")
    assert map_code(top, lambda c: c) is top
    assert map_code(top, lambda c: decode(c).to_code()) == top
