"""Many processes: ranks over MPI, the rank-side scripts, the MPI ring, data-parallel training, collective models.

- :mod:`.ranks`: start ``n`` ranks (``mpiexec``), run a function on each, collect the results;
- ``_rank_worker.py`` / ``_rank_gpu.py`` / ``_rank_ddp.py``: what each rank runs (scripts, imported by the worker
  inside each rank, never by labkit itself), and ``_rank_comm.py``, the call counters the first two share;
- :mod:`.mpi_ring`: the ring all-reduce of lab 08; :mod:`.ddp`: data-parallel training on ranks;
- :mod:`.collectives`: cost models of collectives (ring, tree, NVLS) on a topology.
"""
