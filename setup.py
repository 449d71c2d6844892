"""The one compiled part: the tree NNLS's per-parent step in C (AVX2), loaded
with ctypes by `ektelo.matrix.tree_nnls`. Optional: without a compiler the
install goes on and NumPy does that step. Everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ektelo.matrix._nnls_kernel",
            sources=["src/ektelo/matrix/_nnls_kernel.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
