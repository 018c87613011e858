"""dplens.audit."""
