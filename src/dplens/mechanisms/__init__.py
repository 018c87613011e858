"""dplens.mechanisms."""
