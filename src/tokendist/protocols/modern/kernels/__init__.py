"""Compiled kernels of the modern family: variants of the rules in ``.._quasirandom``, ``.._rotor_router``, ``.._matching`` (balancing circuit) and ``.._flow_imitation``."""
