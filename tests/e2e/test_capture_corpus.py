"""Every case of the corpus: one graph, same answers as eager, second call from the cache.

Each case is built twice (``make()`` is deterministic): one copy runs eagerly, the other
compiled, so state a case changes (module attributes, globals) advances the same way in both.
"""

import pytest
from cases import CASES
from e2e_support import CountingBackend, assert_same, clone_args

import kiln


@pytest.fixture(params=["eager", "aot_eager", "inductor"])
def counting(request):
    """The corpus runs with the graphs as captured, through kiln.aotgrad, and through
    kiln.inductor."""
    return CountingBackend(request.param)


@pytest.mark.parametrize("name", sorted(CASES))
def test_case(name, counting):
    make, graphs, stateful = CASES[name]
    fn, args, kwargs = make()
    pristine = clone_args((args, kwargs))
    compiled_fn, _, _ = make()
    compiled = kiln.compile(compiled_fn, backend=counting, fullgraph=True)

    for call in range(2):
        eager_args, eager_kwargs = clone_args(pristine)
        expected = fn(*eager_args, **eager_kwargs)
        run_args, run_kwargs = clone_args(pristine)
        actual = compiled(*run_args, **run_kwargs)
        assert_same(actual, expected)
        assert_same((run_args, run_kwargs), (eager_args, eager_kwargs))  # mutations replayed
        # the second call hits the cache unless the case changes what its guards read
        assert len(counting.graphs) == graphs + (call if stateful else 0)
