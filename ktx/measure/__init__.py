"""Measuring candidates on a GPU: compile, check resources, verify, time.

Importing this package never touches CUDA: CuPy is imported lazily inside the worker process
that runs kernels, so the harness, the replay backend and the failure protocol all work (and
are tested) on machines without a GPU.
"""
