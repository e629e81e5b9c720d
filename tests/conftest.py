"""Shared test settings: hypothesis profiles (CI runs the same examples, derandomized), and
the ``require_opencl`` fixture the OpenCL test modules use."""

import os

import pytest
from hypothesis import HealthCheck, settings

OPENCL_MISSING = ("no usable OpenCL platform: install an OpenCL driver, e.g. `apt-get install pocl-opencl-icd` "
                  "(PoCL, a CPU driver), and `pip install pyopencl`")

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.register_profile(
    "ci", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile("ci" if os.environ.get("CI") else "default")


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
