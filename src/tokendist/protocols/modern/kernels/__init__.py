"""Compiled kernels of the modern family.

Variants of the rules in ``.._quasirandom``, ``.._rotor_router``, ``.._matching`` (the balancing
circuit and the random matching model), ``.._flow_imitation``, ``.._stratified``,
``.._randomized_diffusion`` and ``.._pairwise_averaging``, each tested against its rule's numpy
reference step.
"""
