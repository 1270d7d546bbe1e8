"""Shared fixtures for kiln.guards tests: hostile objects that try to make checkers raise."""

import pytest


class RaisingGetattr:
    """Every attribute lookup raises (even ones that exist on the class)."""

    def __getattribute__(self, name):
        raise RuntimeError(f"no attribute access: {name}")


class RaisingEq:
    """Comparisons and hashing raise; so does truth testing."""

    def __eq__(self, other):
        raise RuntimeError("no ==")

    def __ne__(self, other):
        raise RuntimeError("no !=")

    def __bool__(self):
        raise RuntimeError("no bool")

    def __len__(self):
        raise RuntimeError("no len")

    __hash__ = None


class WeirdEq:
    """== returns an object whose truth value raises."""

    def __eq__(self, other):
        return RaisingEq()


class RaisingGetitem(dict):
    """A dict whose item access and iteration raise."""

    def __getitem__(self, key):
        raise RuntimeError("no getitem")

    def __iter__(self):
        raise RuntimeError("no iter")

    def keys(self):
        raise RuntimeError("no keys")


class Deleted:
    """Had attribute ``a`` once; it is deleted on construction."""

    def __init__(self):
        self.a = 1
        del self.a


class BadRepr:
    def __repr__(self):
        raise RuntimeError("no repr")


@pytest.fixture
def hostile_values():
    """A list of values that misbehave under attribute access, comparison, len or repr."""
    return [RaisingGetattr(), RaisingEq(), WeirdEq(), RaisingGetitem(a=1), Deleted(), BadRepr(),
            None, 3, "s", (1, 2), [1], {"a": 1}, object(), float("nan")]
