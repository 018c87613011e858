"""The installed dplens's version, on the ground floor: modules that record it (the ledger, the runner's checkpoints,
the CLI's ``--version``) import it from here rather than from the package's face (``dplens/__init__.py``), which
imports nothing back. pyproject.toml states the same number (tests/test_layout.py keeps them equal)."""

__version__ = "0.1.0"
