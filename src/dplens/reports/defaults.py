"""Report defaults, in a module light enough for the command line's parser (no numpy)."""

from __future__ import annotations

__all__ = ["DEFAULT_CONFIDENCE", "DEFAULT_DELTA", "DEFAULT_PRIVACY_UNIT", "DEFAULT_TRIALS"]

#: δ of the (ε, δ) statements when neither the command nor the spec's claim gives one.
DEFAULT_DELTA = 1e-5
#: The unit of privacy, in words, when the user states none.
DEFAULT_PRIVACY_UNIT = "one record (one row / training example) of the input data set"
#: Audit trials per side of a report's audit.
DEFAULT_TRIALS = 20_000
#: Confidence of a report's audit bound.
DEFAULT_CONFIDENCE = 0.95
