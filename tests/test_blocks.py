"""Pure logic of the block grid: BlockGrid, default_block_size, reduce_rows,
RowCollector and the chunk plan of the default executor, Iteration.cut (no TensorFlow work)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowsim.core.backend import Iteration
from flowsim.core.blocks import (
    BLOCK_QUANTUM,
    MAX_BLOCK,
    BlockGrid,
    RowCollector,
    check_count,
    default_block_size,
    reduce_rows,
)

events = st.integers(min_value=1, max_value=10**9)
quanta = st.integers(min_value=1, max_value=4096)


def chunks(events_limit, grid):
    """Iteration.cut without a task (it only reads the grid and events_limit)."""
    return Iteration(None, grid, events_limit, False, 0, 0.0).cut()


@settings(max_examples=300, deadline=None)
@given(events)
def test_default_block_size_properties(n):
    bs = default_block_size(n)
    assert bs % BLOCK_QUANTUM == 0 and 0 < bs <= MAX_BLOCK
    grid = BlockGrid(n, bs)
    # blocks are about equal: total padding is less than one quantum per block
    assert 0 <= grid.n_blocks * bs - n < BLOCK_QUANTUM * grid.n_blocks
    # and no more blocks than needed at MAX_BLOCK events each
    assert grid.n_blocks == math.ceil(n / MAX_BLOCK)


def test_default_block_size_examples():
    assert default_block_size(2_000_000) == 64_576       # 31 blocks, as the docstring says
    assert BlockGrid(2_000_000, 64_576).n_blocks == 31
    assert default_block_size(1) == 64
    assert default_block_size(MAX_BLOCK) == MAX_BLOCK
    assert default_block_size(MAX_BLOCK + 1) == 32_832
    assert default_block_size(1000, max_block=256) == 256


@settings(max_examples=300, deadline=None)
@given(events, quanta)
def test_block_grid_covers_every_event_once(n, q):
    grid = BlockGrid(n, q * BLOCK_QUANTUM)
    bs = grid.block_size
    assert (grid.n_blocks - 1) * bs < n <= grid.n_blocks * bs
    assert grid.events_in(0, grid.n_blocks) == n
    assert grid.events_in(grid.n_blocks - 1, 1) == n - (grid.n_blocks - 1) * bs
    assert grid.events_in(grid.n_blocks, 3) == 0


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 10**7), st.integers(1, 64), st.integers(1, 10**8))
def test_chunk_plan_is_contiguous_and_within_limit(n, q, extra):
    grid = BlockGrid(n, q * BLOCK_QUANTUM)
    limit = grid.block_size + extra % (4 * n + 1)
    plan = chunks(limit, grid)
    # consecutive runs covering blocks 0..n_blocks-1 exactly once, in order
    assert plan[0][0] == 0
    for (a, na), (b, _) in zip(plan, plan[1:]):
        assert b == a + na
    assert plan[-1][0] + plan[-1][1] == grid.n_blocks
    assert all(nb >= 1 and nb * grid.block_size <= limit for _, nb in plan)
    # as few chunks as the limit allows
    per = limit // grid.block_size
    assert len(plan) == math.ceil(grid.n_blocks / per)
    assert sum(grid.events_in(a, nb) for a, nb in plan) == n


def test_chunk_plan_examples():
    grid = BlockGrid(1000, 128)                       # 8 blocks, last one 104 events
    assert chunks(128, grid) == [(b, 1) for b in range(8)]
    assert chunks(383, grid) == [(0, 2), (2, 2), (4, 2), (6, 2)]
    assert chunks(384, grid) == [(0, 3), (3, 3), (6, 2)]
    assert chunks(1024, grid) == [(0, 8)]
    assert chunks(10**9, grid) == [(0, 8)]


def test_block_grid_rejects_bad_sizes():
    with pytest.raises(ValueError, match="block_size must be a multiple of 64, got 100"):
        BlockGrid(1000, 100)
    with pytest.raises(ValueError, match="n_events must be >= 1, got 0"):
        BlockGrid(0, 64)
    with pytest.raises(TypeError, match="block_size must be an integer"):
        BlockGrid(10, 64.0)


def test_check_count_messages():
    assert check_count("n", np.int32(5)) == 5
    assert type(check_count("n", np.int64(5))) is int
    with pytest.raises(TypeError, match=r"n_events must be an integer, got the float 1000000.0; "
                                        r"write 1000000"):
        check_count("n_events", 1e6)
    with pytest.raises(TypeError, match="dim must be an integer, got True"):
        check_count("dim", True)
    with pytest.raises(TypeError, match="dim must be an integer, got '3'"):
        check_count("dim", "3")
    with pytest.raises(ValueError, match="skip must be >= 0, got -1"):
        check_count("skip", -1, minimum=0)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_reduce_rows_is_the_left_to_right_sum(n, width, seed):
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((n, width)) * 10.0 ** rng.integers(-8, 8, size=(n, width))
    total = reduce_rows(rows)
    expect = rows[0].copy()
    for r in rows[1:]:
        expect = expect + r
    assert total.tobytes() == expect.tobytes()
    assert total.dtype == np.float64 and total.shape == (width,)
    # the input is not modified
    assert not np.shares_memory(total, rows)


def test_reduce_rows_order_matters_and_is_fixed():
    # (1e16 + 1) + 1 != 1e16 + (1 + 1) in float64: the order is part of the contract.
    rows = np.array([[1e16], [1.0], [1.0]])
    assert reduce_rows(rows)[0] == 1e16
    assert reduce_rows(rows[::-1])[0] == 1e16 + 2


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 30), st.data())
def test_row_collector_any_arrival_order(n_blocks, data):
    rows = np.arange(n_blocks * 2, dtype=np.float64).reshape(n_blocks, 2)
    # cut into random consecutive chunks and deliver them in a random order
    cuts = sorted(data.draw(st.sets(st.integers(1, n_blocks - 1), max_size=n_blocks))) \
        if n_blocks > 1 else []
    bounds = [0, *cuts, n_blocks]
    pieces = [(a, rows[a:b]) for a, b in zip(bounds, bounds[1:])]
    order = data.draw(st.permutations(range(len(pieces))))
    rc = RowCollector(n_blocks, 2)
    for i in order:
        rc.add(*pieces[i])
    assert rc.result().tobytes() == rows.tobytes()


def test_row_collector_detects_missing_and_repeated_blocks():
    rc = RowCollector(6, 1)
    rc.add(0, np.ones((2, 1)))
    rc.add(4, np.ones((1, 1)))
    with pytest.raises(RuntimeError, match=r"missing blocks \[2, 3, 5\], blocks received "
                                           r"twice \[\]; refusing a partial sum"):
        rc.result()
    rc = RowCollector(3, 1)
    rc.add(0, np.ones((3, 1)))
    rc.add(1, np.ones((1, 1)))
    with pytest.raises(RuntimeError, match=r"missing blocks \[\], blocks received twice \[1\]"):
        rc.result()


def test_row_collector_rejects_chunks_outside_the_grid():
    rc = RowCollector(4, 2)
    with pytest.raises(RuntimeError, match="blocks 3..4 .* 4 blocks"):
        rc.add(3, np.ones((2, 2)))
    with pytest.raises(RuntimeError, match="blocks -1..0"):
        rc.add(-1, np.ones((2, 2)))
    with pytest.raises(RuntimeError, match=r"rows of width 3, expected 2"):
        rc.add(0, np.ones((1, 3)))
