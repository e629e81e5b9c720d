"""``jax.example_libraries`` for programs written against it: the ``optimizers`` and ``stax``
modules' APIs (``from fungraph.example_libraries import optimizers, stax``), on fungraph."""
