"""The engine every backend and algorithm shares: :class:`Simulation` (what one block of
events computes), :class:`Flow` (the iteration loop), kernels, block grids, counter-based
random numbers, deterministic sums, checkpoints, results and the backend interface.

Nothing is imported here, so ``import flowsim.core.X`` loads only what X needs.
"""
