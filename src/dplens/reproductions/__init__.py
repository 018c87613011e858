"""Reproductions of the seed papers' results (``dplens reproduce NAME``)."""
