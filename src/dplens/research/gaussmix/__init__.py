"""The Gaussian mixing mechanism (GaussMix) of seed 004 as a dplens plug-in.

Lev, Srinivasan, Shenfeld, Ligett, Sekhari, Wilson, "The Gaussian Mixing Mechanism: Rényi Differential Privacy via
Gaussian Sketches" (arXiv 2505.24603). ``accounting`` holds the events ``GaussMix`` and ``ModifiedGaussMix`` with
the RDP curve φ(α) of Lemma 1 and the exact χ² privacy profile, and Theorem 1's ε̃ of the modified mechanism;
``mechanism`` the runnable Gaussian sketch and its audit mechanism; ``reproduction`` Figure 1 and the DP-OLS
utility comparison (``dplens reproduce gaussmix``).
"""
