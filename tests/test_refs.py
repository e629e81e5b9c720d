"""Mutable array references (``new_ref``, ``Ref``, ``freeze``, ``jax.ref``'s functions) against
JAX 0.10: created in a function, read and written eagerly, under ``jit``, ``vmap`` and ``grad``,
and used as accumulators in ``fori_loop``, ``scan``, ``while_loop`` and ``cond``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax as flax
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
from jax import lax as jlax  # noqa: E402

LIBS = {"jax": (jax, jnp, jlax), "fungraph": (fg, fnp, flax)}


def _accumulators(api: Any, jnp_: Any, lax: Any, branch: bool = True) -> Any:
    """References created inside the function, written by loop bodies and (``branch``) a ``cond``
    branch (JAX does not batch a ``cond`` that writes a reference)."""

    def f(x: Any) -> Any:
        acc = api.new_ref(jnp_.zeros_like(x))
        count = api.new_ref(0)

        def body(i: Any, c: Any) -> Any:
            acc[...] += x * i
            acc[0] = acc[0] + 1.0
            return c + acc[1]

        c = lax.fori_loop(0, 3, body, 0.0)
        total = api.new_ref(jnp_.zeros((), x.dtype))

        def step(carry: Any, xi: Any) -> Any:
            total[...] += xi
            count[...] += 1
            return carry * 2, total[...]

        carry, ys = lax.scan(step, 1.0, x)

        def grow(k: Any) -> Any:
            count[...] += k
            return k + 1

        k = lax.while_loop(lambda k: k < 4, grow, 0)
        if branch:
            lax.cond(x[0] > -1, lambda: total.__setitem__(..., total[...] * 10), lambda: None)
        return acc[...], c, carry, ys, api.freeze(total), count[...], k

    return f


def _same(a: Any, b: Any) -> None:
    for u, v in zip(a, b, strict=True):
        u, v = np.asarray(u), np.asarray(v)
        assert u.dtype == v.dtype and u.shape == v.shape
        np.testing.assert_allclose(u, v, rtol=1e-6)


def test_references_as_loop_and_branch_accumulators_match_jax() -> None:
    """Eagerly, under ``jit`` and under ``vmap`` (JAX's results jitted, to compile once)."""
    x = np.array([0.5, 1.0, 2.0], np.float32)
    xs = np.stack([x, x + 1])
    with fg.enable_x64(False), jax.enable_x64(False):
        f, g = _accumulators(fg, fnp, flax), _accumulators(fg, fnp, flax, branch=False)
        got = [f(x), fg.jit(f)(x), fg.vmap(g)(xs)]
        f, g = _accumulators(jax, jnp, jlax), _accumulators(jax, jnp, jlax, branch=False)
        want = jax.jit(lambda x, xs: (f(x), jax.vmap(g)(xs)))(x, xs)
    for a, b in zip(got, [want[0], want[0], want[1]], strict=True):
        _same(a, b)


def test_reference_gradient_and_scan_accumulator_match_jax() -> None:
    def loss(api: Any, jnp_: Any, lax: Any) -> Any:
        def f(w: Any) -> Any:
            ref = api.new_ref(jnp_.zeros_like(w))

            def step(c: Any, xi: Any) -> Any:
                ref[...] += jnp_.sin(w * xi)
                ref[1:] = ref[1:] * c
                return c + 0.5, None

            lax.scan(step, 1.0, jnp_.arange(1.0, 4.0))
            return (ref[...] ** 2).sum()
        return f

    w = np.array([0.3, -0.7, 1.1])
    with fg.enable_x64(True), jax.enable_x64(True):
        outs = [api.jit(api.value_and_grad(loss(api, jnp_, lax)))(w) for api, jnp_, lax in LIBS.values()]
    _same(*outs)


def test_reference_operations_and_errors_match_jax() -> None:
    """``r[...]``/``r[i]`` reads and writes, ``swap``, ``addupdate``, ``get``/``set``, ``repr``,
    the shape/dtype attributes, and JAX's errors for a value of the wrong shape or dtype."""
    def run(api: Any, jnp_: Any) -> tuple[list[Any], list[str]]:
        r = api.new_ref(jnp_.zeros(3, jnp_.float32))
        r[...] = jnp_.ones(3, jnp_.float32)
        r[1] += 5.0
        r[1:] = jnp_.array([7.0, 8.0], jnp_.float32)
        old = api.ref.swap(r, 0, 9.0)
        api.ref.addupdate(r, ..., jnp_.ones(3, jnp_.float32))
        api.ref.set(r, 2, 4.0)
        values = [old, api.ref.get(r, ()), r[0], api.freeze(r), repr(r), (r.shape, r.dtype, r.ndim, r.size),
                  isinstance(r, api.Ref)]
        errors = []
        for bad in (lambda: r.__setitem__(..., 1.0), lambda: r.__setitem__(..., jnp_.ones(3, jnp_.int32)),
                    lambda: r.__setitem__(jnp_.array([0, 2]), 3.0), lambda: api.ref.addupdate(r, ..., 1.0)):
            with pytest.raises(ValueError) as err:
                bad()
            errors.append(str(err.value).split(". Value")[0].split(" Transforms")[0])
        with pytest.raises(TypeError):
            r + 1
        return values, errors

    with fg.enable_x64(False), jax.enable_x64(False):
        (gv, ge), (jv, je) = run(fg, fnp), run(jax, jnp)
    _same(gv[:4], jv[:4])
    assert gv[4:] == jv[4:] and ge == je


def test_outer_reference_in_jit_matches_jax() -> None:
    """A reference a jitted function closes over, or takes as an argument, is passed in and
    written back on every call (a loop in the function threading it too), as in JAX."""
    def run(api: Any, jnp_: Any, lax: Any) -> list[Any]:
        acc, count = api.new_ref(jnp_.zeros(3, jnp_.float32)), api.new_ref(0)

        @api.jit
        def f(x: Any) -> Any:
            acc[...] += x

            def body(i: Any, s: Any) -> Any:
                count[...] += 1
                return s + acc[i]

            return lax.fori_loop(0, 3, body, 0.0)

        @api.jit
        def g(r: Any, y: Any) -> Any:
            r[...] = r[...] * y
            return r[0]

        return [f(jnp_.ones(3, jnp_.float32)), f(jnp_.full(3, 2.0, jnp_.float32)), acc[...], count[...],
                g(acc, 2.0), g(acc, 3.0), acc[...]]

    with fg.enable_x64(False), jax.enable_x64(False):
        _same(run(fg, fnp, flax), run(jax, jnp, jlax))


def test_outer_reference_is_threaded_and_never_leaks() -> None:
    """A reference made outside a loop is threaded through it, also eagerly and nested; an
    error in the body leaves it as it was; a value of a transformation applied after the
    reference was made cannot be written into it (JAX refuses it too)."""
    r = fg.new_ref(fnp.zeros(2))
    flax.fori_loop(0, 3, lambda i, c: flax.fori_loop(0, 2, lambda j, d: r.__setitem__(..., r[...] + 1.0) or d, c), 0)
    np.testing.assert_array_equal(r[...], [6.0, 6.0])

    def failing(i: Any, c: Any) -> Any:
        r[...] = r[...] * 2
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        flax.fori_loop(0, 2, failing, 0)
    assert type(r[...]) is type(fnp.zeros(2)) and float(r[0]) == 6.0
    with pytest.raises(ValueError, match="transformation .* was written into it"):
        fg.vmap(lambda y: r.__setitem__(..., y))(fnp.ones((3, 2)))
    with pytest.raises(TypeError, match=r"a Ref is not an array .*r\[\.\.\.\]"):
        fnp.sin(r)
    assert float(r[0]) == 6.0
