"""Run a batch of partitioned runs under ``mpiexec`` and print what rank 0 measured as JSON lines.

Usage: ``mpiexec -n K python tests/mpi/mpi_cases.py CASES_JSON``, CASES_JSON a list of objects with
the keys ``graph, algo, init, seed, partition`` and optionally ``params, max_steps,
until_discrepancy, record_every``. For each case rank 0 prints one line: the run's JSON, the final
loads, the trace and the per-rank token totals (conservation over the ranks); an error prints
``{"error": message}`` instead. Used by test_mpi_backend.py (a helper launches it).
"""

import json
import sys
import zlib

from mpi4py import MPI

import tokendist
from tokendist.errors import TokendistError

KEYS = ("params", "max_steps", "until_discrepancy", "until_local_discrepancy", "record_every", "allow_infeasible",
        "speeds")


def main(path):
    comm = MPI.COMM_WORLD
    cases = json.loads(open(path).read())
    for case in cases:
        kw = {k: case[k] for k in KEYS if k in case}
        try:
            r = tokendist.simulate(case["graph"], case["algo"], case["init"], seed=case["seed"], backend="mpi",
                                   partition=case.get("partition", "contiguous"), **kw)
        except TokendistError as exc:
            if comm.Get_rank() == 0:
                print(json.dumps({"error": str(exc)}), flush=True)
            continue
        # Every rank got the same result: check that all ranks agree on the final loads' hash.
        digest = zlib.crc32(r.loads.tobytes())
        digests = comm.gather(digest, root=0)
        if comm.Get_rank() == 0:
            out = r.to_json()
            out["loads"] = r.loads.tolist()
            out["trace"] = {k: v.tolist() for k, v in r.trace.items()}
            out["same_on_all_ranks"] = len(set(digests)) == 1
            print(json.dumps(out, default=float), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
