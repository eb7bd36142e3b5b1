"""Test-run pairs of detectors added after the built-in catalogue, one module each.

``scripts/new_detector.py`` writes one here per new detector; :mod:`rlvitals_corpus.fixtures`
imports every module of this package, and each registers its :class:`~rlvitals_corpus.fixtures.Pair`.
"""
