"""Weighted sums of logarithms, vectorised: a site log-likelihood total and Newton's function values.

``weighted_log_sum`` takes each value's exponent bits apart and evaluates ``log(1 + u)`` of its mantissa by a
polynomial, so the loop compiles to vector instructions (``np.log`` in a loop does not).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .kernels import FASTMATH, LOG_SCALE

# log(1 + u) for u in [sqrt(1/2) - 1, sqrt(2) - 1): a degree-18 Chebyshev fit (absolute error 5e-15)
_LOG_POLY = (
    4.996003610813204e-16,
    0.9999999999999821,
    -0.5000000000003142,
    0.33333333334250254,
    -0.24999999994181302,
    0.199999998641054,
    -0.16666667041219524,
    0.1428572338247037,
    -0.12499992635720986,
    0.1111078830033677,
    -0.09999836623974005,
    0.0909727997283972,
    -0.08343149514219463,
    0.07625577420850116,
    -0.06971021116384507,
    0.06945945608784451,
    -0.0754056735964861,
    0.06409619232981266,
    -0.025985708552573622,
)
_LN2 = float(np.log(2.0))
_SMALLEST_NORMAL = 2.2250738585072014e-308


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def _split_exponent(bits, mantissa, exponent):
    """``x = m * 2**e`` with ``m`` in ``[sqrt(1/2), sqrt(2))`` for the float64 bit patterns ``bits``; returns
    whether every ``x`` is a positive normal number."""
    ok = 0
    for i in range(bits.shape[0]):
        b = bits[i]
        mb = (b & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000
        big = np.int64(mb > 0x3FF6A09E667F3BCD)
        mantissa[i] = mb - big * 0x0010000000000000
        raw = (b >> 52) & 0x7FF
        exponent[i] = np.float64(raw - 1023 + big)
        ok += np.int64(b <= 0) + np.int64(raw == 0) + np.int64(raw == 0x7FF)
    return ok == 0


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def _weighted_log_sum(m, e, w):
    total = 0.0
    for i in range(m.shape[0]):
        x = m[i] - 1.0
        p = _LOG_POLY[18]
        p = p * x + _LOG_POLY[17]
        p = p * x + _LOG_POLY[16]
        p = p * x + _LOG_POLY[15]
        p = p * x + _LOG_POLY[14]
        p = p * x + _LOG_POLY[13]
        p = p * x + _LOG_POLY[12]
        p = p * x + _LOG_POLY[11]
        p = p * x + _LOG_POLY[10]
        p = p * x + _LOG_POLY[9]
        p = p * x + _LOG_POLY[8]
        p = p * x + _LOG_POLY[7]
        p = p * x + _LOG_POLY[6]
        p = p * x + _LOG_POLY[5]
        p = p * x + _LOG_POLY[4]
        p = p * x + _LOG_POLY[3]
        p = p * x + _LOG_POLY[2]
        p = p * x + _LOG_POLY[1]
        p = p * x + _LOG_POLY[0]
        total += w[i] * (e[i] * _LN2 + p)
    return total


@njit(cache=True, nogil=True)
def weighted_log_sum(x, w):
    """``sum_i w[i] * log(x[i])``: vectorised (exponent bits and a polynomial, absolute error 5e-15 per
    term) for positive normal ``x``, ``np.log`` otherwise."""
    n = x.shape[0]
    mantissa = np.empty(n, np.int64)
    exponent = np.empty(n)
    if not _split_exponent(x.view(np.int64), mantissa, exponent):
        total = 0.0
        for i in range(n):
            total += w[i] * np.log(x[i])
        return total
    return _weighted_log_sum(mantissa.view(np.float64), exponent, w)


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def total_loglik(site_lik, site_scale, pattern_weights, inv_lik, pinv):
    """Sum of pattern-weighted log-likelihoods, adding the invariant-sites part when ``pinv > 0``."""
    if pinv <= 0.0:
        offset = 0.0
        for p in range(site_lik.shape[0]):
            offset += pattern_weights[p] * site_scale[p]
        return weighted_log_sum(site_lik, pattern_weights) - offset * LOG_SCALE
    total = 0.0
    for p in range(site_lik.shape[0]):
        lv = np.log(site_lik[p]) - site_scale[p] * LOG_SCALE
        if inv_lik[p] > 0.0:
            li = np.log(pinv * inv_lik[p])
            hi = lv if lv > li else li
            lo = li if lv > li else lv
            lv = hi + np.log1p(np.exp(lo - hi))
        total += pattern_weights[p] * lv
    return total
