"""Correlated-noise ν-DP-FTRL (seed 001) as a dplens plug-in.

Choquette-Choo, Dvijotham, Pillutla, Ganesh, Steinke, Thakurta, "Correlated Noise Provably Beats Independent Noise
for Differentially Private Learning" (ICLR 2024). ``accounting`` holds the ν-DP-FTRL coefficients, the sensitivity
γ_T and the exact μ-GDP of the ``DpFtrl`` event; ``mechanism`` the runnable correlated-noise release;
``reproduction`` the coefficient and γ_T tables and DP-FTRL against DP-SGD (``dplens reproduce dp-ftrl``).
"""
