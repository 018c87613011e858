"""Bayesian coordinate differential privacy (BCDP, seed 002) as a dplens plug-in.

Aliakbarpour, Fallah, Chaudhuri, Courtade, Jordan, "Enhancing Feature-Specific Data Protection via Bayesian
Coordinate Differential Privacy". ``accounting`` holds Proposition 4, Theorem 2 and the exact per-feature BCDP δ
(BCDP does not compose: the ledger carries the LDP ε); ``mechanism`` the private mean estimator; ``reproduction``
Examples 1–2, the mean-estimation MSE and Algorithm 2's regression (``dplens reproduce bcdp``).
"""
