"""Programs the differential fuzzer (scripts/fuzz.py) found kiln getting wrong, minimised:
each one is a case of tests/e2e/test_fuzz.py::test_regression, run and compared with eager
like a fuzzed program. ``scripts/fuzz.py --save`` appends to this file; only programs that
failed at some point belong here. The comment above a case is the failure it showed."""

REGRESSIONS: list[tuple[str, str]] = []  # (name, source)


def _add(name: str, source: str) -> None:
    REGRESSIONS.append((name, source))


# Found on c8ff981 (runs of scripts/fuzz.py, minimised by it, names and notes by hand).

# item 4/5: F.relu(inplace=True) does not change x (output)
_add("inplace-kwarg-relu-output", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    F.relu(x, inplace=True)
    return (x,)
""")

# item 4/5: F.silu(inplace=True) does not change the input (mutation)
_add("inplace-kwarg-silu-mutation", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    F.silu(x, inplace=True)
    return (y,)
""")

# item 4/5: inplace= on an object's tensor attribute
_add("inplace-kwarg-leaky-relu-attribute", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    F.leaky_relu(obj.t, 0.1, inplace=True)
    return (obj,)
""")

# item 4/5: inplace= inside an inlined closure
_add("inplace-kwarg-hardtanh-in-closure", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    def g2(a):
        F.hardtanh(obj.t, inplace=True)
        return y.mul_(2)
    v3 = g2(g2(d['a']))
    return (obj,)
""")

# item 4: torch.sigmoid_(t) (the torch.* in-place function) does not change t
_add("torch-inplace-function-sigmoid", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    torch.sigmoid_(d['a'])
    return (x,)
""")

# item 4: torch.neg_(t) does not change t
_add("torch-inplace-function-neg", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    torch.neg_(y)
    return (d,)
""")

# item 4: torch.relu_ on a tensor whose row views were taken before
_add("torch-inplace-function-relu-view-of-attribute", """\
# inputs: obj_t_is_y
def f(x, y, k, n, lst, d, obj, m):
    v4 = {i: obj.t[i] for i in range(3)}
    torch.relu_(y)
    return (v4,)
""")

# item 8: torch.sin(x, out=x) is x -> False under kiln
_add("out-result-is-out", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v3 = torch.sin(x, out=x)
    v4 = v3 is x
    return (v4,)
""")

# item 8: t.copy_(u) is t -> False under kiln
_add("inplace-method-result-is-self", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v1 = d['b'].copy_(y)
    v2 = v1 is d['b']
    return (v2,)
""")

# item 8: F.relu(t, inplace=True) is t -> False under kiln
_add("inplace-kwarg-result-is-self", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v1 = F.relu(d['a'], inplace=True)
    v2 = v1 is d['a']
    return (v2,)
""")

# item 7: locals() breaks the graph
_add("locals-sorted", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v1 = sorted(locals())
    return (n,)
""")

# item 7: locals()['x'] breaks the graph
_add("locals-getitem", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v1 = locals()['x']
    return (v1,)
""")

# item 7: vars() in a resume function: KeyError('y') from kiln
_add("vars-after-break", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v2 = _eager_item(d['a'].sum())  # break
    v3 = vars()['y']
    return (v2, v3,)
""")

# item 7: vars(obj) breaks the graph
_add("vars-of-object", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v2 = vars(obj)
    return (m,)
""")

# item 9: dict(UserMapping()) raises ValueError inside kiln
_add("dict-of-user-mapping", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v3 = dict(UM)
    return (v3,)
""")

# item 9: {**UserMapping()} breaks the graph
_add("dict-unpack-user-mapping", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v1 = {**UM}
    return (v1,)
""")

# item 9: dict(mappingproxy) breaks the graph
_add("dict-of-mappingproxy", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v1 = dict(CFG)
    return (v1,)
""")

# item 9: mappingproxy[key] breaks the graph
_add("mappingproxy-getitem", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    y = d['a'] * CFG['s']
    return (y,)
""")

# item 9: Mapping.items() (collections.abc mixin) breaks the graph
_add("mapping-mixin-items", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v2 = list(UM.items())
    return (v2,)
""")

# item 10: d.keys() - set breaks the graph
_add("dict-keys-minus-set", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v1 = list(d.keys() - {'a'})
    return (v1,)
""")

# item 10: d.keys() & set breaks the graph
_add("dict-keys-and-set", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v2 = d.keys() & {'a', 'e'}
    return (v2,)
""")

# item 12: m.forward = lambda ... breaks the graph
_add("module-forward-reassigned", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    m.forward = lambda a: a * 3
    return (x,)
""")

# item 12: m(x) after m.forward = lambda is traced with the class's forward
_add("module-forward-reassigned-then-called", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    m.forward = lambda a: a * 3
    v1 = m(x)
    torch.sin(x, out=v1)
    return (v1,)
""")

# NEW: a closure over a cell not assigned yet: ValueError('Cell is empty') from kiln's guards
_add("closure-over-unassigned-cell", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v2 = 0
    def g2(a):
        nonlocal v3
        return a * v2
    v3 = (lambda b: g2(b) * 2)(lst[0])
    v4 = _opaque(obj.t)  # break
    return (obj,)
""")

# NEW: type(d)(d): AttributeError("'dict' object has no attribute '__dict__'") from kiln
_add("type-of-dict-called", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v2 = type(d)(d)
    return (v2,)
""")

# NEW: isinstance(x, 3) raises while tracing; the frame never runs, the neg_ before it is lost
_add("isinstance-raises-after-inplace", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    d['a'].neg_()
    isinstance(x, 3)
    return (n,)
""")

# NEW: sorted([1, 'a']) raises while tracing; the append before it is lost
_add("sorted-raises-after-append", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    lst.append(x)
    sorted([1, 'a'])
    return (n,)
""")

# NEW: the graph raises at run time (overlap); G = n before it is lost
_add("global-store-lost-when-graph-raises", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    global G, GL
    G = n
    d['a'].index_add_(0, torch.tensor([0, 2]), d['a'][:2])
    return (n,)
""")

# NEW: the graph raises at run time (overlap); the list slice assignment before it is lost
_add("slice-swap-then-index-add", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    lst[0:2] = [lst[1], lst[0]]
    d['a'].index_add_(0, torch.tensor([0, 2]), d['a'][:2])
    return (x,)
""")

# NEW: same, reached through locals()
_add("closure-over-unassigned-cell-locals", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v1 = n
    def g1(a):
        nonlocal v2
        return a * v1
    v2 = (lambda b: g1(b) * 2)(y)
    v3 = 'v1' in locals()
    return (k,)
""")


# Found on a4625cc.

# NEW (module attributes, cf. item 11): m.__dict__['count'] = 7 then m.count reads the old value
_add("module-dict-write-then-read", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    m.__dict__['count'] = 7
    return (m.count,)
""")

# NEW (cf. item 11): forward reads self.count after a write through m.__dict__: stale value
_add("module-dict-write-then-call", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    m.__dict__['count'] = n
    v2 = m.__call__(lst[0])
    return (v2,)
""")

# NEW: the graph raises at run time (overlapping copy_); lst.pop(0) before it is lost
_add("list-pop-lost-when-graph-raises", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v1 = lst.pop(0)
    d['a'][0:2].copy_(d['a'][1:3])
    return (v1,)
""")

# item 7: len(locals()) in a resume function counts kiln's names, not the user's
_add("locals-len-after-break", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v4 = _eager_item(d['a'].sum())  # break
    v5 = len(locals())
    return (v5,)
""")

# item 7: locals()['x'] in a resume function: KeyError('x') from kiln
_add("locals-getitem-after-break", """\
# inputs: plain
def f(x, y, k, n, lst, d, obj, m):
    v1 = _eager_item(lst[0].sum())  # break
    v2 = locals()['x']
    return (v2,)
""")
