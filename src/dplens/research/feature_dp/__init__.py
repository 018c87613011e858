"""Feature-level differential privacy (seed 003) as a dplens plug-in.

Mahloujifar, Guo, Suh, Chaudhuri, "Machine Learning with Privacy for Protected Attributes" (IEEE S&P 2025).
``accounting`` holds the ``FeatureDpSgd`` event (Theorem 5: the add/remove subsampled Gaussian on the protected
feature's residual) and the attribute-inference success bounds of Theorem 4; ``mechanism`` the runnable feature-DP
SGD step; ``reproduction`` the paper's ε values, Theorem 4 and Proposition 1 (``dplens reproduce feature-dp``).
"""
