"""``fastsse.load._stats``: the tests and intervals of ``load compare`` and ``--repeat``.

Expected values are worked by hand from the definitions (and agree with scipy 1.x, which is not a
dependency): Student's t quantiles from the printed tables, the Mann-Whitney U of samples that do
not overlap, Welch's statistic and degrees of freedom from their formulas.
"""

from __future__ import annotations

import math
import random

import pytest

from fastsse.load import _stats as stats


@pytest.mark.parametrize(
    ("df", "t975"),
    [(1, 12.7062), (2, 4.3027), (4, 2.7764), (10, 2.2281), (30, 2.0423), (1000, 1.9623)],
)
def test_t_quantiles_match_the_tables(df: int, t975: float) -> None:
    assert stats.t_quantile(0.975, df) == pytest.approx(t975, abs=1e-4)
    assert stats.t_quantile(0.025, df) == pytest.approx(-t975, abs=1e-4)
    assert stats.t_cdf(stats.t_quantile(0.975, df), df) == pytest.approx(0.975, abs=1e-9)


def test_the_t_distribution_of_one_degree_is_cauchys() -> None:
    for t in (-3.0, -0.5, 0.0, 0.7, 5.0):
        assert stats.t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)


def test_the_incomplete_beta_of_small_integers() -> None:
    # I_x(1, b) = 1 - (1 - x)^b, and I_x(2, 3) = 6x^2 - 8x^3 + 3x^4
    assert stats.betainc(1, 4, 0.3) == pytest.approx(1 - 0.7**4, abs=1e-12)
    x = 0.4
    assert stats.betainc(2, 3, x) == pytest.approx(6 * x**2 - 8 * x**3 + 3 * x**4, abs=1e-12)


def test_the_mean_interval_is_t_times_the_standard_error() -> None:
    mean, low, high = stats.mean_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    half = 2.7764451 * math.sqrt(2.5 / 5)
    assert (mean, low, high) == pytest.approx((3.0, 3.0 - half, 3.0 + half), abs=1e-6)
    with pytest.raises(ValueError, match="2 at least"):
        stats.mean_interval([1.0])


def test_welch_of_unequal_variances() -> None:
    t, df, p = stats.welch([1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 4.0, 6.0, 8.0, 10.0])
    # t = (6 - 3) / sqrt(2.5/5 + 10/5); df = (2.5)^2 / (0.5^2/4 + 2^2/4)
    assert t == pytest.approx(3 / math.sqrt(2.5), abs=1e-12)
    assert df == pytest.approx(6.25 / (0.0625 + 1.0), abs=1e-12)
    assert p == pytest.approx(2 * (1 - stats.t_cdf(t, df)), abs=1e-12)
    assert 0.1 < p < 0.12
    assert stats.welch([1.0, 1.0], [1.0, 1.0])[2] == 1.0  # no spread, no difference
    assert stats.welch([1.0, 1.0], [2.0, 2.0])[2] == 0.0


def test_mann_whitney_of_samples_apart_and_alike() -> None:
    u, p = stats.mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    # U = 0; mean 12.5, sd sqrt(25 * 11 / 12); z = (12.5 - 0.5) / sd
    assert u == 0.0
    assert p == pytest.approx(math.erfc((12.0 / math.sqrt(25 * 11 / 12)) / math.sqrt(2)), abs=1e-12)
    assert stats.mann_whitney([5, 5, 5], [5, 5, 5]) == (4.5, 1.0)
    rng = random.Random(3)
    same = [rng.random() for _ in range(400)], [rng.random() for _ in range(400)]
    assert stats.mann_whitney(*same)[1] > 0.01
    shifted = same[0], [v + 0.2 for v in same[1]]
    assert stats.mann_whitney(*shifted)[1] < 1e-6
    with pytest.raises(ValueError):
        stats.mann_whitney([1.0], [1.0, 2.0])
