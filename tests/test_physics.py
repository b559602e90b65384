"""Physics of the solver: kernels, equation of state, viscosity, density diffusion, the time
step rule, the interaction (momentum balance, and equality with a brute-force all-pairs sum on
every backend), and a still water tank (hydrostatic pressure, exact mass conservation, f32
against f64).

The still-water case is tests/data/still_water.toml: a closed 0.2 x 0.1 x 0.2 m box, dp 0.01,
water 0.15 m deep, three wall layers, Wendland kernel, all other physics as in the seed case
(../shared/reference/cases.md section 1). It is run once per module on the CPU.
"""

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import taichi as ti
from conftest import use_backend

from solver.config import Config, load_config, loads_config
from solver.integrate import time_step
from solver.particle_kind import ParticleKind
from solver.physics.density_diffusion import (
    diffusion_pair_term,
    hydrostatic_density_difference,
)
from solver.physics.eos import tait_density, tait_pressure
from solver.physics.pair_halves import PAIR_CHUNKS, folded_chunk
from solver.physics.shared_formula import taichi_func
from solver.physics.smoothing_kernels import (
    KERNEL_NAMES,
    cubic_spline_f,
    cubic_spline_w,
    kernel_functions,
    wendland_c2_f,
    wendland_c2_w,
)
from solver.physics.sps import BLIN_CI, SMAGORINSKY_CS, sps_stress
from solver.physics.viscosity import laminar_factor, monaghan_pi
from solver.simulation import Simulation
from solver.snapshot import Snapshot

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "configs" / "quick.toml"
STILL_WATER = Path(__file__).resolve().parent / "data" / "still_water.toml"
FLUID = int(ParticleKind.FLUID)

# --------------------------------------------------------------------------- kernels (numpy)


def radial_integral(w, h: float, points: int = 16) -> float:
    """4 pi int_0^2h r^2 w(r) dr by Gauss-Legendre on [0, h] and [h, 2h].

    Both kernels are polynomials on each piece (the cubic spline changes formula at r = h), so
    16 points per piece integrate them exactly up to rounding.
    """
    nodes, weights = np.polynomial.legendre.leggauss(points)
    total = 0.0
    for a, b in ((0.0, h), (h, 2.0 * h)):
        r = 0.5 * (b - a) * nodes + 0.5 * (a + b)
        total += 0.5 * (b - a) * float(np.sum(weights * 4.0 * math.pi * r * r * w(r, h)))
    return total


@pytest.mark.parametrize("name", KERNEL_NAMES)
@pytest.mark.parametrize("h", [1.0, 0.014722, 0.0693])
def test_kernel_integrates_to_one(name: str, h: float) -> None:
    """Normalisation in 3D: 4 pi int_0^2h r^2 W(r, h) dr = 1 for every h (the kernel is a
    smoothed delta function, so SPH sums reproduce a constant field)."""
    w, _ = kernel_functions(name)
    assert radial_integral(w, h) == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_kernel_positive_with_compact_support(name: str) -> None:
    """W >= 0 everywhere, W decreases with r, W(2h) = 0 exactly and W = F = 0 beyond 2h (the
    support radius is 2h, which the neighbour search relies on)."""
    w, f = kernel_functions(name)
    h = 0.02
    r = np.linspace(0.0, 3.0 * h, 3001)
    values = w(r, h)
    assert np.all(values >= 0.0)
    assert np.all(np.diff(values[r <= 2.0 * h]) <= 0.0)
    assert w(2.0 * h, h) == 0.0
    assert f(2.0 * h, h) == 0.0
    assert np.all(values[r >= 2.0 * h] == 0.0)
    assert np.all(f(r, h)[r >= 2.0 * h] == 0.0)
    assert np.all(f(r, h)[r < 2.0 * h] < 0.0)  # W strictly decreasing inside the support


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_gradient_factor_matches_finite_difference(name: str) -> None:
    """F(r) = (1/r) dW/dr: central differences of W divided by r agree to 1e-7 of max |F|,
    across the cubic spline's change of formula at r = h, and F(0) is the finite limit."""
    w, f = kernel_functions(name)
    h = 0.0173
    r = np.linspace(0.01 * h, 1.999 * h, 2000)
    step = 1e-6 * h
    numeric = (w(r + step, h) - w(r - step, h)) / (2.0 * step) / r
    scale = np.max(np.abs(f(r, h)))
    assert np.max(np.abs(numeric - f(r, h))) < 1e-7 * scale
    near_zero = f(np.array([1e-9 * h]), h)[0]
    assert f(0.0, h) == pytest.approx(near_zero, rel=1e-6)
    assert math.isfinite(f(0.0, h))


def test_kernel_closed_forms_at_the_origin() -> None:
    """The normalisations of the literature: cubic spline W(0) = 1/(pi h^3) (Monaghan and
    Lattanzio 1985), Wendland C2 W(0) = 21/(16 pi h^3) (Dominguez et al. 2022)."""
    h = 0.03
    assert cubic_spline_w(0.0, h) == pytest.approx(1.0 / (math.pi * h**3), rel=1e-14)
    assert wendland_c2_w(0.0, h) == pytest.approx(21.0 / (16.0 * math.pi * h**3), rel=1e-14)
    assert cubic_spline_f(0.0, h) == pytest.approx(-3.0 / (math.pi * h**5), rel=1e-14)
    assert wendland_c2_f(0.0, h) == pytest.approx(-105.0 / (16.0 * math.pi * h**5), rel=1e-14)


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_kernel_gradient_is_antisymmetric(name: str) -> None:
    """grad_i W_ij = r_ij F(r_ij) is the gradient of W(|x_i - x_j|) with respect to x_i (checked
    by finite differences in 3D) and equals -grad_j W_ji, so pair forces cancel (Newton's third
    law) and momentum is conserved."""
    w, f = kernel_functions(name)
    h = 0.0173
    rng = np.random.default_rng(7)
    xi = rng.uniform(-1.2 * h, 1.2 * h, size=(200, 3))
    xj = rng.uniform(-1.2 * h, 1.2 * h, size=(200, 3))

    def grad(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """grad_a W(|a - b|) from the formula: (a - b) F(|a - b|)."""
        d = a - b
        return d * f(np.linalg.norm(d, axis=1), h)[:, None]

    def numeric_grad(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        step = 1e-7 * h
        out = np.zeros_like(a)
        for axis in range(3):
            e = np.zeros(3)
            e[axis] = step
            plus = w(np.linalg.norm(a + e - b, axis=1), h)
            minus = w(np.linalg.norm(a - e - b, axis=1), h)
            out[:, axis] = (plus - minus) / (2.0 * step)
        return out

    g_ij = grad(xi, xj)
    g_ji = grad(xj, xi)
    scale = np.max(np.abs(g_ij))
    assert scale > 0.0
    assert np.array_equal(g_ij, -g_ji)  # exactly: only the sign of r_ij changes
    assert np.max(np.abs(numeric_grad(xi, xj) - g_ij)) < 1e-6 * scale
    assert np.max(np.abs(numeric_grad(xj, xi) + g_ij)) < 1e-6 * scale


# --------------------------------------------------------------------------- Taichi side


def test_taichi_formulas_equal_numpy(on_backend: str) -> None:
    """The taichi_func'ed kernels and Tait EOS compute what their numpy originals compute, to
    1e-6 of each function's scale in f32 (the same source code runs in both). On Vulkan this
    also guards SPIR-V code generation: multiplying two comparisons ((q >= 1) * (q < 2))
    crashed Mesa's lavapipe in cubic_spline_f before its factors were reordered."""
    formulas = [cubic_spline_w, cubic_spline_f, wendland_c2_w, wendland_c2_f]
    ti_formulas = [taichi_func(fn) for fn in formulas]
    w_cubic, f_cubic, w_wend, f_wend = ti_formulas
    pressure = taichi_func(tait_pressure)
    rho0, b, gamma = 1000.0, 168171.0, 7.0

    @ti.kernel
    def evaluate(
        r: ti.types.ndarray(), rho: ti.types.ndarray(), out: ti.types.ndarray(), h: ti.f32
    ):
        for i in range(r.shape[0]):
            out[0, i] = w_cubic(r[i], h)
            out[1, i] = f_cubic(r[i], h)
            out[2, i] = w_wend(r[i], h)
            out[3, i] = f_wend(r[i], h)
            out[4, i] = pressure(rho[i], rho0, b, gamma)

    h = 0.0173
    r = np.linspace(0.0, 2.5 * h, 1001).astype(np.float32)
    rho = np.linspace(700.0, 1300.0, 1001).astype(np.float32)
    out = np.zeros((5, r.size), dtype=np.float32)
    evaluate(r, rho, out, h)
    r64, rho64, h64 = r.astype(np.float64), rho.astype(np.float64), float(np.float32(h))
    expected = [fn(r64, h64) for fn in formulas] + [tait_pressure(rho64, rho0, b, gamma)]
    for k, want in enumerate(expected):
        scale = np.max(np.abs(want))
        err = np.max(np.abs(out[k].astype(np.float64) - want))
        assert err <= 1e-6 * scale, f"formula {k} on {on_backend}: error {err / scale:.2e}"


# --------------------------------------------------------------------------- EOS and friends


def quick() -> Config:
    """configs/quick.toml: the seed physics (c0 = 20 sqrt(g 0.3), CFL 0.2) at dp = 0.04."""
    return load_config(QUICK)


def test_tait_reference_state_and_inverse() -> None:
    """Tait EOS: p(rho0) = 0 exactly; tait_density inverts tait_pressure over the whole allowed
    density band [700, 1300]; dp/drho at rho0 is c0^2 (B = c0^2 rho0 / gamma is chosen so)."""
    cfg = quick()
    rho0, b, gamma = cfg.physics.rho0, cfg.eos_b, cfg.physics.gamma
    assert cfg.sound_speed == pytest.approx(20.0 * math.sqrt(9.81 * 0.3), rel=1e-14)
    assert b == pytest.approx(cfg.sound_speed**2 * 1000.0 / 7.0, rel=1e-14)
    assert tait_pressure(rho0, rho0, b, gamma) == 0.0
    assert tait_density(0.0, rho0, b, gamma) == rho0
    rho = np.linspace(cfg.physics.rho_min, cfg.physics.rho_max, 601)
    p = tait_pressure(rho, rho0, b, gamma)
    assert np.all(np.diff(p) > 0.0)
    np.testing.assert_allclose(tait_density(p, rho0, b, gamma), rho, rtol=1e-13)
    e = 1e-3
    slope = tait_pressure(rho0 + e, rho0, b, gamma) - tait_pressure(rho0 - e, rho0, b, gamma)
    assert slope / (2 * e) == pytest.approx(cfg.sound_speed**2, rel=1e-7)


def test_monaghan_viscosity_acts_on_approaching_pairs_only() -> None:
    """Monaghan's Pi_ij is zero for separating pairs (v_ij . r_ij >= 0) and positive for
    approaching ones, where it equals -alpha c0 h v.r / ((r^2 + eta^2) rho_mean)."""
    h, alpha, c0, rho = 0.0173, 0.1, 24.26, 1000.0
    eta2 = 0.01 * h * h
    r2 = (0.8 * h) ** 2
    inverse = 1.0 / (r2 + eta2)
    assert monaghan_pi(0.3, inverse, rho, h, alpha, c0) == 0.0
    assert monaghan_pi(0.0, inverse, rho, h, alpha, c0) == 0.0
    approaching = monaghan_pi(-0.3, inverse, rho, h, alpha, c0)
    assert approaching > 0.0
    assert approaching == pytest.approx(alpha * c0 * h * 0.3 / (r2 + eta2) / rho, rel=1e-14)


def test_sps_stress_of_shear_and_of_expansion() -> None:
    """The SPS closure in numpy. Pure shear S_xz = gamma / 2: |S| = gamma, nu_t = (C_s dp)^2
    gamma, tau_xz / rho = 2 nu_t S_xz and the diagonal -(2/3) C_I dp^2 gamma^2. Pure expansion
    S = a I: the eddy-viscosity part 2 nu_t S - (2/3) nu_t S_kk I is trace-free (k closed as
    nu_t S_kk, as DualSPHysics does), so only Blin's isotropic term is left, -(2/3) C_I dp^2
    |S|^2 with |S|^2 = 6 a^2. Every component carries the 1 / rho of tau / rho^2."""
    dp, rho, gamma, a = 0.01, 998.0, 3.0, 2.0
    nu_t = (SMAGORINSKY_CS * dp) ** 2 * gamma
    diagonal = -(2.0 / 3.0) * BLIN_CI * dp**2 * gamma**2
    shear = sps_stress(0.0, 0.0, 0.0, 0.0, gamma / 2.0, 0.0, rho, dp)
    expected = (diagonal, 0.0, nu_t * gamma, diagonal, 0.0, diagonal)
    assert np.allclose(np.array(shear) * rho, expected, rtol=1e-12, atol=0.0)
    expansion = sps_stress(a, a, a, 0.0, 0.0, 0.0, rho, dp)
    blin = -(2.0 / 3.0) * BLIN_CI * dp**2 * 6.0 * a * a
    assert np.allclose(np.array(expansion) * rho, (blin, 0.0, 0.0, blin, 0.0, blin), rtol=1e-12)


def test_fourtakas_term_leaves_hydrostatic_density_alone() -> None:
    """Fourtakas et al. (2019): the hydrostatic density difference rho_ji^H agrees with the
    exact Tait inverse rho0 ((1 + rho0 g.r_ji / B)^(1/gamma) - 1) to 1e-6 relative over a support
    of the seed case and is positive when j is deeper. For two particles of a fluid at rest 0.1
    m deep it removes all but (1 - 1/gamma) p / B = 0.5 % of Molteni's diffusion (the formula is
    exact at the surface, p = 0; the rest is second order in p / B)."""
    cfg = load_config(ROOT / "configs" / "dambreak.toml")
    rho0, b, gamma = cfg.physics.rho0, cfg.eos_b, cfg.physics.gamma
    g = cfg.gravity_magnitude
    dz = np.linspace(-cfg.support_radius, cfg.support_radius, 401)  # z_i - z_j
    g_dot_r = g * dz  # g . r_ji with g pointing down: positive when j lies below i
    approx = hydrostatic_density_difference(g_dot_r, rho0, b, gamma)
    exact = rho0 * ((1.0 + rho0 * g_dot_r / b) ** (1.0 / gamma) - 1.0)
    np.testing.assert_allclose(approx, exact, rtol=1e-6, atol=1e-12)
    assert np.all(np.sign(approx) == np.sign(dz))
    # j 1 cm deeper than i, both at rest at their hydrostatic densities
    rho_i = tait_density(rho0 * g * 0.1, rho0, b, gamma)
    rho_j = tait_density(rho0 * g * 0.11, rho0, b, gamma)
    difference = (rho_j - rho_i) - hydrostatic_density_difference(g * 0.01, rho0, b, gamma)
    h = cfg.smoothing_length
    inverse = 1.0 / (1e-4 + cfg.eta2)
    pair = (1e-4, inverse, -1.0, 1.0 / rho_j, cfg.particle_mass, h, cfg.sound_speed, 0.1)
    term = diffusion_pair_term(difference, *pair)
    plain = diffusion_pair_term(rho_j - rho_i, *pair)
    assert abs(term) < 0.01 * abs(plain)


# --------------------------------------------------------------------------- time step


def cfl_formula(cfg: Config, a_max: float, v_max: float, visc_max: float) -> float:
    """cases.md section 1, written out independently of solver.integrate."""
    h = cfg.smoothing_length
    c0 = 20.0 * math.sqrt(9.81 * 0.3)
    limits = [h / (max(c0, 10.0 * v_max) + h * visc_max)]
    if a_max > 0.0:
        limits.append(math.sqrt(h / a_max))
    return max(0.2 * min(limits), 1e-5)


@pytest.mark.parametrize(
    ("a_max", "v_max", "visc_max", "limited_by"),
    [
        (0.0, 0.0, 0.0, "sound"),  # a fluid at rest: the acoustic limit H / c0 alone
        (9.81, 0.5, 2.0, "sound"),  # gravity only, slow flow
        (1.0e5, 0.5, 2.0, "force"),  # sqrt(H / a) = 8.3e-4 s < H / c0 = 2.0e-3 s
        (9.81, 10.0, 0.0, "speed"),  # 10 v_max = 100 m/s > c0 = 34.3 m/s
        (9.81, 1.0, 800.0, "viscous"),  # H visc_max = 55 m/s adds to c0
        (1.0e9, 0.0, 0.0, "floor"),  # CFL sqrt(H / a) = 1.7e-6 s < dt_min = 1e-5 s
        (0.0, 1.0e7, 0.0, "floor"),
    ],
)
def test_time_step_follows_cfl_rule(
    a_max: float, v_max: float, visc_max: float, limited_by: str
) -> None:
    """dt = CFL min(sqrt(H / a_max), H / (max(c0, 10 v_max) + H visc_max)), at least dt_min,
    for hand-picked maxima that select each branch of the rule (quick.toml: H = 0.0693 m,
    c0 = 34.3 m/s, CFL 0.2, dt_min 1e-5 s)."""
    cfg = quick()
    h, c0 = cfg.smoothing_length, cfg.sound_speed
    dt = time_step(cfg, a_max, v_max, visc_max)
    assert dt == pytest.approx(cfl_formula(cfg, a_max, v_max, visc_max), rel=1e-14)
    expected = {
        "sound": lambda: 0.2 * h / (c0 + h * visc_max),
        "force": lambda: 0.2 * math.sqrt(h / a_max),
        "speed": lambda: 0.2 * h / (10.0 * v_max + h * visc_max),
        "viscous": lambda: 0.2 * h / (c0 + h * visc_max),
        "floor": lambda: 1e-5,
    }[limited_by]()
    assert dt == pytest.approx(expected, rel=1e-14)


def test_simulation_time_step_uses_the_maxima_of_the_interaction(on_cpu: str) -> None:
    """The time step the simulation takes equals the CFL rule applied to the exact maxima of
    |a|, |v| and the viscous rate over all particles (the reductions lose nothing)."""
    cfg = quick()
    sim = Simulation(cfg)
    p = sim.particles
    fluid = sim.scene.kind == FLUID
    for _ in range(30):
        velocity = p.velocity.to_numpy()[: p.count]
        kind = p.kind.to_numpy()[: p.count]
        sim.step()
        maxima = [float(v) for v in sim.last_maxima()]
        # Taken on the device in float32: the rule's value to float32 rounding.
        assert sim.dt == pytest.approx(time_step(cfg, *maxima), rel=1e-6)
        # |v| is the velocity the interaction saw: the largest over fluid particles. The
        # kernel's |v| may round its sum of squares differently (LLVM fuses multiply-adds on
        # the CPU; numpy 2.4's norm does not), so the maximum agrees to one unit in the last
        # place of float32, not bit for bit.
        speeds = np.linalg.norm(velocity[kind == FLUID], axis=1).astype(np.float32)
        assert abs(maxima[1] - float(speeds.max())) <= float(np.spacing(speeds.max()))
    assert fluid.any() and maxima[0] > 9.0 and maxima[1] > 0.0  # a moving dam break


# --------------------------------------------------------------------------- momentum balance

BLOB = """
[case]
name = "blob"
[particles]
dp = 0.02
[tank]
min = [0.0, 0.0, 0.0]
max = [0.3, 0.3, 0.3]
[[fluid]]
min = [0.1, 0.1, 0.1]
max = [0.2, 0.2, 0.2]
[physics]
density_diffusion = "{diffusion}"
kernel = "{kernel}"
viscosity = "{viscosity}"
nu = 0.01
"""
SPS_STRESS_SCALE = 1e-3
"""Size of random SPS stresses tau / rho^2 [m^5 / (kg s^2)]: in a blob of dp = 0.02 they give
accelerations of tens of m/s^2, as a viscosity nu = 0.01 m^2/s does at velocities of 1 m/s."""


def random_stress(sim: Simulation, rng: np.random.Generator) -> np.ndarray:
    """Give the fluid particles of `sim` random SPS stresses (boundary particles keep 0, as
    the solver keeps them) and return them in particle id order (rows: id)."""
    p = sim.particles
    n = p.count
    fluid = p.kind.to_numpy()[:n] == FLUID
    tau = p.tau.to_numpy()
    tau[:n][fluid] = rng.uniform(-SPS_STRESS_SCALE, SPS_STRESS_SCALE, size=(int(fluid.sum()), 6))
    p.tau.from_numpy(tau)
    by_id = np.zeros((n, 6))
    by_id[p.id.to_numpy()[:n]] = tau[:n]
    return by_id


@pytest.mark.parametrize(
    ("kernel", "diffusion", "viscosity"),
    [
        ("cubic_spline", "fourtakas", "artificial"),
        ("wendland_c2", "molteni", "artificial"),
        ("cubic_spline", "fourtakas", "laminar_sps"),
    ],
)
def test_interaction_conserves_momentum(
    on_backend: str, kernel: str, diffusion: str, viscosity: str
) -> None:
    """In a blob of fluid with random velocities and densities, far (> 2H) from every wall, the
    pressure and viscous forces are pairwise opposite: sum_i m (a_i - g) = 0 to f32 rounding,
    while each |a_i - g| is large. Wall particles out of reach get no force and no density
    change. Under laminar_sps, with random SPS stresses too: the laminar term is symmetric in
    i and j times v_ij, and m_j (tau_i / rho_i^2 + tau_j / rho_j^2) . grad_i W_ij is
    antisymmetric, so both conserve momentum pairwise."""
    cfg = loads_config(BLOB.format(kernel=kernel, diffusion=diffusion, viscosity=viscosity))
    sim = Simulation(cfg)
    p = sim.particles
    n = p.count
    kind = p.kind.to_numpy()[:n]
    fluid = kind == FLUID
    rng = np.random.default_rng(3)
    if viscosity == "laminar_sps":
        random_stress(sim, rng)
    velocity = np.zeros((p.capacity, 3), dtype=np.float32)
    velocity[:n][fluid] = rng.uniform(-0.5, 0.5, size=(int(fluid.sum()), 3))
    density = p.density.to_numpy()
    density[:n][fluid] *= rng.uniform(0.99, 1.01, size=int(fluid.sum())).astype(np.float32)
    pressure = tait_pressure(
        density.astype(np.float64), cfg.physics.rho0, cfg.eos_b, cfg.physics.gamma
    )
    p.velocity.from_numpy(velocity)
    p.density.from_numpy(density)
    p.pressure.from_numpy(pressure.astype(np.float32))
    sim._update_neighbours_and_forces()  # one interaction pass, no time step
    n = p.count
    kind = p.kind.to_numpy()[:n]
    fluid = kind == FLUID
    force = (
        p.acceleration.to_numpy()[:n][fluid].astype(np.float64) - np.array(cfg.physics.gravity)
    ) * cfg.particle_mass
    total = np.abs(force.sum(axis=0))
    scale = np.abs(force).sum(axis=0)
    assert np.all(scale > 0.0)
    assert np.all(total <= 1e-5 * scale), f"net force {total} against {scale}"
    assert np.all(p.density_rate.to_numpy()[:n][~fluid] == 0.0)
    if viscosity == "laminar_sps":
        assert np.all(p.tau.to_numpy()[:n][~fluid] == 0.0)  # boundary particles carry no stress
        assert np.all(np.abs(p.tau.to_numpy()[:n][fluid]).max(axis=0) > 0.0)


def symmetric_matrices(t: np.ndarray) -> np.ndarray:
    """(..., 3, 3) matrices of the six components xx, xy, xz, yy, yz, zz of symmetric ones."""
    rows = [[0, 1, 2], [1, 3, 4], [2, 4, 5]]
    return t[..., rows]


def reference_interaction(
    cfg: Config,
    x: np.ndarray,
    v: np.ndarray,
    rho: np.ndarray,
    p: np.ndarray,
    kind: np.ndarray,
    tau: np.ndarray | None = None,
    only: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """The interaction of interaction.py's docstring summed over all pairs closer than the
    support, found by brute force in numpy (f64) with the same formulas; also the sum of the
    absolute pair terms per particle, as error scale. Under laminar_sps, `tau` holds every
    particle's SPS stress tau / rho^2, and out["tau"] the new one. `only` (a mask) limits the
    sums to some particles (the others' entries stay 0)."""
    _, grad_factor = kernel_functions(cfg.physics.kernel)
    h, m, c0, eta2 = cfg.smoothing_length, cfg.particle_mass, cfg.sound_speed, cfg.eta2
    rho0, b, gamma = cfg.physics.rho0, cfg.eos_b, cfg.physics.gamma
    g = np.array(cfg.physics.gravity)
    n = len(kind)
    fluid = kind == FLUID
    laminar_sps = cfg.physics.viscosity == "laminar_sps"
    out = {name: np.zeros(n) for name in ("rate", "rate_scale", "acc_scale", "visc")}
    out["acc"] = np.zeros((n, 3))
    out["tau"] = np.zeros((n, 6))
    by_x = np.argsort(x[:, 0], kind="stable")
    if only is not None:
        by_x = by_x[only[by_x]]
    for start in range(0, len(by_x), 256):
        rows = by_x[start : start + 256]
        # candidates: every particle in the rows' bounding box grown by the support (a plain
        # filter, independent of the solver's cell grid; the exact test is r2 < support^2)
        lo = x[rows].min(axis=0) - 1.01 * cfg.support_radius
        hi = x[rows].max(axis=0) + 1.01 * cfg.support_radius
        cols = np.flatnonzero(np.all((x >= lo) & (x <= hi), axis=1))
        r = x[rows, None, :] - x[None, cols, :]
        r2 = np.sum(r * r, axis=-1)
        fi = fluid[rows][:, None]
        fj = fluid[cols][None, :]
        pair = (r2 < cfg.support_radius**2) & (rows[:, None] != cols[None, :]) & (fi | fj)
        f = np.where(pair, grad_factor(np.sqrt(r2), h), 0.0)
        grad = r * f[..., None]
        v_ij = v[rows, None, :] - v[None, cols, :]
        continuity = m * np.sum(v_ij * grad, axis=-1)
        v_dot_r = np.sum(v_ij * r, axis=-1)
        rho_i, rho_j = rho[rows, None], rho[None, cols]
        inverse = 1.0 / (r2 + eta2)
        pi = monaghan_pi(v_dot_r, inverse, 0.5 * (rho_i + rho_j), h, cfg.physics.visc_alpha, c0)
        if laminar_sps:
            pi = 0.0
        momentum = -(m * ((p[rows, None] + p[None, cols]) / (rho_i * rho_j) + pi) * fi)[..., None]
        momentum = momentum * grad
        if laminar_sps:
            nu = cfg.physics.nu
            momentum += (laminar_factor(r2 * f, r2, rho_i + rho_j, m, nu, eta2) * fi)[
                ..., None
            ] * v_ij
            stress = symmetric_matrices(tau[rows])[:, None] + symmetric_matrices(tau[cols])[None]
            momentum += m * fi[..., None] * np.einsum("ijab,ijb->ija", stress, grad)
            volume = np.where(pair & fi, m / rho_j, 0.0)
            grad_v = -np.einsum("ij,ija,ijb->iab", volume, v_ij, grad)
            s = 0.5 * (grad_v + np.swapaxes(grad_v, 1, 2))
            new = sps_stress(s[:, 0, 0], s[:, 1, 1], s[:, 2, 2], s[:, 0, 1], s[:, 0, 2], s[:, 1, 2],
                             rho[rows], cfg.dp)  # fmt: skip
            out["tau"][rows] = np.stack(new, axis=-1) * fluid[rows, None]
        diffusion = np.zeros_like(r2)
        if cfg.physics.density_diffusion != "none":
            difference = rho_j - rho_i
            if cfg.physics.density_diffusion == "fourtakas":
                difference = difference - hydrostatic_density_difference(-(r @ g), rho0, b, gamma)
            both = pair & fi & fj
            diffusion = np.where(
                both,
                diffusion_pair_term(
                    difference, r2, inverse, f, 1.0 / rho_j, m, h, c0, cfg.physics.delta
                ),
                0.0,
            )
        if cfg.physics.boundary == "mdbc":  # boundary densities come from the mDBC pass
            continuity = continuity * fi
        out["rate"][rows] = np.sum(continuity + diffusion, axis=1)
        out["rate_scale"][rows] = np.sum(np.abs(continuity) + np.abs(diffusion), axis=1)
        out["acc"][rows] = np.sum(momentum, axis=1) + g * fluid[rows, None]
        out["acc_scale"][rows] = np.sum(np.linalg.norm(momentum, axis=-1), axis=1)
        out["visc"][rows] = np.max(np.where(pair & fi, np.abs(v_dot_r) / (r2 + eta2), 0.0), axis=1)
    return out


def jitter_state(sim: Simulation, rng: np.random.Generator, prev_apart: bool = False) -> None:
    """A state of `sim`'s scene that exercises every pair term: the fluid jittered by up to
    dp/4, random velocities up to 1 m/s and densities within 1 % (the walls' at rho0 or more);
    the previous step's densities (which the lagged diffusion reads) those too, or with
    `prev_apart` another draw."""
    cfg, p = sim.cfg, sim.particles
    n = p.count
    real = np.float32
    fluid = sim.scene.kind == FLUID
    nf = int(fluid.sum())
    position = p.position.to_numpy()
    position[:n][fluid] += rng.uniform(-0.25, 0.25, size=(nf, 3)).astype(real) * cfg.dp
    velocity = np.zeros_like(position)
    velocity[:n][fluid] = rng.uniform(-1.0, 1.0, size=(nf, 3))

    def densities() -> np.ndarray:
        density = p.density.to_numpy()
        density[:n] = (cfg.physics.rho0 * rng.uniform(0.99, 1.01, size=n)).astype(real)
        density[:n][~fluid] = np.maximum(density[:n][~fluid], cfg.physics.rho0)
        return density

    density = densities()
    density_prev = densities() if prev_apart else density
    pressure = tait_pressure(
        density.astype(np.float64), cfg.physics.rho0, cfg.eos_b, cfg.physics.gamma
    ).astype(real)
    for array, values in (
        (p.position, position),
        (p.velocity, velocity),
        (p.velocity_prev, velocity),
        (p.density, density),
        (p.density_prev, density_prev),
        (p.pressure, pressure),
    ):
        array.from_numpy(values)


@pytest.mark.parametrize(
    ("kernel", "diffusion", "boundary"),
    [("cubic_spline", "fourtakas", "dbc"), ("wendland_c2", "molteni", "mdbc")],
)
def test_interaction_equals_all_pairs_sum(
    on_backend: str, kernel: str, diffusion: str, boundary: str
) -> None:
    """The neighbour-search interaction equals the same SPH sums taken over all pairs: on the
    quick dam-break scene (walls, hollow obstacle) with the fluid jittered by up to dp/4, random
    velocities up to 1 m/s and densities within 1 %, every particle's acceleration and density
    rate agree with an f64 numpy all-pairs sum to 1e-4 (acceleration; measured 3e-7) and 2e-4
    (density rate, whose diffusion part subtracts nearby f32 densities; measured 3e-5) of the
    sum of the absolute pair terms, and the time-step inputs (|a|, |v|, viscous rate) agree
    too. A neighbour missed by the cell search, or a wrong formula, shows up here on every
    backend. Under DBC the walls under the water get density rates; under mDBC they get none
    (their densities, set by the mDBC pass before the interaction, enter the sums as read)."""
    # DBC with the quick case's former two wall layers, where the tolerances were measured: a
    # third DBC layer adds particles whose few, distant fluid neighbours make their own rate
    # scale tiny, and the f32 rounding of the jittered positions then weighs 5e-4 of it.
    layers = 2 if boundary == "dbc" else 3
    cfg = load_config(
        QUICK,
        [
            f"physics.kernel={kernel}",
            f"physics.density_diffusion={diffusion}",
            f"physics.boundary={boundary}",
            f"tank.wall_layers={layers}",
        ],
    )
    sim = Simulation(cfg)
    p = sim.particles
    n = p.count
    jitter_state(sim, np.random.default_rng(11))
    sim._update_neighbours_and_forces()  # one interaction pass, no time step
    assert p.count == n
    state = [
        a.to_numpy()[:n].astype(np.float64) for a in (p.position, p.velocity, p.density, p.pressure)
    ]
    kind = p.kind.to_numpy()[:n]
    ref = reference_interaction(cfg, *state, kind)
    acc = p.acceleration.to_numpy()[:n].astype(np.float64)
    rate = p.density_rate.to_numpy()[:n].astype(np.float64)
    a_max, v_max, visc_max = sim.last_maxima().astype(np.float64)
    g = cfg.gravity_magnitude
    acc_error = np.linalg.norm(acc - ref["acc"], axis=1) / (ref["acc_scale"] + g)
    rate_error = np.abs(rate - ref["rate"]) / np.maximum(ref["rate_scale"], 1e-30)
    assert acc_error.max() < 1e-4, f"acceleration off by {acc_error.max():.2e} of its scale"
    assert rate_error.max() < 2e-4, f"density rate off by {rate_error.max():.2e} of its scale"
    if boundary == "dbc":
        assert np.count_nonzero(rate[kind != FLUID]) > 100  # walls under the water take part
    else:
        assert np.all(rate[kind != FLUID] == 0.0)
    is_fluid = kind == FLUID
    # The maxima the interaction folds for the time-step rule.
    ref_a_max = (np.linalg.norm(ref["acc"], axis=1) * is_fluid).max()
    assert abs(a_max - ref_a_max) <= 1e-4 * (np.max(ref["acc_scale"]) + g)
    assert v_max == pytest.approx((np.linalg.norm(state[1], axis=1) * is_fluid).max(), rel=1e-6)
    assert visc_max == pytest.approx(ref["visc"].max(), rel=1e-3)
    assert np.all(acc[~is_fluid] == 0.0)


@pytest.mark.parametrize(
    ("diffusion", "boundary", "integrator"),
    [("fourtakas", "mdbc", "verlet"), ("molteni", "dbc", "symplectic"), ("none", "mdbc", "verlet")],
)
def test_pair_halves_equal_the_gather(
    on_cpu_strict: str, diffusion: str, boundary: str, integrator: str
) -> None:
    """The CPU's interaction taking each fluid pair once (solver/physics/pair_halves.py, the
    default there) against the gather (`neighbors.pair_halves = false`), on the jittered quick
    scene of the all-pairs test above with the previous step's densities drawn apart (Verlet's
    first step reads them in the diffusion; the symplectic scheme reads the current ones): every
    acceleration and density rate agrees to float32 rounding of another order of summation
    (measured: up to 6e-7 and 1.1e-6 of the largest), the viscous rate of the time-step rule
    exactly (a maximum over the same pair values), and under DBC the walls' density rates,
    gathered by both, are the same bits. Without fast math (conftest.on_cpu_strict): with it,
    an AMD EPYC's compiler rounded the two kernels' viscous rates a bit apart."""
    settings = [
        f"physics.density_diffusion={diffusion}",
        f"physics.boundary={boundary}",
        f"time.integrator={integrator}",
    ]
    results = []
    for halves in (True, False):
        halves_set = f"neighbors.pair_halves={str(halves).lower()}"
        sim = Simulation(load_config(QUICK, [*settings, halves_set]))
        assert sim._interaction.pair_halves == halves
        jitter_state(sim, np.random.default_rng(5), prev_apart=True)
        sim._update_neighbours_and_forces()
        p = sim.particles
        n = p.count
        results.append(
            (
                p.acceleration.to_numpy()[:n],
                p.density_rate.to_numpy()[:n],
                sim.last_maxima(),
                p.kind.to_numpy()[:n],
            )
        )
    (acc, rate, maxima, kind), (acc_g, rate_g, maxima_g, kind_g) = results
    assert np.array_equal(kind, kind_g)
    assert np.abs(acc - acc_g).max() <= 1e-5 * np.abs(acc_g).max()
    assert np.abs(rate - rate_g).max() <= 1e-5 * np.abs(rate_g).max()
    assert maxima[2] == maxima_g[2]
    assert maxima[:2] == pytest.approx(maxima_g[:2], rel=1e-5)
    wall = kind != FLUID
    assert np.array_equal(rate[wall], rate_g[wall])
    assert np.all(acc[wall] == 0.0)
    if boundary == "dbc":
        assert np.count_nonzero(rate[wall]) > 100


def test_pair_halves_only_where_they_apply(on_cpu: str) -> None:
    """The pair halves are the CPU's default in one process; the SPS closure and the
    distributed step (one slab here) gather."""
    from solver.distributed.simulation import DistributedSimulation
    from solver.distributed.world import World

    cfg = load_config(QUICK, ["particles.dp=0.06"])
    assert Simulation(cfg)._interaction.pair_halves
    assert not DistributedSimulation(cfg, World.alone())._interaction.pair_halves
    sps = load_config(QUICK, ["particles.dp=0.06", "physics.viscosity=laminar_sps"])
    assert not Simulation(sps)._interaction.pair_halves


SPS_BLOB = """
[case]
name = "sps_blob"
[particles]
dp = 0.02
[tank]
min = [0.0, 0.0, 0.0]
max = [0.3, 0.3, 0.3]
[[fluid]]
min = [0.1, 0.1, 0.0]
max = [0.2, 0.2, 0.1]
[physics]
viscosity = "laminar_sps"
nu = 0.01
"""
"""A 5 x 5 x 5 block of water on the floor of a tank, with the laminar + SPS viscosity; nu is
large so that the laminar term weighs as much as the SPS stresses (SPS_STRESS_SCALE)."""


def test_laminar_sps_interaction_equals_all_pairs_sum(on_backend: str) -> None:
    """The laminar + SPS interaction equals its SPH sums over all pairs: a block of water on the
    floor (walls in reach: they take part in the laminar term and, with velocity 0, in the
    velocity gradient) jittered by up to dp/4, with random velocities up to 1 m/s, densities
    within 1 %, zero fluid pressure (so the viscous terms are not hidden behind the pressure
    gradient) and random SPS stresses. The accelerations agree with an f64 numpy all-pairs sum
    to 1e-4 of the sum of the absolute pair terms (measured 5e-7 on cpu and lavapipe), and the
    new stresses tau / rho^2, computed from the velocity gradient at the end of the pass, to
    1e-4 of the largest (measured 4e-7)."""
    cfg = loads_config(SPS_BLOB)
    sim = Simulation(cfg)
    p = sim.particles
    n = p.count
    rng = np.random.default_rng(5)
    fluid = p.kind.to_numpy()[:n] == FLUID
    nf = int(fluid.sum())
    position = p.position.to_numpy()
    position[:n][fluid] += rng.uniform(-0.25, 0.25, size=(nf, 3)).astype(np.float32) * cfg.dp
    velocity = np.zeros_like(position)
    velocity[:n][fluid] = rng.uniform(-1.0, 1.0, size=(nf, 3))
    density = p.density.to_numpy()
    density[:n][fluid] *= rng.uniform(0.99, 1.01, size=nf).astype(np.float32)
    for array, values in ((p.position, position), (p.velocity, velocity), (p.density, density)):
        array.from_numpy(values)
    p.pressure.fill(0.0)  # boundary pressures come from the mDBC pass
    stress = random_stress(sim, rng)
    sim._update_neighbours_and_forces()  # a sort, the boundary pass, one interaction
    state = [
        a.to_numpy()[:n].astype(np.float64) for a in (p.position, p.velocity, p.density, p.pressure)
    ]
    kind = p.kind.to_numpy()[:n]
    ref = reference_interaction(cfg, *state, kind, stress[p.id.to_numpy()[:n]])
    acc = p.acceleration.to_numpy()[:n].astype(np.float64)
    acc_error = np.linalg.norm(acc - ref["acc"], axis=1) / (
        ref["acc_scale"] + cfg.gravity_magnitude
    )
    assert acc_error.max() < 1e-4, f"acceleration off by {acc_error.max():.2e} of its scale"
    assert np.median(ref["acc_scale"][kind == FLUID]) > 5.0 * cfg.gravity_magnitude
    tau = p.tau.to_numpy()[:n].astype(np.float64)  # swapped in: the stress of this pass
    tau_error = np.abs(tau - ref["tau"]).max() / np.abs(ref["tau"]).max()
    assert tau_error < 1e-4, f"SPS stress off by {tau_error:.2e} of the largest"
    assert np.all(tau[kind != FLUID] == 0.0)


SHEAR_RATE = 2.0
"""gamma_dot of the uniform shear flow v = (gamma_dot (z - z_c), 0, 0) [1/s]."""
SHEAR = """
[case]
name = "shear"
[particles]
dp = 0.02
[tank]
min = [0.0, 0.0, 0.0]
max = [0.6, 0.6, 0.6]
[[fluid]]
min = [0.12, 0.12, 0.12]
max = [0.48, 0.48, 0.48]
[physics]
viscosity = "laminar_sps"
nu = 0.01
"""
"""An 18^3 lattice of water 0.12 m (> 2H) from every wall: its particles 4H inside keep a
whole support of particles that themselves have whole supports."""


def test_uniform_shear_gives_the_analytic_sps_stress_and_no_laminar_force(on_cpu: str) -> None:
    """Uniform shear v = (gamma_dot z, 0, 0) on a regular lattice at rest density and zero
    pressure. The velocity gradient has the one entry dv_x/dz = gamma_dot, so S_xz = gamma_dot
    / 2, |S| = sqrt(2 S_ab S_ab) = gamma_dot, div v = 0, nu_t = (C_s dp)^2 |S|, and
    tau / rho^2 = (2 nu_t S - (2/3) C_I dp^2 |S|^2 I) / rho: xz = nu_t gamma_dot / rho, the
    diagonal -(2/3) C_I dp^2 gamma_dot^2 / rho, xy = yz = 0. Particles with a whole support
    (2H inside the block) carry that stress to 1 % (the lattice sum of the SPH gradient of a
    linear field is 0.23 % short of it, squared in the stress: measured 0.46 %), xy and yz to
    1e-3 of xz. In the next interaction, 4H inside, the laminar term of a linear profile (the
    divergence of a uniform stress, zero) and the SPS term of a uniform stress cancel over the
    symmetric lattice: |a - g| <= 1e-5 of the sum of the absolute pair terms (measured
    4e-7)."""
    cfg = loads_config(SHEAR)
    sim = Simulation(cfg)
    p = sim.particles
    n = p.count
    x = p.position.to_numpy()[:n].astype(np.float64)
    fluid = p.kind.to_numpy()[:n] == FLUID
    centre = 0.5 * (np.array(cfg.fluid_blocks[0].min) + np.array(cfg.fluid_blocks[0].max))
    velocity = np.zeros((p.capacity, 3), dtype=np.float32)
    velocity[:n, 0] = np.where(fluid, SHEAR_RATE * (x[:, 2] - centre[2]), 0.0)
    p.velocity.from_numpy(velocity)
    density = np.full(p.capacity, cfg.physics.rho0, dtype=np.float32)
    p.density.from_numpy(density)
    p.pressure.fill(0.0)
    sim._update_neighbours_and_forces()  # tau from the shear; its own SPS term is still zero
    sim._update_neighbours_and_forces()  # the SPS term of that tau
    x, velocity, density = (
        a.to_numpy()[:n].astype(np.float64) for a in (p.position, p.velocity, p.density)
    )
    kind = p.kind.to_numpy()[:n]
    fluid = kind == FLUID
    half = 0.5 * np.array(cfg.fluid_blocks[0].max) - 0.5 * np.array(cfg.fluid_blocks[0].min)
    depth = np.min(half - np.abs(x - centre), axis=1)  # distance inside the block's faces
    rho = cfg.physics.rho0
    s_norm = SHEAR_RATE
    nu_t = (SMAGORINSKY_CS * cfg.dp) ** 2 * s_norm
    diagonal = -(2.0 / 3.0) * BLIN_CI * cfg.dp**2 * s_norm**2 / rho
    expected = np.array([diagonal, 0.0, nu_t * SHEAR_RATE / rho, diagonal, 0.0, diagonal])
    whole = fluid & (depth > cfg.support_radius)
    tau = p.tau_next.to_numpy()[:n][whole].astype(np.float64)  # the first pass's stress
    # (the second pass computed the same from the same velocities: p.tau)
    assert whole.sum() > 1000
    np.testing.assert_allclose(
        tau, np.broadcast_to(expected, tau.shape), rtol=1e-2, atol=1e-3 * abs(expected[2])
    )
    inner = fluid & (depth > 2.0 * cfg.support_radius)
    assert inner.sum() >= 64  # 4^3
    acc = p.acceleration.to_numpy()[:n][inner].astype(np.float64) - np.array(cfg.physics.gravity)
    first = p.tau_next.to_numpy()[:n].astype(np.float64)
    ref = reference_interaction(cfg, x, velocity, density, np.zeros(n), kind, first, inner)
    assert np.abs(acc).max() <= 1e-5 * ref["acc_scale"][inner].min(), np.abs(acc).max()


# --------------------------------------------------------------------------- still water

SETTLE_START = 0.2
"""Seconds before the pressure is sampled. The fluid starts at its hydrostatic density and the
walls at rho0, so the water first sinks onto the walls and rings acoustically (period 4 depth /
c0 = 0.026 s); artificial viscosity and delta-SPH damp the ringing: the RMS fluid speed falls
from 2.3e-2 m/s at 0.025 s to 2.6e-3 m/s at 0.2 s, then stays near 2e-3 m/s (a slow drift of
the particles along the bottom edges of the tank)."""
SETTLE_WINDOW = 0.1
"""Seconds over which each particle's pressure is averaged: four acoustic periods. Largest
errors of the averaged pressure, measured for windows starting at 0.2, 0.3, ... 0.8 s: 0.9, 0.9,
0.9, 0.8, 1.0, 1.0, 1.2 %, so the earliest window leaves a 2x margin to the 2 % criterion at the
least cost (about 2100 steps of 8691 particles, 20 to 30 s on 2 cores). Shorter windows of 0.05 s
gave 1.3 to 2.0 %, and instantaneous pressures 1.4 to 6 % (single particles of the top checked
layer): the remaining noise is the Verlet scheme's odd-even oscillation and slow sloshing."""
SAMPLE_EVERY = 5
F64_STEPS = 140
"""Steps of the f32 / f64 comparison: 0.02 s, three Verlet-Euler cycles of 40 steps."""


@dataclass
class StillWater:
    """What the module's one still-water run recorded (numpy only; Taichi may restart)."""

    cfg: Config
    snapshots: list[Snapshot]
    early: dict[int, Snapshot]
    mean_pressure: np.ndarray
    samples: int
    removed: int
    count: int


@pytest.fixture(scope="module")
def still_water() -> StillWater:
    """Run tests/data/still_water.toml on the CPU in f32 until SETTLE_START + SETTLE_WINDOW."""
    use_backend("cpu")
    cfg = load_config(STILL_WATER)
    sim = Simulation(cfg)
    total = len(sim.scene.kind)
    snapshots = [sim.snapshot()]
    early: dict[int, Snapshot] = {}
    next_snapshot = 0.05
    while sim.time < SETTLE_START:
        sim.step()
        if sim.steps <= F64_STEPS and sim.steps % 10 == 0:
            early[sim.steps] = sim.snapshot()
        if sim.time >= next_snapshot:
            snapshots.append(sim.snapshot())
            next_snapshot += 0.05
    pressure_sum = np.zeros(total)
    pressure_count = np.zeros(total, dtype=np.int64)
    samples = 0
    while sim.time < SETTLE_START + SETTLE_WINDOW:
        snap = sim.snapshot()
        pressure_sum[snap.id] += snap.pressure
        pressure_count[snap.id] += 1
        samples += 1
        for _ in range(SAMPLE_EVERY):
            sim.step()
    snapshots.append(sim.snapshot())
    mean = np.where(pressure_count > 0, pressure_sum / np.maximum(pressure_count, 1), np.nan)
    return StillWater(cfg, snapshots, early, mean, samples, sim.removed, sim.count)


def free_surface(snap: Snapshot, dp: float) -> float:
    """The still-water level from the particles: mean height of the top fluid layer + dp/2."""
    z = snap.position[snap.kind == FLUID, 2].astype(np.float64)
    top_layer = z[z > z.max() - 0.5 * dp]
    return float(top_layer.mean()) + 0.5 * dp


def checked_fluid(snap: Snapshot, cfg: Config, surface: float) -> np.ndarray:
    """Mask of fluid particles more than 3 dp below the surface and 2 dp from every wall face
    (3.5 dp and 2.5 dp in lattice terms, so particles near the cut do not flicker in and out)."""
    dp = cfg.dp
    x = snap.position.astype(np.float64)
    lo, hi = np.array(cfg.tank.box.min), np.array(cfg.tank.box.max)
    return (
        (snap.kind == FLUID)
        & (surface - x[:, 2] > 3.5 * dp)
        & np.all(x > lo + 2.5 * dp, axis=1)
        & np.all(x[:, :2] < hi[:2] - 2.5 * dp, axis=1)
    )


def test_still_water_keeps_hydrostatic_pressure(still_water: StillWater) -> None:
    """After settling, the time-averaged pressure of every fluid particle more than 3 dp below
    the free surface and 2 dp from the walls is within 2 % of rho0 |g| depth. The still-water
    level is fitted (the mean of z + p / (rho0 g) over those particles) and must lie within
    dp/4 of the top particle layer + dp/2, where the particles put the free surface."""
    cfg, snap = still_water.cfg, still_water.snapshots[-1]
    rho_g = cfg.physics.rho0 * cfg.gravity_magnitude
    geometric = free_surface(snap, cfg.dp)
    selected = checked_fluid(snap, cfg, geometric)
    assert selected.sum() >= 500  # 15 x 5 columns, 10 layers deep
    z = snap.position[selected, 2].astype(np.float64)
    pressure = still_water.mean_pressure[snap.id[selected]]
    assert still_water.samples >= 50 and np.all(np.isfinite(pressure))
    fitted = float(np.mean(z + pressure / rho_g))
    assert abs(fitted - geometric) < 0.25 * cfg.dp, (fitted, geometric)
    hydrostatic = rho_g * (fitted - z)
    error = np.abs(pressure - hydrostatic) / hydrostatic
    worst = int(np.argmax(error))
    assert error.max() < 0.02, (
        f"pressure off by {error.max():.2%} at depth {fitted - z[worst]:.3f} m "
        f"({pressure[worst]:.1f} Pa against {hydrostatic[worst]:.1f} Pa)"
    )


def rms_fluid_speed(snap: Snapshot) -> float:
    """Root-mean-square speed of the fluid particles [m/s]."""
    v = snap.velocity[snap.kind == FLUID].astype(np.float64)
    return float(np.sqrt(np.mean(np.sum(v * v, axis=1))))


def test_still_water_stays_still(still_water: StillWater) -> None:
    """The water comes to rest: after settling the RMS fluid speed is below 0.5 % of the
    long-wave speed sqrt(g h) = 1.2 m/s and below half its largest value at 0.05 to 0.15 s, no
    particle is faster than 3 % of sqrt(g h), and the fluid has moved by less than dp/10 on
    average and less than dp/2 anywhere."""
    cfg = still_water.cfg
    first, last = still_water.snapshots[0], still_water.snapshots[-1]
    long_wave = math.sqrt(cfg.gravity_magnitude * 0.15)
    rms = rms_fluid_speed(last)
    ringing = max(rms_fluid_speed(s) for s in still_water.snapshots[1:4])
    top = float(np.max(np.linalg.norm(last.velocity[last.kind == FLUID], axis=1)))
    assert rms < 0.005 * long_wave, f"RMS speed {rms:.2e} m/s"
    assert rms < 0.5 * ringing, f"RMS speed {rms:.2e} m/s after settling, {ringing:.2e} before"
    assert top < 0.03 * long_wave, f"largest speed {top:.2e} m/s"
    start = first.position[np.argsort(first.id)].astype(np.float64)
    now = last.position[np.argsort(last.id)].astype(np.float64)
    fluid = first.kind[np.argsort(first.id)] == FLUID
    moved = np.linalg.norm(now - start, axis=1)[fluid]
    assert moved.mean() < 0.1 * cfg.dp, f"mean displacement {moved.mean() / cfg.dp:.3f} dp"
    assert moved.max() < 0.5 * cfg.dp, f"largest displacement {moved.max() / cfg.dp:.3f} dp"


def test_still_water_conserves_mass_exactly(still_water: StillWater) -> None:
    """In the closed tank nothing is removed: at every snapshot the fluid count, and with it the
    fluid mass count * rho0 dp^3, equals the initial one exactly; the ids are a permutation of
    the original ones and every particle keeps its kind."""
    cfg = still_water.cfg
    first = still_water.snapshots[0]
    total = first.count
    initial_kind = first.kind[np.argsort(first.id)]
    fluid0 = int(np.count_nonzero(first.kind == FLUID))
    assert fluid0 == 19 * 9 * 15
    assert np.array_equal(np.sort(first.id), np.arange(total))
    assert still_water.removed == 0 and still_water.count == total
    for snap in still_water.snapshots + list(still_water.early.values()):
        assert snap.count == total
        fluid = int(np.count_nonzero(snap.kind == FLUID))
        assert fluid == fluid0
        assert fluid * cfg.particle_mass == fluid0 * cfg.particle_mass
        order = np.argsort(snap.id)
        assert np.array_equal(snap.id[order], np.arange(total))
        assert np.array_equal(snap.kind[order], initial_kind)
        assert np.all(np.isfinite(snap.position)) and np.all(np.isfinite(snap.density))


def test_f64_agrees_with_f32_on_still_water(still_water: StillWater) -> None:
    """The same still-water run in f64 on the CPU: every 10 steps up to 0.02 s, the
    hydrostatic pressure profile (the mean pressure of each initial particle layer) agrees with
    f32 to 1e-3 of rho0 g h, and the particle pressures to 2e-3 of it in RMS. Single particles
    differ more (up to about 0.5 % just after a Verlet-Euler step: f32 rounding of density feeds
    the odd-even Verlet noise), which is why the profile is compared."""
    use_backend("cpu", "f64")
    cfg = load_config(STILL_WATER, ["physics.precision=f64"])
    sim = Simulation(cfg)
    assert sim.particles.position.dtype == ti.f64
    scale = cfg.physics.rho0 * cfg.gravity_magnitude * 0.15
    first = still_water.snapshots[0]
    order0 = np.argsort(first.id)
    fluid = first.kind[order0] == FLUID
    layer = np.rint(first.position[order0, 2] / cfg.dp).astype(int)[fluid]
    compared = 0
    while sim.steps < F64_STEPS:
        sim.step()
        if sim.steps not in still_water.early:
            continue
        s64, s32 = sim.snapshot(), still_water.early[sim.steps]
        assert s64.pressure.dtype == np.float64
        p64 = s64.pressure[np.argsort(s64.id)][fluid]
        p32 = s32.pressure[np.argsort(s32.id)][fluid].astype(np.float64)
        assert s64.time == pytest.approx(s32.time, rel=1e-5)
        diff = p64 - p32
        for k in np.unique(layer):
            assert abs(diff[layer == k].mean()) < 1e-3 * scale, (sim.steps, k)
        assert math.sqrt(np.mean(diff**2)) < 2e-3 * scale, sim.steps
        compared += 1
    assert compared == F64_STEPS // 10


def _acceleration_by_id(sim: Simulation) -> np.ndarray:
    p = sim.particles
    order = np.argsort(p.id.to_numpy()[: p.count])
    return p.acceleration.to_numpy()[: p.count][order], p.density_rate.to_numpy()[: p.count][order]


def test_skin_search_misses_no_neighbour_between_sorts(on_backend: str) -> None:
    """With a neighbour skin, particles are sorted into cells only now and then; between sorts
    the search reaches (1 + skin) 2H around each particle over the cells of the last sort. After
    20 dam-break steps without a sort, the interaction equals the one computed right after a
    fresh sort (same neighbours, only the order of the sums differs): accelerations and density
    rates agree to 1e-4 of their scale, on every backend."""
    cfg = load_config(QUICK, ["neighbors.skin=0.5"])
    sim = Simulation(cfg)
    for _ in range(20):
        sim.step()
    assert sim.sorts == 1, "the skin should have spared every sort after the first"
    assert 0.0 < sim.moved <= 0.5 * cfg.support_radius
    sim._update_neighbours_and_forces()
    stale_acc, stale_rate = _acceleration_by_id(sim)
    sim.moved = math.inf
    sim._update_neighbours_and_forces()
    assert sim.sorts == 2
    fresh_acc, fresh_rate = _acceleration_by_id(sim)
    np.testing.assert_allclose(stale_acc, fresh_acc, atol=1e-4 * np.abs(fresh_acc).max())
    np.testing.assert_allclose(stale_rate, fresh_rate, atol=1e-4 * np.abs(fresh_rate).max())


@pytest.mark.parametrize("viscosity", ["artificial", "laminar_sps"])
def test_one_launch_verlet_step_computes_what_separate_launches_do(
    on_backend: str, viscosity: str
) -> None:
    """The fused Verlet step (interaction, time step and update in one kernel) against the
    separate kernels the benchmarks time: the same formulas, so after 40 steps of the quick
    dam break the states agree to float32 rounding (the compiler may contract multiply-adds
    differently in the two kernels, so the bits need not match); under laminar_sps the SPS
    stresses too, which both paths swap in after each interaction."""
    from solver.phase_timer import PhaseTimer

    cfg = load_config(QUICK, [f"physics.viscosity={viscosity}"])
    fused, separate = Simulation(cfg), Simulation(cfg)
    separate.phase = PhaseTimer()
    for _ in range(40):
        fused.step()
        separate.step()
    assert fused.sorts == separate.sorts and fused.steps == separate.steps
    assert fused.time == pytest.approx(separate.time, rel=1e-5)
    names = ["position", "velocity", "density"] + ["tau"] * (viscosity == "laminar_sps")
    for name in names:
        a = getattr(fused.particles, name).to_numpy()[: fused.count]
        b = getattr(separate.particles, name).to_numpy()[: separate.count]
        scale = np.abs(b).max()
        assert np.abs(a - b).max() <= 1e-4 * scale, name
    phases = {"neighbour sort", "boundary density", "interaction", "integration"}
    assert set(separate.phase.seconds) == phases  # quick.toml runs mDBC


@pytest.mark.parametrize("timed", [False, True])
def test_the_interactions_block_size_changes_no_result(
    on_backend: str, timed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interaction's loop in GPU blocks of 512 threads (as CUDA runs it in large cases,
    `interaction_block_dim`) against Taichi's default blocks: each particle's sums are its own
    thread's, so 20 steps of the quick dam break give the same bits, in the one-launch step
    and in the separate kernels the benchmarks time. The CPU ignores block sizes; Vulkan (on
    lavapipe in CI) runs its workgroups at the size asked."""
    from solver import simulation
    from solver.phase_timer import PhaseTimer

    cfg = load_config(QUICK)
    default = Simulation(cfg)
    monkeypatch.setattr(simulation, "interaction_block_dim", lambda arch, fluid, precision: 512)
    large = Simulation(cfg)
    assert large._interaction.block_dim == 512 and default._interaction.block_dim is None
    if timed:
        default.phase = large.phase = PhaseTimer()
    for _ in range(20):
        default.step()
        large.step()
    for name in ("position", "velocity", "density", "acceleration"):
        a = getattr(default.particles, name).to_numpy()[: default.count]
        b = getattr(large.particles, name).to_numpy()[: large.count]
        assert np.array_equal(a, b), name


def test_interaction_block_dim_is_large_on_cuda_in_large_cases_only() -> None:
    """Blocks of LARGE_BLOCK threads on CUDA in f32 from LARGE_BLOCK_FLUID fluid particles;
    Taichi's default (None) below it, in f64 and on every other backend."""
    from solver.physics.interaction import LARGE_BLOCK, LARGE_BLOCK_FLUID, interaction_block_dim

    assert interaction_block_dim("cuda", LARGE_BLOCK_FLUID, "f32") == LARGE_BLOCK
    assert interaction_block_dim("cuda", LARGE_BLOCK_FLUID - 1, "f32") is None
    assert interaction_block_dim("cuda", 10 * LARGE_BLOCK_FLUID, "f64") is None
    for arch in ("cpu", "vulkan", "metal"):
        assert interaction_block_dim(arch, 10 * LARGE_BLOCK_FLUID, "f32") is None


def test_the_seed_case_takes_large_blocks_on_cuda_and_spheric_does_not() -> None:
    """The two shipped cases the threshold was measured on (docs/performance.md, "Blocks of
    512 as a register cap"): the seed case's water fills blocks of 512 and gained 16 to 19 %,
    SPHERIC test 2's does not fill them and keeps Taichi's blocks of 128."""
    from solver.physics.interaction import LARGE_BLOCK, interaction_block_dim
    from solver.scene import fluid_count_bound

    seed = fluid_count_bound(load_config(ROOT / "configs" / "dambreak.toml"))
    spheric = fluid_count_bound(load_config(ROOT / "configs" / "spheric_test2.toml"))
    assert interaction_block_dim("cuda", seed, "f32") == LARGE_BLOCK
    assert interaction_block_dim("cuda", spheric, "f32") is None


def test_verlet_density_diffusion_reads_the_previous_step(on_backend: str) -> None:
    """On Verlet's leapfrog steps the density diffusion is evaluated on the previous step's
    densities (solver/physics/interaction.py): with the current densities A and the previous
    ones B, the density rates equal, bit for bit, those of an Euler step (which diffuses the
    current densities) taken with B as the current densities; and they differ from the Euler
    step's with A, so the lag is exercised. The continuity part reads no density."""
    sim = Simulation(load_config(QUICK))
    p = sim.particles
    n = p.count
    rng = np.random.default_rng(5)
    rho0 = sim.cfg.physics.rho0
    now = (rho0 * rng.uniform(0.99, 1.01, size=p.capacity)).astype(np.float32)
    before = (rho0 * rng.uniform(0.99, 1.01, size=p.capacity)).astype(np.float32)
    fluid = np.flatnonzero(p.kind.to_numpy()[:n] == FLUID)

    def rates(current: np.ndarray, previous: np.ndarray, euler: bool) -> np.ndarray:
        p.density.from_numpy(current)
        p.density_prev.from_numpy(previous)
        sim.steps = sim.cfg.time.verlet_euler_every - 1 if euler else 0
        sim._update_neighbours_and_forces()  # the first call sorts; nothing moves after it
        return p.density_rate.to_numpy()[fluid]

    rates(now, before, euler=False)  # sorts: the arrays then keep their order
    lagged = rates(now, before, euler=False)
    assert sim.sorts == 1
    np.testing.assert_array_equal(lagged, rates(before, now, euler=True))
    assert not np.array_equal(lagged, rates(now, before, euler=True))


def test_verlet_with_strong_density_diffusion_stays_stable(on_cpu: str) -> None:
    """Verlet's leapfrog applied to a diffusion term amplifies a mode that alternates from step
    to step; with the diffusion evaluated at the previous step the quick dam break runs with
    delta = 0.3 (three times the usual) for 0.06 s without losing a particle. With the
    diffusion of the current step, and the Euler step every 40 steps to damp that mode, it
    failed within the 0.06 s (462 particles removed), and with delta = 0.2 at step 75, t = 0.03
    s (2026-12-03)."""
    sim = Simulation(load_config(QUICK, ["physics.delta=0.3"]))
    while sim.time < 0.06:
        sim.advance(0.06)
        assert sim.nonfinite == 0
    assert sim.steps >= 150  # twice the steps the old scheme lasted
    assert sum(sim.removed_by_reason().values()) == 0
    p = sim.particles
    density = p.density.to_numpy()[: p.count]
    assert np.all(np.isfinite(density))
    assert density.min() > 0.95 * sim.cfg.physics.rho0


@ti.kernel
def _folded_chunks(out: ti.types.ndarray(dtype=ti.i32, ndim=1)):
    for slot in range(PAIR_CHUNKS):
        out[slot] = folded_chunk(slot)


def test_folded_chunks_pair_the_bottom_with_the_surface(on_cpu: str) -> None:
    """The pair halves run every chunk once, at slots that alternate between the two ends
    of the fluid block, so each contiguous run of slots a CPU thread gets pairs heavy chunks
    (the bottom of the water) with light ones (its surface)."""
    out = ti.ndarray(ti.i32, shape=PAIR_CHUNKS)
    _folded_chunks(out)
    chunks = out.to_numpy()
    np.testing.assert_array_equal(np.sort(chunks), np.arange(PAIR_CHUNKS))
    for pair in chunks.reshape(-1, 2):
        assert pair.sum() == PAIR_CHUNKS - 1
