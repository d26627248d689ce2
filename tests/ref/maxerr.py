"""Error measures for comparing results with a reference that fail on NaN and infinity.

`err > tol` is False for a NaN err, so a check written that way passes it; torch's and numpy's
max() propagate a NaN into err, and Python's max() over numbers that include one returns a NaN or
not depending on their order. Here a NaN or an infinity anywhere in a compared tensor measures
+inf, which fails both `err > tol` and `err <= tol` checks, and no ratio is inf / inf (a NaN).
No reference tensor of these tests is legitimately non-finite.
"""
import math

import numpy as np


def _as64(x):
    if hasattr(x, 'detach'):  # a torch tensor
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, np.float64)


def max_abs(x):
    """Largest |x| as a float: +inf when x holds a NaN or an infinity, 0.0 when it is empty."""
    x = _as64(x)
    if x.size == 0:
        return 0.0
    return float(np.abs(x).max()) if np.isfinite(x).all() else math.inf


def max_abs_diff(a, b):
    """Largest |a - b|: +inf when a or b holds a NaN or an infinity (then so does a - b)."""
    return max_abs(_as64(a) - _as64(b))


def rel_err(a, ref, floor):
    """max_abs_diff(a, ref) / max(max_abs(ref), floor): +inf when a or ref holds a NaN or an infinity."""
    err = max_abs_diff(a, ref)
    return err / max(max_abs(ref), floor) if err < math.inf else math.inf
