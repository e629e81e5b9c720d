"""Kernel source generators, one module per family.

``spec`` (:class:`~fungraph.backends.opencl.kernels.spec.KernelSpec`, parameters and launch
grids), ``elementwise`` (fused regions), ``reductions``, ``matmul`` (``dot_general``), ``conv``,
``indexing`` (``scatter_add``, ``dynamic_update_slice``) and ``copies`` (panel packing and
relayouts). Every generator returns :class:`KernelSpec` values: the source of one
``__kernel`` function, the storage slots it takes as ``(__global T* p<slot>, long o<slot>)``
argument pairs, and its launches.
"""
