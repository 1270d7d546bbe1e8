"""Every case of the corpus: one graph, same answers as eager, second call from the cache."""

import pytest
from cases import CASES
from e2e_support import assert_same, clone_args

import kiln


@pytest.mark.parametrize("name", sorted(CASES))
def test_case(name, counting):
    make, graphs = CASES[name]
    fn, args, kwargs = make()
    pristine = clone_args((args, kwargs))

    eager_args, eager_kwargs = clone_args(pristine)
    expected = fn(*eager_args, **eager_kwargs)

    compiled = kiln.compile(fn, backend=counting, fullgraph=True)
    run_args, run_kwargs = clone_args(pristine)
    actual = compiled(*run_args, **run_kwargs)
    assert_same(actual, expected)
    assert_same((run_args, run_kwargs), (eager_args, eager_kwargs))  # mutations replayed
    assert len(counting.graphs) == graphs

    # The second call with equal inputs is a cache hit: no new graph, same answers.
    run_args, run_kwargs = clone_args(pristine)
    eager_args, eager_kwargs = clone_args(pristine)
    assert_same(compiled(*run_args, **run_kwargs), fn(*eager_args, **eager_kwargs))
    assert_same((run_args, run_kwargs), (eager_args, eager_kwargs))
    assert len(counting.graphs) == graphs
