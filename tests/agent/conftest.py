"""Fixtures for the agent tests."""

from __future__ import annotations

import pytest

from ktx.agent.catalog import Catalog

from .helpers import toy_catalog


@pytest.fixture
def catalog() -> Catalog:
    return toy_catalog()
