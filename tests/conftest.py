"""Shared fixtures. Logs are captured, not printed, so tests can assert on them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import structlog


@pytest.fixture(autouse=True)
def captured_logs() -> Iterator[list[dict[str, Any]]]:
    """Every structlog event of the test, as dicts (also keeps test output quiet).

    The configuration is reset first: a CLI test configures structlog globally
    (with a level filter), which must not leak into the next test.
    """
    structlog.reset_defaults()
    with structlog.testing.capture_logs() as logs:
        yield logs
    structlog.reset_defaults()
