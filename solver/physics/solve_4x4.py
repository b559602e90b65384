"""A 4 x 4 linear system by its adjugate: the determinant and adj(A) b in one pass.

The mDBC fit (solver/physics/mdbc.py) solves a 4 x 4 moment system once per boundary particle
and needs the determinant first, to decide whether the fit can be trusted. Taichi's
`Matrix.determinant` and `Matrix.inverse` expand each cofactor separately through a helper
function called 360 times, which Taichi's front end transforms at every call (about 0.3 s of
every process's kernel preparation on the 2-core CPU), and the inverse computes the determinant
a second time.

Here the twelve 2 x 2 minors of rows (0, 1) and of rows (2, 3) are formed once; the
determinant is their Laplace expansion by complementary minors, and each adjugate entry (a
cofactor, a 3 x 3 determinant) is a three-term sum of one row's entries and the other pair of
rows' minors. The solution of A x = b is then Cramer's x = adj(A) b / det A, the division left
to the caller, which makes it only where det A is large enough.

Written as plain arithmetic on `a[i, j]` and `b[i]`, so that the same function runs on numpy
arrays (the tests) and, through `taichi_func`, inside kernels.
"""

from typing import Any


def determinant_and_adjugate_product(a: Any, b: Any) -> tuple[Any, Any, Any, Any, Any]:
    """(det A, y0, y1, y2, y3) with y = adj(A) b, for a 4 x 4 matrix `a` and a 4-vector `b`;
    A x = b is solved by x = y / det A."""
    s0 = a[0, 0] * a[1, 1] - a[1, 0] * a[0, 1]
    s1 = a[0, 0] * a[1, 2] - a[1, 0] * a[0, 2]
    s2 = a[0, 0] * a[1, 3] - a[1, 0] * a[0, 3]
    s3 = a[0, 1] * a[1, 2] - a[1, 1] * a[0, 2]
    s4 = a[0, 1] * a[1, 3] - a[1, 1] * a[0, 3]
    s5 = a[0, 2] * a[1, 3] - a[1, 2] * a[0, 3]
    c5 = a[2, 2] * a[3, 3] - a[3, 2] * a[2, 3]
    c4 = a[2, 1] * a[3, 3] - a[3, 1] * a[2, 3]
    c3 = a[2, 1] * a[3, 2] - a[3, 1] * a[2, 2]
    c2 = a[2, 0] * a[3, 3] - a[3, 0] * a[2, 3]
    c1 = a[2, 0] * a[3, 2] - a[3, 0] * a[2, 2]
    c0 = a[2, 0] * a[3, 1] - a[3, 0] * a[2, 1]
    det = s0 * c5 - s1 * c4 + s2 * c3 + s3 * c2 - s4 * c1 + s5 * c0
    y0 = (
        (a[1, 1] * c5 - a[1, 2] * c4 + a[1, 3] * c3) * b[0]
        + (-a[0, 1] * c5 + a[0, 2] * c4 - a[0, 3] * c3) * b[1]
        + (a[3, 1] * s5 - a[3, 2] * s4 + a[3, 3] * s3) * b[2]
        + (-a[2, 1] * s5 + a[2, 2] * s4 - a[2, 3] * s3) * b[3]
    )
    y1 = (
        (-a[1, 0] * c5 + a[1, 2] * c2 - a[1, 3] * c1) * b[0]
        + (a[0, 0] * c5 - a[0, 2] * c2 + a[0, 3] * c1) * b[1]
        + (-a[3, 0] * s5 + a[3, 2] * s2 - a[3, 3] * s1) * b[2]
        + (a[2, 0] * s5 - a[2, 2] * s2 + a[2, 3] * s1) * b[3]
    )
    y2 = (
        (a[1, 0] * c4 - a[1, 1] * c2 + a[1, 3] * c0) * b[0]
        + (-a[0, 0] * c4 + a[0, 1] * c2 - a[0, 3] * c0) * b[1]
        + (a[3, 0] * s4 - a[3, 1] * s2 + a[3, 3] * s0) * b[2]
        + (-a[2, 0] * s4 + a[2, 1] * s2 - a[2, 3] * s0) * b[3]
    )
    y3 = (
        (-a[1, 0] * c3 + a[1, 1] * c1 - a[1, 2] * c0) * b[0]
        + (a[0, 0] * c3 - a[0, 1] * c1 + a[0, 2] * c0) * b[1]
        + (-a[3, 0] * s3 + a[3, 1] * s1 - a[3, 2] * s0) * b[2]
        + (a[2, 0] * s3 - a[2, 1] * s1 + a[2, 2] * s0) * b[3]
    )
    return det, y0, y1, y2, y3
