"""The Differential Privacy Deployments Registry: records dplens writes, and checks of records others wrote.

The registry (OpenDP, launched November 2025; public data repository ``opendp/deployments-registry-data``) holds
one YAML record per deployment, in three tiers, validated against a Draft-7 JSON schema. dplens writes its own
copy of that schema from the registry's documented fields (:mod:`dplens.registry.schema`, following the registry
commit :data:`~dplens.registry.fields.REGISTRY_COMMIT`), and:

- states what a record says beyond a report (:mod:`dplens.registry.export`: ρ of a zCDP composition, the
  ``[deployment]`` table); the record itself is built from a report one floor up
  (:func:`dplens.reports.registry_entry.export_entry`; ``dplens report … -o DIR`` writes ``registry-entry.yaml``
  when the spec has a ``[deployment]`` table, ``dplens registry export REPORT.json``);
- checks the stated privacy parameters of records others wrote (:func:`dplens.registry.check.check_records`,
  ``dplens registry check FILE|DIR …``): ρ → (ε, δ) by the tightest valid conversion and the classic one, μ → (ε, δ),
  pure DP stated with a δ, a variant that does not match its parameters, an ε below what a conversion of the
  stated ρ allows.

Modules: :mod:`~dplens.registry.fields` (the registry's enumerations, light enough for the spec parser),
:mod:`~dplens.registry.deployment` (the spec's ``[deployment]`` table), :mod:`~dplens.registry.schema` (the
project's schema and validation), :mod:`~dplens.registry.yamlio` (reading and writing records),
:mod:`~dplens.registry.export`, :mod:`~dplens.registry.check`.

Example:
    >>> from dplens.registry.fields import REGISTRY_COMMIT, VariantName
    >>> len(REGISTRY_COMMIT), VariantName("Zero-concentrated DP").name
    (40, 'ZCDP')
"""
