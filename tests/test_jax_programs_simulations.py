"""Simulation programs in the style of small public JAX projects, run on JAX and on fungraph with
only the import changed, in both dtype modes: Hamiltonian Monte Carlo (leapfrog in ``fori_loop``,
Metropolis acceptance, samples by ``scan`` over split keys), a checkerboard Metropolis sweep of
the Ising model, an N-body leapfrog integrator under ``scan`` differentiated in the masses, a
Kalman filter's log-likelihood by ``scan`` with its gradient, RK4 and Euler-Maruyama solvers, and
jax-md-style neighbour lists (periodic displacements, ``nonzero(size=)``, cell lists,
``segment_sum`` energies and forces by ``grad``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from tests.helpers import jax_or_skip
from tests.jax_programs import check_program

jax, jnp = jax_or_skip()


def _hamiltonian_monte_carlo(lib: Any, np_: Any) -> Any:
    # after "Hamiltonian Monte Carlo from scratch" posts (leapfrog, HMC kernel, scan over keys)
    random, lax = lib.random, lib.lax

    def neg_log_prob(q: Any) -> Any:
        prec = np_.array([[2.0, 0.6], [0.6, 1.0]])
        return 0.5 * q @ prec @ q

    dVdq = lib.grad(neg_log_prob)

    def leapfrog(q: Any, p: Any, path_len: float, step_size: float) -> Any:
        p = p - step_size * dVdq(q) / 2

        def body(i: Any, state: Any) -> Any:
            q, p = state
            q = q + step_size * p
            p = p - step_size * dVdq(q)
            return q, p

        q, p = lax.fori_loop(0, int(path_len / step_size) - 1, body, (q, p))
        q = q + step_size * p
        p = p - step_size * dVdq(q) / 2
        return q, -p

    def hmc_step(q: Any, key: Any) -> Any:
        key_p, key_u = random.split(key)
        p0 = random.normal(key_p, q.shape)
        q_new, p_new = leapfrog(q, p0, 1.0, 0.1)
        start_log_p = neg_log_prob(q) + np_.sum(p0 ** 2) / 2
        new_log_p = neg_log_prob(q_new) + np_.sum(p_new ** 2) / 2
        accept = np_.log(random.uniform(key_u)) < start_log_p - new_log_p
        q = np_.where(accept, q_new, q)
        return q, (q, accept)

    @partial(lib.jit, static_argnums=1)
    def sample(key: Any, n: int) -> Any:
        return lax.scan(hmc_step, np_.zeros(2), random.split(key, n))

    last, (samples, accepted) = sample(random.PRNGKey(0), 8)
    return last, samples, accepted, np_.mean(samples, axis=0), np_.cov(samples.T)


def _ising_metropolis(lib: Any, np_: Any) -> Any:
    # after Ising-model Metropolis samplers in JAX (checkerboard updates with jnp.roll)
    random, lax = lib.random, lib.lax
    L, beta = 6, 0.4
    i, j = np_.meshgrid(np_.arange(L), np_.arange(L), indexing="ij")
    colors = [(i + j) % 2 == c for c in (0, 1)]

    def energy_change(spins: Any) -> Any:
        neighbours = (np_.roll(spins, 1, 0) + np_.roll(spins, -1, 0) + np_.roll(spins, 1, 1)
                      + np_.roll(spins, -1, 1))
        return 2 * spins * neighbours

    def sweep(spins: Any, key: Any) -> Any:
        for color, k in zip(colors, random.split(key, 2)):
            accept = random.uniform(k, spins.shape) < np_.exp(-beta * energy_change(spins))
            spins = np_.where(color & accept, -spins, spins)
        return spins, (np_.mean(spins), -np_.sum(spins * (np_.roll(spins, 1, 0) + np_.roll(spins, 1, 1))))

    key, init_key = random.split(random.PRNGKey(3))
    spins = 2 * random.bernoulli(init_key, 0.5, (L, L)).astype(np_.int32) - 1
    final, (magnetisation, energy) = lib.jit(lambda s, k: lax.scan(sweep, s, random.split(k, 6)))(spins, key)
    return spins, final, magnetisation, energy


def _n_body(lib: Any, np_: Any) -> Any:
    # after N-body leapfrog integrators written with lax.scan
    lax = lib.lax

    def accelerations(pos: Any, masses: Any, eps: float = 0.1) -> Any:
        diff = pos[None, :, :] - pos[:, None, :]
        dist2 = np_.sum(diff ** 2, axis=-1) + eps ** 2
        inv = dist2 ** -1.5 * (1 - np_.eye(pos.shape[0]))
        return np_.einsum("ij,ijk,j->ik", inv, diff, masses)

    def energy(pos: Any, vel: Any, masses: Any, eps: float = 0.1) -> Any:
        kinetic = 0.5 * np_.sum(masses[:, None] * vel ** 2)
        r = np_.sqrt(np_.sum((pos[None] - pos[:, None]) ** 2, axis=-1) + eps ** 2)
        pairs = np_.triu(masses[:, None] * masses[None, :] / r, k=1)
        return kinetic - np_.sum(pairs)

    def simulate(masses: Any, pos: Any, vel: Any, dt: float = 0.01, steps: int = 20) -> Any:
        def step(state: Any, _: Any) -> Any:
            pos, vel = state
            vel = vel + 0.5 * dt * accelerations(pos, masses)
            pos = pos + dt * vel
            vel = vel + 0.5 * dt * accelerations(pos, masses)
            return (pos, vel), energy(pos, vel, masses)
        return lax.scan(step, (pos, vel), None, length=steps)

    pos = np_.array([[0., 0., 0.], [1., 0., 0.], [0., 1., 0.], [0., 0., 1.]])
    vel = np_.array([[0., 0., 0.], [0., .5, 0.], [-.5, 0., 0.], [0., .3, .3]])
    masses = np_.array([1., .1, .2, .05])
    (final_pos, final_vel), energies = lib.jit(simulate)(masses, pos, vel)
    drift = lib.grad(lambda m: energy(*simulate(m, pos, vel)[0], m))(masses)
    return final_pos, final_vel, energies, drift


def _kalman_filter(lib: Any, np_: Any) -> Any:
    # after Kalman filters written with lax.scan (a log-likelihood maximised by gradient)
    lax, mvn = lib.lax, lib.scipy.stats.multivariate_normal

    def kalman_log_likelihood(params: Any, ys: Any) -> Any:
        A, C, Q, R = params["A"], params["C"], np_.exp(params["log_q"]) * np_.eye(2), np_.exp(params["log_r"])
        R = R * np_.eye(1)

        def step(carry: Any, y: Any) -> Any:
            m, P, ll = carry
            m_pred = A @ m
            P_pred = A @ P @ A.T + Q
            S = C @ P_pred @ C.T + R
            K = np_.linalg.solve(S, C @ P_pred).T
            ll = ll + mvn.logpdf(y, C @ m_pred, S)
            m = m_pred + K @ (y - C @ m_pred)
            P = (np_.eye(2) - K @ C) @ P_pred
            return (m, P, ll), m

        (m, P, ll), ms = lax.scan(step, (np_.zeros(2), np_.eye(2), 0.), ys)
        return ll, ms

    t = np_.arange(10.)
    ys = (np_.sin(t * 0.5) + 0.1 * np_.cos(t * 3.))[:, None]
    params = {"A": np_.array([[1., 0.1], [-0.1, 0.95]]), "C": np_.array([[1., 0.]]), "log_q": np_.log(0.05),
              "log_r": np_.log(0.1)}
    (ll, ms), grads = lib.jit(lib.value_and_grad(kalman_log_likelihood, has_aux=True))(params, ys)
    return ll, ms, grads


def _ode_solvers(lib: Any, np_: Any) -> Any:
    # after fixed-step ODE and SDE solvers in JAX (RK4 in fori_loop, Euler-Maruyama in scan)
    lax, random = lib.lax, lib.random

    def lorenz(state: Any, t: Any, sigma: float = 10., rho: float = 28., beta: float = 8. / 3) -> Any:
        x, y, z = state
        return np_.array([sigma * (y - x), x * (rho - z) - y, x * y - beta * z])

    def rk4(f: Any, y0: Any, t0: float, dt: float, n: int) -> Any:
        def body(i: Any, y: Any) -> Any:
            t = t0 + i * dt
            k1 = f(y, t)
            k2 = f(y + dt / 2 * k1, t + dt / 2)
            k3 = f(y + dt / 2 * k2, t + dt / 2)
            k4 = f(y + dt * k3, t + dt)
            return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return lax.fori_loop(0, n, body, y0)

    def euler_maruyama(key: Any, x0: Any, theta: Any, dt: float = 0.05, n: int = 12) -> Any:
        def step(x: Any, k: Any) -> Any:
            x = x - theta * x * dt + 0.3 * np_.sqrt(dt) * random.normal(k, x.shape)
            return x, x
        return lax.scan(step, x0, random.split(key, n))

    y0 = np_.array([1., 1., 1.])
    decay = lambda y, t, k: -k * y  # noqa: E731
    return (rk4(lorenz, y0, 0., 0.01, 50), lib.jit(rk4, static_argnums=(0, 4))(lorenz, y0, 0., 0.01, 50),
            lib.grad(lambda k: np_.sum(rk4(partial(decay, k=k), np_.ones(2), 0., 0.1, 10)))(0.7),
            euler_maruyama(random.PRNGKey(0), np_.ones(3), 0.5),
            lib.jacfwd(lambda th: euler_maruyama(random.PRNGKey(1), np_.ones(2), th)[0])(0.5))


def _neighbour_lists(lib: Any, np_: Any) -> Any:
    # after jax-md's space.periodic, neighbour lists and soft-sphere energies
    N, box, cutoff, max_neighbours = 8, 3.0, 1.2, 4
    R = lib.random.uniform(lib.random.PRNGKey(0), (N, 2)) * box

    def displacement(Ra: Any, Rb: Any) -> Any:
        dR = Ra - Rb
        return np_.mod(dR + box * 0.5, box) - 0.5 * box

    pair_displacement = lib.vmap(lib.vmap(displacement, (None, 0)), (0, None))

    def safe_norm(dR: Any) -> Any:
        r2 = np_.sum(dR ** 2, axis=-1)
        return np_.where(r2 > 0, np_.sqrt(np_.where(r2 > 0, r2, 1.)), 0.)

    def neighbour_list(R: Any) -> Any:
        dr = safe_norm(pair_displacement(R, R))
        mask = (dr < cutoff) & ~np_.eye(N, dtype=bool)
        idx = np_.where(mask, np_.arange(N)[None, :], N)
        return np_.sort(idx, axis=1)[:, :max_neighbours]

    def soft_sphere_energy(R: Any, neighbours: Any, sigma: float = 1.0, epsilon: float = 1.0) -> Any:
        senders = np_.repeat(np_.arange(N), max_neighbours)
        receivers = neighbours.reshape(-1)
        valid = receivers < N
        dR = displacement(R[senders], R[np_.where(valid, receivers, 0)])
        r = safe_norm(dR)
        e = np_.where(valid & (r < sigma), 0.5 * epsilon * (1 - r / sigma) ** 2, 0.)
        per_particle = lib.ops.segment_sum(e, senders, num_segments=N)
        return 0.5 * np_.sum(per_particle), per_particle

    def cell_list(R: Any, cell_size: float = 1.0) -> Any:
        n_cells = int(box // cell_size)
        cells = np_.floor(R / cell_size).astype(np_.int32) % n_cells
        hashed = cells[:, 0] * n_cells + cells[:, 1]
        order = np_.argsort(hashed)
        return hashed, order, np_.bincount(hashed, length=n_cells ** 2)

    neighbours = lib.jit(neighbour_list)(R)
    (energy, per_particle), forces = lib.value_and_grad(soft_sphere_energy, has_aux=True)(R, neighbours)
    rows, cols = np_.nonzero(neighbours < N, size=N * max_neighbours, fill_value=-1)
    return neighbours, energy, per_particle, -forces, rows, cols, cell_list(R), lib.jit(cell_list)(R)


PROGRAMS: dict[str, Callable[[Any, Any], Any]] = {
    "hamiltonian_monte_carlo": _hamiltonian_monte_carlo, "ising_metropolis": _ising_metropolis, "n_body": _n_body,
    "kalman_filter": _kalman_filter, "ode_solvers": _ode_solvers, "neighbour_lists": _neighbour_lists,
}


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_simulation_program_matches_jax(name: str, x64: bool) -> None:
    check_program(jax, jnp, PROGRAMS[name], x64, rtol32=5e-4, rtol64=1e-9)
