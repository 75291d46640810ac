"""FOS, SOS and the randomized algorithm on heterogeneous networks: Elsässer, Monien, Schamberger (JGAA 2006).

Registered protocols: fos, sos, fos-floor, sos-iou, random-walk.

``_rules.py`` holds the protocol classes, each with the rule as the paper states it and its plain
numpy reference step; the per-node forms and the paper's mathematics sit in their own modules
beside it; ``kernels/`` holds the compiled variants (one job per module) that
the rules choose among, each tested against the reference step.
"""

from ._rules import FOS, SOS, FOSFloor, SOSIOU, HeterogeneousDiffusion, COMMON_PARAMS, KERNEL_PARAM
from ._random_walk import RandomWalk, walk_tokens, targets, token_index, SWITCH_RULES

__all__ = ['FOS', 'SOS', 'FOSFloor', 'SOSIOU', 'HeterogeneousDiffusion', 'COMMON_PARAMS', 'KERNEL_PARAM', 'RandomWalk', 'walk_tokens', 'targets', 'token_index', 'SWITCH_RULES']
