"""Donating CPU results (``donate_argnums``): updated in place when nothing else sees them, then
deleted with JAX's error; copied when anything else might see them; never modified otherwise."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.backends.cpu import ENGINE_STATS
from fungraph.testing.models import mlp_params, sgd_step
from fungraph.tree_util import tree_flatten


def _problem() -> tuple[list, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 12)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]
    return mlp_params([12, 16, 16, 3], seed=3), x, y


def test_donated_sgd_step_updates_in_place_and_allocates_nothing_in_steady_state() -> None:
    params, x, y = _problem()
    plain = fg.jit(sgd_step)
    donating = fg.jit(sgd_step, donate_argnums=0)
    p_plain, p_don = params, params
    for _ in range(3):
        p_plain, l_plain = plain(p_plain, x, y)
        p_don, l_don = donating(p_don, x, y)
        np.testing.assert_allclose(l_don, l_plain, rtol=1e-6)
    for a, b in zip(tree_flatten(p_don)[0], tree_flatten(p_plain)[0]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    del a, b                      # a second reference to a leaf would make the call copy it
    exe = donating.lower(p_don, x, y).compiled.executable
    assert len(exe.donated_outputs) == 6, exe.donated_outputs      # every parameter, the last layer's too
    p = p_don
    del p_don
    for _ in range(3):
        old = p
        ptrs = [leaf.ctypes.data for leaf in tree_flatten(p)[0]]
        before = ENGINE_STATS["output_allocations"]
        p, loss = donating(p, x, y)
        assert ENGINE_STATS["output_allocations"] - before == 1          # the loss only
        assert [leaf.ctypes.data for leaf in tree_flatten(p)[0]] == ptrs
        assert all(leaf.is_deleted() for leaf in tree_flatten(old)[0])
        assert not any(leaf.is_deleted() or leaf.flags.writeable for leaf in tree_flatten(p)[0])
    for _ in range(3):
        p_plain, _ = plain(p_plain, x, y)
    for a, b in zip(tree_flatten(p)[0], tree_flatten(p_plain)[0]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _jax_deleted_message() -> str:
    import jax

    tree = [jax.numpy.ones(3, dtype=jax.numpy.float32)]
    jax.jit(lambda t: [t[0] * 2.0], donate_argnums=0)(tree)
    assert tree[0].is_deleted()
    with pytest.raises(RuntimeError) as err:
        tree[0] + 1.0
    return str(err.value)


@pytest.mark.parametrize("use", [lambda a: a + 1.0, repr, str, lambda a: a[0], lambda a: a.sum(), fnp.sin,
                                 lambda a: fnp.asarray(a), lambda a: fg.jit(lambda t: t * 2)(a), float],
                         ids=["add", "repr", "str", "index", "sum", "eager-sin", "fnp.asarray", "jit", "float"])
def test_a_donated_result_raises_jaxs_error_on_later_use(use) -> None:
    want = _jax_deleted_message()
    f = fg.jit(lambda t: [t[0] * 2.0], donate_argnums=0)
    tree = [fg.jit(lambda v: v + 1.0)(np.ones(3, np.float32))]
    out = f(tree)
    assert tree[0].is_deleted() and not out[0].is_deleted()
    with pytest.raises(RuntimeError) as err:
        use(tree[0])
    assert str(err.value) == want == "Array has been deleted with shape=float32[3]."
    assert np.asarray(tree[0]).size == 0                 # holds none of the buffer the output took over
    np.testing.assert_array_equal(out[0], np.full(3, 4.0, np.float32))


def _seen_elsewhere(r: list) -> object:
    return [lambda: r[0], lambda: r[0][1:], lambda: np.asarray(r[0]), lambda: memoryview(r[0]),
            lambda: r[0].reshape(3, 1), lambda: np.from_dlpack(r[0])]


@pytest.mark.parametrize("k", range(6), ids=["name", "slice", "asarray", "memoryview", "reshape", "dlpack"])
def test_a_donated_result_seen_elsewhere_is_copied_not_updated(k: int) -> None:
    f = fg.jit(lambda t: [t[0] * 2.0], donate_argnums=0)
    tree = [fg.jit(lambda v: v + 1.0)(np.ones(3, np.float32))]
    other = _seen_elsewhere(tree)[k]()
    out = f(tree)
    assert not tree[0].is_deleted()
    np.testing.assert_array_equal(tree[0], np.full(3, 2.0, np.float32))
    np.testing.assert_array_equal(np.asarray(other).ravel(), np.full(3, 2.0, np.float32)[:np.asarray(other).size])
    np.testing.assert_array_equal(out[0], np.full(3, 4.0, np.float32))


def test_results_passed_without_donation_are_never_modified() -> None:
    params, x, y = _problem()
    step = fg.jit(sgd_step)
    p, _ = step(params, x, y)
    kept = [np.array(leaf) for leaf in tree_flatten(p)[0]]
    for _ in range(2):
        new, _ = step(p, x, y)
    assert not any(leaf.is_deleted() for leaf in tree_flatten(p)[0])
    for leaf, want in zip(tree_flatten(p)[0], kept):
        np.testing.assert_array_equal(leaf, want)
    f = fg.jit(lambda a, b: (a + b, b * 2.0), donate_argnums=0)
    args = [fg.jit(lambda v: v + 1.0)(np.ones(3, np.float32)) for _ in range(2)]
    out = f(*args)
    assert not args[1].is_deleted()
    np.testing.assert_array_equal(args[1], np.full(3, 2.0, np.float32))
    np.testing.assert_array_equal(out[1], np.full(3, 4.0, np.float32))


def test_a_donated_bare_positional_result_is_updated_in_place_and_deleted_as_in_jax() -> None:
    import jax

    jx = jax.numpy.ones(3, dtype=jax.numpy.float32)
    jax_ptr = jx.unsafe_buffer_pointer()
    jy = jax.jit(lambda v: v * 2.0, donate_argnums=0)(jx)
    want_deleted, want_reused = jx.is_deleted(), jy.unsafe_buffer_pointer() == jax_ptr
    f = fg.jit(lambda v, w: (v * 2.0, w + 1.0), donate_argnums=0)
    x = fg.jit(lambda v: v + 1.0)(np.ones(3, np.float32))
    w = fg.jit(lambda v: v + 1.0)(np.ones(2, np.float32))
    ptr = x.ctypes.data
    out, kept = f(x, w)
    assert (x.is_deleted(), out.ctypes.data == ptr) == (want_deleted, want_reused) == (True, True)
    assert not w.is_deleted() and not out.is_deleted()
    with pytest.raises(RuntimeError) as err:
        x + 1.0
    assert str(err.value) == _jax_deleted_message()
    np.testing.assert_array_equal(out, np.full(3, 4.0, np.float32))
    np.testing.assert_array_equal(kept, np.full(2, 3.0, np.float32))


def test_a_donated_bare_positional_result_seen_elsewhere_is_copied_not_updated() -> None:
    f = fg.jit(lambda v: v * 2.0, donate_argnums=0)
    x = fg.jit(lambda v: v + 1.0)(np.ones(3, np.float32))
    also = x
    out = f(x)
    assert not x.is_deleted() and also is x
    np.testing.assert_array_equal(x, np.full(3, 2.0, np.float32))
    np.testing.assert_array_equal(out, np.full(3, 4.0, np.float32))
    y = fg.jit(lambda v: v + 1.0)(np.ones(3, np.float32))
    out = fg.jit(lambda a, b: a + b, donate_argnums=(0, 1))(y, y)
    assert not y.is_deleted()
    np.testing.assert_array_equal(out, np.full(3, 4.0, np.float32))


def _keyword_donor(jit: object, how: str) -> object:
    def f(v, w, *, scale=2.0):  # noqa: ANN001, ANN202
        return v * scale + w

    if how == "donate_argnames":
        return jit(f, donate_argnames="v")
    if how == "donate_argnums":
        return jit(f, donate_argnums=0)
    if how == "mixed":
        return jit(f, donate_argnums=1)
    return jit(lambda v, *, w: v + w, donate_argnames="w")


def _call_by_keyword(g: object, how: str, v: object, w: object) -> object:
    if how in ("donate_argnames", "donate_argnums"):
        return g(w=w, v=v)
    return g(v, w=w)


@pytest.mark.parametrize("how", ["donate_argnames", "donate_argnums", "mixed", "keyword_only"])
def test_a_donated_keyword_result_is_updated_in_place_and_deleted_as_in_jax(how: str) -> None:
    import jax

    jx, jw = jax.numpy.ones(3, dtype=jax.numpy.float32), jax.numpy.full(3, 5.0, dtype=jax.numpy.float32)
    jax_out = _call_by_keyword(_keyword_donor(jax.jit, how), how, jx, jw)
    want = [jx.is_deleted(), jw.is_deleted()]
    g = _keyword_donor(fg.jit, how)
    x = fg.jit(lambda v: v + 0.0)(np.ones(3, np.float32))
    w = fg.jit(lambda v: v + 0.0)(np.full(3, 5.0, np.float32))
    ptrs = {x.ctypes.data, w.ctypes.data}
    if how in ("donate_argnames", "donate_argnums"):
        out = g(w=w, v=x)  # the test's names are the only references, as in a user's program
    else:
        out = g(x, w=w)
    assert [x.is_deleted(), w.is_deleted()] == want and any(want)
    assert out.ctypes.data in ptrs
    np.testing.assert_array_equal(out, np.asarray(jax_out))
    with pytest.raises(RuntimeError) as err:
        (x if want[0] else w) + 1.0
    assert str(err.value) == _jax_deleted_message()


def test_a_donated_keyword_result_seen_elsewhere_is_copied_not_updated() -> None:
    f = fg.jit(lambda v: v * 2.0, donate_argnames="v")
    x = fg.jit(lambda v: v + 1.0)(np.ones(3, np.float32))
    also = x
    out = f(v=x)
    assert not x.is_deleted() and also is x
    np.testing.assert_array_equal(x, np.full(3, 2.0, np.float32))
    np.testing.assert_array_equal(out, np.full(3, 4.0, np.float32))
    view = np.asarray(x)
    out = f(v=x)
    assert not x.is_deleted()
    np.testing.assert_array_equal(view, np.full(3, 2.0, np.float32))


def _donations(lib: Any, m: Any) -> list[tuple[list[bool], list[str], Any]]:
    """For each case: which of the donated arrays are deleted, the warnings given over two
    calls (JAX warns when it compiles), and the result."""
    cases = [(lambda a, b: a + b, (3,), (3,)), (lambda a, b: (a + b, a * b), (3,), (3,)),
             (lambda a, b: a.sum() + b, (3,), (4,)), (lambda a, b: (b[:3] * 2, a.sum()), (3,), (4,)),
             (lambda a, b: (b.sum(), a + 1, b - 1), (3,), (4,))]
    out = []
    for fn, sa, sb in cases:
        f = lib.jit(fn, donate_argnums=(0, 1))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for _ in range(2):
                a, b = m.ones(sa), m.arange(float(sb[0]))
                result = f(a, b)
        out.append(([a.is_deleted(), b.is_deleted()], [str(w.message) for w in seen], result))
    return out


def test_only_donations_jax_aliases_to_an_output_are_deleted() -> None:
    """JAX matches each output to the first donated input of its shape and dtype: the others
    stay valid, with JAX's "Some donated buffers were not usable" warning when it compiles
    (fungraph deleted every donated array, ``a + b`` of two donated arrays both)."""
    from tests.helpers import jax_or_skip

    jax, jnp = jax_or_skip()
    with fg.enable_x64(False), jax.enable_x64(False):
        ours, theirs = _donations(fg, fnp), _donations(jax, jnp)
    for (deleted, warned, got), (want_deleted, want_warned, want) in zip(ours, theirs, strict=True):
        assert deleted == want_deleted
        assert warned == want_warned
        for g, w in zip(tree_flatten(got)[0], tree_flatten(want)[0], strict=True):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w))


def test_a_donated_call_of_a_seen_signature_finds_its_entry_without_the_signature_walk(monkeypatch) -> None:
    """A training step's later calls look their compiled entry up by the pytree and the leaves'
    shapes and dtypes (the fast key), as calls without donation do, and still donate in place."""
    from fungraph.jit import Jitted

    walks = []
    signature = Jitted._signature
    monkeypatch.setattr(Jitted, "_signature", lambda self, args: walks.append(1) or signature(self, args))
    params, x, y = _problem()
    donating = fg.jit(sgd_step, donate_argnums=0)
    p, want = params, [{k: v.copy() for k, v in layer.items()} for layer in params]
    for i in range(4):
        old = p
        p, loss = donating(p, x, y)
        want, want_loss = sgd_step(want, x, y)
        # the first call updates params' own arrays, which ``params`` still holds: its results
        # are copied at the second call, and donated from the third on
        assert i < 2 or all(leaf.is_deleted() for leaf in tree_flatten(old)[0])
        np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    del old
    assert len(walks) <= 1  # the first call only (none when an earlier test compiled this step)
    for a, b in zip(tree_flatten(p)[0], tree_flatten(want)[0]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_donated_numpy_inputs_are_left_as_they_were_as_in_jax() -> None:
    """JAX copies a numpy argument to the device and donates the copy: the caller's array never
    changes, bare or in a pytree, positional or keyword, on the first call or a cached one."""
    step = fg.jit(lambda p, g: [p[0] - g], donate_argnums=0)
    bare = fg.jit(lambda p: p * 2, donate_argnums=0)
    for _ in range(3):
        a, b = np.ones(3, np.float32), np.ones(3, np.float32)
        np.testing.assert_array_equal(step([a], np.full(3, 0.5, np.float32))[0], [0.5] * 3)
        np.testing.assert_array_equal(bare(b), [2.0] * 3)
        np.testing.assert_array_equal(bare(p=b), [2.0] * 3)
        np.testing.assert_array_equal(a, np.ones(3, np.float32))
        np.testing.assert_array_equal(b, np.ones(3, np.float32))
