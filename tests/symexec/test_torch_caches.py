"""SymexecCaches: what captures share is the caller's, passed to capture(); nothing is shared
through a module global."""

import torch

from kiln.symexec import SymexecCaches, capture


def _breaks_at_numpy(x):
    y = x + 1
    z = y.numpy().tolist()  # needs the data: a graph break here
    return torch.tensor(z) * 2


def _capture(caches=None):
    x = torch.randn(3)
    return capture(_breaks_at_numpy.__code__, {"x": x}, _breaks_at_numpy.__globals__, graph_breaks=True,
                   caches=caches)


def test_captures_given_one_caches_object_share_resume_functions_and_decoded_code():
    caches = SymexecCaches()
    first, second = _capture(caches), _capture(caches)
    assert first.graph_break is not None
    (resume,) = first.resumes
    assert second.resumes[0].code is resume.code  # a recompile reuses the resume function
    assert [fn.__code__ for fn in caches.resume_functions.values()] == [resume.code]
    assert _breaks_at_numpy.__code__ in caches.decoded and _breaks_at_numpy.__code__ in caches.analyses
    assert caches.dispatch.hits >= 1  # the second capture replayed x + 1 from the first


def test_captures_without_caches_share_nothing():
    caches = SymexecCaches()
    shared = _capture(caches)
    alone = _capture()
    assert alone.resumes[0].code is not shared.resumes[0].code
    assert len(caches.resume_functions) == 1


def test_the_fake_op_cache_is_emptied_past_its_limit():
    caches = SymexecCaches(dispatch_limit=0)
    _capture(caches)
    assert caches.dispatch.entries or caches.dispatch.probes
    assert caches.fake_op_cache() is caches.dispatch
    assert not caches.dispatch.entries and not caches.dispatch.probes
