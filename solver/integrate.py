"""Time stepping: Verlet and symplectic schemes, dynamic boundary rules and the time-step rule.

Both schemes follow DualSPHysics (Crespo et al. 2015, "DualSPHysics: open-source parallel CFD
solver based on SPH", CPC 187, section 2.4):

- Verlet (Verlet 1967): v^{n+1} = v^{n-1} + (dt_{n-1} + dt_n) a^n,
  x^{n+1} = x^n + dt_n v^n + dt_n^2 a^n / 2, rho^{n+1} = rho^{n-1} + (dt_{n-1} + dt_n) D^n, with
  an Euler step (v^n, rho^n in place of v^{n-1}, rho^{n-1}, dt_n for the span) every
  `verlet_euler_every` steps to keep the two interleaved solutions together. The span
  t^{n+1} - t^{n-1} = dt_{n-1} + dt_n is DualSPHysics' 2 dt when steps are even; written out,
  it stays a centred difference when a step is shortened to land on an output time (with
  2 dt_n, a step cut to a sliver would put the n+1 solution back at time n-1, and a run with
  frequent outputs drifts: particles leave the density band). The density diffusion in D^n
  is evaluated on rho^{n-1} on the leapfrog steps (solver/physics/interaction.py: the leapfrog
  is unstable for a dissipative term), on rho^n on the Euler steps.
- Symplectic position Verlet (Leimkuhler et al. 1996): a half-step predictor, a new interaction,
  then v^{n+1} = v^n + dt a^{n+1/2}, x^{n+1} = x^n + dt (v^n + v^{n+1}) / 2 and
  rho^{n+1} = rho^n (2 - eps) / (2 + eps), eps = -dt D^{n+1/2} / rho^{n+1/2}.

Boundary particles stay still. Under DBC (Crespo et al. 2007) they integrate their density,
clamped to rho0 from below as OpenFPM and DualSPHysics do; under mDBC (English et al. 2022)
their density is set before each interaction (solver/physics/mdbc.py) and the update keeps it.
A fluid particle is flagged for removal when it leaves the domain or its density leaves
[rho_min, rho_max] (DualSPHysics' "excluded" particles), with the reason (REMOVED_OUTSIDE,
REMOVED_DENSITY) in its `removed` flag; it stays frozen and out of every interaction until the
next neighbour-grid sort drops it and counts it by reason. NaN fails both tests.
"""

from collections.abc import Callable
from typing import NamedTuple

import taichi as ti

from solver.config import Config
from solver.counting_region import counted_here, everywhere
from solver.particle_kind import ParticleKind
from solver.physics import eos
from solver.physics.shared_formula import taichi_func

FLUID = int(ParticleKind.FLUID)
REMOVED_OUTSIDE = 1
REMOVED_DENSITY = 2
tait_pressure = taichi_func(eos.tait_pressure)


@ti.func
def finite(x) -> bool:
    """Whether the float x is finite, from its bits (immune to fast-math folding of x != x)."""
    result = True
    if ti.static(ti.lang.impl.get_runtime().default_fp == ti.f64):
        high = ti.cast(ti.bit_cast(x, ti.u64) >> 32, ti.u32)
        result = (high & 0x7FFFFFFF) < 0x7FF00000
    else:
        result = (ti.bit_cast(x, ti.u32) & 0x7FFFFFFF) < 0x7F800000
    return result


@ti.func
def finite_state(x, v, rho) -> bool:
    """Whether a particle's position, velocity and density are all finite."""
    ok = finite(rho)
    for a in ti.static(range(3)):
        ok = ok and finite(x[a]) and finite(v[a])
    return ok


def cfl_time_step(
    a_max: float, v_max: float, visc_max: float, h: float, c0: float, cfl: float, dt_min: float
) -> float:
    """dt = CFL min(sqrt(H / a_max), H / (max(c0, 10 v_max) + H visc_max)), at least dt_min.

    The variable time step of Monaghan and Kos (1999) as used by OpenFPM and DualSPHysics
    (cases.md section 1); visc_max = max over pairs of |v_ij . r_ij| / (r_ij^2 + eta^2).
    Plain arithmetic, so the same formula runs in Python and, through `taichi_func`, inside the
    integration kernels, which take the step on the device.
    """
    wave_limit = h / (max(c0, 10.0 * v_max) + h * visc_max)
    force_limit = wave_limit
    if a_max > 0.0:
        force_limit = (h / a_max) ** 0.5
    return max(cfl * min(force_limit, wave_limit), dt_min)


NO_LIMIT = 1.0e30
"""The limit of a step that has none (`Simulation.step()`, `dambreak bench`'s endless run):
finite, as CUDA's fast math may assume that no value is infinite (see NO_PROBE,
solver/step_batch.py)."""


def lands_on_limit(dt: float, dt_limit: float) -> bool:
    """Whether a step of dt, taken under the limit dt_limit, ends on the limit.

    The device holds the limit only to its float precision, so a step within 1e-6 relative of
    it counts as landing (the host then counts the exact limit): a run lands on its output
    times instead of leaving a sliver of a step before them.
    """
    return dt_limit <= dt * (1.0 + 1e-6)


def at_time_step_floor(dt: float, dt_limit: float, dt_min: float) -> bool:
    """Whether the CFL step has been pushed down to its floor dt_min (to float32 rounding)
    although the limit of the step allowed more: the run's health check stops it there."""
    return dt <= dt_min * (1.0 + 1e-6) and dt_min < dt_limit


def displacement_bound(dt: float, v_max: float, a_max: float) -> float:
    """How far a Verlet step of dt moves a particle at most: dt v_max + dt^2 a_max / 2 (the
    skin's bookkeeping between neighbour sorts)."""
    return dt * v_max + 0.5 * dt * dt * a_max


def time_step(cfg: Config, a_max: float, v_max: float, visc_max: float) -> float:
    """`cfl_time_step` with the constants of `cfg`."""
    t = cfg.time
    return cfl_time_step(a_max, v_max, visc_max, cfg.smoothing_length, cfg.sound_speed, t.cfl,
                         t.dt_min)  # fmt: skip


class Integrator(NamedTuple):
    """The integration kernels of a case, and the Taichi functions fused kernels build on."""

    verlet: Callable
    predict: Callable
    correct: Callable
    verlet_particle: Callable
    """ti.func (i, arrays..., dt, span, euler, health, region): the Verlet update of one
    particle."""
    verlet_span: Callable
    """ti.func (dt, dt_prev) -> t^{n+1} - t^{n-1}, the span of the leapfrog."""
    device_time_step: Callable
    """ti.func (maxima, dt_limit) -> dt: the CFL step, shortened to dt_limit."""
    clear_health: Callable
    """ti.func (health): zero the health counts before an update."""


def build_integrator(cfg: Config) -> Integrator:
    """Taichi kernels (verlet, predict, correct) for `cfg`, with its constants compiled in.

    Each also writes the pressure of the new density (Tait equation), ready for the next
    interaction and for snapshots. `verlet` and `predict` take the time step themselves from
    `maxima[slot]` (see `SlotMaximum`); `correct` reuses the predictor's dt. Each returns
    (dt, max |a|, max |v|, particles with a non-finite value, particles flagged for removal
    now), so the host learns the step and the run's health from the one launch that took the
    step (`correct` returns 0 for the maxima).
    """
    lo = ti.Vector(list(cfg.domain.min))
    hi = ti.Vector(list(cfg.domain.max))
    rho0, b, gamma = cfg.physics.rho0, cfg.eos_b, cfg.physics.gamma
    rho_min, rho_max = cfg.physics.rho_min, cfg.physics.rho_max
    h, c0, cfl, dt_min = cfg.smoothing_length, cfg.sound_speed, cfg.time.cfl, cfg.time.dt_min
    step_info = ti.types.vector(5, float)
    integrate_boundary = cfg.physics.boundary == "dbc"
    cfl_rule = taichi_func(cfl_time_step)

    @ti.func
    def clear_health(health: ti.template()):
        """Zero the counts of non-finite and newly flagged particles before an update."""
        health[0] = 0
        health[1] = 0

    @ti.func
    def store_update(
        i,
        rho,
        flag,
        position: ti.template(),
        velocity: ti.template(),
        density: ti.template(),
        pressure: ti.template(),
        removed: ti.template(),
        health: ti.template(),
        counted,
    ):
        """Write particle i's new density, its pressure and its removal flag, and count it for
        the run's health check if it holds a non-finite value, or if it is flagged now and
        `counted` (it lies in this process's counting region, solver/counting_region.py; a
        non-finite value is counted by every process that holds the particle)."""
        density[i] = rho
        pressure[i] = tait_pressure(rho, rho0, b, gamma)
        removed[i] = flag
        if flag != 0 and counted:
            ti.atomic_add(health[1], 1)
        if not finite_state(position[i], velocity[i], rho):
            ti.atomic_add(health[0], 1)

    @ti.func
    def step_result(dt, maxima_row, health: ti.template()):
        """What the integration kernels return: dt, max |a|, max |v| and the health counts."""
        return step_info(dt, maxima_row[0], maxima_row[1], health[0], health[1])

    @ti.func
    def device_time_step(maxima, dt_limit):
        """The CFL step from the maxima (|a|, |v|, viscous rate) of the last interaction,
        shortened to dt_limit: taken on the device, so no round trip precedes integration."""
        m = maxima
        return ti.min(cfl_rule(m[0], m[1], m[2], h, c0, cfl, dt_min), dt_limit)

    @ti.func
    def verlet_span(dt, dt_prev):
        """t^{n+1} - t^{n-1} = dt_{n-1} + dt_n; dt_prev <= 0 (no step before) counts as dt."""
        return dt + ti.select(dt_prev > 0.0, dt_prev, dt)

    @ti.func
    def boundary_density(integrated, current):
        """A boundary particle's new density: DBC's integrated value clamped to rho0, or under
        mDBC the value the boundary pass set (`current`)."""
        result = current
        if ti.static(integrate_boundary):
            result = ti.max(integrated, rho0)
        return result

    @ti.func
    def removal_reason(x, rho):
        reason = 0
        if not ((x >= lo).all() and (x <= hi).all()):
            reason = REMOVED_OUTSIDE
        elif not (rho >= rho_min and rho <= rho_max):
            reason = REMOVED_DENSITY
        return reason

    @ti.func
    def verlet_particle(
        i,
        position: ti.template(),
        velocity: ti.template(),
        velocity_prev: ti.template(),
        density: ti.template(),
        density_prev: ti.template(),
        kind: ti.template(),
        acceleration: ti.template(),
        density_rate: ti.template(),
        pressure: ti.template(),
        removed: ti.template(),
        dt,
        span,
        euler,
        health: ti.template(),
        region,
    ):
        """The Verlet (or Euler) update of particle i over dt, the leapfrog spanning `span`
        = dt_{n-1} + dt_n (see `verlet_span`); frozen while flagged for removal. A flag counts
        toward `health` where the particle lies in the counting `region`."""
        if removed[i] == 0:
            rho = density[i]
            rho_new = density_prev[i] + span * density_rate[i]
            if euler:
                rho_new = rho + dt * density_rate[i]
            density_prev[i] = rho
            flag = 0
            if kind[i] == FLUID:
                v = velocity[i]
                a = acceleration[i]
                v_new = velocity_prev[i] + span * a
                if euler:
                    v_new = v + dt * a
                x_new = position[i] + dt * v + 0.5 * dt * dt * a
                velocity_prev[i] = v
                velocity[i] = v_new
                position[i] = x_new
                flag = removal_reason(x_new, rho_new)
            else:
                rho_new = boundary_density(rho_new, rho)
            store_update(
                i, rho_new, flag, position, velocity, density, pressure, removed, health,
                counted_here(position[i], region),
            )  # fmt: skip

    @ti.kernel
    def verlet(
        position: ti.types.ndarray(ndim=1),
        velocity: ti.types.ndarray(ndim=1),
        velocity_prev: ti.types.ndarray(ndim=1),
        density: ti.types.ndarray(ndim=1),
        density_prev: ti.types.ndarray(ndim=1),
        kind: ti.types.ndarray(ndim=1),
        acceleration: ti.types.ndarray(ndim=1),
        density_rate: ti.types.ndarray(ndim=1),
        pressure: ti.types.ndarray(ndim=1),
        removed: ti.types.ndarray(ndim=1),
        n: ti.i32,
        maxima: ti.types.ndarray(ndim=1),
        slot: ti.i32,
        dt_limit: float,
        dt_prev: float,
        euler: ti.i32,
        health: ti.types.ndarray(dtype=ti.i32, ndim=1),
    ) -> step_info:
        dt = device_time_step(maxima[slot], dt_limit)
        span = verlet_span(dt, dt_prev)
        clear_health(health)
        for i in range(n):
            verlet_particle(
                i, position, velocity, velocity_prev, density, density_prev, kind, acceleration,
                density_rate, pressure, removed, dt, span, euler, health, everywhere(),
            )  # fmt: skip
        return step_result(dt, maxima[slot], health)

    @ti.kernel
    def predict(
        position: ti.types.ndarray(ndim=1),
        velocity: ti.types.ndarray(ndim=1),
        density: ti.types.ndarray(ndim=1),
        position_prev: ti.types.ndarray(ndim=1),
        velocity_prev: ti.types.ndarray(ndim=1),
        density_prev: ti.types.ndarray(ndim=1),
        kind: ti.types.ndarray(ndim=1),
        acceleration: ti.types.ndarray(ndim=1),
        density_rate: ti.types.ndarray(ndim=1),
        pressure: ti.types.ndarray(ndim=1),
        removed: ti.types.ndarray(ndim=1),
        n: ti.i32,
        maxima: ti.types.ndarray(ndim=1),
        slot: ti.i32,
        dt_limit: float,
        health: ti.types.ndarray(dtype=ti.i32, ndim=1),
        region_lo: float,
        region_hi: float,
    ) -> step_info:
        dt = device_time_step(maxima[slot], dt_limit)
        clear_health(health)
        half = 0.5 * dt
        for i in range(n):
            if removed[i] == 0:  # frozen while flagged, until a sort drops it
                rho = density[i]
                density_prev[i] = rho
                rho_half = rho + half * density_rate[i]
                flag = 0
                if kind[i] == FLUID:
                    x = position[i]
                    v = velocity[i]
                    position_prev[i] = x
                    velocity_prev[i] = v
                    position[i] = x + half * v
                    velocity[i] = v + half * acceleration[i]
                    flag = removal_reason(x + half * v, rho_half)
                else:
                    rho_half = boundary_density(rho_half, rho)
                store_update(
                    i, rho_half, flag, position, velocity, density, pressure, removed, health,
                    counted_here(position[i], ti.Vector([region_lo, region_hi])),
                )  # fmt: skip
        return step_result(dt, maxima[slot], health)

    @ti.kernel
    def correct(
        position: ti.types.ndarray(ndim=1),
        velocity: ti.types.ndarray(ndim=1),
        density: ti.types.ndarray(ndim=1),
        position_prev: ti.types.ndarray(ndim=1),
        velocity_prev: ti.types.ndarray(ndim=1),
        density_prev: ti.types.ndarray(ndim=1),
        kind: ti.types.ndarray(ndim=1),
        acceleration: ti.types.ndarray(ndim=1),
        density_rate: ti.types.ndarray(ndim=1),
        pressure: ti.types.ndarray(ndim=1),
        removed: ti.types.ndarray(ndim=1),
        n: ti.i32,
        dt: float,
        maxima: ti.types.ndarray(ndim=1),
        slot: ti.i32,
        health: ti.types.ndarray(dtype=ti.i32, ndim=1),
        region_lo: float,
        region_hi: float,
    ) -> step_info:
        clear_health(health)
        for i in range(n):
            if removed[i] == 0:  # frozen while flagged, until a sort drops it
                eps = -density_rate[i] / density[i] * dt
                rho_new = density_prev[i] * (2.0 - eps) / (2.0 + eps)
                rho_now = density[i]
                flag = 0
                if kind[i] == FLUID:
                    v_old = velocity_prev[i]
                    v_new = v_old + dt * acceleration[i]
                    x_new = position_prev[i] + 0.5 * dt * (v_old + v_new)
                    velocity[i] = v_new
                    position[i] = x_new
                    flag = removal_reason(x_new, rho_new)
                else:
                    rho_new = boundary_density(rho_new, rho_now)
                store_update(
                    i, rho_new, flag, position, velocity, density, pressure, removed, health,
                    counted_here(position[i], ti.Vector([region_lo, region_hi])),
                )  # fmt: skip
        return step_result(dt, maxima[slot], health)

    return Integrator(
        verlet, predict, correct, verlet_particle, verlet_span, device_time_step, clear_health
    )
