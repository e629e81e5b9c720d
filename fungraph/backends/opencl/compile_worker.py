"""A helper process that compiles a share of a program's kernels into PoCL's kernel cache.

PoCL compiles a kernel's work-group function at its first launch, under a process-wide lock,
so one process compiles one kernel at a time; :mod:`~fungraph.backends.opencl.compile_pool`
runs this file as a script in other processes (it imports pyopencl and numpy, never fungraph,
so it starts in a fraction of a second). It opens a context on the device its argument names,
then for each job, one JSON line on stdin (the program's source and build options, the kernel
functions with their slots' sizes, integer arguments and launches), builds the program (PoCL
takes the program the parent just built from its cache) and launches each kernel once per
launch shape, on one work-group where that compiles the same, over zeroed buffers: PoCL
compiles the work-group function for that shape into its cache, where the parent finds it. It
answers each job with one JSON line and exits when stdin closes.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _device(cl: Any, platform: str, name: str) -> Any:
    for p in cl.get_platforms():
        if p.name.strip() != platform:
            continue
        for d in p.get_devices():
            if d.name.strip() == name:
                return d
    raise LookupError(f"no OpenCL device {name!r} on platform {platform!r}")


def _run(cl: Any, np: Any, ctx: Any, queue: Any, job: dict) -> int:
    """Build the job's program and launch each of its kernels once per run, each slot a zeroed
    buffer of its own size; the number of kernels launched."""
    program = cl.Program(ctx, job["source"]).build(options=job["options"])
    dtypes = {"int": np.int32, "long": np.int64}
    zero = np.zeros(1, np.uint8)
    for k in job["kernels"]:
        kernel = cl.Kernel(program, k["name"])
        kernel.set_scalar_arg_dtypes([None, np.int64] * len(k["slot_bytes"]) + [dtypes[t] for t in k["types"]])
        bufs = [cl.Buffer(ctx, cl.mem_flags.READ_WRITE, max(int(n), 1)) for n in k["slot_bytes"]]
        for values, (gsize, lsize, offset) in k["runs"]:
            for buf in bufs:
                cl.enqueue_fill_buffer(queue, buf, zero, 0, buf.size)
            kernel.set_args(*[x for buf in bufs for x in (buf, 0)], *values)
            cl.enqueue_nd_range_kernel(queue, kernel, tuple(gsize), None if lsize is None else tuple(lsize),
                                       global_work_offset=None if offset is None else tuple(offset))
        queue.finish()
    return len(job["kernels"])


def main() -> int:
    import warnings

    import numpy as np
    import pyopencl as cl

    warnings.simplefilter("ignore")
    want = json.loads(sys.argv[1])
    ctx = cl.Context([_device(cl, want["platform"], want["device"])])
    queue = cl.CommandQueue(ctx)
    for line in sys.stdin:
        job = json.loads(line)
        try:
            reply = {"id": job["id"], "ok": True, "launched": _run(cl, np, ctx, queue, job)}
        except Exception as err:  # reported to the parent, which compiles the rest itself
            reply = {"id": job["id"], "ok": False, "error": f"{type(err).__name__}: {err}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
