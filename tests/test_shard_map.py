"""shard_map and the mesh API in one process (a mesh of one device): values, shapes and
gradients against JAX's shard_map on one CPU device, the varying/invariant typing (where
``pvary`` goes, what psum and pvary transpose to), spec errors, and the fingerprint check.
The multi-process cases run under mpiexec from tests/mpi (scripts/test.sh)."""

import numpy as np
import pytest

import fungraph as fg
from fungraph import lax
from fungraph.primitives import mesh_collectives as mc
from fungraph.sharding import Mesh, NamedSharding, PartitionSpec
from fungraph.sharding import PartitionSpec as P
from tests.helpers import jax_or_skip

RNG = np.random.default_rng(0)


def _mesh() -> Mesh:
    return fg.make_mesh((1,), ("dp",))


def _jax_mesh(jax):
    return jax.sharding.Mesh(np.array(jax.devices()[:1]), ("dp",))


def test_process_api_in_one_process():
    fg.distributed.initialize()
    assert (fg.process_count(), fg.process_index()) == (1, 0)
    mesh = _mesh()
    assert mesh.shape == {"dp": 1} and mesh.axis_names == ("dp",) and mesh.size == 1
    assert fg.experimental.shard_map is fg.shard_map
    from fungraph.experimental.shard_map import shard_map
    assert shard_map is fg.shard_map
    with pytest.raises(ValueError, match="2 processes|2 devices"):
        fg.make_mesh((2,), ("dp",))


def test_named_sharding_shard_shape_matches_jax():
    jax, _ = jax_or_skip()
    from jax.sharding import NamedSharding as JNamed
    from jax.sharding import PartitionSpec as JP
    mesh = _mesh()
    for spec in [P(), P("dp"), P(None, "dp"), P(("dp",), None)]:
        ours = NamedSharding(mesh, spec).shard_shape((4, 6))
        theirs = JNamed(_jax_mesh(jax), JP(*spec)).shard_shape((4, 6))
        assert ours == theirs


def _loss(w, x, y):
    pred = jnp_tanh(x @ w)
    return lax.psum(((pred - y) ** 2).sum(), "dp")


def jnp_tanh(v):
    return fg.numpy.tanh(v)


def test_data_parallel_loss_and_grad_match_jax():
    jax, jnp = jax_or_skip()
    w, x, y = RNG.normal(size=(3, 2)), RNG.normal(size=(5, 3)), RNG.normal(size=(5, 2))
    mesh = _mesh()
    ours = fg.jit(fg.value_and_grad(fg.shard_map(_loss, mesh=mesh, in_specs=(P(), P("dp"), P("dp")),
                                                 out_specs=P())))(w, x, y)

    def jloss(w, x, y):
        return jax.lax.psum(((jnp.tanh(x @ w) - y) ** 2).sum(), "dp")

    theirs = jax.jit(jax.value_and_grad(jax.shard_map(jloss, mesh=_jax_mesh(jax), in_specs=(
        jax.P(), jax.P("dp"), jax.P("dp")), out_specs=jax.P())))(w, x, y)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)


def _names_inside(graph) -> list[str]:
    """The primitives of ``graph`` with its sub-graphs' (the shard_map call's body) in place."""
    out = []
    for e in graph.eqns:
        out.append(e.primitive.name)
        for g in e.subgraphs:
            out.extend(_names_inside(g))
    return out


def test_shard_map_is_one_call_whose_body_has_pvary_where_invariant_meets_varying():
    mesh = _mesh()
    f = fg.shard_map(_loss, mesh=mesh, in_specs=(P(), P("dp"), P("dp")), out_specs=P())
    w, x, y = np.ones((3, 2)), np.ones((5, 3)), np.ones((5, 2))
    graph = fg.make_graph(f)(w, x, y)
    assert [e.primitive.name for e in graph.eqns] == ["jit_call"]
    assert graph.eqns[0].params["name"] == "shard_map(_loss)"
    body = graph.eqns[0].params["call"]
    assert body.eqns[0].primitive.name == "pvary" and body.eqns[0].inputs[0] is body.invars[0]
    names = _names_inside(graph)
    assert names.count("pvary") == 1 and names.count("mesh_psum") == 1
    grad_names = _names_inside(fg.make_graph(fg.grad(f))(w, x, y))
    # the loss's psum transposes to a pvary, the parameters' pvary to a psum
    assert grad_names.count("mesh_psum") == 2 and grad_names.count("pvary") == 2


def test_psum_of_an_invariant_value_is_n_times_it_and_its_gradient_n():
    jax, jnp = jax_or_skip()
    mesh = _mesh()
    f = fg.shard_map(lambda a: lax.psum(a * a, "dp"), mesh=mesh, in_specs=P(), out_specs=P())
    jf = jax.shard_map(lambda a: jax.lax.psum(a * a, "dp"), mesh=_jax_mesh(jax), in_specs=jax.P(),
                       out_specs=jax.P())
    np.testing.assert_allclose(fg.grad(f)(3.0), jax.grad(jf)(3.0))
    np.testing.assert_allclose(f(3.0), jf(3.0))


#: each collective as a function of the collectives' namespace (``lax`` or ``jax.lax``) and the
#: block, with the out spec its result has
COLLECTIVE_CASES = {
    "psum": (lambda c, v: c.psum(v * 2, "dp"), ()),
    "pmean": (lambda c, v: c.pmean(v, "dp"), ()),
    "pmax": (lambda c, v: c.pmax(v, "dp"), ()),
    "pmin": (lambda c, v: c.pmin(v, "dp"), ()),
    "all_gather": (lambda c, v: c.all_gather(v, "dp"), ("dp",)),
    "all_gather_tiled": (lambda c, v: c.all_gather(v, "dp", axis=1, tiled=True), ("dp",)),
    "psum_scatter": (lambda c, v: c.psum_scatter(v, "dp", scatter_dimension=0, tiled=True), ("dp",)),
    "ppermute": (lambda c, v: c.ppermute(v, "dp", [(0, 0)]), ("dp",)),
    "all_to_all": (lambda c, v: c.all_to_all(v, "dp", 0, 1, tiled=True), ("dp",)),
    "axis_index": (lambda c, v: c.axis_index("dp") + v, ("dp",)),
}


@pytest.mark.parametrize("name", sorted(COLLECTIVE_CASES))
def test_each_collective_on_a_mesh_of_one_matches_jax(name):
    jax, jnp = jax_or_skip()
    x = RNG.normal(size=(4, 3))
    body, out_spec = COLLECTIVE_CASES[name]
    ours = fg.shard_map(lambda v: body(lax, v), mesh=_mesh(), in_specs=P("dp"), out_specs=P(*out_spec))
    theirs = jax.shard_map(lambda v: body(jax.lax, v), mesh=_jax_mesh(jax), in_specs=jax.P("dp"),
                           out_specs=jax.P(*out_spec))(x)
    assert np.shape(ours(x)) == np.shape(theirs)
    np.testing.assert_allclose(ours(x), theirs, rtol=1e-12)
    np.testing.assert_allclose(fg.jit(ours)(x), theirs, rtol=1e-12)


def test_replicated_output_that_varies_is_an_error():
    f = fg.shard_map(lambda v: v * 2, mesh=_mesh(), in_specs=P("dp"), out_specs=P())
    with pytest.raises(ValueError, match=r"out_specs PartitionSpec\(\) for output 0 .* varies over them"):
        f(np.ones(3))
    ok = fg.shard_map(lambda v: v * 2, mesh=_mesh(), in_specs=P("dp"), out_specs=P(), check_vma=False)
    np.testing.assert_array_equal(ok(np.ones(3)), 2 * np.ones(3))


def test_spec_errors_name_the_axis_and_rank():
    with pytest.raises(ValueError, match="names axis 'mp'"):
        fg.shard_map(lambda v: v, mesh=_mesh(), in_specs=P("mp"), out_specs=P("mp"))(np.ones(3))
    with pytest.raises(ValueError, match="2 entries for a value of rank 1"):
        fg.shard_map(lambda v: v, mesh=_mesh(), in_specs=P("dp", None), out_specs=P())(np.ones(3))


def test_vmap_and_jvp_inside_shard_map_and_collectives_in_a_scan_body():
    jax, jnp = jax_or_skip()
    x = RNG.normal(size=(4, 3))

    def body(c, lax_, vmap, jvp, scan):
        def f(v):
            rows = vmap(lambda r: lax_.psum(r * r, "dp"))(v)
            tangent = jvp(lambda r: lax_.psum(jnp_or(c).sin(r), "dp"), (v,), (v,))[1]

            def step(carry, r):
                return carry + lax_.psum(r, "dp"), carry
            total, _ = scan(step, v[0] * 0, v)
            return rows + tangent + total
        return f

    ours = fg.shard_map(body(fg, lax, fg.vmap, fg.jvp, lax.scan), mesh=_mesh(), in_specs=P("dp"),
                        out_specs=P("dp"))(x)
    theirs = jax.shard_map(body(jax, jax.lax, jax.vmap, jax.jvp, jax.lax.scan), mesh=_jax_mesh(jax),
                           in_specs=jax.P("dp"), out_specs=jax.P("dp"))(x)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def jnp_or(c):
    return c.numpy


def test_gradient_through_cond_with_collectives_matches_jax():
    jax, jnp = jax_or_skip()
    w, x = RNG.normal(size=(3,)), RNG.normal(size=(4, 3))

    def make(c, lax_, shard_map, spec, mesh):
        def local(w, x):
            def yes(a):
                return lax_.psum((x @ a) ** 2, "dp").sum()

            def no(a):
                return lax_.psum(x @ a, "dp").sum()
            return lax_.cond(w[0] > -10, yes, no, w)
        return shard_map(local, mesh=mesh, in_specs=(spec(), spec("dp")), out_specs=spec())

    ours = fg.grad(make(fg, lax, fg.shard_map, P, _mesh()))(w, x)
    theirs = jax.grad(make(jax, jax.lax, jax.shard_map, jax.P, _jax_mesh(jax)))(w, x)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_program_text_ignores_constant_values_and_differs_on_shapes():
    f = fg.shard_map(lambda v: lax.psum(v, "dp"), mesh=_mesh(), in_specs=P("dp"), out_specs=P())
    g1, g2 = fg.make_graph(f)(np.ones(3)), fg.make_graph(f)(np.ones(4))
    assert mc.holds_collectives(g1)
    assert mc.program_text(g1) != mc.program_text(g2)
    h1 = fg.make_graph(lambda v: v + np.arange(3.0))(np.ones(3))
    h2 = fg.make_graph(lambda v: v + np.arange(3.0) * 2)(np.ones(3))
    assert mc.program_text(h1) == mc.program_text(h2) and not mc.holds_collectives(h1)


def test_partition_spec_is_jax_like():
    jax, _ = jax_or_skip()
    spec = PartitionSpec("dp", None, ("a", "b"))
    assert tuple(spec) == tuple(jax.P("dp", None, ("a", "b")))
    assert spec.axis_names() == ("dp", "a", "b")


def test_loops_keep_invariant_carries_invariant():
    """A while_loop (and a fori_loop with traced bounds) whose carry only meets psums stays
    invariant, so it may be returned as P(); a carry that meets the block varies."""
    def local(v):
        invariant = lax.while_loop(lambda c: c < 10.0, lambda c: c + lax.psum(v.sum(), "dp") ** 2 + 1.0, 0.0)
        varying = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + v), (0, v * 0))[1]
        return invariant, varying

    f = fg.shard_map(local, mesh=_mesh(), in_specs=P("dp"), out_specs=(P(), P("dp")))
    a, b = f(np.ones(3))
    assert float(a) == 10.0 and np.array_equal(b, 3 * np.ones(3))
    bad = fg.shard_map(local, mesh=_mesh(), in_specs=P("dp"), out_specs=(P(), P()))
    with pytest.raises(ValueError, match="for output 1"):
        bad(np.ones(3))


def test_vmap_and_jvp_of_shard_map_match_jax():
    jax, jnp = jax_or_skip()
    x = RNG.normal(size=(2, 4, 3))

    def body(c, np_):
        return lambda v: c.psum(np_.sin(v) * v, "dp").sum(0)

    ours = fg.shard_map(body(lax, fg.numpy), mesh=_mesh(), in_specs=P("dp"), out_specs=P())
    theirs = jax.shard_map(body(jax.lax, jnp), mesh=_jax_mesh(jax), in_specs=jax.P("dp"), out_specs=jax.P())
    np.testing.assert_allclose(fg.vmap(ours)(x), jax.vmap(theirs)(x), rtol=1e-12)
    np.testing.assert_allclose(fg.jvp(ours, (x[0],), (x[1],))[1], jax.jvp(theirs, (x[0],), (x[1],))[1], rtol=1e-12)


def test_a_jitted_function_is_staged_apart_inside_and_outside_shard_map():
    """The same jitted function under vmap(axis_name="dp") and inside a shard_map over "dp":
    each staging binds its own collective."""
    g = fg.jit(lambda v: lax.psum(v, "dp"))
    x = np.arange(3.0)
    f = fg.shard_map(g, mesh=_mesh(), in_specs=P("dp"), out_specs=P())
    np.testing.assert_allclose(f(x), x)
    np.testing.assert_allclose(fg.vmap(g, axis_name="dp")(np.stack([x, x])), np.stack([2 * x, 2 * x]))
    h = fg.jit(lambda v: lax.psum(v, "dp"))
    np.testing.assert_allclose(fg.vmap(h, axis_name="dp")(np.stack([x, x])), np.stack([2 * x, 2 * x]))
    np.testing.assert_allclose(fg.shard_map(h, mesh=_mesh(), in_specs=P("dp"), out_specs=P())(x), x)


def test_graph_of_a_shard_map_gradient_round_trips_through_the_text_form():
    f = fg.shard_map(lambda w, x: lax.psum((x @ w).sum(), "dp"), mesh=_mesh(), in_specs=(P(), P("dp")),
                     out_specs=P())
    args = (RNG.normal(size=(3, 2)), RNG.normal(size=(4, 3)))
    graph = fg.make_graph(fg.grad(f))(*args)
    parsed = fg.parse(str(graph))
    assert parsed.structural_key == graph.structural_key
    np.testing.assert_allclose(fg.eval_graph(parsed, *args)[0], fg.grad(f)(*args))


def test_custom_jvp_output_from_replicated_inputs_stays_replicated():
    """Typed from the function (JAX's rule), not from all inputs: ``sin(w)`` of the replicated
    ``w`` may be returned as P() though the call also reads the block."""
    @fg.custom_jvp
    def f(w, x):
        return fg.numpy.sin(w), x * w

    f.defjvp(lambda p, t: (f(*p), (fg.numpy.cos(p[0]) * t[0], t[1] * p[0] + p[1] * t[0])))
    g = fg.shard_map(f, mesh=_mesh(), in_specs=(P(), P("dp")), out_specs=(P(), P("dp")))
    a, b = fg.jit(g)(np.ones(3), np.ones(3))
    np.testing.assert_allclose(a, np.sin(np.ones(3)))
    with pytest.raises(ValueError, match="for output 1"):
        fg.shard_map(f, mesh=_mesh(), in_specs=(P(), P("dp")), out_specs=(P(), P()))(np.ones(3), np.ones(3))


def test_program_text_has_no_object_addresses():
    """A custom rule's repr names its address, which differs between processes."""
    @fg.custom_jvp
    def f(v):
        return v * 2

    f.defjvp(lambda p, t: (f(*p), t[0] * 2))
    g = fg.shard_map(lambda v: lax.psum(f(v), "dp"), mesh=_mesh(), in_specs=P("dp"), out_specs=P())
    text = "\n".join(mc.program_text(fg.make_graph(g)(np.ones(3))))
    assert "custom_jvp_call" in text and " at 0x" not in text


def test_multihost_utils_in_one_process_match_jax():
    jax, _ = jax_or_skip()
    from jax.experimental import multihost_utils as jmh

    from fungraph.experimental import multihost_utils as mh
    x = RNG.normal(size=(2, 3))
    for tiled in (False, True):
        ours, theirs = mh.process_allgather(x, tiled=tiled), jmh.process_allgather(x, tiled=tiled)
        assert ours.shape == theirs.shape
        np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(mh.broadcast_one_to_all({"a": x})["a"], jmh.broadcast_one_to_all({"a": x})["a"])
    mh.sync_global_devices("here")
    mh.assert_equal(x)


def test_pmap_in_one_process_matches_jax():
    jax, jnp = jax_or_skip()
    x = RNG.normal(size=(1, 4))

    def body(c, lax_):
        return lambda v: (lax_.psum(v, "i") * lax_.psum(1, "i"), c.grad(lambda u: lax_.pmean((u ** 2).sum(), "i"))(v))

    for a, b in zip(fg.pmap(body(fg, lax), axis_name="i")(x), jax.pmap(body(jax, jax.lax), axis_name="i")(x)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("in_axes, out_axes", [
    ((1, None), 0), ((-2, None), -1), ((1, None), None), ((1, None), (0, None)), ((1, None), (2, -1)),
    ((1, None), 1)])
def test_pmap_in_and_out_axes_match_jax(in_axes, out_axes):
    """Any mapped axis in, any axis or None out (a pytree prefix each); an axis the output
    lacks is an error in both."""
    jax, jnp = jax_or_skip()
    x, w = RNG.normal(size=(3, 1, 4)), np.arange(3.)

    def body(lax_):
        return lambda v, w: (lax_.psum(v, "i") * 2, (v * w[:, None]).sum())

    try:
        theirs = jax.pmap(body(jax.lax), axis_name="i", in_axes=in_axes, out_axes=out_axes)(x, w)
    except ValueError:
        with pytest.raises(ValueError, match="out_axes"):
            fg.pmap(body(lax), axis_name="i", in_axes=in_axes, out_axes=out_axes)(x, w)
        return
    ours = fg.pmap(body(lax), axis_name="i", in_axes=in_axes, out_axes=out_axes)(x, w)
    for a, b in zip(ours, theirs):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_pmap_in_axes_errors_name_the_shape():
    with pytest.raises(ValueError, match=r"axis 1 has shape \(3, 2\)"):
        fg.pmap(lambda v: v, axis_name="i", in_axes=1)(np.ones((3, 2)))
    with pytest.raises(ValueError, match="no axis 2"):
        fg.pmap(lambda v: v, axis_name="i", in_axes=2)(np.ones((1, 2)))
