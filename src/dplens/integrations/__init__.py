"""Adapters to training frameworks; each imports its framework lazily, so ``import dplens`` never loads torch."""
