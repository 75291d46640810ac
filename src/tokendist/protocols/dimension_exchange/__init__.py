"""Dimension exchange on trees and edge colourings: Houle, Symvonis, Wood (2004).

Registered protocols: threshold2, threshold1, discrepancy1; the worst-case loads ``distance`` and ``msd-stable``.

``_rules.py`` holds the protocol classes, each with the rule as the paper states it and its plain
numpy reference step; the per-node forms and the paper's mathematics sit in their own modules
beside it; ``kernels/`` holds the compiled variants (one job per module) that
the rules choose among, each tested against the reference step.
"""

from ._rules import Threshold2, Threshold1, Discrepancy1

__all__ = ['Threshold2', 'Threshold1', 'Discrepancy1']
