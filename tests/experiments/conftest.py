"""Local Dask clusters for the sweep and reproduction tests: one of each size per test module."""

import pytest


def _cluster(workers):
    pytest.importorskip("distributed")
    from tokendist.experiments.sweep import open_client  # the sweep extra: only where a test asks for it

    return open_client(workers=workers)


@pytest.fixture(scope="module")
def client1():
    with _cluster(1) as c:
        yield c


@pytest.fixture(scope="module")
def client2():
    with _cluster(2) as c:
        yield c
