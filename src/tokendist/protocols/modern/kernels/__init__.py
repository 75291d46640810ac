"""Compiled kernels of the modern family.

Variants of the rules in ``.._quasirandom``, ``.._rotor_router``, ``.._matching`` (the balancing
circuit) and ``.._flow_imitation``, each tested against its rule's numpy reference step.
"""
