"""The OpenMP thread count of the calling thread, through threadpoolctl (a per-thread setting)."""

from __future__ import annotations


def one_openmp_thread():
    """Limit the calling thread's OpenMP team (PyTorch's and scikit-learn's intra-op threads as this thread sees
    them) to one thread, at once; returns threadpoolctl's limiter, a context manager that restores the count on
    exit. Other threads, and PyTorch's global thread count, are untouched. For small operations, where idle
    spinning OpenMP threads only take cores from the work that matters."""
    from threadpoolctl import threadpool_limits  # imported here: most commands never limit threads

    return threadpool_limits(limits=1, user_api="openmp")
