"""What one OpenCL kernel can fuse: the engine's :class:`FusionCapability`. The compiler's
``regions.fuse_regions`` chooses the regions under its cost-model policy (``fusion_model``,
``fusion_search``) and writes them as ``fusion`` equations; the engine lowers each region to
one kernel (``lowering``).

A region's members are elementwise and index-map equations (:func:`codegen.is_fusible`), its
root may also be a reduction (the reduction's kernel evaluates its operand's producers), and
a view outside every region whose output is an affine view of its input's storage is a free
alias (:func:`aliasable_views`). The engine also computes the region consuming a product or a
reduction with it (``epilogue``), so a scalar scale stays beside the product.
"""

from __future__ import annotations

from fungraph.backends.opencl.codegen import INDEX_OPS, VIEW_OPS, Access, contiguous, is_fusible, op_cost, view_access
from fungraph.interpreters.regions import FusionCapability
from fungraph.ir import Graph, Var

REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin"})


def aliasable_views(graph: Graph) -> set[int]:
    """View equations whose output is an affine view of their input's storage, assuming every
    computed value is stored contiguously (true for every kernel output)."""
    layout: dict[Var, Access | None] = {}
    ok: set[int] = set()

    def lay(v: Var) -> Access:
        got = layout.get(v)
        return got if got is not None else Access(0, v.aval, 0, contiguous(v.aval.shape))

    for i, e in enumerate(graph.eqns):
        if e.primitive.name in VIEW_OPS and isinstance(e.inputs[0], Var):
            a = view_access(e, lay(e.inputs[0]))
            if a is not None:
                layout[e.outputs[0]] = a
                ok.add(i)
    return ok


#: Regions searched under the cost model on the engine's final program order (after the
#: donation ordering of ``planning``), with reductions as roots and product epilogues.
OPENCL_FUSION = FusionCapability(policy="search", member=is_fusible, roots=REDUCTIONS, index_ops=INDEX_OPS,
                                 op_cost=op_cost, free_views=aliasable_views, product_epilogues=True,
                                 planned_by="engine")
