"""``rlvitals._record.record`` behaves as ``dataclasses.dataclass`` on the features it supports."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle

import pytest

from rlvitals._record import record


@record(frozen=True)
class Frozen:
    a: int
    b: tuple = ()


@record
class Mutable:
    a: int
    b: list = dataclasses.field(default_factory=list)


@pytest.mark.parametrize("obj", [Frozen(1, (2,)), Mutable(1, [2])])
def test_pickles_and_copies(obj):
    """The scan's process engine and the recorder pickle records across processes."""
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(obj, protocol=proto)) == obj
    assert copy.deepcopy(obj) == obj


def _pair(frozen: bool):
    """The same class body under @dataclass and under @record."""

    def body():
        class C:
            a: int
            b: str = "x"
            c: list = dataclasses.field(default_factory=list)
            d: float = dataclasses.field(default=1.5, repr=False)

            def total(self) -> float:
                return self.a + self.d

        return C

    return dataclasses.dataclass(frozen=frozen)(body()), record(frozen=frozen)(body())


@pytest.mark.parametrize("frozen", [False, True])
def test_construction_repr_eq_match_dataclass(frozen):
    D, R = _pair(frozen)
    for args, kwargs in [((1,), {}), ((1, "y"), {"c": [2]}), ((), {"a": 3, "d": 2.5})]:
        d, r = D(*args, **kwargs), R(*args, **kwargs)
        assert dataclasses.asdict(d) == dataclasses.asdict(r)
        assert repr(d) == repr(r)
        assert (r == R(*args, **kwargs)) and (d == D(*args, **kwargs))
        assert r != d and r.__eq__(d) is NotImplemented
        assert r.total() == d.total()
        assert dataclasses.replace(r, b="z") == R(r.a, "z", r.c, r.d)
        assert copy.deepcopy(r) == r and copy.copy(r) == r
        match r:
            case R(a, b):
                assert (a, b) == (r.a, r.b)
    assert R(1).c is not R(1).c  # a fresh default per instance
    assert [f.name for f in dataclasses.fields(R)] == [f.name for f in dataclasses.fields(D)]
    assert dataclasses.is_dataclass(R) and R.__match_args__ == D.__match_args__


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {}, "missing 1 required positional argument: 'a'"),
        ((1, "y", [], 2.0, 5), {}, "takes 5 positional arguments but 6 were given"),
        ((1,), {"a": 2}, "multiple values for argument 'a'"),
        ((1,), {"e": 2}, "unexpected keyword argument 'e'"),
    ],
)
def test_bad_arguments_raise_type_error_like_dataclass(frozen, args, kwargs, message):
    D, R = _pair(frozen)
    with pytest.raises(TypeError):
        D(*args, **kwargs)
    with pytest.raises(TypeError, match=message):
        R(*args, **kwargs)


def test_frozen_refuses_assignment_and_hashes_like_dataclass():
    D, R = _pair(True)
    r = R(1, c=())
    for op in (lambda: setattr(r, "a", 2), lambda: delattr(r, "a"), lambda: setattr(r, "z", 0)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            op()
    assert hash(r) == hash(R(1, c=())) == hash(D(1, c=()))
    _, M = _pair(False)
    m = M(1)
    m.a = 5
    assert m.a == 5 and M.__hash__ is None  # mutable with eq: unhashable, as dataclass


def test_post_init_runs_and_may_validate():
    @record(frozen=True)
    class Knobs:
        window: int = 10

        def __post_init__(self):
            if self.window < 1:
                raise ValueError("window must be >= 1")

    assert Knobs().window == 10
    with pytest.raises(ValueError, match="window"):
        Knobs(0)


def test_signature_and_docstring():
    _, R = _pair(False)
    sig = inspect.signature(R)
    assert list(sig.parameters) == ["a", "b", "c", "d"]
    assert sig.parameters["b"].default == "x" and sig.parameters["a"].default is sig.empty
    assert R.__doc__ == "C(a, b, c, d)"

    @record
    class Documented:
        """Says what it is."""

        x: int = 0

    assert Documented.__doc__ == "Says what it is."


def test_subclass_record_adds_fields():
    @record(frozen=True)
    class Base:
        a: int = 1

    @record(frozen=True)
    class Child(Base):
        b: int = 2

    c = Child(5, 6)
    assert (c.a, c.b) == (5, 6) and repr(
        c
    ) == "test_subclass_record_adds_fields.<locals>.Child(a=5, b=6)"
    assert Base(5) != c


def test_unsupported_fields_are_refused():
    with pytest.raises(TypeError, match="init=False"):

        @record
        class Bad:
            x: int = dataclasses.field(default=0, init=False)
