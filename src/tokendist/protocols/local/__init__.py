"""Local load balancing, single-port and multi-port: Ghosh et al. (CMU-CS-95-131, 1995).

Registered protocols: single-port, multi-port, ds, async-multi-port.

``_rules.py`` holds the protocol classes, each with the rule as the paper states it and its plain
numpy reference step; the per-node forms and the paper's mathematics sit in their own modules
beside it; ``kernels/`` holds the compiled variants (one job per module) that
the rules choose among, each tested against the reference step.
"""

from . import _worst_case  # noqa: F401  (registers the Sec. 4 lower-bound loads)
from ._rules import MultiPort, SinglePort, DynamicSynchronous, AsyncMultiPort, multi_port_flows, single_port_flows, single_port_selection_probability

__all__ = ['MultiPort', 'SinglePort', 'DynamicSynchronous', 'AsyncMultiPort', 'multi_port_flows', 'single_port_flows', 'single_port_selection_probability']
