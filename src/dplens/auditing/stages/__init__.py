"""The stages of a target audit (:func:`dplens.auditing.target_game.audit_target`), one module each.

0. :mod:`.checks` — before the pilot: the pair (searched when only a relation is given), the probe of the query
   values, the reproducibility check → :class:`~.checks.Checked`;
1. :mod:`.profile` — profile the outputs on the fitting half of the pilot (kind, support, atoms, float models)
   → :class:`~.profile.Profiled` and the fitting draws;
2. :mod:`.candidates` — choose the candidate scores and fit them on the fitting draws → :class:`~.candidates.
   Candidates`;
3. :mod:`.operating_point` — stream the selection half of the pilot through them and fix where the significance
   goes → :class:`~.operating_point.OperatingPoint`;
4. :mod:`.counting` — run the counted trials, binned by the frozen scores → :class:`~.counting.Counted`;
5. :mod:`.result` — every score's bound, the verdict, the evidence → :class:`~.result.TargetAuditResult`.

Helpers the stages share: :mod:`.setting` (the checked arguments), :mod:`.pilot` (the pilot's sizes, draws and
output kinds), :mod:`.float_models` (which float model describes the pilot), :mod:`.chunks` (the chunk task that
counts raw bins). No stage imports the orchestrator; each hands the next a small frozen value.
"""
