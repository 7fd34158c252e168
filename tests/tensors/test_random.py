"""Random integers, permutations, samples and numpy sharing: ae.randint, randperm, bernoulli..."""

from __future__ import annotations

import numpy as np
import pytest

import aengine as ae


def test_randint_forms_range_dtype_and_seed() -> None:
    ae.manual_seed(3)
    a = ae.randint(10, (4, 5))
    b = ae.randint(-3, 4, size=(1000,))
    assert a.shape == (4, 5) and a.dtype == np.int64
    assert int(a.min()) >= 0 and int(a.max()) < 10
    assert set(b.tolist()) == set(range(-3, 4))  # every value reached in 1,000 draws
    ae.manual_seed(3)
    assert ae.randint(10, (4, 5)).tolist() == a.tolist()
    g = ae.Generator(1)
    assert ae.randint(0, 5, (3,), generator=g, dtype=ae.int32).dtype == np.int32
    assert ae.randint_like(ae.zeros(2, 3), 7).shape == (2, 3)
    assert ae.randint_like(ae.zeros(2, dtype=ae.int64), 2, 4).dtype == np.int64


def test_randint_errors_say_what_to_do() -> None:
    with pytest.raises(RuntimeError, match="from=5 >= to=3"):
        ae.randint(5, 3, (2,))
    with pytest.raises(TypeError, match=r"\(high, size\) or \(low, high, size\)"):
        ae.randint(5)
    with pytest.raises(TypeError, match="'high' must be an int"):
        ae.randint(0, 2.5, (2,))


def test_randperm_is_a_permutation() -> None:
    p = ae.randperm(50)
    assert p.dtype == np.int64 and sorted(p.tolist()) == list(range(50))
    assert ae.randperm(0).shape == (0,)
    with pytest.raises(RuntimeError, match="non-negative"):
        ae.randperm(-1)


def test_bernoulli_draws_zeros_and_ones_with_the_probabilities() -> None:
    ae.manual_seed(0)
    p = ae.full((20000,), 0.25)
    d = ae.bernoulli(p)
    assert d.dtype == p.dtype and set(np.unique(d.numpy()).tolist()) <= {0.0, 1.0}
    assert 0.23 < float(d.mean()) < 0.27  # seeded: the same draws every run
    assert ae.bernoulli(ae.zeros(3), p=1.0).tolist() == [1.0, 1.0, 1.0]
    assert ae.tensor([0.0, 1.0]).bernoulli().tolist() == [0.0, 1.0]
    assert not ae.bernoulli(ae.tensor([0.5], requires_grad=True)).requires_grad
    with pytest.raises(RuntimeError, match=r"in \[0, 1\]"):
        ae.bernoulli(ae.tensor([1.5]))


def test_multinomial_rows_replacement_and_errors() -> None:
    ae.manual_seed(0)
    w = ae.tensor([[0.0, 1.0, 0.0, 3.0], [1.0, 1.0, 1.0, 1.0]])
    s = ae.multinomial(w, 2)
    assert s.shape == (2, 2) and s.dtype == np.int64
    assert sorted(s[0].tolist()) == [1, 3]  # without replacement: the two non-zero ones
    assert len(set(s[1].tolist())) == 2
    r = ae.tensor([0.0, 1.0, 0.0]).multinomial(5, replacement=True)
    assert r.tolist() == [1] * 5
    with pytest.raises(RuntimeError, match="without replacement"):
        ae.multinomial(ae.tensor([0.0, 1.0]), 2)
    with pytest.raises(RuntimeError, match="element < 0"):
        ae.multinomial(ae.tensor([-1.0, 1.0]), 1)
    with pytest.raises(RuntimeError, match="1 or 2 dim"):
        ae.multinomial(ae.ones(2, 2, 2), 1)


def test_from_numpy_shares_memory() -> None:
    a = np.arange(3.0)
    t = ae.from_numpy(a)
    a[1] = 10.0
    assert t.tolist() == [0.0, 10.0, 2.0] and t.dtype == np.float64
    with pytest.raises(TypeError, match="expected np.ndarray"):
        ae.from_numpy([1, 2])  # type: ignore[arg-type]


def test_conversions_as_torch() -> None:
    torch = pytest.importorskip("torch", reason="torch (CPU) not installed: oracle skipped")
    x = np.array([1.5, -2.0, 0.0], dtype=np.float32)
    for m in ("long", "int", "half", "bool", "float", "double"):
        got = getattr(ae.tensor(x), m)()
        want = getattr(torch.from_numpy(x), m)()
        assert str(got.dtype) == str(want.dtype).replace("torch.", ""), m
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert ae.tensor(x).type() == "aengine.FloatTensor"
    assert ae.tensor(x).type(ae.float64).dtype == np.float64
    with pytest.raises(ValueError, match="must be cuda device"):
        ae.tensor(x).cuda("cpu")
