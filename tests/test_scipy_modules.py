"""``fungraph.scipy``'s ``ndimage``, ``fft``, ``signal`` (spectral analysis and ``fftconvolve``),
``interpolate``, ``spatial.transform`` and ``cluster.vq`` against ``jax.scipy``'s, in both dtype
modes: values, dtypes and shapes, and gradients, ``vmap`` and ``jit`` where JAX defines them."""

import warnings

import numpy as np
import pytest

import fungraph as fg
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

import jax.scipy.cluster.vq as jvq  # noqa: E402
import jax.scipy.fft as jfft  # noqa: E402
import jax.scipy.ndimage as jnd  # noqa: E402
import jax.scipy.signal as jsig  # noqa: E402
from jax.scipy.interpolate import RegularGridInterpolator as JGrid  # noqa: E402
from jax.scipy.spatial.transform import Rotation as JRot  # noqa: E402
from jax.scipy.spatial.transform import Slerp as JSlerp  # noqa: E402

import fungraph.scipy.cluster.vq as fvq  # noqa: E402
import fungraph.scipy.fft as ffft  # noqa: E402
import fungraph.scipy.ndimage as fnd  # noqa: E402
import fungraph.scipy.signal as fsig  # noqa: E402
from fungraph.scipy.interpolate import RegularGridInterpolator as FGrid  # noqa: E402
from fungraph.scipy.spatial.transform import Rotation as FRot  # noqa: E402
from fungraph.scipy.spatial.transform import Slerp as FSlerp  # noqa: E402

MODES = pytest.mark.parametrize("x64", [True, False])


def _same(got, want, what, precise=None):
    """Equal dtype, shape and (to the precision of the computation) values; results are fungraph Arrays."""
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves), what
    for g, w in zip(got_leaves, want_leaves):
        assert isinstance(g, fg.Array), (what, type(g))
        assert g.dtype == w.dtype and g.shape == w.shape, (what, g.dtype, w.dtype, g.shape, w.shape)
        fine = precise if precise is not None else w.dtype in (np.float64, np.complex128)
        tol = 1e-9 if fine else 2e-3
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol, err_msg=what)


def _rng():
    return np.random.default_rng(0)


# --- ndimage ----------------------------------------------------------------------------------


@MODES
@pytest.mark.parametrize("mode", ["constant", "nearest", "wrap", "mirror", "reflect"])
def test_map_coordinates_matches_jax(mode, x64):
    rng = _rng()
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for dtype in (np.float32, np.float64, np.int32):
            image = (rng.normal(size=(4, 5)) * 5).astype(dtype)
            coords = [rng.uniform(-6, 9, size=(7,)), rng.uniform(-6, 9, size=(7,))]
            for order in (0, 1):
                want = jnd.map_coordinates(image, coords, order, mode, cval=1.5)
                _same(fnd.map_coordinates(image, coords, order, mode, cval=1.5), want, (dtype, order, mode))
                _same(fg.jit(lambda c: fnd.map_coordinates(image, c, order, mode))(coords),
                      jax.jit(lambda c: jnd.map_coordinates(image, c, order, mode))(coords), "jit")
        row = np.arange(3.0)[None]
        points = [np.array([0.3, 1.2, -1.0]), np.array([-2.5, 0.5, 4.2])]
        _same(fnd.map_coordinates(row, points, 1, mode), jnd.map_coordinates(row, points, 1, mode), "size 1")
        image = rng.normal(size=(4, 5))
        coords = np.stack([rng.uniform(-1, 5, 6), rng.uniform(-1, 6, 6)])
        loss = lambda m: lambda img, c: (m.map_coordinates(img, list(c), 1, mode) ** 2).sum()  # noqa: E731
        _same(fg.grad(loss(fnd), argnums=(0, 1))(image, coords), jax.grad(loss(jnd), argnums=(0, 1))(image, coords),
              "grad")
        _same(fg.vmap(lambda c: fnd.map_coordinates(image, list(c), 1, mode), in_axes=1)(coords),
              jax.vmap(lambda c: jnd.map_coordinates(image, list(c), 1, mode), in_axes=1)(coords), "vmap")


def test_map_coordinates_refuses_what_jax_refuses():
    with pytest.raises(NotImplementedError, match="order"):
        fnd.map_coordinates(np.ones((3, 3)), [np.zeros(2), np.zeros(2)], 3)
    with pytest.raises(NotImplementedError, match="mode"):
        fnd.map_coordinates(np.ones((3, 3)), [np.zeros(2), np.zeros(2)], 1, mode="grid-wrap")
    with pytest.raises(ValueError, match="length input.ndim"):
        fnd.map_coordinates(np.ones((3, 3)), [np.zeros(2)], 1)


# --- fft --------------------------------------------------------------------------------------

DCT_CASES = [("dct", {}), ("dct", dict(n=7, axis=1)), ("dct", dict(n=2, axis=0)), ("idct", {}),
             ("idct", dict(n=3, axis=-2)), ("dctn", {}), ("dctn", dict(axes=(0, 2))), ("dctn", dict(s=(5, 3))),
             ("dctn", dict(axes=[1])), ("dctn", dict(s=4)), ("idctn", {}), ("idctn", dict(axes=(1, 3), s=(2, 8)))]


@MODES
@pytest.mark.parametrize("norm", [None, "ortho"])
def test_dct_family_matches_jax(norm, x64):
    rng = _rng()
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for dtype in (np.float32, np.float64, np.int32, np.complex64):
            x = (rng.normal(size=(3, 4, 5, 6)) * 3).astype(dtype)
            if dtype == np.complex64:
                x = x + 1j * rng.normal(size=x.shape).astype(np.float32)
            for name, kw in DCT_CASES:
                # JAX under one jit per case: its eager form compiles each of its operations
                theirs = jax.jit(lambda v: getattr(jfft, name)(v, norm=norm, **kw))(x)  # noqa: B023
                _same(getattr(ffft, name)(x, norm=norm, **kw), theirs, (name, kw, dtype),
                      precise=x64 and dtype in (np.float64,))
        x = rng.normal(size=(4, 6))
        for name in ("dct", "idct", "dctn", "idctn"):
            ours, theirs = getattr(ffft, name), getattr(jfft, name)
            _same(fg.grad(lambda v: (ours(v, norm=norm) ** 3).sum())(x),
                  jax.grad(lambda v: (theirs(v, norm=norm) ** 3).sum())(x), name, precise=x64)
            _same(fg.jit(fg.vmap(ours))(x), jax.jit(jax.vmap(theirs))(x), name, precise=x64)


def test_windows_scipy_would_supply_are_refused_by_name():
    with pytest.raises(NotImplementedError, match="window"):
        fsig.welch(np.ones(32), nperseg=8, window=("kaiser", 4.0))


def test_dct_types_other_than_2_are_refused_as_in_jax():
    for name in ("dct", "idct", "dctn", "idctn"):
        with pytest.raises(NotImplementedError, match="type 2"):
            getattr(ffft, name)(np.ones(4), type=1)
        with pytest.raises(ValueError, match="norm"):
            getattr(ffft, name)(np.ones(4), norm="forward")


@MODES
def test_fft_of_integers_takes_jax_s_complex_dtype(x64):
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for dtype in (np.int32, np.int64, np.bool_, np.uint8):
            x = np.ones((4,), dtype)
            for name in ("fft", "rfft", "ifft", "fftn", "rfftn", "hfft", "ihfft", "irfft"):
                assert getattr(fg.numpy.fft, name)(x).dtype == getattr(jnp.fft, name)(x).dtype, (name, dtype)


# --- signal -----------------------------------------------------------------------------------


def _signal_cases(x, y):
    return [
        ("detrend", (x,), {}), ("detrend", (x,), dict(type="constant", axis=0)), ("detrend", (x,), dict(bp=[10, 25])),
        ("stft", (x,), dict(nperseg=8)),
        ("stft", (x,), dict(nperseg=9, noverlap=3, nfft=12, boundary="even", padded=False, detrend="linear")),
        ("stft", (x,), dict(nperseg=8, boundary="odd", return_onesided=False)),
        ("stft", (x.T,), dict(nperseg=8, boundary="constant", axis=0, fs=3.0)),
        ("welch", (x,), dict(nperseg=16)), ("welch", (x,), dict(nperseg=10, average="median", scaling="spectrum")),
        ("welch", (x.T,), dict(nperseg=10, axis=0, nfft=13)), ("welch", (x,), dict(nperseg=8, window="hamming")),
        ("welch", (x,), dict(nperseg=7, window="blackman")), ("stft", (x,), dict(nperseg=8, window="bartlett")),
        ("csd", (x, y), dict(nperseg=9, window="boxcar")),
        ("csd", (x, y), dict(nperseg=16)), ("csd", (x, y[:, :30]), dict(nperseg=8, average="median")),
        ("csd", (x, None), dict(nperseg=8)),
        ("fftconvolve", (x, y[:, :7]), {}), ("fftconvolve", (x, y[:, :7]), dict(mode="same")),
        ("fftconvolve", (x, y[:, :7]), dict(mode="valid", axes=1)),
        ("fftconvolve", (x[:1, :5], y[:, :7]), dict(mode="valid")),
        ("fftconvolve", (x[0], y[0, :9]), dict(mode="same")),
    ]


@MODES
def test_signal_spectral_analysis_and_fftconvolve_match_jax(x64):
    rng = _rng()
    with fg.enable_x64(x64), jax.enable_x64(x64), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dtype in (np.float32, np.float64, np.int32):
            x = (rng.normal(size=(3, 40)) * 3).astype(dtype)
            y = (rng.normal(size=(3, 40)) * 3).astype(dtype)
            for name, args, kw in _signal_cases(x, y):
                theirs = jax.jit(lambda *a: getattr(jsig, name)(*a, **kw))(*args)  # noqa: B023
                _same(getattr(fsig, name)(*args, **kw), theirs, (name, kw, dtype))


@MODES
def test_istft_inverts_stft_as_jax_s(x64):
    rng = _rng()
    with fg.enable_x64(x64), jax.enable_x64(x64):
        x = rng.normal(size=(3, 40))
        z = np.asarray(jsig.stft(x, nperseg=8)[2])
        for kw in ({}, dict(nperseg=8, noverlap=5), dict(boundary=False), dict(window="hamming"),
                   dict(window="blackman")):
            _same(fsig.istft(z, **kw), jsig.istft(z, **kw), kw)
        moved = np.moveaxis(z, -1, 0)
        _same(fsig.istft(moved, time_axis=0, freq_axis=-1), jsig.istft(moved, time_axis=0, freq_axis=-1), "axes")
        two = np.asarray(jsig.stft(x, nperseg=8, return_onesided=False)[2])
        _same(fsig.istft(two, input_onesided=False), jsig.istft(two, input_onesided=False), "two-sided")


@MODES
def test_signal_gradients_vmap_and_jit_match_jax(x64):
    with fg.enable_x64(x64), jax.enable_x64(x64):
        x = _rng().normal(size=(3, 40))

        def loss(m):
            return lambda v: (m.welch(v, nperseg=8)[1].sum() + (m.istft(m.stft(v, nperseg=8)[2])[1] ** 2).sum()
                              + (m.fftconvolve(v, v[:, :5]) ** 2).sum() + (m.detrend(v) ** 3).sum())

        _same(fg.grad(loss(fsig))(x), jax.grad(loss(jsig))(x), "grad")
        _same(fg.jit(fg.vmap(loss(fsig)))(x[:, None]), jax.vmap(loss(jsig))(x[:, None]), "vmap")


# --- interpolate ------------------------------------------------------------------------------


@MODES
@pytest.mark.parametrize("method", ["linear", "nearest"])
def test_regular_grid_interpolator_matches_jax(method, x64):
    rng = _rng()
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for dtype in (np.float32, np.float64, np.int32):
            grid = (np.sort(rng.uniform(0, 5, 6)), np.linspace(-1, 1, 4))
            values = (rng.normal(size=(6, 4, 2)) * 4).astype(dtype)
            xi = rng.uniform(-1.5, 6, size=(5, 2)).astype(np.float32)
            for fill in (np.nan, None, 0.5, 3):
                for points in (xi, (xi[:, 0], xi[:, 1]), xi.astype(np.float64)):
                    _same(FGrid(grid, values, method=method, fill_value=fill)(points),
                          JGrid(grid, values, method=method, fill_value=fill)(points), (dtype, fill))
        grid, values = (np.linspace(0, 1, 5),), rng.normal(size=5)
        x = np.array([[0.1], [0.55], [0.99]])
        _same(fg.grad(lambda v, p: FGrid(grid, v, method)(p).sum(), argnums=(0, 1))(values, x),
              jax.grad(lambda v, p: JGrid(grid, v, method)(p).sum(), argnums=(0, 1))(values, x), "grad")
        ours, theirs = FGrid(grid, values, method), JGrid(grid, values, method)
        _same(fg.jit(lambda f, p: f(p))(ours, x), jax.jit(lambda f, p: f(p))(theirs, x), "jit of the pytree")
        _same(fg.vmap(ours)(x[:, None]), jax.vmap(theirs)(x[:, None]), "vmap")


def test_regular_grid_interpolator_refuses_what_jax_refuses():
    with pytest.raises(NotImplementedError, match="bounds_error"):
        FGrid((np.arange(3.0),), np.ones(3), bounds_error=True)
    with pytest.raises(ValueError, match="method"):
        FGrid((np.arange(3.0),), np.ones(3), method="cubic")
    with pytest.raises(ValueError, match="fill_value"):
        FGrid((np.arange(3.0),), np.ones(3), fill_value=1j)


# --- cluster.vq -------------------------------------------------------------------------------


@MODES
def test_vq_matches_jax(x64):
    rng = _rng()
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for dtype in (np.float32, np.int32, np.float64):
            obs = (rng.normal(size=(7, 3)) * 3).astype(dtype)
            book = (rng.normal(size=(4, 3)) * 3).astype(dtype)
            for a, b in ((obs, book), (obs[:, 0], book[:, 0])):
                _same(fvq.vq(a, b), jvq.vq(a, b), dtype)
                _same(fg.jit(fvq.vq)(a, b), jvq.vq(a, b), dtype)
        obs, book = rng.normal(size=(7, 3)), rng.normal(size=(4, 3))
        _same(fg.grad(lambda o: fvq.vq(o, book)[1].sum())(obs), jax.grad(lambda o: jvq.vq(o, book)[1].sum())(obs),
              "grad")
        _same(fg.vmap(lambda o: fvq.vq(o, book)[1])(obs[:, None]), jax.vmap(lambda o: jvq.vq(o, book)[1])(obs[:, None]),
              "vmap")


# --- spatial.transform ------------------------------------------------------------------------


def _quats(dtype):
    q = _rng().normal(size=(6, 4)).astype(dtype)
    q[0], q[1], q[2], q[3] = [0, 0, 0, 1], [0, 0, 0, -1], [1, 0, 0, 0], [0, 0, -1, 0]
    return q


@MODES
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rotation_conversions_match_jax(dtype, x64):
    rng = _rng()
    with fg.enable_x64(x64), jax.enable_x64(x64):
        precise = x64 and dtype == np.float64
        ours, theirs = FRot.from_quat(_quats(dtype)), JRot.from_quat(_quats(dtype))
        _same(ours.quat, theirs.quat, "from_quat", precise)
        for name, args in [("as_matrix", ()), ("as_mrp", ()), ("as_rotvec", ()), ("as_rotvec", (True,)),
                           ("magnitude", ()), ("as_quat", ()), ("as_quat", (True, True)), ("as_quat", (True,))]:
            _same(getattr(ours, name)(*args), getattr(theirs, name)(*args), name, precise)
        for seq in ("xyz", "ZYX", "zxz", "XYX", "yzx", "ZXZ"):
            _same(ours.as_euler(seq), theirs.as_euler(seq), seq, precise)
            angles = rng.uniform(-3, 3, size=(5, 3)).astype(dtype)
            _same(FRot.from_euler(seq, angles).quat, JRot.from_euler(seq, angles).quat, seq, precise)
            _same(FRot.from_euler(seq[:2], angles[0, :2] * 30, degrees=True).quat,
                  JRot.from_euler(seq[:2], angles[0, :2] * 30, degrees=True).quat, seq, precise)
        _same(FRot.from_euler("z", 90, degrees=True).quat, JRot.from_euler("z", 90, degrees=True).quat, "ints")
        matrices = np.asarray(theirs.as_matrix())
        _same(FRot.from_matrix(matrices).quat, JRot.from_matrix(matrices).quat, "from_matrix", precise)
        rotvec = rng.normal(size=(5, 3)).astype(dtype)
        rotvec[0], rotvec[1] = 0, 1e-4
        _same(FRot.from_rotvec(rotvec).quat, JRot.from_rotvec(rotvec).quat, "from_rotvec", precise)
        _same(FRot.from_rotvec(rotvec * 50, degrees=True).quat, JRot.from_rotvec(rotvec * 50, degrees=True).quat,
              "from_rotvec degrees", precise)
        _same(FRot.from_mrp(rotvec).quat, JRot.from_mrp(rotvec).quat, "from_mrp", precise)
        _same(FRot.from_mrp(np.array([1, 2, 0])).quat, JRot.from_mrp(np.array([1, 2, 0])).quat, "from_mrp ints")


@MODES
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rotation_algebra_and_slerp_match_jax(dtype, x64):
    with fg.enable_x64(x64), jax.enable_x64(x64):
        precise = x64 and dtype == np.float64
        ours, theirs = FRot.from_quat(_quats(dtype)), JRot.from_quat(_quats(dtype))
        vectors = _rng().normal(size=(6, 3)).astype(dtype)
        for v in (vectors, vectors[0]):
            _same(ours.apply(v), theirs.apply(v), "apply", precise)
            _same(ours.apply(v, inverse=True), theirs.apply(v, inverse=True), "apply inverse", precise)
            _same(ours[2].apply(v), theirs[2].apply(v), "apply one", precise)
        _same((ours * ours[::-1]).quat, (theirs * theirs[::-1]).quat, "compose", precise)
        _same((ours[0] * ours).quat, (theirs[0] * theirs).quat, "compose one", precise)
        _same(ours.inv().quat, theirs.inv().quat, "inv", precise)
        _same(ours[1:3].quat, theirs[1:3].quat, "index", precise)
        assert len(ours) == len(theirs)
        _same(FRot.concatenate([ours, ours[:2]]).quat, JRot.concatenate([theirs, theirs[:2]]).quat, "concat")
        _same(FRot.identity(dtype=dtype).quat, JRot.identity(dtype=dtype).quat, "identity")
        weights = np.arange(1, 7)
        _same(ours.mean(weights).as_matrix(), theirs.mean(weights).as_matrix(), "mean", precise)
        with pytest.raises(TypeError, match="not subscriptable"):
            ours[0][0]
        with pytest.raises(NotImplementedError):
            FRot.random(None)
        angles = np.array([[90, 0, 0], [0, 45, 0], [0, 0, -30]], dtype)
        slerp_ours = FSlerp.init([0, 1, 2], FRot.from_euler("zxy", angles, degrees=True))
        slerp_theirs = JSlerp.init([0, 1, 2], JRot.from_euler("zxy", angles, degrees=True))
        for t in ([0, 0.5, 1, 1.5, 2], 0.25, np.array([0.3, 1.9], dtype)):
            _same(slerp_ours(t).quat, slerp_theirs(t).quat, ("slerp", t), precise)
        times = np.array([0.3, 1.2])
        _same(fg.jit(lambda s, t: s(t).as_euler("zxy"))(slerp_ours, times),
              jax.jit(lambda s, t: s(t).as_euler("zxy"))(slerp_theirs, times), "slerp under jit", precise)


@MODES
def test_rotation_gradients_and_vmap_match_jax(x64):
    with fg.enable_x64(x64), jax.enable_x64(x64):
        x = _rng().normal(size=(4, 3))

        def loss(rot):
            def f(v):
                r = rot.from_rotvec(v)
                return ((r.as_matrix() ** 2 * np.arange(9.0).reshape(3, 3)).sum() + r.as_euler("xyz").sum()
                        + r.apply(np.ones(3)).sum() + r.as_mrp().sum())
            return f

        _same(fg.grad(loss(FRot))(x), jax.grad(loss(JRot))(x), "grad")
        _same(fg.vmap(lambda v: FRot.from_rotvec(v).as_quat())(x), jax.vmap(lambda v: JRot.from_rotvec(v).as_quat())(x),
              "vmap")
        _same(fg.jit(fg.vmap(lambda v: FRot.from_rotvec(v).as_euler("ZYZ")))(x),
              jax.jit(jax.vmap(lambda v: JRot.from_rotvec(v).as_euler("ZYZ")))(x), "jit of vmap")


def test_modules_import_as_jax_s():
    import fungraph.scipy as fs

    for name in ("cluster", "fft", "interpolate", "ndimage", "spatial"):
        assert getattr(fs, name).__name__ == f"fungraph.scipy.{name}"
    assert fs.cluster.vq.vq is fvq.vq and fs.spatial.transform.Rotation is FRot
