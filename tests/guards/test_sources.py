import pytest

from kiln.guards import (
    AttrSource,
    ClosureCellSource,
    DefaultsSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    MappingGetSource,
    ModuleSource,
    TypeSource,
)


class Obj:
    pass


def make_layers():
    root = Obj()
    root.layers = [Obj(), Obj()]
    root.layers[0].weight = "w0"
    return root


def test_render_compositions():
    src = AttrSource(ItemSource(AttrSource(LocalSource("self"), "layers"), 0), "weight")
    assert str(src) == "L['self'].layers[0].weight"
    assert str(ItemSource(GlobalSource("CONFIG"), "eps")) == "G['CONFIG']['eps']"
    assert str(TypeSource(LocalSource("x"))) == "type(L['x'])"
    assert str(AttrSource(LocalSource("x"), "class")) == "getattr(L['x'], 'class')"
    assert str(AttrSource(LocalSource("x"), "a-b")) == "getattr(L['x'], 'a-b')"
    assert str(ClosureCellSource(LocalSource("f"), 1)) == "L['f'].__closure__[1].cell_contents"
    assert str(DefaultsSource(LocalSource("f"), 0)) == "L['f'].__defaults__[0]"
    assert str(DefaultsSource(LocalSource("f"), "k")) == "L['f'].__kwdefaults__['k']"


def test_fetch_follows_the_path():
    root = make_layers()
    src = AttrSource(ItemSource(AttrSource(LocalSource("self"), "layers"), 0), "weight")
    assert src.fetch({"self": root}, None) == "w0"
    assert ItemSource(GlobalSource("C"), "eps").fetch({}, {"C": {"eps": 0.5}}) == 0.5
    assert TypeSource(LocalSource("x")).fetch({"x": 3}, None) is int
    with pytest.raises(KeyError):
        GlobalSource("C").fetch({}, None)
    with pytest.raises(AttributeError):
        AttrSource(LocalSource("x"), "nope").fetch({"x": 3}, None)


def test_closure_and_defaults_fetch():
    captured = [1, 2]

    def f(a, b=10, *, c=20):
        return captured, a, b, c

    frame = {"f": f}
    assert ClosureCellSource(LocalSource("f"), 0).fetch(frame, None) is captured
    assert DefaultsSource(LocalSource("f"), 0).fetch(frame, None) == 10
    assert DefaultsSource(LocalSource("f"), "c").fetch(frame, None) == 20


def test_rendered_text_is_the_code_that_fetches():
    root = make_layers()
    src = AttrSource(ItemSource(AttrSource(LocalSource("self"), "layers"), 0), "weight")
    assert eval(str(src), {"L": {"self": root}}) == "w0"


def test_equality_and_hash_follow_rendering():
    a = AttrSource(LocalSource("x"), "y")
    b = AttrSource(LocalSource("x"), "y")
    assert a == b and hash(a) == hash(b)
    assert a != AttrSource(LocalSource("x"), "z")
    assert LocalSource("x") != GlobalSource("x")
    # keys equal across types render differently and stay distinct
    assert ItemSource(LocalSource("d"), 1) != ItemSource(LocalSource("d"), True)
    assert len({ItemSource(LocalSource("d"), 1), ItemSource(LocalSource("d"), True)}) == 2


def test_item_keys_must_be_literals():
    ItemSource(LocalSource("d"), ("a", 1, None, b"x"))
    with pytest.raises(TypeError):
        ItemSource(LocalSource("d"), object())
    with pytest.raises(TypeError):
        ItemSource(LocalSource("d"), [1])
    with pytest.raises(TypeError):
        LocalSource(3)


def test_chain_and_globals():
    src = AttrSource(ItemSource(GlobalSource("M"), "k"), "a")
    assert [str(s) for s in src.chain()] == ["G['M']", "G['M']['k']", "G['M']['k'].a"]
    assert src.uses_globals()
    assert not AttrSource(LocalSource("x"), "a").uses_globals()
    assert LocalSource("x").base is None


def test_module_source_reaches_an_imported_module_by_name():
    import json
    import sys

    src = AttrSource(ModuleSource("json"), "dumps")
    assert str(src) == "M['json'].dumps"
    assert src.fetch({}, None) is json.dumps
    assert eval(str(src), {"M": sys.modules}) is json.dumps  # the text is the code
    assert not src.uses_globals()
    assert ModuleSource("json") != GlobalSource("json")
    with pytest.raises(KeyError):
        ModuleSource("kiln_no_such_module").fetch({}, None)
    with pytest.raises(TypeError):
        ModuleSource(3)


def test_mapping_get_source_reads_a_key_or_none():
    src = MappingGetSource(LocalSource("env"), "HOME")
    assert str(src) == "L['env'].get('HOME')"
    assert src.fetch({"env": {"HOME": "/root"}}, None) == "/root"
    assert src.fetch({"env": {}}, None) is None
    with pytest.raises(TypeError):
        MappingGetSource(LocalSource("env"), ["HOME"])


def test_item_keys_may_be_classes_and_functions_named_by_import_path():
    import collections
    import sys

    from kiln.guards import importable_path

    table = {int: "int", collections.OrderedDict: "od", importable_path: "fn"}
    src = ItemSource(LocalSource("t"), collections.OrderedDict)
    assert str(src) == "L['t'][M['collections'].OrderedDict]"
    assert src.fetch({"t": table}, None) == "od"
    assert eval(str(src), {"L": {"t": table}, "M": sys.modules}) == "od"
    assert str(ItemSource(LocalSource("t"), int)) == "L['t'][M['builtins'].int]"
    assert importable_path(importable_path) == "M['kiln.guards._sources'].importable_path"

    def local():
        pass

    assert importable_path(local) is None  # '<locals>' in its qualname
    with pytest.raises(TypeError):
        ItemSource(LocalSource("t"), local)
