"""Black-box scores for target audits, one module per family behind one binner interface.

- :mod:`.base` — the interface: a score frozen before the counted trials maps outputs to raw bins, and raw bins to
  ranks ordered by the score (what the thresholds cut); the game (:mod:`dplens.auditing.target_game`) only counts
  raw bins and never knows which family it runs;
- :mod:`.frequency` — the exact frequency ratio of whole outputs (discrete vectors with a small observed support);
- :mod:`.features` — the feature map of numeric outputs: sentinel/atom one-hot indicators beside the values;
- :mod:`.learned` — learned density-ratio scores: ridge logistic regression and gradient-boosted trees;
- :mod:`.operating` — the operating point: which (score, threshold, direction) the significance is spent on,
  chosen on an independent pilot.
"""
