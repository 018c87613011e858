"""dplens.reports."""
