"""Cheaper graph breaks: an op kiln's fake tensors could not run used to end the graph there
(or, alone in its frame, leave no graph at all) where torch.compile keeps it in the graph.

- ATen ops with no meta kernel (``geqrf``, ``histogram``, ``_histogramdd_bin_edges``) stay in
  the graph when their inputs are static: their real kernel run on zeros tells the results'
  metadata, as torch's fake tensors do. Ops whose output sizes depend on the data
  (``linalg_lstsq``) and symbolic inputs still break around that op only.
- A composite torch function whose later op checks what an earlier op assumed of a size that
  may be 1 (``take_along_dim`` broadcasting indices of a real size 1) runs again deciding
  such sizes by their example values, instead of breaking.

Each case compares with eager and counts graphs and breaks exactly, at or below torch.compile's
counts on the same calls (measured beside kiln where the count depends on recompiles)."""

import torch
from e2e_support import assert_same

import kiln


def breaks():
    return kiln.session().stats.breaks


def torch_graph_count(fn, *calls):
    """How many graphs torch.compile captures for ``fn`` over ``calls`` (argument tuples)."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    try:
        compiled = torch.compile(fn, backend=backend)
        for args in calls:
            compiled(*args)
    finally:
        torch._dynamo.reset()
    return len(graphs)


def run_all(counting, fn, *calls):
    """``fn`` compiled with ``counting``, each call's result equal to eager's."""
    compiled = kiln.compile(fn, backend=counting)
    for args in calls:
        assert_same(compiled(*args), fn(*args))


def op_names(gm):
    return [getattr(n.target, "__name__", str(n.target)) for n in gm.graph.nodes if n.op.startswith("call")]


def test_geqrf_between_other_ops_is_one_graph(counting):
    def fn(x):
        y = x * 2
        a, tau = torch.geqrf(y)  # no meta kernel in torch: its real kernel on zeros tells the metadata
        return a + 1, tau * 2

    run_all(counting, fn, (torch.randn(5, 3),))
    assert len(counting.graphs) == 1  # torch.compile: 1
    assert breaks() == []
    assert "geqrf" in op_names(counting.graphs[0])


def test_histogram_and_histogramdd_stay_in_the_graph(counting):
    def fn(x, bins):
        y = x.abs()
        hist, edges = torch.histogram(y[:, 0], bins=4)
        hist_b, _ = torch.histogram(y[:, 1], bins=bins)
        counts, dd_edges = torch.histogramdd(y, bins=[3, 4])
        return hist * 2, edges + 1, hist_b, counts.sum(), [e - 1 for e in dd_edges]

    run_all(counting, fn, (torch.randn(8, 2), torch.tensor([0.0, 0.5, 1.0, 3.0])))
    assert len(counting.graphs) == 1  # torch.compile: 1
    assert breaks() == []


def test_an_op_whose_sizes_depend_on_data_still_breaks_around_it_alone(counting):
    def fn(a, b):
        q, tau = torch.geqrf(a * 2)  # in the graph
        sol = torch.linalg.lstsq(q, b).solution  # residuals' size depends on the rank: a break
        return sol + tau.sum()

    run_all(counting, fn, (torch.randn(5, 3), torch.randn(5, 2)))
    assert len(counting.graphs) == 2  # torch.compile: 2 (the same break)
    assert len(breaks()) == 1
    assert "linalg_lstsq" in str(breaks()[0])
    assert "geqrf" in op_names(counting.graphs[0])


def test_op_without_meta_kernel_on_dynamic_sizes_breaks_around_that_op_only(counting):
    def fn(x):
        y = x * 2
        a, tau = torch.geqrf(y)
        return a + 1, tau * 2

    calls = [(torch.randn(5, 3),), (torch.randn(6, 3),)]
    run_all(counting, fn, *calls)
    # static: one graph; dynamic sizes: the graph before geqrf and the resume after it
    assert [op_names(g).count("geqrf") for g in counting.graphs] == [1, 0, 0]
    assert len(breaks()) == 1
    assert len(counting.graphs) <= torch_graph_count(fn, *calls)


def test_take_along_dim_with_indices_of_size_one_after_sizes_went_dynamic(counting):
    def fn(x, idx):
        y = torch.take_along_dim(x * 2, idx, dim=1)
        return y + 1

    calls = [
        (torch.randn(4, 5), torch.randint(0, 5, (4, 3))),
        (torch.randn(6, 5), torch.randint(0, 5, (1, 3))),  # broadcast along dim 0: a real 1
        (torch.randn(7, 5), torch.randint(0, 5, (7, 2))),
    ]
    run_all(counting, fn, *calls)
    assert breaks() == []
    assert len(counting.graphs) <= torch_graph_count(fn, *calls)  # torch.compile: 3
    assert len(counting.graphs) == 3
