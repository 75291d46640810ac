"""The progress bar says when numba compiles ("compiling kernels (once per install)")."""

import numba
import numpy as np
from numba.core import event as numba_event

from tokendist.cli._output import COMPILING, CompileNotice


def test_compile_notice_turns_on_for_a_compilation_and_off_at_its_end():
    seen = []
    notice = CompileNotice(seen.append)

    @numba.njit  # a fresh function: no cache, so calling it compiles it (and what it calls)
    def inner(x):
        return x + 1

    @numba.njit
    def outer(a):
        return inner(a.sum())

    numba_event.register("numba:compile", notice)
    try:
        assert outer(np.arange(4)) == 7
        outer(np.arange(5))  # same signature: no compilation, no notice
    finally:
        numba_event.unregister("numba:compile", notice)
    assert seen == [True, False] and notice.depth == 0  # nested compilations count once
    assert "once per install" in COMPILING
