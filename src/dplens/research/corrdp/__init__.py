"""Correlation-aware differential privacy (CorrDP, seed 000) as a dplens plug-in.

Wang, Zhang, Cummings, "Integrating Feature Correlation in Differential Privacy with Applications in DP-ERM".
``accounting`` holds the correlation distances, the correlated sensitivity and the eq. (3) noise weights with the
``CorrDpLaplace`` event; ``mechanism`` the runnable per-coordinate Laplace release; ``reproduction`` the reference
values C1–C8 and CorrDP-SGD against DP-SGD (``dplens reproduce corrdp``).
"""
