"""jax_privacy 2.0's matrix-factorisation sensitivities, 64-bit, for a list of cases read as JSON on stdin.

Run only in a child process (``JAX_ENABLE_X64=1 python tests/helpers/jax_mf_reference.py < cases.json``): JAX must
never be loaded in the pytest process (see the root conftest). Each case is ``{"kind": ..., ...}``; one JSON list
of floats (sensitivities, not squared) is printed on stdout, in order.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    os.environ.setdefault("JAX_ENABLE_X64", "1")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax_privacy.matrix_factorization import buffered_toeplitz, sensitivity, toeplitz

    out = []
    for case in json.load(sys.stdin):
        kind = case["kind"]
        if kind == "toeplitz_minsep":
            coef = jnp.asarray(case["coef"], dtype=jnp.float64)
            value = toeplitz.minsep_sensitivity_squared(coef, case["min_sep"], case["k"], n=case["n"]) ** 0.5
        elif kind == "banded":
            value = sensitivity.get_sensitivity_banded(jnp.asarray(case["C"]), case["min_sep"], case["k"])
        elif kind == "minsep_upper":
            value = sensitivity.get_min_sep_sensitivity_upper_bound(jnp.asarray(case["C"]), case["min_sep"], case["k"])
        elif kind == "fixed_epoch":
            value = sensitivity.fixed_epoch_sensitivity(jnp.asarray(case["C"]), case["epochs"])
        elif kind == "blt_norm":
            blt = buffered_toeplitz.BufferedToeplitz.build(case["buf_decay"], case["output_scale"])
            value = buffered_toeplitz.sensitivity_squared(blt, case["n"]) ** 0.5
        elif kind == "blt_coefs":
            blt = buffered_toeplitz.BufferedToeplitz.build(case["buf_decay"], case["output_scale"])
            out.append([float(v) for v in blt.toeplitz_coefs(case["n"])])
            continue
        else:
            raise SystemExit(f"unknown case kind {kind!r}")
        out.append(float(value))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
