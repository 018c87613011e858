"""Audits of the DP-SGD step that ran: the harness, the framework adapters, the named implementation checks.

One interface (:class:`~dplens.auditing.training.framework_free.StepSubject`: crafted per-sample gradients in, the
privatised update out) sits between the framework adapters and the checks and games, so that neither knows the
framework. Entry point: :func:`dplens.check_dp_sgd` (``dplens check-dp-sgd``).
"""
