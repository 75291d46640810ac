"""Perfect, fully decentralised token distribution on trees: Margara, Pistocchi, Vassura.

Registered protocols: perfect-tree (per-node state machines on the message-passing executor).

``_rules.py`` holds the protocol classes, each with the rule as the paper states it and its plain
numpy reference step; the per-node forms and the paper's mathematics sit in their own modules
beside it.
"""

from ._rules import PerfectTree, spanning_tree_of, SPANNING_TREES

__all__ = ['PerfectTree', 'spanning_tree_of', 'SPANNING_TREES']
