"""Audits: statistically valid lower bounds on ε from what a mechanism does.

- :mod:`.games` — the distinguishing game on a mechanism with a vectorised sampler (a spec's, or dplens's own);
  :mod:`.spec_games`, :mod:`.attribute`, :mod:`.one_run`, :mod:`.canaries` and :mod:`.scores` — the other games
  (attribute inference, one-run canaries, training runs, audits from membership scores);
- :mod:`.bounds` — Clopper–Pearson and the ε bounds of a test's counts; :mod:`.runner` — seeded, chunked,
  resumable execution (in process, a process pool, Dask);
- :mod:`.target_game` — the black-box audit of a user's own code (``dplens audit --target``), run as a pipeline of
  stages, one module each in :mod:`.stages`:

  0. :mod:`.stages.checks` — the pair (searched when only a relation is given), the probe of the query values, the
     reproducibility check;
  1. :mod:`.stages.memory` plans the memory against a budget from one output's size; :mod:`.stages.profile`
     (outputs of at most 128 coordinates, held) or :mod:`.stages.wide` (wider ones, reduced as they arrive by
     :mod:`.stages.reduction`) profile the outputs on the fitting half of the pilot;
  2. :mod:`.stages.candidates` — choose the candidate scores and fit them (the families are in :mod:`.blackbox`);
  3. :mod:`.stages.operating_point` — stream the selection half of the pilot and fix where the significance goes;
  4. :mod:`.stages.counting` — the counted trials, binned by the frozen scores;
  5. :mod:`.stages.result` — every score's bound, the verdict, the evidence in words.

  Each stage hands the next a small frozen value and none imports the orchestrator; the guide page "Inside a
  black-box audit" walks through them;
- :mod:`.targets`, :mod:`.pairs`, :mod:`.floats` — user code as a target, pair searches, floating-point
  reachability; :mod:`.host` — outputs and scores of any array type (torch on any device, JAX, CuPy) in host
  memory;
- :mod:`.score_auditor` — every estimator of jax_privacy's canary score auditor, each labelled bound, estimate or
  heuristic.

Example:
    >>> import dplens
    >>> result = dplens.audit(lambda data, rng: 7, ([1, 1], [1]), claim=(1.0, 0.0), trials=2_000)
    >>> result.verdict.value, result.epsilon_lower_bound  # a constant release: no evidence of leakage
    ('CONSISTENT', 0.0)
"""
