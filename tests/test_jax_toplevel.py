"""JAX's top-level names beyond the transformations: ``config``, ``enable_x64``, devices,
``device_get``, ``named_call``/``named_scope``, ``ensure_compile_time_eval``, ``custom_gradient``,
``closure_convert``, ``clear_caches``, ``typeof``, ``checkpoint`` with policies, ``float0``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import checkpoint_policies as cp
from tests.helpers import jax_or_skip

NAMES = ["config", "enable_x64", "default_matmul_precision", "device_get", "devices", "local_devices", "device_count",
         "local_device_count", "default_backend", "process_index", "process_count", "named_call", "named_scope",
         "ensure_compile_time_eval", "custom_gradient", "closure_convert", "clear_caches", "typeof",
         "checkpoint_policies", "float0", "scipy"]


def test_the_names_exist_in_both() -> None:
    jax, _ = jax_or_skip()
    assert [n for n in NAMES if not hasattr(jax, n)] == []
    assert [n for n in NAMES if not hasattr(fg, n)] == []
    policies = ["everything_saveable", "nothing_saveable", "dots_saveable", "dots_with_no_batch_dims_saveable",
                "checkpoint_dots", "checkpoint_dots_with_no_batch_dims"]
    assert [p for p in policies if not hasattr(fg.checkpoint_policies, p)] == []


# --- config -----------------------------------------------------------------------------


def test_config_reads_and_updates_like_jax() -> None:
    jax, _ = jax_or_skip()
    for config in (jax.config, fg.config):
        config.update("jax_enable_x64", True)
        assert config.jax_enable_x64
        config.update("jax_platforms", "cpu")
        assert config.jax_platforms == "cpu"
        config.update("jax_default_matmul_precision", "highest")
        assert config.jax_default_matmul_precision == "highest"
        config.update("jax_default_matmul_precision", None)
        config.update("jax_debug_nans", False)
        assert not config.jax_debug_nans
    assert fg.config.values["jax_enable_x64"] is True
    fg.config.update("jax_platforms", None)


def test_config_refuses_what_fungraph_cannot_do() -> None:
    with fg.enable_x64(False):
        assert fnp.asarray(1.0).dtype == np.float32
    with fg.enable_x64():
        assert fnp.asarray(1.0).dtype == np.float64
    with pytest.raises(ValueError, match=r"no platform 'gpu'; its backends are cpu, opencl"):
        fg.config.update("jax_platforms", "cpu,gpu")
    with pytest.raises(ValueError, match="jax_default_matmul_precision='fp8'"):
        fg.config.update("jax_default_matmul_precision", "fp8")
    with pytest.raises(NotImplementedError, match="threefry2x32 only"):
        fg.config.update("jax_default_prng_impl", "rbg")
    with pytest.raises(AttributeError, match=r"no option 'jax_no_such_option'.*options are: jax_enable_x64, "):
        fg.config.update("jax_no_such_option", True)
    with pytest.raises(ValueError, match="jax_numpy_rank_promotion='sometimes'"):
        fg.config.update("jax_numpy_rank_promotion", "sometimes")
    with pytest.raises(ValueError, match="jax_transfer_guard='never'"):
        fg.config.update("jax_transfer_guard", "never")
    with pytest.raises(AttributeError, match="no option 'jax_enable_64'"):
        _ = fg.config.jax_enable_64
    with pytest.raises(AttributeError, match="config.update"):
        fg.config.jax_enable_x64 = True


def test_config_disable_jit_is_disable_jit() -> None:
    seen: list[Any] = []

    @fg.jit
    def f(x: Any) -> Any:
        seen.append(type(x))
        return x + 1

    fg.config.update("jax_disable_jit", True)
    try:
        assert fg.config.jax_disable_jit
        np.testing.assert_array_equal(f(np.ones(2)), 2 * np.ones(2))
        assert seen == [np.ndarray]
    finally:
        fg.config.update("jax_disable_jit", False)
    with fg.disable_jit():
        assert fg.config.jax_disable_jit
    assert not fg.config.jax_disable_jit


def test_default_matmul_precision_is_recorded_for_the_block() -> None:
    with fg.default_matmul_precision("float32"):
        assert fg.config.jax_default_matmul_precision == "float32"
        np.testing.assert_allclose(fg.jit(lambda a: a @ a)(np.eye(2)), np.eye(2))
    assert fg.config.jax_default_matmul_precision is None


# --- devices ----------------------------------------------------------------------------


def test_devices_describe_the_cpu_backend() -> None:
    jax, _ = jax_or_skip()
    assert fg.default_backend() == jax.default_backend() == "cpu"
    (cpu,) = fg.devices()
    assert (cpu.platform, cpu.id, cpu.process_index) == (jax.devices()[0].platform, 0, 0)
    assert fg.local_devices() == fg.devices("cpu") == [cpu]
    assert fg.device_count() == fg.local_device_count() == 1
    assert (fg.process_index(), fg.process_count()) == (0, 1)
    with pytest.raises(RuntimeError, match="unknown backend 'tpu'; fungraph's backends are cpu, opencl"):
        fg.devices("tpu")
    np.testing.assert_array_equal(fg.device_put([1.0, 2.0], cpu), [1.0, 2.0])


def test_opencl_device_put_and_device_get(require_opencl: None) -> None:
    (dev,) = fg.devices("opencl")
    assert dev.platform == "opencl" and fg.device_count("opencl") == 1
    on_device = fg.device_put({"w": np.arange(3.0), "n": 2}, dev)
    assert isinstance(on_device["w"], fg.Array)
    back = fg.device_get(on_device)
    assert type(back["w"]) is np.ndarray and back["n"] is not None
    np.testing.assert_array_equal(back["w"], np.arange(3.0))


def test_device_get_leaves_host_values_and_refuses_tracers() -> None:
    tree = {"a": np.ones(2), "b": 3, "c": [np.float32(1.5)]}
    got = fg.device_get(tree)
    assert got["a"] is tree["a"] and got["b"] == 3 and got["c"][0] == np.float32(1.5)
    with pytest.raises(fg.ConcretizationError):
        fg.jit(lambda x: fg.device_get(x))(np.ones(2))


# --- tracing utilities ------------------------------------------------------------------


def test_named_call_and_named_scope_change_nothing() -> None:
    def f(x: Any) -> Any:
        with fg.named_scope("layer"):
            return fnp.sin(x) * 2

    g = fg.named_call(f, name="block")
    x = np.linspace(0, 1, 4)
    np.testing.assert_allclose(fg.jit(g)(x), 2 * np.sin(x))
    np.testing.assert_allclose(fg.grad(lambda v: g(v).sum())(x), 2 * np.cos(x))
    with pytest.raises(TypeError, match="name must be a string"), fg.named_scope(3):  # type: ignore[arg-type]
        pass


def test_ensure_compile_time_eval_computes_constants_while_tracing() -> None:
    jax, jnp = jax_or_skip()

    def body(xp: Any, ensure: Any) -> Any:
        def f(x: Any) -> Any:
            with ensure():
                n = xp.sum(xp.arange(4))
                if n > 3:                              # a Python branch on a value computed now
                    x = x * n
            return x + 1

        return f

    x = np.arange(3.0)
    got = fg.jit(body(fnp, fg.ensure_compile_time_eval))(x)
    np.testing.assert_array_equal(got, jax.jit(body(jnp, jax.ensure_compile_time_eval))(x))
    graph = fg.make_graph(body(fnp, fg.ensure_compile_time_eval))(x)
    assert "arange" not in str(graph) and "reduce_sum" not in str(graph)


def test_typeof_is_the_abstract_value() -> None:
    assert fg.typeof(np.ones((2, 3), np.float32)) == fg.ShapedArray((2, 3), np.float32)
    assert str(fg.typeof(1.0)) == "f64[]"
    seen: list[Any] = []
    fg.jit(lambda x: seen.append(fg.typeof(x)) or x)(np.ones(4, np.int32))
    assert seen == [fg.ShapedArray((4,), np.int32)]


def test_clear_caches_drops_compiled_plans() -> None:
    x = np.ones(3)
    before = fg.jit(lambda v: fnp.tanh(v) * 3).lower(x).compiled
    assert fg.jit(lambda v: fnp.tanh(v) * 3).lower(x).compiled is before   # shared across functions
    fg.clear_caches()
    after = fg.jit(lambda v: fnp.tanh(v) * 3).lower(x).compiled
    assert after is not before
    np.testing.assert_allclose(fg.jit(lambda v: fnp.tanh(v) * 3)(x), np.tanh(x) * 3)


def test_clear_caches_makes_a_jitted_function_trace_again() -> None:
    traces = []
    f = fg.jit(lambda v: traces.append(1) or v * 2)
    f(np.ones(3))
    f({"a": np.ones(3)}["a"])
    assert len(traces) == 1
    fg.clear_caches()
    np.testing.assert_array_equal(f(np.ones(3)), 2 * np.ones(3))
    assert len(traces) == 2


# --- custom_gradient and closure_convert ------------------------------------------------


def _clipped_product(xp: Any, custom_gradient: Any) -> Any:
    @custom_gradient
    def f(x: Any, y: Any) -> Any:
        def vjp(g: Any) -> tuple:
            return xp.clip(g, -1.0, 1.0) * y, g * x
        return x * y, vjp

    return f


def _log1pexp(xp: Any, custom_gradient: Any) -> Any:
    @custom_gradient
    def f(x: Any) -> Any:
        e = xp.exp(x)
        return xp.log1p(e), lambda g: g * (1 - 1 / (1 + e))   # one argument: a lone cotangent

    return f


def test_custom_gradient_matches_jax() -> None:
    jax, jnp = jax_or_skip()
    x, y = np.array([0.5, 2.0, -1.0]), np.array([3.0, -4.0, 0.25])

    def loss(xp: Any, cg: Any) -> Any:
        f = _clipped_product(xp, cg)
        return lambda x, y: (f(x, y) * 10).sum()

    want = jax.grad(loss(jnp, jax.custom_gradient), argnums=(0, 1))(x, y)
    grad = fg.grad(loss(fnp, fg.custom_gradient), argnums=(0, 1))
    for got in (grad(x, y), fg.jit(grad)(x, y)):
        np.testing.assert_allclose(got, want, rtol=1e-15)
    per_example = fg.vmap(fg.grad(lambda a, b: _clipped_product(fnp, fg.custom_gradient)(a, b) * 10,
                                  argnums=(0, 1)))(x, y)
    np.testing.assert_allclose(per_example, want, rtol=1e-15)
    for order in (1, 2):
        f_fg, f_jax = _log1pexp(fnp, fg.custom_gradient), _log1pexp(jnp, jax.custom_gradient)
        for _ in range(order):
            f_fg, f_jax = fg.grad(f_fg), jax.grad(f_jax)
        np.testing.assert_allclose(f_fg(3.0), f_jax(3.0), rtol=1e-14)


def test_closure_convert_hoists_traced_values() -> None:
    jax, jnp = jax_or_skip()

    def model(xp: Any, closure_convert: Any) -> Any:
        def loss(w: Any, x: Any) -> Any:
            f = lambda v: xp.sin(w * v) + 2.0 * v        # noqa: E731 - closes over w
            converted, consts = closure_convert(f, x)
            return converted(x, *consts).sum(), len(consts)
        return loss

    x = np.array([0.5, 1.5])
    value, n = model(fnp, fg.closure_convert)(1.5, x)
    assert n == 0
    np.testing.assert_allclose(value, np.sum(np.sin(1.5 * x) + 2 * x))
    got = fg.grad(lambda w: model(fnp, fg.closure_convert)(w, x)[0])(1.5)
    want = jax.grad(lambda w: model(jnp, jax.closure_convert)(w, x)[0])(1.5)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    seen: list[int] = []
    fg.grad(lambda w: seen.append(model(fnp, fg.closure_convert)(w, x)[1]) or w)(1.5)
    assert seen == [1]
    converted, _ = fg.closure_convert(lambda a, b: a * b, 1.0, 2.0)
    with pytest.raises(TypeError, match="called with arguments"):
        converted((1.0, 2.0))


# --- checkpoint and its policies --------------------------------------------------------


def _net(w: Any, x: Any) -> Any:
    return fnp.tanh(fnp.tanh(x @ w) @ w).sum()


@pytest.mark.parametrize("policy", [None, cp.nothing_saveable, cp.everything_saveable, cp.dots_saveable,
                                    cp.dots_with_no_batch_dims_saveable])
def test_every_policy_gives_the_same_gradient(policy: Any) -> None:
    rng = np.random.default_rng(0)
    w, x = rng.normal(size=(3, 3)), rng.normal(size=(2, 3))
    remat = fg.checkpoint(_net, policy=policy, prevent_cse=False)
    np.testing.assert_allclose(fg.grad(remat)(w, x), fg.grad(_net)(w, x), rtol=1e-14)
    graph = str(fg.make_graph(fg.grad(remat))(w, x))
    assert ("remat" in graph) == (policy is not cp.everything_saveable)


def test_policies_answer_for_equations() -> None:
    plain = fg.make_graph(lambda a, b: a @ b)(np.ones((2, 3)), np.ones((3, 4))).eqns[0]
    batched = fg.make_graph(lambda a, b: a @ b)(np.ones((5, 2, 3)), np.ones((5, 3, 4))).eqns[0]
    sine = fg.make_graph(fnp.sin)(np.ones(2)).eqns[0]

    def ask(policy: Any, eqn: Any) -> bool:
        return policy(eqn.primitive, *(a.aval for a in eqn.inputs), **eqn.params.kwargs())

    assert [ask(cp.dots_saveable, e) for e in (plain, batched, sine)] == [True, True, False]
    assert [ask(cp.dots_with_no_batch_dims_saveable, e) for e in (plain, batched, sine)] == [True, False, False]
    assert ask(cp.everything_saveable, sine) and not ask(cp.nothing_saveable, plain)
    with pytest.raises(TypeError, match="policy must be a callable"):
        fg.checkpoint(_net, policy="dots")  # type: ignore[arg-type]


def test_checkpoint_static_arguments() -> None:
    def layers(x: Any, n: int, *, act: str = "sin") -> Any:
        for _ in range(n):
            x = getattr(fnp, act)(x)
        return x.sum()

    remat = fg.checkpoint(layers, static_argnums=(1,), static_argnames="act")
    x = np.linspace(0, 1, 3)
    for n, act in [(1, "sin"), (3, "cos")]:
        np.testing.assert_allclose(fg.grad(remat)(x, n, act=act), fg.grad(layers)(x, n, act=act), rtol=1e-14)
    with pytest.raises(ValueError, match="static_argnames names 'nope'"):
        fg.checkpoint(layers, static_argnames="nope")


# --- float0 -----------------------------------------------------------------------------


def test_float0_tangents_and_cotangents_for_integers() -> None:
    jax, jnp = jax_or_skip()
    assert fg.float0 == jax.dtypes.float0

    def f(xp: Any) -> Any:
        return lambda x, i: (x * i, xp.argmax(x))

    x, i = np.array([1.0, 3.0]), np.array(2)
    zero = np.zeros((), fg.float0)
    (p, _), (t, t_int) = fg.jvp(f(fnp), (x, i), (np.ones(2), zero))
    (jp, _), (jt, _) = jax.jvp(f(jnp), (x, i), (np.ones(2), zero))
    np.testing.assert_array_equal(p, jp)
    np.testing.assert_array_equal(t, jt)
    _, f_vjp = fg.vjp(f(fnp), x, i)
    gx, gi = f_vjp((np.ones(2), zero))
    np.testing.assert_array_equal(gx, [2.0, 2.0])
    assert gi.dtype == np.int64 and gi == 0              # JAX gives float0 here; fungraph integer zeros
    with pytest.raises(TypeError, match="cannot be float0"):
        fg.jvp(f(fnp), (x, i), (np.zeros(2, fg.float0), zero))


def test_ahead_of_time_compile_runs_the_lowered_signature_and_refuses_others() -> None:
    """``jit(f).lower(x).compile()`` as in JAX: a callable for arguments like the lowered ones,
    with ``as_text()``; other shapes, dtypes or static values are a TypeError naming both."""
    x = np.arange(6.0).reshape(2, 3)
    lowered = fg.jit(lambda a, n: fnp.sin(a) * n, static_argnums=1).lower(x, 2)
    compiled = lowered.compile()
    np.testing.assert_allclose(compiled(x + 1, 2), np.sin(x + 1) * 2)
    assert "sin" in lowered.as_text() and compiled.as_text() == lowered.as_text()
    with pytest.raises(TypeError, match=r"compiled for arguments \(float64\[2, 3\]; static \{1: 2\}\) but called "
                                        r"with \(float32\[2, 3\]"):
        compiled(x.astype(np.float32), 2)
    with pytest.raises(TypeError, match=r"static \{1: 3\}"):
        compiled(x, 3)


@pytest.mark.parametrize("transform", ["jacfwd", "jacrev", "hessian"])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_jacobians_with_aux_match_jax(transform: str, argnums: Any) -> None:
    jax, jnp = jax_or_skip()
    x = np.linspace(-1.0, 1.0, 5)

    def f(np_: Any) -> Any:
        def fun(a: Any, b: Any) -> Any:
            out = np_.sum(np_.sin(a) * b ** 2) if transform == "hessian" else np_.sin(a) * b ** 2
            return out, {"dot": np_.sum(a * b), "label": 3}

        return fun

    got, aux = getattr(fg, transform)(f(fnp), argnums=argnums, has_aux=True)(x, x + 1)
    want, want_aux = getattr(jax, transform)(f(jnp), argnums=argnums, has_aux=True)(x, x + 1)
    for g, w in zip(fg.tree_util.tree_leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(aux["dot"], want_aux["dot"])
    assert aux["label"] == 3
    jitted, _ = fg.jit(getattr(fg, transform)(f(fnp), argnums=argnums, has_aux=True))(x, x + 1)
    for g, w in zip(fg.tree_util.tree_leaves(jitted), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


# --- promotion modes, config contexts, error types ---------------------------------------------


def _outcome(thunk: Any) -> str:
    try:
        r = thunk()
    except Exception as e:  # noqa: BLE001 - the outcome compared is the exception's kind
        return "TypePromotionError" if type(e).__name__ == "TypePromotionError" else (
            "ValueError" if isinstance(e, ValueError) else type(e).__name__)
    return f"{r.dtype}{tuple(r.shape)}"


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.filterwarnings("ignore:Explicitly requested dtype")
def test_strict_dtype_promotion_matches_jax(x64: bool) -> None:
    jax, jnp = jax_or_skip()
    pairs = [(np.float32, np.float64), (np.int32, np.float32), (np.int8, np.int16), (np.uint8, np.int8),
             (np.float32, float), (np.int32, float), (np.int32, int), (np.bool_, int), (np.complex64, complex),
             (np.float16, np.float32)]
    for a, b in pairs:
        for mode in ("standard", "strict"):
            got = []
            for lib, lnp in ((jax, jnp), (fg, fnp)):
                with lib.enable_x64(x64), lib.numpy_dtype_promotion(mode):
                    other = lnp.ones(3, b) if isinstance(b, type) and issubclass(b, np.generic) else b(1)
                    got.append((_outcome(lambda: lnp.ones(3, a) + other),
                                _outcome(lambda: lnp.multiply(lnp.ones(3, a), other)),
                                _outcome(lambda: lib.jit(lambda u, v: u - v)(lnp.ones(3, a), other))))
                    assert lib.config.jax_numpy_dtype_promotion == mode
            assert got[0] == got[1], (a, b, mode, got)
    assert fg.config.jax_numpy_dtype_promotion == "standard"


@pytest.mark.parametrize("mode", ["allow", "warn", "raise"])
def test_rank_promotion_modes_match_jax(mode: str) -> None:
    import warnings
    jax, jnp = jax_or_skip()
    cases = [lambda n: n.ones(2) + n.ones((3, 2)), lambda n: n.add(n.ones(2), n.ones((3, 2))),
             lambda n: n.ones(2) * 2.0, lambda n: n.where(n.ones((3, 2)) > 0, n.ones(2), 0.0),
             lambda n: n.maximum(n.ones(2), n.ones((3, 2))), lambda n: n.logaddexp(n.ones(2), n.ones((3, 2))),
             lambda n: n.ones((4, 1)) < n.ones(3), lambda n: n.left_shift(n.ones(2, int), n.ones((2, 2), int)),
             lambda n: n.ones((3, 2)) + n.ones((3, 2)), lambda n: n.ones(()) + n.ones((3, 2))]
    for case in cases:
        got = []
        for lib, lnp in ((jax, jnp), (fg, fnp)):
            lib.clear_caches()  # JAX warns when it traces, and it caches traces
            with lib.numpy_rank_promotion(mode), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                got.append((_outcome(lambda: case(lnp)), _outcome(lambda: lib.jit(lambda: case(lnp))()),
                            any("rank promotion" in str(w.message) for w in caught)))
        assert got[0] == got[1], got
    assert fg.config.jax_numpy_rank_promotion == "allow"


def test_library_functions_do_not_promote_ranks_where_jax_does_not() -> None:
    x = np.arange(6.0).reshape(2, 3)
    with fg.numpy_rank_promotion("raise"):
        assert fg.nn.one_hot(np.array([[0, 2]]), 3).shape == (1, 2, 3)
        assert fnp.interp(x, np.array([0.0, 5.0]), np.array([1.0, 2.0])).shape == (2, 3)
        assert fnp.searchsorted(np.array([1.0, 3.0]), x).shape == (2, 3)
        assert fg.nn.softmax(x).shape == (2, 3)


def test_config_contexts_set_and_restore_like_jax() -> None:
    jax, _ = jax_or_skip()
    names = ["debug_nans", "debug_infs", "log_compiles", "checking_leaks", "enable_checks", "transfer_guard",
             "numpy_rank_promotion", "numpy_dtype_promotion", "default_device", "default_prng_impl",
             "explain_cache_misses", "threefry_partitionable", "P", "NamedSharding", "host_count", "host_id",
             "errors", "typing"]
    assert [n for n in names if not hasattr(jax, n)] == []
    assert [n for n in names if not hasattr(fg, n)] == []
    with fg.debug_nans():
        assert fg.config.jax_debug_nans
        with pytest.raises(FloatingPointError):
            fnp.log(fnp.asarray(-1.0))
    assert not fg.config.jax_debug_nans
    with fg.log_compiles(), fg.checking_leaks(), fg.transfer_guard("disallow"), fg.default_device(fg.devices()[0]):
        assert fg.config.jax_log_compiles and fg.config.jax_transfer_guard == "disallow"
    assert fg.config.jax_transfer_guard is None
    assert fg.P("a", None) == fg.sharding.PartitionSpec("a", None)
    assert (fg.host_count(), fg.host_id()) == (fg.process_count(), fg.process_index())


def test_errors_are_jax_errors_classes() -> None:
    jax, _ = jax_or_skip()
    checks = [("TracerBoolConversionError", lambda lib: lib.jit(lambda x: 1 if x > 0 else 0)(1.0)),
              ("TracerArrayConversionError", lambda lib: lib.jit(lambda x: np.asarray(x))(1.0)),
              ("TracerIntegerConversionError", lambda lib: lib.jit(lambda i: [1, 2, 3][i])(1)),
              ("ConcretizationTypeError", lambda lib: lib.jit(lambda x: float(x))(1.0))]
    for name, thunk in checks:
        for lib in (jax, fg):
            with pytest.raises(getattr(lib.errors, name)):
                thunk(lib)
            with pytest.raises({"TracerIntegerConversionError": TypeError, "TracerArrayConversionError": TypeError}.get(
                    name, lib.errors.ConcretizationTypeError)):
                thunk(lib)
    for lib in (jax, fg):
        with pytest.raises(lib.errors.NonConcreteBooleanIndexError) as info:
            lib.jit(lambda x: x[x > 0])(np.ones(3))
        assert isinstance(info.value, lib.errors.JAXIndexError) and isinstance(info.value, IndexError)
        assert issubclass(lib.errors.KeyReuseError, lib.errors.JAXTypeError)
        assert issubclass(lib.errors.KeyReuseError, TypeError) and issubclass(lib.errors.JaxRuntimeError, RuntimeError)
    leaked: list[Any] = []
    fg.jit(lambda x: leaked.append(x) or x)(1.0)
    with pytest.raises(fg.errors.UnexpectedTracerError):
        fg.jit(lambda y: y + leaked[0])(1.0)


def test_typing_names_annotate() -> None:
    from fungraph.typing import ArrayLike, DTypeLike

    def f(x: ArrayLike, d: DTypeLike) -> ArrayLike:
        return fnp.asarray(x, d)

    assert isinstance(fnp.ones(2), ArrayLike) and isinstance(np.float32(1), ArrayLike) and isinstance(2.0, ArrayLike)
    assert f(1, np.float32).dtype == np.float32 and f(1, "int8").dtype == np.int8


def _threaded_contexts(lib: Any, lnp: Any) -> dict[str, Any]:
    """One thread enters config contexts while another, started before and running at the same
    time, calls the same jitted functions: what each sees. ``f`` is traced first by the thread
    without contexts, so a cache keyed only on the arguments would hand the other its trace."""
    import threading

    f = lib.jit(lambda x, y: x + y)
    g = lib.jit(lambda x: lnp.log(x))
    h = lib.jit(lambda x, y: x * y)
    x, y = lnp.ones(3), lnp.ones((2, 3))
    traced, in_context, done = threading.Barrier(2), threading.Barrier(2), threading.Barrier(2)
    seen: dict[str, Any] = {}

    def outcome(thunk: Any) -> str:
        try:
            out = thunk()
        except Exception as err:  # noqa: BLE001 - which error each library raises is compared
            return "FloatingPointError" if isinstance(err, FloatingPointError) else (
                "TypePromotionError" if "TypePromotion" in type(err).__name__ else "ValueError"
                if isinstance(err, ValueError) else type(err).__name__)
        return str(np.asarray(out).dtype)

    def plain() -> None:
        seen["plain f"] = outcome(lambda: f(x, y))
        seen["plain h"] = outcome(lambda: h(lnp.ones(2, lnp.float32), lnp.ones(2, lnp.int32)))
        traced.wait()
        in_context.wait()
        seen["plain options"] = (lib.config.jax_numpy_rank_promotion, lib.config.jax_debug_nans,
                                 lib.config.jax_numpy_dtype_promotion)
        seen["plain g"] = outcome(lambda: g(-lnp.ones(2)))
        seen["plain f again"] = outcome(lambda: f(x, y))
        done.wait()

    def contexts() -> None:
        traced.wait()
        with lib.numpy_rank_promotion("raise"), lib.debug_nans(True), lib.numpy_dtype_promotion("strict"):
            in_context.wait()
            seen["context options"] = (lib.config.jax_numpy_rank_promotion, lib.config.jax_debug_nans,
                                       lib.config.jax_numpy_dtype_promotion)
            seen["context f"] = outcome(lambda: f(x, y))
            seen["context g"] = outcome(lambda: g(-lnp.ones(2)))
            seen["context h"] = outcome(lambda: h(lnp.ones(2, lnp.float32), lnp.ones(2, lnp.int32)))
            done.wait()
        seen["after f"] = outcome(lambda: f(x, y))

    threads = [threading.Thread(target=plain), threading.Thread(target=contexts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return seen


def test_config_contexts_hold_in_their_thread_only_as_jax_s() -> None:
    """JAX's config contexts are thread-local: ``numpy_rank_promotion("raise")``,
    ``debug_nans(True)`` and ``numpy_dtype_promotion("strict")`` entered in one thread leave
    another, running at the same time, as it was, and a jitted function traced in the other
    thread is traced again under the context's options (they were process-wide: the other
    thread raised, or the context's thread reused a trace made without them)."""
    import warnings

    jax, jnp = jax_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = _threaded_contexts(jax, jnp)
        ours = _threaded_contexts(fg, fnp)
    assert len(theirs) == 10
    assert ours == theirs
    assert theirs["context f"] == "ValueError" and theirs["plain f again"] == str(fnp.ones(1).dtype)


def test_process_queries_global_array_constructors_and_environment_info() -> None:
    """One process: the global array is the whole array; shapes that do not fit name both."""
    from fungraph.sharding import NamedSharding
    from fungraph.sharding import PartitionSpec as P

    assert fg.process_indices() == fg.host_ids() == [0]
    full = np.arange(12.0).reshape(4, 3)
    for sharding in (fg.sharding.SingleDeviceSharding(fg.devices()[0]),
                     NamedSharding(fg.make_mesh((1,), ("dp",)), P("dp"))):
        got = fg.make_array_from_callback(full.shape, sharding, lambda idx: full[idx])
        assert isinstance(got, fg.Array)
        np.testing.assert_array_equal(got, full)
        np.testing.assert_array_equal(fg.make_array_from_single_device_arrays(full.shape, sharding, [full]), full)
        np.testing.assert_array_equal(fg.make_array_from_process_local_data(sharding, full, full.shape), full)
    with pytest.raises(ValueError, match=r"returned shape \(2, 3\), but this process's block of the global shape"):
        fg.make_array_from_callback(full.shape, sharding, lambda idx: full[:2])
    fg.effects_barrier()
    info = fg.print_environment_info(return_string=True)
    assert "numpy:" in info and "process_count: 1" in info


def test_jit_takes_jaxs_one_device_options() -> None:
    """``in_shardings``/``out_shardings`` that keep arrays whole on the one device, ``device``,
    ``keep_unused``, ``inline``, ``compiler_options`` and None for the argnums, as JAX programs pass
    them; a sharding over several devices is refused, naming shard_map."""
    from fungraph.sharding import Mesh, NamedSharding, SingleDeviceSharding
    from fungraph.sharding import PartitionSpec as P

    jax, _ = jax_or_skip()
    mesh = fg.make_mesh((1,), ("dp",))
    x = np.arange(4.0)
    theirs = jax.sharding.NamedSharding(jax.make_mesh((1,), ("dp",)), jax.sharding.PartitionSpec("dp"))
    for lib, sharding in ((jax, theirs), (fg, NamedSharding(mesh, P("dp")))):
        f = lib.jit(lambda v, unused: v * 2, in_shardings=(sharding, None), out_shardings=sharding, keep_unused=True,
                    inline=True, static_argnums=None, donate_argnums=None)
        np.testing.assert_array_equal(np.asarray(f(x, 1.0)), x * 2)
    on_cpu = fg.jit(lambda v: v + 1, device=fg.devices()[0], in_shardings=SingleDeviceSharding(fg.devices()[0]),
                    compiler_options={"xla_cpu_enable_fast_math": False})
    np.testing.assert_array_equal(on_cpu(x), x + 1)
    assert on_cpu.backend == "cpu"
    split = NamedSharding(Mesh(np.array([fg.devices()[0]] * 2, dtype=object), ("dp",)), P("dp"))
    with pytest.raises(NotImplementedError, match="splits arrays over several devices.*shard_map"):
        fg.jit(lambda v: v, out_shardings=split)
    assert fg.jit(lambda v: v, donate_argnums=0, static_argnums=None).donate_argnums == (0,)


def test_mesh_utils_and_compilation_cache() -> None:
    """``create_device_mesh`` lays the processes' devices out for ``Mesh`` (one here);
    ``create_hybrid_device_mesh`` tiles blocks of ``mesh_shape`` as ``np.block`` does;
    ``set_cache_dir`` sets JAX's option."""
    from fungraph.experimental import mesh_utils
    from fungraph.experimental.compilation_cache import compilation_cache
    from fungraph.sharding import Mesh

    jax, _ = jax_or_skip()
    from jax.experimental import mesh_utils as jax_mesh_utils

    ours, theirs = mesh_utils.create_device_mesh((1,)), jax_mesh_utils.create_device_mesh((1,))
    assert ours.shape == theirs.shape == (1,) and ours.dtype == theirs.dtype == object
    step = fg.jit(fg.shard_map(lambda x: fg.lax.psum(x, "dp"), mesh=Mesh(ours, ("dp",)), in_specs=fg.P("dp"),
                               out_specs=fg.P()))
    np.testing.assert_array_equal(step(np.ones(3)), np.ones(3))
    ids = np.vectorize(lambda d: d.id)
    devices = [fg.sharding.Device("cpu", "cpu", id=i) for i in range(8)]
    hybrid = mesh_utils.create_hybrid_device_mesh((2, 2), (2, 1), devices)
    blocks = [ids(mesh_utils.create_device_mesh((2, 2), devices[4 * k:4 * k + 4])) for k in range(2)]
    np.testing.assert_array_equal(ids(hybrid), np.block([[blocks[0]], [blocks[1]]]))
    with pytest.raises(ValueError, match=r"a mesh of shape \(2,\) needs 2 devices, but 1 are given"):
        mesh_utils.create_device_mesh((2,))
    try:
        compilation_cache.set_cache_dir("/tmp/fungraph-cache")
        assert fg.config.jax_compilation_cache_dir == "/tmp/fungraph-cache"
    finally:
        compilation_cache.reset_cache()
    assert fg.config.jax_compilation_cache_dir is None


def test_meshes_with_axis_types_set_mesh_and_reshard_as_jax() -> None:
    """JAX's sharding-in-types entry points on one device: axis types recorded, ``set_mesh`` as a
    block or a statement (per thread), the abstract mesh, ``reshard`` keeping the array."""
    import threading

    from fungraph.sharding import AxisType, NamedSharding, Sharding, get_abstract_mesh, get_mesh
    from fungraph.sharding import PartitionSpec as P

    jax, _ = jax_or_skip()
    theirs = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Explicit,))
    mesh = fg.make_mesh((1,), ("x",), axis_types=(AxisType.Explicit,), devices=fg.devices())
    assert [t.name for t in mesh.axis_types] == [t.name for t in theirs.axis_types] == ["Explicit"]
    assert get_abstract_mesh().empty and get_mesh() is None
    with fg.set_mesh(mesh) as current, jax.set_mesh(theirs):
        assert current is mesh and get_mesh() is mesh
        ours_abs, their_abs = get_abstract_mesh(), jax.sharding.get_abstract_mesh()
        assert (ours_abs.axis_names, ours_abs.axis_sizes) == (their_abs.axis_names, their_abs.axis_sizes)
        seen = []
        worker = threading.Thread(target=lambda: seen.append(get_mesh()))
        worker.start()
        worker.join()
        assert seen == [None]
        x = np.arange(4.0)
        got, want = fg.reshard(x, P("x")), jax.sharding.reshard(x, jax.sharding.PartitionSpec("x"))
        assert isinstance(got, fg.Array)
        np.testing.assert_array_equal(got, np.asarray(want))
        assert fg.sharding.reshard is fg.reshard
    assert get_mesh() is None
    fg.set_mesh(mesh)
    try:
        assert get_mesh() is mesh
    finally:
        fg.set_mesh(None)
    assert isinstance(NamedSharding(mesh, P()), Sharding) and isinstance(fg.numpy.ones(2).sharding, Sharding)
    with pytest.raises(ValueError, match="one AxisType per axis"):
        fg.make_mesh((1,), ("x",), axis_types=("Explicit",))


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_dtypes_helpers_and_key_dtype_match_jax(x64: bool) -> None:
    jax, _ = jax_or_skip()
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for name in ("canonicalize_dtype", "iinfo", "itemsize_bits", "scalar_type_of"):
            for arg in (np.float64, np.int8, "int16", np.uint32, 1.0, True, 3):
                try:
                    want = str(getattr(jax.dtypes, name)(arg))
                except (TypeError, ValueError) as err:
                    want = type(err).__name__
                try:
                    got = str(getattr(fg.dtypes, name)(arg))
                except (TypeError, ValueError) as err:
                    got = type(err).__name__
                assert got == want, (name, arg)
    assert str(fg.random.key_dtype()) == str(jax.random.key_dtype()) == "key<fry>"
    assert fg.random.key(0).dtype == fg.random.key_dtype()
    assert fg.experimental.mesh_utils.create_device_mesh((1,)).shape == (1,)


#: JAX modules whose every public name fungraph has, with the names left out on purpose
#: (docs/differences_from_jax.md says why).
FULL_MODULES = {
    "scipy.special": set(), "scipy.stats": set(), "scipy.linalg": set(), "scipy.signal": set(),
    "scipy.optimize": set(), "scipy.sparse.linalg": set(), "scipy.ndimage": set(), "scipy.fft": set(),
    "scipy.interpolate": set(), "scipy.integrate": set(), "scipy.cluster.vq": set(),
    "scipy.spatial.transform": set(), "image": set(), "ops": set(), "test_util": set(),
    "tree_util": {"default_registry"}, "random": {"random_gamma_p"},
    "nn": {"get_scaled_dot_general_config", "scaled_dot_general", "scaled_matmul"},
    "experimental.mesh_utils": {"device_kind_handler_dict"}, "experimental.checkify": set(),
    "stages": {"CompilerOptions"},
}


@pytest.mark.parametrize("module", sorted(FULL_MODULES))
def test_modules_have_every_public_name_of_jax_s(module: str) -> None:
    import importlib

    jax_or_skip()
    theirs = {n for n in dir(importlib.import_module(f"jax.{module}")) if not n.startswith("_")}
    ours = set(dir(importlib.import_module(f"fungraph.{module}")))
    assert theirs - ours - FULL_MODULES[module] == set()
