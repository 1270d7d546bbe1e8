"""NoStorageSharing on real tensors (the compiled check and the explanation agree), and
TensorMatch.admits_same_tensor (which sources could be one tensor)."""

import pytest
import torch

from kiln.guards import GuardSet, LocalSource, NoStorageSharing, TensorMatch
from kiln.guards._storage_kinds import shared_storage

A, B, C = LocalSource("a"), LocalSource("b"), LocalSource("c")


def _agree(guard, frame, expected):
    gs = GuardSet([guard])
    assert gs.compile()(frame) is expected
    assert gs.compile(native=False)(frame) is expected
    assert (gs.explain(frame) is None) is expected


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        pytest.param(lambda: (torch.zeros(4), torch.zeros(4), torch.zeros(2)), True, id="separate"),
        pytest.param(lambda: (lambda b: (b[0:2], b[2:4], torch.zeros(1)))(torch.zeros(4)), False, id="views"),
        pytest.param(lambda: (lambda b: (b, torch.ones(1), b.view(2, 2)))(torch.zeros(4)), False, id="base_and_view"),
        pytest.param(lambda: (lambda b: (torch.ones(1), b, b))(torch.zeros(4)), False, id="same_tensor"),
        pytest.param(lambda: (torch.zeros(0), torch.zeros(0), torch.zeros(0)), True, id="empty"),
    ],
)
def test_no_storage_sharing(make, expected):
    a, b, c = make()
    guard = NoStorageSharing((A, B, C))
    _agree(guard, {"a": a, "b": b, "c": c}, expected)
    text = GuardSet([guard]).explain({"a": a, "b": b, "c": c})
    if not expected:
        assert "views of one storage" in text


def test_describe_names_the_sources():
    assert NoStorageSharing((A, B)).describe() == "no storage shared among tensors L['a'], L['b']"
    assert NoStorageSharing((A, B)) == NoStorageSharing([A, B])


def test_a_value_without_storage_fails_the_check():
    assert GuardSet([NoStorageSharing((A, B))]).compile()({"a": 1, "b": torch.zeros(1)}) is False


def test_shared_storage_reports_the_first_pair():
    base = torch.zeros(6)
    assert shared_storage((torch.zeros(1), base[:2], torch.zeros(1), base[3:])) == (1, 3)
    assert shared_storage((torch.zeros(1),)) is None


def test_admits_same_tensor():
    x = torch.randn(2, 3)
    same = TensorMatch.from_tensor(A, x)
    assert same.admits_same_tensor(TensorMatch.from_tensor(B, x.clone()))
    assert not same.admits_same_tensor(TensorMatch.from_tensor(B, torch.randn(3, 2)))
    assert not same.admits_same_tensor(TensorMatch.from_tensor(B, x.double()))
    assert not same.admits_same_tensor(TensorMatch.from_tensor(B, torch.nn.Parameter(x)))
    assert not same.admits_same_tensor(TensorMatch.from_tensor(B, x.t().contiguous().t()))
    free = TensorMatch.from_tensor(B, torch.randn(5, 3), dynamic_sizes=[0], dynamic_strides=[1])
    assert same.admits_same_tensor(free)
    assert not same.admits_same_tensor(TensorMatch.from_tensor(B, torch.randn(2, 3, 1)))


def test_tensors_without_a_plain_storage_share_nothing():
    sparse = torch.eye(2).to_sparse()
    assert shared_storage((sparse, sparse, torch.zeros(1))) is None
