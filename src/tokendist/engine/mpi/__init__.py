"""The partitioned bulk-synchronous executor: ``simulate(..., backend="mpi")`` over MPI ranks.

* :mod:`._partition` -- which rank owns which node (contiguous ranges or METIS);
* :mod:`._halo` -- a rank's local graph, its ghosts and the neighbour exchange;
* :mod:`._run` -- the step loop with the engine's global checks and stopping rules;
* :mod:`._messages` -- the message-passing protocols (``perfect-tree``, ``async-multi-port``) as
  per-node handlers placed on the ranks, their messages batched per time unit and neighbour rank.

Run under ``mpiexec -n K python -m tokendist.cli run ... --backend mpi``; the results are those of
the single-process engine, bit for bit, for every K and partition. mpi4py (and pymetis for
``--partition metis``) are optional dependencies, imported when a run needs them.
"""

from ._partition import PARTITIONS, edge_cut, partition
from ._halo import LocalPart
from ._messages import MESSAGE_PROTOCOLS, run_message_ranks
from ._run import PARTITIONED_PROTOCOLS, mpi_world, partitioned_refusal, run_partitioned

__all__ = ["PARTITIONS", "partition", "edge_cut", "LocalPart", "run_partitioned", "mpi_world",
           "partitioned_refusal", "PARTITIONED_PROTOCOLS", "run_message_ranks", "MESSAGE_PROTOCOLS"]
