"""The fuzz suite's fixtures: its budget (``--fuzz-minutes`` / ``TFNATIVE_FUZZ_MINUTES``) and seed."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from .harness import Budget, budget_from

# One profile for every generated test: no deadline (each example runs a process), a fixed database-free run
# under CI (derandomize: the same examples every time), random on demand.
settings.register_profile("tfnative-ci", deadline=None, derandomize=True, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                 HealthCheck.data_too_large])
settings.register_profile("tfnative-demand", deadline=None, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                 HealthCheck.data_too_large])


@pytest.fixture(scope="session")
def budget(request: pytest.FixtureRequest) -> Budget:
    b = budget_from(request.config.getoption("--fuzz-minutes"))
    settings.load_profile("tfnative-demand" if b.on_demand else "tfnative-ci")
    if b.on_demand:
        print("fuzz: %.1f minutes, seed %d (TFNATIVE_FUZZ_SEED=%d reproduces it)" % (b.minutes, b.seed, b.seed))
    return b
