"""dplens.auditing."""
