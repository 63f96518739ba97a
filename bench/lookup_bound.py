#!/usr/bin/env python3
"""lookup_bound.py — how far the n-gram lookup ring could go on one answer.

Reads the step trace of one greedy `zerolayer run --spec lookup` (stderr with
ZL_RING_TRACE=1) and prints:
  * the verify-cost curve the steps measured: median time of a step over n
    tokens / median plain step;
  * the ring/plain the run reached (its tokens per second of step time against
    plain steps' rate);
  * two upper bounds at that curve, by dynamic programming over the answer
    (every split of it into verify steps): "drafter" knows in advance how many
    of the lookup drafter's proposed tokens will be accepted at each position
    and drafts exactly those (the best any draft-length policy can do with
    this drafter); "any copy" may propose the longest continuation found
    anywhere in the history (the best any drafter copying from the context
    can do).  Positions past the curve's longest measured step use a line
    fitted through its last points.
Greedy decoding emits the same tokens with and without the ring, so the trace
holds the whole answer.

  ZL_RING_TRACE=1 zerolayer run ... --temp 0 --spec lookup 2>trace.txt
  bench/lookup_bound.py trace.txt [MIN_N MAX_N]   (the drafter's n-gram range, default 2 4 as src/engine/spec.c)
"""
import statistics
import sys

RING_MAX = 16


def read(path):
    hist, steps = None, []
    for line in open(path):
        f = line.split()
        if f[:2] == ["ring-trace", "hist"]:
            hist = [int(t) for t in f[3:]]
        elif f[:2] == ["ring-trace", "step"]:
            steps.append((int(f[5]), int(f[7]), float(f[9]), [int(t) for t in f[11:]]))
    if hist is None or not steps:
        sys.exit(f"{path}: no ring-trace lines (run with ZL_RING_TRACE=1 and --spec lookup)")
    return hist, steps


def cost_curve(steps):
    plain = [s for d, _, s, _ in steps if d == 0 and s > 0]
    if len(plain) < 3:
        sys.exit("too few plain steps to time a plain step")
    t1 = statistics.median(plain)
    by_n = {}
    for d, _, s, _ in steps:
        if d > 0 and s > 0:
            by_n.setdefault(d + 1, []).append(s)
    c = {1: 1.0}
    c.update({n: statistics.median(v) / t1 for n, v in sorted(by_n.items())})
    ns = sorted(c)
    tail = ns[-3:] if len(ns) >= 3 else ns
    if len(tail) >= 2:  # least-squares line through the last points, for lengths never measured
        mx = sum(tail) / len(tail)
        my = sum(c[n] for n in tail) / len(tail)
        b = sum((n - mx) * (c[n] - my) for n in tail) / sum((n - mx) ** 2 for n in tail)
    else:
        b = 1.0
    full = {}
    for n in range(1, RING_MAX + 2):
        if n in c:
            full[n] = c[n]
        else:
            lo = max(k for k in ns if k < n) if any(k < n for k in ns) else 1
            hi = min((k for k in ns if k > n), default=None)
            full[n] = c[lo] + (n - lo) * ((c[hi] - c[lo]) / (hi - lo) if hi else b)
    return t1, c, full


def proposal(h, min_n, max_n):
    """the drafter of src/decode/drafter_lookup.c: the most recent earlier match of the longest suffix"""
    for n in range(max_n, min_n - 1, -1):
        if len(h) < n + 1:
            continue
        suf = h[-n:]
        for s in range(len(h) - n - 1, -1, -1):
            if h[s:s + n] == suf:
                out = h[s + n:s + n + RING_MAX]
                if out:
                    return out
    return []


def longest_copy(h, fut):
    best = 0
    for L in range(1, min(RING_MAX, len(fut)) + 1):
        pat = fut[:L]
        if not any(h[s:s + L] == pat for s in range(len(h) - L + 1)):
            break
        best = L
    return best


def bound(N, a, c):
    cost = [0.0] * (N + 1)
    for i in range(N - 1, -1, -1):
        cost[i] = min(c[k + 1] + cost[i + k + 1] for k in range(0, min(a[i], N - 1 - i) + 1))
    return N / cost[0]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    min_n = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    max_n = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    hist, steps = read(sys.argv[1])
    t1, c, full = cost_curve(steps)
    seq = hist + [t for st in steps for t in st[3]]
    P = len(hist)
    N = len(seq) - P  # position P + i: the token a step verifies first (t0), drafts follow it
    a_drafter, a_copy = [], []
    for i in range(N):
        h, fut = seq[:P + i + 1], seq[P + i + 1:]
        pr = proposal(h, min_n, max_n)
        k = 0
        while k < len(pr) and k < len(fut) and pr[k] == fut[k]:
            k += 1
        a_drafter.append(k)
        a_copy.append(longest_copy(h, fut))
    emitted = sum(len(st[3]) for st in steps)
    secs = sum(st[2] for st in steps)
    print(f"answer: {N} tokens after a {P}-token history; plain step {t1 * 1e3:.1f} ms")
    print("verify cost c(n) measured: " + ", ".join(f"{n}: {v:.2f}" for n, v in c.items()))
    print(f"reached:              {emitted / secs * t1:.2f}x  ({len(steps)} steps, "
          f"{sum(1 for s in steps if s[0])} verify steps)")
    print(f"bound, this drafter:  {bound(N, a_drafter, full):.2f}x  "
          f"(the drafter proposes an accepted token at {sum(1 for x in a_drafter if x)} of {N} positions)")
    print(f"bound, any copy:      {bound(N, a_copy, full):.2f}x  "
          f"(some copy from the history fits at {sum(1 for x in a_copy if x)} of {N} positions)")


if __name__ == "__main__":
    main()
