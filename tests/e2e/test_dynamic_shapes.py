"""``dynamic=True``: every dimension of a tensor argument is a symbol from the first compile
(parameters and buffers stay static; a size of 0 is specialized, a size of 1 is a symbol too:
unlike torch.compile, a batch of 1 shares the graph of the other sizes).
Sizes flow through the traced Python as numbers the graph computes (``x.size(0)``,
``x.shape[1] // 2``, ``numel()``), relations between sizes become shape guards instead of
recompiles, and uses that need a value (``range(n)``, ``int(n)``) specialize that size. One
graph serves every call whose sizes satisfy the recorded guards; outputs equal eager's."""

import logging
import random

import torch
from e2e_support import CountingBackend
from torch import nn

import kiln
from benchmarks.dynamic_bench import TinyGPT


def _gpt_sweep(dynamic):
    """The issue's acceptance sweep: lengths 5..64, batches 1..8, in random order."""
    torch.manual_seed(0)
    model = TinyGPT().eval()
    counting = CountingBackend()
    compiled = kiln.compile(model, backend=counting, dynamic=dynamic)
    rng = random.Random(0)
    shapes = [(rng.randint(1, 8), rng.randint(5, 64)) for _ in range(24)] + [(1, 7), (1, 30)]
    with torch.no_grad():
        for b, t in shapes:
            idx = torch.randint(0, 50, (b, t))
            torch.testing.assert_close(compiled(idx), model(idx))
    assert {b for b, _ in shapes} == set(range(1, 9))
    return len(counting.graphs)


def test_gpt_over_batch_sizes_and_lengths_is_one_graph_batch_1_included():
    # torch.compile: 2 graphs (a batch of 1 is specialized: its "0/1 specialization")
    assert _gpt_sweep(True) == 1


def test_gpt_over_batch_sizes_and_lengths_automatic_dynamic_is_two_graphs():
    # the first call static, the second with both dims symbolic; batch 1 shares it
    # (torch.compile: 3)
    assert _gpt_sweep(None) == 2


def _shape_ops(x):
    b, t, _ = x.shape
    flat = x.view(-1, x.size(-1))
    halves = x.split([t // 2, t - t // 2], dim=1)
    first = x[:, : x.size(1) // 2]
    pos = torch.arange(t, dtype=x.dtype)
    causal = torch.ones(t, t).tril()
    y = flat.reshape(b, -1).sum(-1) + halves[1].mean() + first.sum() + (causal @ pos).sum()
    return y, x.shape[0] * 2, x.numel(), t % 3


def test_size_arithmetic_and_shape_ops_stay_symbolic():
    counting = CountingBackend()
    compiled = kiln.compile(_shape_ops, backend=counting, dynamic=True)
    for shape in ((2, 6, 4), (3, 9, 4), (5, 12, 7), (4, 20, 3)):
        x = torch.randn(shape)
        got, expected = compiled(x), _shape_ops(x)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:] == expected[1:] and all(type(g) is int for g in got[1:])
    assert len(counting.graphs) == 1


def _branch_on_size(x):
    if x.size(0) > 4:
        return x * 2
    return x - 1


def test_a_relation_on_sizes_is_a_guard_not_a_recompile_per_size():
    counting = CountingBackend()
    compiled = kiln.compile(_branch_on_size, backend=counting, dynamic=True)
    for n, graphs in ((2, 1), (3, 1), (4, 1), (6, 2), (9, 2), (3, 2)):
        x = torch.randn(n, 3)
        torch.testing.assert_close(compiled(x), _branch_on_size(x))
        assert len(counting.graphs) == graphs, n


def _unrolled(x):
    acc = torch.zeros(x.shape[1:])
    for i in range(x.size(0)):
        acc = acc + x[i] * i
    return acc


def test_a_size_that_sets_python_control_flow_is_specialized():
    counting = CountingBackend()
    compiled = kiln.compile(_unrolled, backend=counting, dynamic=True)
    for n, graphs in ((2, 1), (3, 2), (2, 2), (3, 2)):
        x = torch.randn(n, 4)
        torch.testing.assert_close(compiled(x), _unrolled(x))
        assert len(counting.graphs) == graphs


def _add(x, y):
    return x + y


def test_duck_sized_inputs_and_broadcasting_are_guarded():
    # x and y have equal sizes in the first call (one symbol): a y of size 1 that broadcasts
    # is another graph, never the first one's answer
    counting = CountingBackend()
    compiled = kiln.compile(_add, backend=counting, dynamic=True)
    pairs = [((3, 4), (3, 4)), ((5, 6), (5, 6)), ((5, 6), (1, 6)), ((7, 2), (7, 2)), ((7, 3), (1, 3))]
    for sx, sy in pairs:
        x, y = torch.randn(sx), torch.randn(sy)
        torch.testing.assert_close(compiled(x, y), _add(x, y))
    assert len(counting.graphs) == 2


def _strided(x):
    return x.view(-1) if x.is_contiguous() else x.reshape(-1) * 2


def test_strides_written_in_sizes_are_guarded():
    counting = CountingBackend()
    compiled = kiln.compile(_strided, backend=counting, dynamic=True)
    for x in (torch.randn(3, 5), torch.randn(4, 6), torch.randn(6, 4).t(), torch.randn(7, 5).t(),
              torch.randn(5, 2)):
        torch.testing.assert_close(compiled(x), _strided(x))
    assert len(counting.graphs) == 2


def test_parameters_stay_static_and_inputs_dynamic(monkeypatch, caplog):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    counting = CountingBackend()
    monkeypatch.setenv("KILN_LOGS", "guards")
    compiled = kiln.compile(model, backend=counting, dynamic=True)
    with caplog.at_level(logging.INFO, logger="kiln.guards"):
        compiled(torch.randn(4, 6, requires_grad=True))
    guards = "\n".join(r.getMessage() for r in caplog.records)
    assert "L['self']._modules['0']._parameters['weight']: torch.nn.parameter.Parameter torch.float32 on cpu, " \
           "size (8, 6), stride (6, 1)" in guards
    assert "L['input']: torch.Tensor torch.float32 on cpu, size (?, ?)" in guards
    for b in (2, 5, 9):
        x = torch.randn(b, 6, requires_grad=True)
        out = compiled(x)
        out.sum().backward()
        expected_x = x.detach().clone().requires_grad_()
        expected = model(expected_x)
        expected.sum().backward()
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(x.grad, expected_x.grad)
    assert len(counting.graphs) == 1


def test_dynamic_false_keeps_static_sizes_and_none_goes_dynamic_once():
    for dynamic, graphs in ((False, 3), (None, 2)):
        counting = CountingBackend()
        compiled = kiln.compile(_branch_on_size, backend=counting, dynamic=dynamic)
        for n in (2, 3, 4):
            x = torch.randn(n, 3)
            torch.testing.assert_close(compiled(x), _branch_on_size(x))
        assert len(counting.graphs) == graphs
        kiln.reset()


def test_automatic_dynamic_makes_a_tensor_symbolic_after_its_size_changes_once(monkeypatch, caplog):
    # dynamic=None (the default): the first compile is static; the first change of a
    # tensor's size recompiles with every dimension of it a symbol (the batch too, though
    # only the length changed), never again for it (torch.compile: one recompile per dim)
    torch.manual_seed(0)
    model = TinyGPT().eval()
    counting = CountingBackend()
    compiled = kiln.compile(model, backend=counting)
    monkeypatch.setenv("KILN_LOGS", "recompiles")
    kiln.compile(model, backend=counting)  # reads KILN_LOGS
    steps = [((2, 9), 1), ((2, 17), 2), ((2, 33), 2), ((2, 5), 2),  # the length changes
             ((5, 5), 2), ((7, 40), 2), ((3, 12), 2), ((1, 12), 2)]  # then the batch size
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="kiln.recompiles"):
        for (b, t), graphs in steps:
            idx = torch.randint(0, 50, (b, t))
            torch.testing.assert_close(compiled(idx), model(idx))
            assert len(counting.graphs) == graphs, (b, t)
    said = [r.getMessage() for r in caplog.records if "symbols from now on" in r.getMessage()]
    assert len(said) == 1 and "dims [0, 1] of L['idx']" in said[0]


def test_automatic_dynamic_leaves_parameters_static_and_dynamic_false_off():
    model = nn.Linear(4, 3)
    counting = CountingBackend()
    compiled = kiln.compile(model, backend=counting)
    for b in (2, 3, 5, 8):
        x = torch.randn(b, 4)
        torch.testing.assert_close(compiled(x), model(x))
    assert len(counting.graphs) == 2
    counting = CountingBackend()
    compiled = kiln.compile(_branch_on_size, backend=counting, dynamic=False)
    for n in (5, 6, 7):
        compiled(torch.randn(n, 2))
    assert len(counting.graphs) == 3


def _reshapes(x):
    out_shape = (-1,) + x.shape[1:] + (1,)  # noqa: RUF005 (the concatenation library code writes)
    same = x.shape == x.shape[:1] + x.shape[1:]
    return x.reshape(out_shape), same, x.size()[:-1] + (x.size(-1) * 2,)  # noqa: RUF005


def test_tuples_of_sizes_are_built_without_specializing():
    counting = CountingBackend()
    compiled = kiln.compile(_reshapes, backend=counting, dynamic=True)
    for shape in ((2, 3, 4), (5, 6, 7), (3, 2, 9)):
        x = torch.randn(shape)
        got, expected = compiled(x), _reshapes(x)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:] == expected[1:] and type(got[2]) is torch.Size
    assert len(counting.graphs) == 1


def test_transformers_models_over_lengths_and_batches():
    transformers = __import__("pytest").importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.GPT2Model(transformers.GPT2Config(
        vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=64)).eval()
    # torch.compile: 2 and 4 on this sweep. kiln: 1 and 2; on torch 2.11 a batch of 1 gets a
    # graph of its own (its CPU scaled_dot_product_attention asks whether the batch is 1
    # when it picks a kernel: a guard in C++), so 2 and 3
    counts = ((True, 2), (None, 3)) if torch.__version__.startswith("2.11") else ((True, 1), (None, 2))
    for dynamic, graphs in counts:
        kiln.reset()
        counting = CountingBackend()
        compiled = kiln.compile(model, backend=counting, dynamic=dynamic)
        with torch.no_grad():
            for b, t in ((2, 8), (2, 13), (3, 21), (4, 9), (1, 17), (1, 11), (5, 25)):
                ids = torch.randint(0, 128, (b, t))
                mask = torch.ones(b, t, dtype=torch.long)
                mask[0, -2:] = 0  # padding
                got = compiled(input_ids=ids, attention_mask=mask).last_hidden_state
                expected = model(input_ids=ids, attention_mask=mask).last_hidden_state
                torch.testing.assert_close(got, expected)
        assert len(counting.graphs) == graphs, dynamic


def _rows(x):
    return x.sum(1) * x.size(0)


def test_mark_dynamic_makes_a_dimension_symbolic_from_the_first_compile():
    counting = CountingBackend()
    compiled = kiln.compile(_rows, backend=counting)  # dynamic=None
    for n in (3, 5, 8):
        x = torch.randn(n, 4)
        kiln.mark_dynamic(x, 0)
        torch.testing.assert_close(compiled(x), _rows(x))
    assert len(counting.graphs) == 1


def test_mark_dynamic_with_a_range():
    counting = CountingBackend()
    compiled = kiln.compile(_rows, backend=counting)
    for n in (2, 4, 64, 9):
        x = torch.randn(n, 4)
        kiln.mark_dynamic(x, 0, min=2, max=64)
        torch.testing.assert_close(compiled(x), _rows(x))
    assert len(counting.graphs) == 1
    with __import__("pytest").raises(ValueError, match="outside"):
        kiln.mark_dynamic(torch.randn(100, 4), 0, min=1, max=64)


def test_mark_static_wins_over_dynamic_true():
    counting = CountingBackend()
    compiled = kiln.compile(_rows, backend=counting, dynamic=True)
    for n, m, graphs in ((3, 4, 1), (6, 4, 1), (3, 5, 2), (7, 5, 2)):
        x = torch.randn(n, m)
        kiln.mark_static(x, 1)
        torch.testing.assert_close(compiled(x), _rows(x))
        assert len(counting.graphs) == graphs


def test_a_marked_dimension_the_code_specializes_is_an_error_naming_the_line():
    pytest = __import__("pytest")
    compiled = kiln.compile(_unrolled, backend="eager")
    x = torch.randn(3, 4)
    kiln.mark_dynamic(x, 0)
    with pytest.raises(kiln.ConstraintViolation) as info:
        compiled(x)
    message = str(info.value)
    assert "L['x'].size(0) was marked dynamic" in message and "specializes it to 3" in message
    assert "test_dynamic_shapes.py" in message and "_unrolled" in message
    # maybe_mark_dynamic allows it: the size is specialized, the answer right
    kiln.reset()
    assert _marked_graphs(_unrolled, kiln.maybe_mark_dynamic, (3, 4)) == 2
    x = torch.randn(0, 4)
    kiln.mark_dynamic(x, 0)
    with pytest.raises(kiln.ConstraintViolation, match="a size of 0 is specialized"):
        kiln.compile(_rows, backend="eager")(x)
    # a size of 1 is a symbol: no error, and the same graph serves 5
    assert _marked_graphs(_rows, kiln.mark_dynamic, (1, 5)) == 1


def _marked_graphs(fn, mark, sizes):
    """Graphs for calls of ``fn`` on (n, 4) tensors with dim 0 marked by ``mark``."""
    counting = CountingBackend()
    compiled = kiln.compile(fn, backend=counting)
    for n in sizes:
        x = torch.randn(n, 4)
        mark(x, 0)
        torch.testing.assert_close(compiled(x), fn(x))
    return len(counting.graphs)


def test_mark_arguments_are_checked():
    pytest = __import__("pytest")
    x = torch.randn(2, 3)
    with pytest.raises(IndexError, match="out of range"):
        kiln.mark_dynamic(x, 2)
    with pytest.raises(TypeError, match="expects a tensor"):
        kiln.mark_static([1, 2], 0)
    with pytest.raises(ValueError, match="min=5 > max=2"):
        kiln.mark_dynamic(x, 0, min=5, max=2)
    with pytest.raises(TypeError, match="an int"):
        kiln.maybe_mark_dynamic(x, "0")
    kiln.mark_dynamic(x, [0, -1])  # several dims, negative ones counted from the end
    from kiln.symexec._marks import marks_of

    assert sorted(marks_of(x)) == [0, 1]


def test_kiln_logs_dynamic_names_symbols_and_specializations(monkeypatch, caplog):
    monkeypatch.setenv("KILN_LOGS", "dynamic")
    compiled = kiln.compile(_unrolled, backend="eager", dynamic=True)
    with caplog.at_level(logging.INFO, logger="kiln.dynamic"):
        compiled(torch.randn(3, 4))
    said = [r.getMessage() for r in caplog.records if r.name == "kiln.dynamic"]
    assert said[:2] == ["L['x'].size(0) is s0 (example 3)", "L['x'].size(1) is s1 (example 4)"]
    special = [m for m in said if m.startswith("specialized s0 to 3 (s0 = L['x'].size(0)) at ")]
    assert special and "test_dynamic_shapes.py" in special[0] and "_unrolled" in special[0]


def _sizes_in_python(x):
    n, m = x.shape
    pair = (n + 1, m)
    out = torch.zeros(max(n, m), min(pair[1], 8))
    return out.sum() + pair[0], out.shape[0] + pair[1]


def test_max_min_and_tuple_indexing_of_sizes_are_guards_not_values():
    counting = CountingBackend()
    compiled = kiln.compile(_sizes_in_python, backend=counting, dynamic=True)
    for shape, graphs in (((3, 5), 1), ((2, 7), 1), ((6, 4), 2), ((7, 2), 2), ((4, 6), 2)):
        x = torch.randn(shape)
        got, expected = compiled(x), _sizes_in_python(x)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1]
        assert len(counting.graphs) == graphs, shape


@torch.jit.script
def _scripted_scale(x: torch.Tensor, factor: int):
    return torch.sqrt(torch.tensor(x.size(-1), dtype=torch.float) * factor)


def _uses_script(x):
    return x / _scripted_scale(x, 2)


def test_a_torch_jit_script_function_is_traced_from_its_python_source():
    # transformers 5.17's DeBERTa-v2 calls scripted helpers: called as TorchScript on fake
    # tensors they read every size as an int (all specialized); their Python is traced instead
    counting = CountingBackend()
    compiled = kiln.compile(_uses_script, backend=counting, dynamic=True)
    for shape in ((2, 8, 4), (3, 5, 4), (4, 9, 4)):  # torch.tensor(size) of the last dim specializes it
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x), _uses_script(x))
    assert len(counting.graphs) == 1
    kiln.reset()
    counting = CountingBackend()
    compiled = kiln.compile(_uses_script, backend=counting, dynamic=False)
    for shape in ((2, 8, 4), (2, 8, 4), (3, 5, 6)):
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x), _uses_script(x))
    assert len(counting.graphs) == 2
