"""The four schedule policies' arithmetic: static shares, guided and factoring chunk sizes,
fair shares (see :mod:`flowsim.schedule`).  Pure functions, no TensorFlow."""
import math

from ..core.blocks import check_count

POLICIES = ("static", "dynamic", "guided", "weighted")
#: Weighted factoring's batch ratio before the run-time spread is measured
#: (half of the remaining work per batch), and its largest value.
FACTOR = 2


def check_policy(policy):
    if policy not in POLICIES:
        raise ValueError(f"schedule must be one of {', '.join(map(repr, POLICIES))}, "
                         f"got {policy!r}")
    return policy


def static_shares(n_blocks, weights):
    """Contiguous shares ``[(first, n)]``, one per weight, in proportion to ``weights``.

    Largest-remainder rounding (ties to the lower index), so the shares add up
    to ``n_blocks`` exactly; equal weights give near-equal parts differing by at
    most one block, the larger ones first (like OpenMP ``static``).
    """
    n_blocks = check_count("n_blocks", n_blocks, minimum=0)
    weights = [float(w) for w in weights]
    if not weights:
        raise ValueError("static_shares needs at least one weight")
    if any(not math.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError(f"weights must be finite, >= 0 and not all 0, got {weights}")
    total = sum(weights)
    exact = [n_blocks * w / total for w in weights]
    sizes = [math.floor(e) for e in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - sizes[i]), i))
    for i in order[:n_blocks - sum(sizes)]:
        sizes[i] += 1
    out, first = [], 0
    for n in sizes:
        out.append((first, n))
        first += n
    return out


def guided_chunk(remaining, workers, chunk=1):
    """libgomp's guided rule: ``min(remaining, max(ceil(remaining / workers), chunk))``."""
    return min(remaining, max(-(-remaining // workers), chunk))


def factoring_ratio(remaining, workers, cv):
    """Factoring's batch ratio ``x`` (a batch hands out ``remaining / x``).

    Hummel, Schonberg and Flynn (1992): ``x = 1 + b² + b·sqrt(b² + 2)`` with
    ``b = workers·cv / (2·sqrt(remaining))``, ``cv`` the coefficient of
    variation of one block's run time; ``cv=None`` (not measured yet) gives
    :data:`FACTOR`, and ``x`` never exceeds it.
    """
    if cv is None:
        return FACTOR
    b = workers * cv / (2.0 * math.sqrt(max(remaining, 1)))
    return min(float(FACTOR), 1.0 + b * b + b * math.sqrt(b * b + 2.0))


def fair_share(remaining, speeds, free, now=0.0):
    """Blocks each worker would run if all finished ``remaining`` together.

    ``speeds[w]`` in blocks per second, ``free[w]`` the time worker ``w`` is
    free (busy workers: the end of their chunk in flight), raised to ``now``
    if earlier: ``f_w = max(free[w], now)``.  Water-filling: finds the common
    end ``T`` with ``sum(s_w * max(0, T - f_w)) == remaining`` and returns
    ``[s_w * max(0, T - f_w)]``.
    """
    free = [max(f, now) for f in free]
    order = sorted(range(len(speeds)), key=lambda w: free[w])
    rate = done = 0.0
    end = now
    for i, w in enumerate(order):
        rate += speeds[w]
        nxt = free[order[i + 1]] if i + 1 < len(order) else math.inf
        if done + rate * (nxt - free[w]) >= remaining:
            end = free[w] + (remaining - done) / rate
            break
        done += rate * (nxt - free[w])
    return [s * max(0.0, end - f) for s, f in zip(speeds, free)]
