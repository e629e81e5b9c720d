"""Shared test settings: x64 on for the suite (JAX's default is off, and fungraph's; the
precise gradient checks need float64: ``x32`` runs a test in 32-bit mode), native CPU builds in a
temporary folder, hypothesis profiles
(CI runs the same examples, derandomized), and the ``require_opencl`` and ``cpu_code_paths``
fixtures the OpenCL test modules use."""

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

import fungraph

fungraph.config.update("jax_enable_x64", True)

# the native CPU engine's builds go to a folder of this test process, never the user's cache
if "FUNGRAPH_NATIVE_CACHE" not in os.environ:
    os.environ["FUNGRAPH_NATIVE_CACHE"] = tempfile.mkdtemp(prefix="fungraph-native-tests-")
    atexit.register(shutil.rmtree, os.environ["FUNGRAPH_NATIVE_CACHE"], ignore_errors=True)

OPENCL_MISSING = ("no usable OpenCL platform: install an OpenCL driver, e.g. `apt-get install pocl-opencl-icd` "
                  "(PoCL, a CPU driver), and `pip install pyopencl`")

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.register_profile(
    "ci", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile("ci" if os.environ.get("CI") else "default")


@pytest.fixture
def x32() -> Iterator[None]:
    """The test runs in JAX's default 32-bit mode (``jax_enable_x64`` off) in its thread."""
    with fungraph.enable_x64(False):
        yield


def opencl_available() -> bool:
    try:
        from fungraph.backends.opencl import available
    except ImportError:
        return False
    return available()


@pytest.fixture
def require_opencl() -> None:
    """Skip without an OpenCL platform, except under ``CI=true`` where that is a failure."""
    if opencl_available():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {OPENCL_MISSING}")
    pytest.skip(OPENCL_MISSING)


@pytest.fixture
def cpu_code_paths(require_opencl: None) -> Iterator[None]:
    """The kernel choices made for CPU devices (packed 6x16 products with epilogues, 16-column
    sums): on a GPU driver the device is presented as a CPU, so these tests check the same
    kernels on every driver; on PoCL nothing changes."""
    from fungraph.backends.opencl import get_device
    from tests.helpers import opencl_device_presented_as

    if get_device().info.is_cpu:
        yield
        return
    with opencl_device_presented_as(is_cpu=True):
        yield


@pytest.fixture
def device_as(request: pytest.FixtureRequest) -> Iterator[object]:
    """The OpenCL device presented with other limits (``request.param``: DeviceInfo fields)."""
    from tests.helpers import opencl_device_presented_as

    with opencl_device_presented_as(**request.param) as info:
        yield info


#: tests/mpi runs under mpiexec (scripts/test.sh, through scripts/mpi_pytest.py), not in the
#: one-process suite; FUNGRAPH_MPI_TESTS=1 (set by scripts/mpi_pytest.py) collects it.
collect_ignore = [] if os.environ.get("FUNGRAPH_MPI_TESTS") == "1" else ["mpi"]


@pytest.fixture(autouse=True)
def _dtype_mode_restored() -> Iterator[None]:
    """Each test leaves the process-wide dtype mode as it found it (x64 on): a test that turns it
    off and fails to restore it would change the dtypes of whichever tests its worker runs next."""
    from fungraph import dtypes

    before = (dtypes._X64_GLOBAL[0], dtypes._X64_LOCAL.override)
    jax = sys.modules.get("jax")
    jax_before = jax.config.jax_enable_x64 if jax is not None else None
    yield
    if jax is not None and jax.config.jax_enable_x64 != jax_before:
        jax.config.update("jax_enable_x64", jax_before)  # the oracle's mode, set by tests for their own cases
    after = (dtypes._X64_GLOBAL[0], dtypes._X64_LOCAL.override)
    if after != before:
        dtypes._X64_GLOBAL[0], dtypes._X64_LOCAL.override = before
        pytest.fail(f"the test changed the dtype mode (x64 global, thread override) from {before} to {after}")
