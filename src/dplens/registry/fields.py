"""The registry's enumerations and the schema version dplens follows (standard library only: the spec parser and
the command line's parser import this module).

The values are the registry schema's documented enumerations (``schemas/deployments-schema.yaml`` of
``opendp/deployments-registry-data`` at :data:`REGISTRY_COMMIT`). Inside dplens they are enums; a record or a spec
holds their string values.

Example:
    >>> DataProductType("Machine learning model").name
    'MACHINE_LEARNING_MODEL'
    >>> choices(ReleaseType)
    ['One release', 'Many releases']
"""

from __future__ import annotations

import enum

__all__ = [
    "BASIC_REQUIRED",
    "ENUM_FIELDS",
    "REGISTRY_COMMIT",
    "REGISTRY_COMMIT_DATE",
    "REGISTRY_REPOSITORY",
    "AccessType",
    "DataProductType",
    "DataSourceType",
    "ModelName",
    "RecordStatus",
    "ReleaseType",
    "Sector",
    "Tier",
    "VariantName",
    "choices",
]

#: The public repository of the registry's data and schema.
REGISTRY_REPOSITORY = "https://github.com/opendp/deployments-registry-data"
#: The registry commit whose schema (``schemas/deployments-schema.yaml``) dplens's schema follows: "globally
#: replace "description" with "details" (#186)", after the renames flavor → variant (#184), resources →
#: administrative (#187) and preprocessing → preprocessing_and_hyperparameter_tuning (#185).
REGISTRY_COMMIT = "3e9c812a924cf01d228f26f6c462c59c391c3f2a"
#: The date of :data:`REGISTRY_COMMIT`.
REGISTRY_COMMIT_DATE = "2026-07-15"


class RecordStatus(enum.Enum):
    """``status``: the approval status of a record (a new record is a ``Draft``)."""

    CONVERTED = "Converted"
    DRAFT = "Draft"
    PENDING = "Pending"
    CHANGES_REQUIRED = "Changes Required"
    APPROVED = "Approved"
    APPROVED_UPDATE_REQUESTED = "Approved (Update Requested)"
    APPROVED_PENDING = "Approved (Pending)"


class Tier(enum.IntEnum):
    """``tier``: how complete the description is (1 basic; 2 + variant, unit, parameters, deployment model; 3 +
    domain, unit details, accounting and implementation)."""

    BASIC = 1
    INTERMEDIATE = 2
    ADVANCED = 3


class DataProductType(enum.Enum):
    """``deployment.basic.data_product_type``."""

    SUMMARY_STATISTICS = "Summary statistics"
    MACHINE_LEARNING_MODEL = "Machine learning model"
    DATASET = "Dataset"
    SYNTHETIC_DATA = "Synthetic data"
    INTERACTIVE_API = "Interactive API"
    SQL_QUERIES = "SQL queries"


class Sector(enum.Enum):
    """``deployment.basic.data_product_sector``."""

    TECHNOLOGY = "Technology"
    HEALTHCARE = "Healthcare"
    EDUCATION = "Education"
    GOVERNMENT = "Government"
    ENERGY = "Energy"
    FINANCE = "Finance"


class VariantName(enum.Enum):
    """``deployment.dp_variant.variant_name``."""

    PURE = "Pure DP"
    APPROXIMATE = "Approximate DP"
    ZCDP = "Zero-concentrated DP"
    RENYI = "Renyi DP"
    CUSTOM = "Custom"


class ModelName(enum.Enum):
    """``deployment.deployment_model.model_name`` (the trust model)."""

    LOCAL = "Local"
    CENTRAL = "Central"
    SHUFFLE = "Shuffle"
    FEDERATED = "Federated"
    VARIES = "Varies"


class ReleaseType(enum.Enum):
    """``deployment.deployment_model.release_type``."""

    ONE = "One release"
    MANY = "Many releases"


class DataSourceType(enum.Enum):
    """``deployment.deployment_model.data_source_type``."""

    STATIC = "Static"
    DYNAMIC = "Dynamic"


class AccessType(enum.Enum):
    """``deployment.deployment_model.access_type``."""

    INTERACTIVE = "Interactive"
    NON_INTERACTIVE = "Non-interactive"


#: The fields of a record's basic section that the registry's schema requires (so a tier-1 record needs each).
BASIC_REQUIRED = (
    "name",
    "data_curators",
    "description",
    "intended_use",
    "data_product_type",
    "data_product_region",
    "publication_date",
)

#: The fields of a record (and keys of a spec's ``[deployment]`` table) that take one of the enumerations, with it:
#: read by the ``[deployment]`` parser and by the record schema.
ENUM_FIELDS: dict[str, type[enum.Enum]] = {
    "data_product_type": DataProductType,
    "data_product_sector": Sector,
    "variant_name": VariantName,
    "model_name": ModelName,
    "release_type": ReleaseType,
    "data_source_type": DataSourceType,
    "access_type": AccessType,
    "status": RecordStatus,
}


def choices(kind: type[enum.Enum]) -> list[str]:
    """The allowed string values of an enumeration, in the registry's order."""
    return [member.value for member in kind]
