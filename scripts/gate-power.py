#!/usr/bin/env python3
"""The rollout gate's detection power at the documented defaults (docs/canary.md, "Noise").

The shipped baseline-divergence query passes a version when the 99% one-sided Wilson upper
bound on its share of diverged comparisons is at most max-divergence, and fails it when the
lower bound is above, once min-checks are scored (src/canary/warmup.rs has the same rule).
Every comparison is a look here (the most looks a gate can take), so the chance of passing
is an upper bound on what a gate that looks less often sees. Exact, by dynamic programming
over the number of divergences; no sampling.

    python3 scripts/gate-power.py [max-divergence] [comparisons]
"""
import math
import sys

Z = 2.326
MIN_TO_FAIL = 10


def bounds(d, n):
    spread = Z * math.sqrt(d * (n - d) / n + Z * Z / 4)
    centre = d + Z * Z / 2
    return (centre - spread) / (n + Z * Z), (centre + spread) / (n + Z * Z)


def power(p, tolerance, comparisons):
    """(passed, failed, undecided) after `comparisons`, divergence rate `p` per comparison."""
    alive = {0: 1.0}
    passed = failed = 0.0
    for n in range(1, comparisons + 1):
        step = {}
        for d, prob in alive.items():
            step[d] = step.get(d, 0.0) + prob * (1 - p)
            step[d + 1] = step.get(d + 1, 0.0) + prob * p
        alive = {}
        for d, prob in step.items():
            lower, upper = bounds(d, n)
            if upper <= tolerance:
                passed += prob
            elif n >= MIN_TO_FAIL and lower > tolerance:
                failed += prob
            else:
                alive[d] = prob
    return passed, failed, sum(alive.values())


def main():
    tolerance = float(sys.argv[1]) if len(sys.argv) > 1 else 0.1
    comparisons = int(sys.argv[2]) if len(sys.argv) > 2 else 150
    first = lambda d: next(n for n in range(max(d, 1), 10_000) if bounds(d, n)[1] <= tolerance)
    print(f"max-divergence {tolerance}: passes at {first(0)} comparisons without a divergence, "
          f"{first(1)} with one, {first(2)} with two")
    print(f"| divergence per comparison | passed | failed | undecided after {comparisons} |")
    print("|---|---|---|---|")
    for p in (0.0, 0.005, 0.01, 0.02, 0.05, 0.10, 0.17, 0.25, 0.50):
        passed, failed, undecided = power(p, tolerance, comparisons)
        print(f"| {p:.1%} | {passed:.2%} | {failed:.2%} | {undecided:.2%} |")


if __name__ == "__main__":
    main()
