"""The tolerances of the Python package's tests, derived rather than tuned (docs/testing.md).

Which rule where: test_op.py's comparisons with the float64 reference (check_specs: the step
combinations, random problems, grouped-query attention) use check_against_torch's compare, the
bound measured on each case (32 times the float32 reference's own rounding noise), the one rule
for that comparison. This module's a-priori bound serves where there is no float32 reference run
to measure: two runs of the op against each other (thread counts, packed documents against each
document alone), gradcheck's finite differences (test_op.py _gradcheck_tol), and the module tests
(test_module.py, test_from_config.py), whose references are other float32 computations.

A float32 sum of n terms is off from the exact sum by at most lambda * sqrt(n) * u * sum|terms|,
u = 2^-24, with probability at least 1 - 2n exp(-lambda^2 / 2) when the rounding errors are
modelled as independent and zero-mean (Higham and Mary, "A new approach to probabilistic rounding
error analysis", SIAM J. Sci. Comput. 41(5), 2019; the worst case, n * u, is never approached by
real data). LAMBDA = 6: a false failure at most once in 10^7 sums. Along a chain of steps the
errors add, each step's sums read values of the case's scale (inputs of order 1, softmax weights
in [0, 1], the group norm's rows rescaled to rms 1, the gate in (0, 1)), and none of the steps
amplifies an error by more than O(1): softmax's Jacobian has norm <= 1, the group norm divides by
a row's rms, of order 1 in these cases (its near-zero rows are rare: check_against_torch's
random_case draws the norm less often at d = 1). So an output or gradient is off by at most
    chain_bound(lengths) * scale,  chain_bound = LAMBDA * u * sum over the chain's sums of sqrt(n),
scale the largest |value| of the case's expected tensors. A wrong index or a missing term changes
a value by a fraction of its own size: 10^-2 to 1, two to four orders of magnitude above.
"""
import math

U = 2.0 ** -24
LAMBDA = 6.0


def mta_sums(B, H, T, d, pre=None, post=None, c_h=None, **_):
    """The lengths of the sums of one MTA forward and backward (docs/spec.md section 2) of a case
    spec (check_against_torch's keys): forward q.k (d), the key-query convolution (c_q c_k), the
    head mixing (H), the softmax's denominator (T), the post-softmax convolution, the head
    convolution (c_h), P v (T), the group norm's rms (d), the gate's dot (d); the backward the same
    sums transposed, and the parameters' gradients, sums over every (b, i, j) (B T T: the kernels
    and head mixings) or every (b, i) (B T d: group norm and gate)."""
    cq, ck = pre or (1, 1)
    pq, pk = post or (1, 1)
    ch = H if c_h is True else (c_h or 1)
    forward = [d, cq * ck, H, T, pq * pk, ch, T, d, d]
    return forward + forward + [B * T * T, B * T * d]


def chain_bound(lengths):
    """LAMBDA * u * sum of sqrt(n) over the sums of a chain: the relative error of its result
    against the chain's scale (the module docstring)."""
    return LAMBDA * U * sum(math.sqrt(n) for n in lengths)


def close(got, exp, bound, scale):
    """max|got - exp| <= bound * scale, failing on a NaN or an infinity (maxerr's measure)."""
    from maxerr import max_abs_diff
    return max_abs_diff(got, exp) <= bound * scale


def scale_of(*tensors):
    """The largest |value| among tensors (a case's scale)."""
    from maxerr import max_abs
    return max(max_abs(t) for t in tensors)
