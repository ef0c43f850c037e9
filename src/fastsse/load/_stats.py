"""The statistics ``load compare`` and ``load --repeat`` need, without scipy (not a dependency).

- ``mann_whitney(a, b) -> (u, p)``: the two-sided Mann-Whitney U test of two independent samples
  (normal approximation, with the tie correction and a continuity correction of 1/2, as
  ``scipy.stats.mannwhitneyu(method="asymptotic")``): is a value of one sample as likely to be
  above a value of the other as below it?
- ``welch(a, b) -> (t, df, p)``: Welch's two-sided t test of two means with unequal variances.
- ``mean_interval(values, level=0.95) -> (mean, low, high)``: the mean and its Student-t
  confidence interval.
- ``t_cdf(t, df)`` and ``t_quantile(q, df)``: Student's t distribution, from the regularized
  incomplete beta function (Numerical Recipes' continued fraction).

Each raises InvalidRequest for a sample too small for it (fewer than 2 values).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from .._errors import InvalidRequest

_EPS: Final = 3e-16
_TINY: Final = 1e-300


def _beta_fraction(a: float, b: float, x: float) -> float:
    # the continued fraction of the incomplete beta function (modified Lentz's method)
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        even = m * (b - m) * x / ((qam + m2) * (a + m2))
        odd = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        for aa in (even, odd):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom (df > 0)."""
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile (0 < q < 1) of Student's t with ``df`` degrees of freedom."""
    if not 0.0 < q < 1.0:
        raise InvalidRequest(f"a quantile needs 0 < q < 1, not {q}")
    if q < 0.5:
        return -t_quantile(1.0 - q, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < q:
        hi *= 2.0
    for _ in range(200):  # bisection: t_cdf is monotone, and 200 halvings reach a double's precision
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def _moments(values: Sequence[float]) -> tuple[int, float, float]:
    n = len(values)
    if n < 2:
        raise InvalidRequest(f"a sample of {n} value(s) has no spread: 2 at least are needed")
    mean = math.fsum(values) / n
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return n, mean, var


def mean_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean of ``values`` and its ``level`` confidence interval,
    ``mean -+ t(1 - (1 - level) / 2, n - 1) * s / sqrt(n)``."""
    n, mean, var = _moments(values)
    half = t_quantile(1.0 - (1.0 - level) / 2.0, n - 1) * math.sqrt(var / n)
    return mean, mean - half, mean + half


def welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """``(t, df, p)``: Welch's two-sided t test of ``mean(a) == mean(b)``."""
    na, ma, va = _moments(a)
    nb, mb, vb = _moments(b)
    sa, sb = va / na, vb / nb
    if sa + sb == 0.0:  # no spread in either: the means are equal or they differ for certain
        df = float(na + nb - 2)
        return (0.0, df, 1.0) if ma == mb else (math.copysign(math.inf, mb - ma), df, 0.0)
    t = (mb - ma) / math.sqrt(sa + sb)
    df = (sa + sb) ** 2 / (sa * sa / (na - 1) + sb * sb / (nb - 1))
    return t, df, 2.0 * (1.0 - t_cdf(abs(t), df))


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """``(u, p)``: the Mann-Whitney U of ``a`` (the count of pairs where a's value is above b's,
    ties half) and the two-sided p-value of the normal approximation."""
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        raise InvalidRequest(f"samples of {na} and {nb} values: 2 at least are needed in each")
    both = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    rank_a = 0.0
    ties = 0.0
    i, n = 0, na + nb
    while i < n:
        j = i
        while j + 1 < n and both[j + 1][0] == both[i][0]:
            j += 1
        rank = (i + j) / 2.0 + 1.0  # the mean rank of a run of equal values
        count = j - i + 1
        if count > 1:
            ties += count**3 - count
        rank_a += rank * sum(1 for k in range(i, j + 1) if both[k][1] == 0)
        i = j + 1
    u = rank_a - na * (na + 1) / 2.0
    mean = na * nb / 2.0
    var = na * nb / 12.0 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0.0:
        return u, 1.0  # every value equal: nothing tells the samples apart
    z = (abs(u - mean) - 0.5) / math.sqrt(var)
    return u, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2.0)))
