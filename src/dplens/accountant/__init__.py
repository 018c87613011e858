"""dplens.accountant."""
