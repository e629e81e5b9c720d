"""Newton's method in a while_loop, and its gradient (reverse mode through a loop whose trip
count depends on the data, which JAX cannot differentiate)."""

from __future__ import annotations

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax


def cube_root_of_one_minus(theta):
    """The root x of x**3 + theta * x - 1 = 0, by Newton iterations until the step is tiny."""

    def body(carry):
        x, _ = carry
        step = (x ** 3 + theta * x - 1.0) / (3 * x ** 2 + theta)
        return x - step, fnp.abs(step)

    return lax.while_loop(lambda c: c[1] > 1e-14, body, (1.0, 1.0), checkpoint="sqrt")[0]


def main() -> tuple[float, float]:
    theta = 2.0
    x = cube_root_of_one_minus(theta)
    dx = fg.grad(cube_root_of_one_minus)(theta)
    implicit = -x / (3 * x ** 2 + theta)
    print(f"x = {x:.15f}, dx/dtheta = {dx:.15f}, implicit-function theorem: {implicit:.15f}")
    return float(dx), float(implicit)


if __name__ == "__main__":
    main()
