"""How close a floating-point result must be to the expected one: tolerances fitted to the dtype
and to the magnitudes involved, the same for a test cell's check (`coursekit.checks`) and for
the grader's comparison (`autograder.trusted.outcomes`).

Two correct answers that compute the same formula in another order (`p - lr * (g + wd * p)`
against `p.mul_(1 - lr * wd).sub_(lr * g)`, a sum over other threads) round differently: by a
few units in the last place of the *largest* values that take part, not of each entry. So an
entry near zero in a tensor of large values may differ by about eps × the tensor's scale, and
every entry by a relative eps. The comparison allows

    |found - expected| <= atol' + rtol' × |expected|,  where
    rtol' = max(rtol, ULPS × eps(dtype)) and atol' = max(atol, ULPS × eps(dtype) × scale),

`scale` the largest finite |expected| of the tensor, `rtol`/`atol` the scenario's (or the
check's) own. ULPS leaves room for a few dozen operations that each round once; a wrong answer
differs by far more (a factor, a term, a sign).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

ULPS = 64
EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23,
       "float64": 2.0 ** -52}


def fitted(dtype: str, expected: Iterable[float], rtol: float, atol: float
           ) -> tuple[float, float]:
    """(rtol', atol') for comparing values of `dtype` (its name: "float32") with `expected`."""
    eps = EPS.get(str(dtype).replace("torch.", ""))
    if eps is None:
        return rtol, atol
    scale = max((abs(float(x)) for x in expected if math.isfinite(float(x))), default=0.0)
    return max(rtol, ULPS * eps), max(atol, ULPS * eps * scale)
