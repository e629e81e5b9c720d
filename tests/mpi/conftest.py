"""Settings for the tests that run under ``mpiexec -n N`` (scripts/test.sh runs them after the
one-process suite through scripts/mpi_pytest.py): JAX, the oracle, gets N host devices so
that its ``shard_map`` over N devices can be compared with N processes; x64 on, as in the
main suite; every process joins the MPI world before the first test."""

import os

os.environ.setdefault("XLA_FLAGS", "")
_size = os.environ.get("PMI_SIZE") or os.environ.get("OMPI_COMM_WORLD_SIZE") or "1"
if "--xla_force_host_platform_device_count" not in os.environ["XLA_FLAGS"]:
    os.environ["XLA_FLAGS"] += f" --xla_force_host_platform_device_count={_size}"

import fungraph  # noqa: E402

fungraph.config.update("jax_enable_x64", True)
fungraph.distributed.initialize(abort_on_exception=False)
