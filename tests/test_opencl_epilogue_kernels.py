"""OpenCL epilogues: the elementwise region that consumes a product or a reduction computed
inside that kernel (bitwise what separate kernels give), donated addends written in place,
and the cases where an epilogue would be wrong and is left apart.

Without an OpenCL platform these tests skip, except under ``CI=true`` where a missing
driver is a failure.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from fungraph.jit import clear_caches
from fungraph.testing import Program, programs
from fungraph.testing.models import sgd_step
from fungraph.tree_util import tree_flatten
from tests.helpers import GPU_LIKE, kernel_notes

# the CPU kernel choices are checked on every driver; the GPU_LIKE cases undo this
pytestmark = pytest.mark.usefixtures("require_opencl", "cpu_code_paths")


FORMS = {"a @ b": (lambda a: a, lambda b: b), "a.T @ b": (lambda a: a.T, lambda b: b),
         "a @ b.T": (lambda a: a, lambda b: b.T)}


def _operands(rng: np.random.Generator, form: str, m: int, k: int, n: int, dtype: type) -> tuple:
    a = rng.standard_normal((k, m) if form == "a.T @ b" else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if form == "a @ b.T" else (k, n)).astype(dtype)
    return a, b


EPILOGUES = {
    "w - p": lambda p, w, c, q: w - p,
    "w + p": lambda p, w, c, q: w + p,
    "p - w": lambda p, w, c, q: p - w,
    "relu(p + c) and its mask": lambda p, w, c, q: (fnp.where(p + c > 0, p + c, 0.0), p + c > 0),
    "select by a stored mask": lambda p, w, c, q: fnp.where(q, p, 0.0) * 2.0,
    "max(p, w) * scalar": lambda p, w, c, q: fnp.maximum(p, w) * c[0],
}


@pytest.mark.parametrize("shape, form, dtype", [
    ((130, 70, 40), "a @ b", np.float32), ((130, 70, 40), "a.T @ b", np.float32),
    ((130, 70, 40), "a @ b.T", np.float32), ((67, 33, 53), "a.T @ b", np.float64),
    ((256, 100, 1024), "a @ b.T", np.float32)])
def test_elementwise_region_of_a_product_runs_in_the_product_kernels(shape: tuple[int, int, int], form: str,
                                                                      dtype: type) -> None:
    """The fused region consuming a product (a sum with ``w``, bias + ReLU writing the value
    and its mask, a select by a stored mask, a max and a scalar scale) runs on each block in
    every kernel of the product: the bulk, the overlapping (``a @ b``) or strided (``a.T @ b``)
    row panel, the padded column panel, the scalar corner, and the product computed
    transposed (``a @ b.T`` at 256 x 100 x 1024), with no kernel of its own. One program holds
    every case (one product per case, on its own ``b``)."""
    m, k, n = shape
    rng = np.random.default_rng(m * n)
    a, _ = _operands(rng, form, m, k, n, dtype)
    bs = [_operands(rng, form, m, k, n, dtype)[1] for _ in EPILOGUES]
    w = rng.standard_normal((m, n)).astype(dtype)
    c = rng.standard_normal(n).astype(dtype)
    q = rng.standard_normal((m, n)) > 0
    fa, fb = FORMS[form]
    tol = 1e-4 if dtype == np.float32 else 1e-10

    def f(a, bs, w, c, q):
        return [epi(fa(a) @ fb(b), w, c, q) for epi, b in zip(EPILOGUES.values(), bs)]

    j = fg.jit(f, backend="opencl")
    got = j(a, bs, w, c, q)
    wide = [x.astype(np.float64) for x in (a, w, c)]
    want = f(wide[0], [b.astype(np.float64) for b in bs], wide[1], wide[2], q)
    for what, b, g_all, w_all in zip(EPILOGUES, bs, got, want):
        for g, v in zip(*(x if isinstance(x, tuple) else (x,) for x in (g_all, w_all))):
            g, v = np.asarray(g), np.asarray(v)
            if v.dtype == bool:
                near = np.abs(fa(wide[0]) @ fb(b.astype(np.float64)) + wide[2]) < 1e-3
                assert np.all((g == v) | near), what
            else:
                np.testing.assert_allclose(g, v, rtol=tol, atol=tol * np.abs(v).max(), err_msg=what)
    text = kernel_notes(j, a, bs, w, c, q)
    assert text.count("epilogue") >= len(EPILOGUES)
    assert not _elementwise_kernels(text)


def _elementwise_kernels(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("kernel") and "[elementwise]" in line]


def _apart(f, args, flag: str) -> list[np.ndarray]:
    """``f``'s outputs on OpenCL with the lowering's epilogue switch ``flag`` off: the regions
    in kernels of their own."""
    from fungraph.backends.opencl import lowering

    setattr(lowering, flag, False)
    clear_caches()
    try:
        return [np.asarray(x) for x in tree_flatten(fg.jit(f, backend="opencl")(*args))[0]]
    finally:
        setattr(lowering, flag, True)
        clear_caches()


def test_epilogue_is_bitwise_the_separate_kernels() -> None:
    """The epilogue runs the region's operations in the same order as its own kernel would."""
    rng = np.random.default_rng(7)
    a, b = _operands(rng, "a @ b", 100, 50, 70, np.float32)
    c = rng.standard_normal(70).astype(np.float32)

    def f(a, b, c):
        h = a @ b + c
        return fnp.where(h > 0, h, 0.0) * 0.5 - c, fnp.maximum(h, -h) / 3.0

    fused = [np.asarray(x) for x in fg.jit(f, backend="opencl")(a, b, c)]
    apart = _apart(f, (a, b, c), "DOT_EPILOGUES")
    for x, y in zip(fused, apart):
        np.testing.assert_array_equal(x, y)


@st.composite
def _epilogue_programs(draw: st.DrawFn) -> tuple:
    """A product (optionally batched, any of the three forms, any edge sizes) followed by a
    random chain of epilogue operations on it, on full-shape, row, column and scalar inputs."""
    batch = draw(st.sampled_from([(), (2,)]))
    m = draw(st.integers(64, 100))
    k = draw(st.integers(1, 80))
    n = draw(st.sampled_from([1, 10, 16, 37]))
    form = draw(st.sampled_from(list(FORMS) if not batch else ["a @ b"]))
    ops = draw(st.lists(st.tuples(st.sampled_from(["add", "sub", "mul", "max", "min", "relu", "neg", "abs", "gt"]),
                                  st.sampled_from(["full", "row", "col", "scalar", "prev"])), min_size=1, max_size=4))
    return batch, m, k, n, form, ops


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_epilogue_programs(), st.integers(0, 2**16))
def test_random_epilogues_match_numpy(program: tuple, seed: int) -> None:
    batch, m, k, n, form, ops = program
    rng = np.random.default_rng(seed)
    a, b = _operands(rng, form, m, k, n, np.float32)
    if batch:
        a, b = np.stack([a, a * 0.5]), np.stack([b, -b])
    shape = (*batch, m, n)
    extra = {"full": rng.standard_normal(shape), "row": rng.standard_normal(n), "col": rng.standard_normal((m, 1)),
             "scalar": rng.standard_normal(())}
    extra = {key: v.astype(np.float32) for key, v in extra.items()}
    fa, fb = FORMS[form]

    def f(a, b, full, row, col, scalar, xp=fnp):
        p = xp.matmul(fa(a) if not batch else a, fb(b) if not batch else b)
        values = [p]
        args = {"full": full, "row": row, "col": col, "scalar": scalar}
        for op, src in ops:
            x = values[-1]
            y = values[-2] if src == "prev" and len(values) > 1 else args["full" if src == "prev" else src]
            if op == "relu":
                x = xp.where(x > 0, x, 0.0)
            elif op == "neg":
                x = -x
            elif op == "abs":
                x = xp.abs(x)
            elif op == "gt":
                x = xp.where(x > y, x, y * 0.5)
            else:
                x = {"add": xp.add, "sub": xp.subtract, "mul": xp.multiply, "max": xp.maximum,
                     "min": xp.minimum}[op](x, y)
            values.append(x)
        return values[-1]

    args = (a, b, extra["full"], extra["row"], extra["col"], extra["scalar"])
    got = np.asarray(fg.jit(f, backend="opencl")(*args))
    want = f(*(x.astype(np.float64) for x in args), xp=np)
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale * max(1, k) ** 0.5)


def test_product_epilogue_writes_a_donated_addend_in_place() -> None:
    """An SGD update ``w - x.T @ g`` with ``w`` donated writes into ``w``'s buffer."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((100, 64)).astype(np.float32)
    x = rng.standard_normal((256, 100)).astype(np.float32)
    g = rng.standard_normal((256, 64)).astype(np.float32)
    step = fg.jit(lambda w, x, g: w - x.T @ g, backend="opencl", donate_argnums=0)
    wd = fg.jit(lambda v: v * 1.0, backend="opencl")(w)
    ptr = wd.buffer.int_ptr
    out = step(wd, x, g)
    np.testing.assert_allclose(np.asarray(out), w - x.T @ g, rtol=1e-4, atol=1e-3)
    assert out.buffer.int_ptr == ptr and wd.is_deleted()
    assert "epilogue sub" in kernel_notes(step, out, x, g)


def test_a_scaled_product_is_scaled_in_its_epilogue() -> None:
    """``w - lr * (x.T @ g)``: on OpenCL the scale stays on the product and the epilogue applies
    it; the CPU backend's rule that moves it onto the smaller factor ``x`` would cost a kernel."""
    rng = np.random.default_rng(8)
    w = rng.standard_normal((200, 128)).astype(np.float32)
    x = rng.standard_normal((64, 200)).astype(np.float32)
    g = rng.standard_normal((64, 128)).astype(np.float32)
    step = fg.jit(lambda w, x, g: w - 0.125 * (x.T @ g), backend="opencl")
    np.testing.assert_allclose(np.asarray(step(w, x, g)), w - 0.125 * (x.T @ g), rtol=1e-4, atol=1e-3)
    text = kernel_notes(step, w, x, g)
    kernels = [line for line in text.splitlines() if line.startswith("kernel")]
    assert all("dot_general" in line or "pack" in line for line in kernels), kernels
    assert "epilogue fma" in text
    cpu = fg.jit(lambda w, x, g: w - 0.125 * (x.T @ g)).lower(w, x, g).text
    assert "mul" in cpu.split("dot_general")[0]  # the CPU backend scales x first


def _reduce_epilogue_cases() -> dict[str, tuple]:
    rng = np.random.default_rng(9)
    x = rng.standard_normal((96, 64)).astype(np.float32)   # 64 columns: 16-column sums on CPUs
    b = rng.standard_normal(64).astype(np.float32)
    v = rng.standard_normal(20000)                         # long: two passes
    s = rng.standard_normal((3, 37)).astype(np.float32)
    return {"b - lr * sum(x, 0)": (lambda x, b: b - 0.1 * x.sum(axis=0), (x, b)),
            "sum(x, 0) > b": (lambda x, b: x.sum(axis=0) > b, (x, b)),
            "two regions: sum(x, 0) > b, sum(x, 0) * b": (lambda x, b: (x.sum(axis=0) > b, x.sum(axis=0) * b), (x, b)),
            "two regions: log(s), x / s": (lambda x: (fnp.log(fnp.exp(x).sum(axis=1)), 2.0 / fnp.exp(x).sum(axis=1)),
                                           (x,)),
            "mean": (lambda v: fnp.mean(v), (v,)),
            "sqrt(sum(v * v)) + 1": (lambda v: fnp.sqrt(fnp.sum(v * v)) + 1.0, (v,)),
            "2 * mean over rows": (lambda x: x.mean(axis=1) * 2.0, (x,)),
            "argmax + 1": (lambda s: fnp.argmax(s, axis=1) + 1, (s,)),
            "exp(max(s, 0))": (lambda s: fnp.exp(s.max(axis=0)), (s,)),
            "mean over rows, keepdims": (lambda x: x.mean(axis=1, keepdims=True), (x,)),
            "log of a reshaped sum, stop_gradient of a max": (lambda x: (
                fnp.log(fnp.abs(x).sum(axis=1).reshape(-1, 1)) * 0.5,
                fnp.abs(lax.stop_gradient(x.max(axis=1, keepdims=True))) * 2.0), (x,)),
            "sum(x, 0, keepdims) + row": (lambda x, b: x.sum(axis=0, keepdims=True) * 0.5 + b[None], (x, b))}




@pytest.mark.parametrize("device_as", [{}, GPU_LIKE], indirect=True, ids=["as-is", "gpu-like"])
@pytest.mark.parametrize("case", list(_reduce_epilogue_cases()))
def test_reduction_computes_the_region_that_consumes_it(device_as, case: str) -> None:
    """A reduction whose result only feeds one elementwise region of its shape, or of its
    shape with ``keepdims`` (a mean's division, a bias update), evaluates that region where it
    stores: no elementwise kernel is left, and the values are bitwise those of the separate
    kernels."""
    f, args = _reduce_epilogue_cases()[case]
    j = fg.jit(f, backend="opencl")
    got = [np.asarray(x) for x in tree_flatten(j(*args))[0]]
    want = tree_flatten(f(*args))[0]
    for g_, w_ in zip(got, want):
        np.testing.assert_allclose(g_, np.asarray(w_), rtol=2e-5, atol=1e-4)
    text = kernel_notes(j, *args)
    assert "epilogue" in text and not _elementwise_kernels(text), text
    for g_, a_ in zip(got, _apart(f, args, "REDUCE_EPILOGUES")):
        np.testing.assert_array_equal(g_, a_)


@pytest.mark.parametrize("device_as", [{}, GPU_LIKE], indirect=True, ids=["as-is", "gpu-like"])
@pytest.mark.parametrize("shape", [(96, 64), (50, 7)])
def test_reduction_epilogue_writes_a_donated_bias_in_place(device_as, shape) -> None:
    """A bias update ``b - lr * sum(g, 0)`` with ``b`` donated: the reduction's kernel reads
    each element of ``b`` only where it stores it, so the result takes ``b``'s buffer."""
    rng = np.random.default_rng(11)
    g = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape[1]).astype(np.float32)
    step = fg.jit(lambda b, g: b - 0.1 * g.sum(axis=0), backend="opencl", donate_argnums=0)
    bd = fg.jit(lambda v: v * 1.0, backend="opencl")(b)
    ptr = bd.buffer.int_ptr
    out = step(bd, g)
    np.testing.assert_allclose(np.asarray(out), b - 0.1 * g.sum(axis=0), rtol=1e-5, atol=1e-5)
    assert out.buffer.int_ptr == ptr and bd.is_deleted()
    assert "epilogue" in kernel_notes(step, out, g)


def test_training_step_reductions_absorb_the_loss_and_bias_updates() -> None:
    """An MLP's SGD step: the loss's softmax sums, its mean and the bias updates run in their
    reductions' kernels (a sum feeding both ``log`` and a division, a reshape taken before
    the sum included; the row maximum's ``stop_gradient`` and finite check, and the row sum's
    ``log`` and reciprocal through the reshape that restores its axis), with parameters and
    loss bitwise those of separate kernels."""
    from fungraph.testing.models import mlp_params

    rng = np.random.default_rng(14)
    params = mlp_params([20, 32, 32, 10], seed=14)
    x = rng.standard_normal((24, 20)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 24)]
    step = fg.jit(sgd_step, backend="opencl")
    got = [np.asarray(v) for v in tree_flatten(step(params, x, y))[0]]
    for g_, a_ in zip(got, _apart(sgd_step, (params, x, y), "REDUCE_EPILOGUES")):
        np.testing.assert_array_equal(g_, a_)
    text = kernel_notes(step, params, x, y)
    assert "(2 outputs)" in text and text.count("epilogue") >= 5, text
    assert "reduce_max [reduce, epilogue reshape, stop_gradient, abs, lt, select]" in text, text
    assert "[reduce, epilogue reshape, log, reshape, div, mul (2 outputs)]" in text, text


def test_sixteen_column_sum_leaves_a_region_it_cannot_vectorise_apart() -> None:
    """``exp(sum(x, 0))``: the 16-column sum evaluates epilogues on vector lanes, which take no
    ``exp``, so the sum keeps its fast form and ``exp`` its own kernel."""
    x = np.random.default_rng(13).standard_normal((96, 64)).astype(np.float32) * 0.1
    j = fg.jit(lambda x: fnp.exp(x.sum(axis=0)), backend="opencl")
    np.testing.assert_allclose(np.asarray(j(x)), np.exp(x.sum(axis=0)), rtol=1e-5)
    text = kernel_notes(j, x)
    assert "16 columns per work-item" in text and "epilogue" not in text and _elementwise_kernels(text)


@pytest.mark.parametrize("device_as", [{}, GPU_LIKE], indirect=True, ids=["as-is", "gpu-like"])
def test_reduction_epilogue_needs_each_element_where_it_is_stored(device_as) -> None:
    """``rev(2 * sum(x, 0))`` and the like read the result at other elements than they store
    (a random program found ``rev`` of a ``keepdims`` sum computed wrongly): the result is
    stored and the region keeps its own kernel."""
    rng = np.random.default_rng(16)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    z = rng.standard_normal((3, 4, 6)).astype(np.float32)
    cases = [(lambda x: (x.sum(axis=0) * 2.0)[::-1], x), (lambda x: x.sum(axis=0, keepdims=True)[:, ::-1], x),
             (lambda z: (z.sum(axis=1) + 1.0).T * 2.0, z), (lambda x: fnp.maximum(x.max(axis=1), 0.0)[1:4] * 3.0, x)]
    for f, a in cases:
        j = fg.jit(f, backend="opencl")
        np.testing.assert_allclose(np.asarray(j(a)), np.asarray(f(a)), rtol=1e-5, atol=1e-5)
        assert "epilogue" not in kernel_notes(j, a)


@pytest.mark.parametrize("device_as", [{}, GPU_LIKE], indirect=True, ids=["as-is", "gpu-like"])
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prog=programs(max_eqns=14))
def test_random_programs_with_reduction_epilogues_match_the_cpu(device_as, prog: Program) -> None:
    """Random programs (``keepdims`` sums, means and maxima among elementwise, shape and
    matmul operations) on OpenCL, with reduction epilogues wherever they apply, against the
    CPU backend."""
    got = fg.jit(prog.fun, backend="opencl")(*prog.args)
    want = fg.jit(prog.fun)(*prog.args)
    for g_, w_ in zip(tree_flatten(got)[0], tree_flatten(want)[0]):
        np.testing.assert_allclose(np.asarray(g_), np.asarray(w_), rtol=2e-4, atol=2e-4, err_msg=repr(prog))


def test_reduction_epilogue_waits_for_values_computed_later() -> None:
    """``sum(x, 0) + sum(2x, 0)``: the first sum cannot store the add (the second sum does not
    exist yet), the second can."""
    x = np.random.default_rng(10).standard_normal((40, 24)).astype(np.float32)
    f = lambda x: x.sum(axis=0) + (x * 2.0).sum(axis=0)  # noqa: E731
    j = fg.jit(f, backend="opencl")
    np.testing.assert_allclose(np.asarray(j(x)), x.sum(axis=0) * 3.0, rtol=1e-5, atol=1e-5)
    reductions = [line for line in kernel_notes(j, x).splitlines() if line.startswith("kernel") and "reduce" in line]
    assert len(reductions) == 2 and "epilogue" not in reductions[0] and "epilogue add" in reductions[1]


def test_donated_operand_of_a_product_is_not_overwritten_by_its_epilogue() -> None:
    """``w - w @ s`` with ``w`` donated: other work-items still read ``w`` as an operand, so the
    result goes to a fresh buffer."""
    rng = np.random.default_rng(6)
    w = rng.standard_normal((96, 96)).astype(np.float32)
    s = rng.standard_normal((96, 96)).astype(np.float32)
    step = fg.jit(lambda w, s: w - w @ s, backend="opencl", donate_argnums=0)
    wd = fg.jit(lambda v: v * 1.0, backend="opencl")(w)
    ptr = wd.buffer.int_ptr
    out = step(wd, s)
    np.testing.assert_allclose(np.asarray(out), w - w @ s, rtol=1e-4, atol=1e-3)
    assert out.buffer.int_ptr != ptr
    assert "epilogue sub" in kernel_notes(step, out, s)


def test_product_epilogue_is_skipped_when_it_would_be_wrong() -> None:
    """No epilogue when the product has a use outside the region (a reduction), or when the
    region computes what an epilogue does not (``exp``); the values stay right."""
    rng = np.random.default_rng(4)
    w = rng.standard_normal((96, 96)).astype(np.float32)
    s = rng.standard_normal((96, 96)).astype(np.float32)
    cases = [lambda w, s: (w - s @ s, (s @ s).sum(axis=0)), lambda w, s: fnp.exp(s @ w * 0.01) + w]
    for f in cases:
        j = fg.jit(f, backend="opencl")
        got, want = j(w, s), f(w, s)
        for gv, wv in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            np.testing.assert_allclose(np.asarray(gv), wv, rtol=1e-4, atol=1e-3)
        text = kernel_notes(j, w, s)
        assert "epilogue" not in text and _elementwise_kernels(text)


def test_product_epilogue_leaves_a_region_with_transcendentals_alone() -> None:
    """``tanh(w)`` joins the region of ``tanh(w) - p``; an epilogue does not evaluate ``tanh``,
    so the region stays a kernel of its own."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((100, 64)).astype(np.float32)
    a = rng.standard_normal((100, 80)).astype(np.float32)
    b = rng.standard_normal((80, 64)).astype(np.float32)

    def f(w, a, b):
        x = fnp.tanh(w)
        p = a @ b
        return x - p, x * 2.0

    j = fg.jit(f, backend="opencl")
    for g, want in zip(j(w, a, b), f(w, a, b)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-5, atol=1e-5)
    assert "epilogue" not in kernel_notes(j, w, a, b)
