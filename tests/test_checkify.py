"""``fungraph.experimental.checkify`` against ``jax.experimental.checkify``, in both dtype modes:
the same programs give the same error message (or None) and the same outputs, for user checks,
NaN, division and index checks, under ``jit``, ``vmap``, ``grad`` and control flow."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax as flax
from fungraph.experimental import checkify as fck
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
from jax import lax as jlax  # noqa: E402
from jax.experimental import checkify as jck  # noqa: E402

#: the API a program is written against: (transformations, numpy, lax, checkify)
LIBS = {"jax": (jax, jnp, jlax, jck), "fungraph": (fg, fnp, flax, fck)}


def _user(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        ck.check(x > 0, "{} must be positive, twice is {y}", x, y=2 * x)
        ck.check(x > -10, "second check {}", x)
        return np_.sin(x)
    return f


def _pytree_fmt(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        ck.check(True, "never")
        ck.check(x.sum() > 100, "vec {} {:.3f} d {d}", x, x[1], d={"a": x[0], "b": (x * 2, x > 1)})
        ck.check(False, "always")
        return x
    return f


def _first_of_two(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        y = np_.log(x)
        ck.check(x > 1, "x={} too small", x)
        return y / x
    return f


def _div(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    return lambda a, b: (a // b, a + b)


def _float_div(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    return lambda x, y: np_.sqrt(x) / y


def _floor_divide(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    return lambda x, y: x // y


def _gather(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    return lambda x, i: x[i] * 2


def _take_2d(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    return lambda x, i: x[:, i].sum()


def _static_index(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    return lambda x: x[7] + 1.0


def _static_negative_column(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    return lambda x: x[:, -5] * 2.0


def _dynamic_slices(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    def f(x: Any, i: Any, j: Any) -> Any:
        a = lax.dynamic_slice(x, (i, i * 0 + 1), (2, 2))
        b = lax.dynamic_update_slice(x, a * 0, (j * 0 + 1, j))
        return a.sum() + lax.dynamic_index_in_dim(b, j, 1, keepdims=False)
    return f


def _order_of_kinds(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    def f(x: Any, i: Any) -> Any:
        y = np_.log(x)
        ck.check(i < 0, "user {}", i)
        z = lax.dynamic_slice_in_dim(y, i, 2)
        return z.sum() + np_.sqrt(-x).sum()
    return f


def _at_updates(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    def f(x: Any, i: Any, j: Any) -> Any:
        y = x.at[i].set(5.0).at[i].multiply(2.0).at[i].min(-1.0)
        return y.reshape(2, 3).at[:, j].add(1.0).sum() + y.at[j].add(y[3]).sum()
    return f


def _jit_inside(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    return t.jit(_user(t, np_, lax, ck))


def _while(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    def body(c: Any) -> Any:
        ck.check(c[1] < 4.0, "step {} reached {}", c[0], c[1])
        return c[0] + 1, np_.sqrt(c[1]) + c[1]
    return lambda x: lax.while_loop(lambda c: c[0] < 5, body, (0, x))


def _fori(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    def body(i: Any, c: Any) -> Any:
        ck.check(c < 8.0, "at {} carry {}", i, c)
        return np_.log(c) * 4.0 + 2.0
    return lambda x, n: lax.fori_loop(0, n, body, x)


def _scan(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    def body(c: Any, x: Any) -> Any:
        ck.check(x != 3.0, "element {} with carry {}", x, c)
        return c * x, np_.log(x - c)
    return lambda c, xs: lax.scan(body, c, xs)


def _cond(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    def neg(x: Any) -> Any:
        ck.check(x > -2, "negative branch got {}", x)
        return np_.sqrt(x)

    def pos(x: Any) -> Any:
        ck.check(x < 2, "positive branch got {}", x)
        return x / (x - 1.0)
    return lambda x: lax.cond(x > 0, pos, neg, x)


def _grad_inside(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        ck.check(x < 3, "x={} too big", x)
        return np_.log(x) * x
    return t.grad(f)


def _vmap_inside(t: Any, np_: Any, lax: Any, ck: Any) -> Callable[..., Any]:
    return t.vmap(_user(t, np_, lax, ck))


def _f32(*xs: Any) -> tuple:
    return tuple(np.asarray(x, np.float32) for x in xs)


#: name: (program, errors, arguments)
CASES: dict[str, tuple[Callable[..., Any], str, tuple]] = {
    "user_ok": (_user, "user_checks", _f32(2.0)),
    "user_fail_fmt": (_user, "user_checks", _f32(-3.0)),
    "user_second": (_user, "user_checks", _f32(-30.0)),
    "pytree_fmt": (_pytree_fmt, "user_checks", _f32([0.5, 1.5, 2.0])),
    "python_bool_check": (_pytree_fmt, "user_checks", _f32([50.0, 60.0])),
    "nan_before_check": (_first_of_two, "all_checks", _f32(-1.0)),
    "check_before_div": (_first_of_two, "all_checks", _f32(0.5)),
    "nan_only": (_first_of_two, "nan_checks", _f32(-1.0)),
    "nan_off": (_first_of_two, "div_checks", _f32(-1.0)),
    "int_div": (_div, "div_checks", (np.array([4, 5, 6], np.int32), np.array([2, 0, 1], np.int32))),
    "int_div_ok": (_div, "div_checks", (np.array([4, 5, 6], np.int32), np.array([2, 3, 1], np.int32))),
    "float_div_first": (_float_div, "float_checks", _f32([1.0, 4.0], [1.0, 0.0])),
    "float_nan_first": (_float_div, "float_checks", _f32([-1.0, 4.0], [1.0, 0.0])),
    "float_floordiv_nan": (_floor_divide, "float_checks", _f32([1.0, 4.0], [2.0, 0.0])),
    "float_floordiv_div": (_floor_divide, "div_checks", _f32([1.0, 4.0], [2.0, 0.0])),
    "gather_oob": (_gather, "index_checks", (np.arange(5.0, dtype=np.float32), np.array([1, 9, 2, 11], np.int32))),
    "gather_negative": (_gather, "index_checks", (np.arange(5.0, dtype=np.float32), np.array(-7, np.int32))),
    "gather_ok": (_gather, "index_checks", (np.arange(5.0, dtype=np.float32), np.array([-1, 4], np.int32))),
    "take_axis1": (_take_2d, "index_checks", (np.ones((2, 3), np.float32), np.array([0, 3], np.int32))),
    "static_index": (_static_index, "index_checks", (np.ones((3, 4), np.float32),)),
    "static_index_ok": (_static_index, "index_checks", (np.ones((9, 4), np.float32),)),
    "static_negative_column": (_static_negative_column, "index_checks", (np.ones((3, 4), np.float32),)),
    **{f"dynamic_slices_{i}_{j}": (_dynamic_slices, "index_checks", (np.ones((3, 4), np.float32), np.int32(i),
                                                                      np.int32(j)))
       for i, j in ((0, 2), (2, 0), (-5, 0), (1, 3), (0, -1), (0, 9))},
    **{f"order_{errors}_{i}": (_order_of_kinds, errors, (np.array([1.0, -1.0, 2.0], np.float32), np.int32(i)))
       for errors in ("all_checks", "index_checks", "float_checks") for i in (5, -1)},
    **{f"at_{i}_{j}": (_at_updates, "index_checks", (np.arange(6.0, dtype=np.float32), np.int32(i),
                                                     np.asarray(j, np.int32)))
       for i, j in ((2, 1), (-1, [1, 2]), (6, 0), (-7, 0), (0, [1, 3]), (0, [-5, 1]), (0, -2))},
    "jit_inside": (_jit_inside, "user_checks", _f32(-3.0)),
    "while_body": (_while, "all_checks", _f32(1.5)),
    "while_ok": (_while, "user_checks", _f32(0.5)),
    "fori": (_fori, "all_checks", (np.float32(3.0), np.int32(5))),
    "scan": (_scan, "all_checks", (np.float32(1.0), np.array([2.0, 3.0, 4.0], np.float32))),
    "scan_nan": (_scan, "nan_checks", (np.float32(1.0), np.array([0.5, 3.0, 4.0], np.float32))),
    "cond_neg": (_cond, "all_checks", _f32(-3.0)),
    "cond_pos": (_cond, "all_checks", _f32(5.0)),
    "cond_div": (_cond, "float_checks", _f32(1.0)),
    "cond_nan": (_cond, "all_checks", _f32(-1.0)),
    "grad_inside": (_grad_inside, "all_checks", _f32(4.0)),
    "grad_inside_nan": (_grad_inside, "nan_checks", _f32(-1.0)),
    "vmap_inside": (_vmap_inside, "user_checks", _f32([1.0, -2.0, -3.0, 4.0])),
}


def _run(lib: str, case: str, wrap: str) -> tuple[str | None, list[np.ndarray]]:
    t, np_, lax, ck = LIBS[lib]
    program, errors, args = CASES[case]
    checked = ck.checkify(program(t, np_, lax, ck), errors=getattr(ck, errors))
    fn = {"eager": checked, "jit": t.jit(checked), "vmap": t.vmap(checked)}[wrap]
    if wrap == "vmap":
        args = tuple(np.stack([a, a + 1, a - 2]) for a in args)
    args = tuple(np_.asarray(a) for a in args)
    with np.errstate(all="ignore"):
        err, out = fn(*args)
    return err.get(), [np.asarray(o) for o in jax.tree_util.tree_leaves(out)]


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_checkify_messages_and_outputs_equal_jax(case: str, x64: bool) -> None:
    with fg.enable_x64(x64), jax.enable_x64(x64):
        want, want_out = _run("jax", case, "eager")
        got, got_out = _run("fungraph", case, "eager")
    assert got == want
    for g, w in zip(got_out, want_out, strict=True):
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("wrap", ["jit", "vmap"])
@pytest.mark.parametrize("case", ["user_fail_fmt", "nan_before_check", "gather_oob", "scan", "cond_neg", "cond_div",
                                  "cond_nan", "int_div", "user_ok", "dynamic_slices_1_3"])
def test_checkify_under_jit_and_vmap_equals_jax(case: str, wrap: str) -> None:
    with fg.enable_x64(False), jax.enable_x64(False):
        want, want_out = _run("jax", case, wrap)
        got, got_out = _run("fungraph", case, wrap)
    assert got == want
    for g, w in zip(got_out, want_out, strict=True):
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)


def _raised(fn: Callable[[], Any]) -> tuple[type, str]:
    with pytest.raises(Exception) as info:
        fn()
    return info.type, str(info.value)


def _outcome(fn: Callable[[], Any]) -> tuple[bool, str]:
    """Whether ``fn`` raised a ``ValueError`` (JAX's ``JaxRuntimeError`` is one), and its message."""
    with pytest.raises(ValueError) as info:
        fn()
    return isinstance(info.value, ValueError), str(info.value)


@pytest.mark.parametrize("x64", [False, True])
def test_check_outside_checkify_raises_as_jax(x64: bool) -> None:
    outcomes = {}
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for lib, (t, np_, lax, ck) in LIBS.items():
            f = _user(t, np_, lax, ck)
            outcomes[lib] = (_outcome(lambda f=f, np_=np_: f(np_.asarray(-1.0))),
                             _outcome(lambda f=f, t=t, np_=np_: t.jit(f)(np_.asarray(1.0))),
                             _outcome(lambda f=f, ck=ck, np_=np_: ck.checkify(f)(np_.asarray(-5.0))[0].throw()))
        f = _user(fg, fnp, flax, fck)
        assert float(f(fnp.asarray(1.0))) == pytest.approx(np.sin(1.0), rel=1e-6)
        assert fck.checkify(f)(fnp.asarray(1.0))[0].get() is None
    assert outcomes["fungraph"] == outcomes["jax"]
    assert isinstance(fck.JaxRuntimeError("m"), ValueError)


def test_check_error_debug_check_and_argument_errors_as_jax() -> None:
    for lib in LIBS:
        t, np_, lax, ck = LIBS[lib]

        def inner(x: Any, ck: Any = ck) -> Any:
            ck.debug_check(x < 0, "debug {}", x)
            return x

        def outer(x: Any, ck: Any = ck, inner: Any = inner) -> Any:
            err, y = ck.checkify(inner)(x)
            ck.check_error(err)
            return y

        one, two = np_.asarray(1.0), np_.asarray(2.0)
        assert float(inner(one)) == 1.0
        assert float(t.jit(inner)(one)) == 1.0
        assert ck.checkify(outer)(two)[0].get() == "debug 2.0 (`check` failed)"
        assert str(ck.checkify(outer)(-two)[0]) == "Error(None)"
        scalar = _raised(lambda ck=ck, np_=np_: ck.check(np_.array([True, False]), "m"))
        python_arg = _raised(lambda ck=ck: ck.check(True, "m {}", 3.0))
        not_error = _raised(lambda ck=ck: ck.check_error("no"))
        if lib == "jax":
            want = (scalar[0], python_arg, not_error[0])
        else:
            got = (scalar[0], python_arg, not_error[0])
    assert got == want


def test_grad_through_checkified_function_equals_jax() -> None:
    outs = []
    for lib in LIBS:
        t, np_, lax, ck = LIBS[lib]
        f = ck.checkify(_user(t, np_, lax, ck))
        outs.append([float(t.grad(lambda x, f=f: f(x)[1])(np_.asarray(v))) for v in (0.5, -1.0)])
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-6)


#: numpy functions whose NaN (or division by zero) JAX's checkify reports by primitive name
NAN_FUNCTIONS = ["log", "log2", "sqrt", "arccos", "arctanh", "cbrt", "power", "sin", "tan", "exp", "cosh", "fmod",
                 "remainder", "divide", "logaddexp", "std", "cumsum", "dot"]


@pytest.mark.parametrize("x64", [False, True])
def test_nan_and_division_messages_name_jax_s_primitives(x64: bool) -> None:
    x = np.array([-2.0, -0.5, 0.0, 0.5, 3.0, np.inf], np.float32)
    got, want = {}, {}
    with fg.enable_x64(x64), jax.enable_x64(x64), np.errstate(all="ignore"):
        for name in NAN_FUNCTIONS:
            for lib, messages in (("jax", want), ("fungraph", got)):
                _, np_, _, ck = LIBS[lib]
                f = getattr(np_, name)
                g = (lambda v, f=f: f(v, v[::-1])) if name in ("power", "fmod", "remainder", "divide", "logaddexp",
                                                                 "dot") else f
                messages[name] = ck.checkify(g, errors=ck.float_checks)(np_.asarray(x))[0].get()
    assert got == want
    assert len(set(want.values())) > 5


def test_checkify_of_vmap_of_while_is_refused_as_jax() -> None:
    messages, fori = [], []
    for t, np_, lax, ck in LIBS.values():
        def loop(x: Any, np_: Any = np_, lax: Any = lax) -> Any:
            return lax.while_loop(lambda c: c < x, lambda c: c + 1.0, np_.zeros_like(x))
        with pytest.raises(ValueError) as info:
            ck.checkify(t.vmap(loop))(np_.asarray([1.0, 3.0]))
        messages.append(str(info.value).split("\n--")[0])
        err, out = ck.checkify(t.vmap(lambda x, lax=lax: lax.fori_loop(0, 3, lambda i, c: c * x, x)))(
            np_.asarray([1.0, 3.0]))
        fori.append((err.get(), np.asarray(out).tolist()))
    assert messages[1] == messages[0]
    assert fori[1] == fori[0] == (None, [1.0, 81.0])


def test_vmap_of_checkify_of_while_checks_each_example_s_own_iterations() -> None:
    """(JAX 0.10 fails on this program with an internal error.)"""
    def loop(x: Any) -> Any:
        def body(c: Any) -> Any:
            fck.check((c != 1.0) | (x > 2.0), "c={} x={}", c, x)
            return c + 1.0
        return flax.while_loop(lambda c: c < x, body, fnp.zeros_like(x))

    err, out = fg.vmap(fck.checkify(loop))(fnp.asarray([1.0, 3.0, 1.5]))
    assert np.asarray(out).tolist() == [1.0, 3.0, 2.0]
    assert err.get() == "at mapped index 2: c=1.0 x=1.5 (`check` failed)"


def _gather_dims(lax: Any, offset: tuple[int, ...], collapsed: tuple[int, ...]) -> Any:
    return lax.GatherDimensionNumbers(offset_dims=offset, collapsed_slice_dims=collapsed, start_index_map=(0, 1))


#: programs of (x (3, 4), i, j) indexing with several integers at once, as JAX's index checks see them
_MULTI_INDEX: dict[str, Callable[[Any, Any], Callable[..., Any]]] = {
    "x[i, j]": lambda np_, lax: lambda x, i, j: x[i, j],
    "x[i, 1:3]": lambda np_, lax: lambda x, i, j: x[i, 1:3],
    "x[None, :, j]": lambda np_, lax: lambda x, i, j: x[None, :, j],
    "x3[i, :, j]": lambda np_, lax: lambda x, i, j: x.reshape(3, 2, 2)[i, :, j],
    "x[arrays]": lambda np_, lax: lambda x, i, j: x[np_.stack([i, j]), np_.stack([j, i])],
    "dynamic_slice": lambda np_, lax: lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 2)),
    "gather": lambda np_, lax: lambda x, i, j: lax.gather(x, np_.stack([np_.stack([i, j]), np_.stack([j, i])]),
                                                          _gather_dims(lax, (), (0, 1)), (1, 1), mode="fill"),
    "gather_window": lambda np_, lax: lambda x, i, j: lax.gather(x, np_.stack([i, j])[None],
                                                                 _gather_dims(lax, (1, 2), ()), (2, 2), mode="clip"),
    "take_along_axis": lambda np_, lax: lambda x, i, j: np_.take_along_axis(x, np_.stack([i, j])[:, None], axis=0),
    "take_clip": lambda np_, lax: lambda x, i, j: np_.take(x, np_.stack([i, j]), axis=1, mode="clip"),
    "at_get_fill": lambda np_, lax: lambda x, i, j: x.at[i, j].get(mode="fill"),
    "at_add": lambda np_, lax: lambda x, i, j: x.at[np_.stack([i, j]), 1].add(1.0),
}


def test_index_checks_of_several_indices_equal_jax() -> None:
    """Multi-index, slicing, dynamic-slice, gather, take and ``.at`` forms report the first
    index out of bounds (after JAX's wrapping of negative ones) on the original array's shape."""
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    pairs = [(1, 2), (3, 0), (0, 4), (-1, -5), (-4, 1)]
    with fg.enable_x64(False), jax.enable_x64(False):
        programs = [(jck.checkify(p(jnp, jlax), errors=jck.index_checks), fck.checkify(p(fnp, flax),
                                                                                      errors=fck.index_checks))
                    for p in _MULTI_INDEX.values()]
        theirs = jax.jit(lambda *a: [p(*a) for p, _ in programs])
        for i, j in pairs:
            args = (x, np.int32(i), np.int32(j))
            for name, (want, (_, ours)) in zip(_MULTI_INDEX, zip(theirs(*args), programs, strict=True)):
                got = ours(*(fnp.asarray(a) for a in args))
                assert got[0].get() == want[0].get(), (name, i, j)
                np.testing.assert_allclose(np.asarray(got[1]), np.asarray(want[1]), err_msg=f"{name} {i} {j}")
