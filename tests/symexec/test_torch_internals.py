"""The private torch attributes symexec reads answer as documented on this torch."""

import torch

from kiln.symexec._torch_internals import version_counter, view_base


def test_version_counter_moves_on_inplace_changes_and_through_views():
    x = torch.zeros(3)
    before = version_counter(x)
    x.add_(1)
    assert version_counter(x) == before + 1
    x[0:1].mul_(2)
    assert version_counter(x) == before + 2
    with torch.inference_mode():
        assert version_counter(torch.zeros(1)) == -1


def test_view_base():
    x = torch.zeros(3)
    assert view_base(x) is None
    assert view_base(x[1:]) is x
