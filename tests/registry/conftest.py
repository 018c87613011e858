"""Shared data of the registry tests: a complete tier-1 [deployment] table."""

from __future__ import annotations

#: Every key tier 1 needs, valid.
BASIC = {
    "name": "Counts",
    "data_curators": ["Example Agency"],
    "description": "Noisy counts.",
    "intended_use": "Planning.",
    "data_product_type": "Summary statistics",
    "data_product_region": "Atlantis",
    "publication_date": "2025-03-01",
}
