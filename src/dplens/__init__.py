"""dplens: differential-privacy accounting, empirical auditing and compliance reports."""

__version__ = "0.1.0"
