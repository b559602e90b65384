"""A short dam break on the backend under test against the CPU backend of the same machine.

The quick case (configs/quick.toml) at a coarse spacing runs for a fraction of a second on
each backend, one after the other in this process (Taichi runs one backend at a time; ti.reset
between them). The two end states are compared in the macroscopic quantities of
solver.validation.metrics with the tolerances of `dambreak compare` (Tolerances: energies 2 %
of the initial potential energy, centre of mass and front 2 dp, mass 2 %), which allow for
float32 arithmetic that differs between devices. When the backend under test is the CPU itself,
the reference is the sequential CPU run (one thread), which must agree just as well.
"""

import math
from dataclasses import dataclass

import numpy as np

from solver.backend import reset_taichi, start_backend
from solver.config import Config, load_config
from solver.selftest.result import CheckResult
from solver.simulation import Simulation
from solver.validation.compare import Tolerances
from solver.validation.metrics import FluidMetrics, compute_metrics

OVERRIDES = ("particles.dp=0.05", "time.end=0.15")
"""About 1600 particles and 0.15 s: the water column has started to fall and spread."""


@dataclass(frozen=True)
class CaseRun:
    """What one backend gave: metrics at the start and at the end, steps and backend."""

    backend: str
    device: str
    start: FluidMetrics
    end: FluidMetrics
    steps: int


def case_config() -> Config:
    """The self-test's dam break: the quick case, coarse and short."""
    return load_config(None, OVERRIDES)


def run_case(cfg: Config, backend: str, threads: int | None = None) -> CaseRun:
    """Run `cfg` to its end time on `backend`; Taichi is reset afterwards."""
    info = start_backend(backend, "f32", threads)
    try:
        sim = Simulation(cfg)
        start = compute_metrics(sim.snapshot(), cfg)
        while sim.time < cfg.time.end * (1.0 - 1e-12):
            sim.advance(cfg.time.end)  # in batches, as `dambreak run` steps
            if sim.nonfinite or not math.isfinite(sim.dt):
                break
        end = compute_metrics(sim.snapshot(), cfg)
        return CaseRun(info.name, info.device, start, end, sim.steps)
    finally:
        reset_taichi()


def compare_case(cfg: Config, test: CaseRun, reference: CaseRun) -> list[CheckResult]:
    """One CheckResult per macroscopic quantity, test run against reference run."""
    tol = Tolerances()
    a, b = test.end, reference.end
    energy_scale = reference.start.potential_energy
    dp = cfg.dp
    mass_scale = reference.start.mass
    com = float(np.linalg.norm(np.subtract(a.centre_of_mass, b.centre_of_mass)))
    front = abs(a.front - b.front)
    figures = [
        ("kinetic energy", abs(a.kinetic_energy - b.kinetic_energy) / energy_scale, tol.energy,
         f"{a.kinetic_energy:.4g} J vs {b.kinetic_energy:.4g} J", "of initial E_p"),
        ("potential energy", abs(a.potential_energy - b.potential_energy) / energy_scale,
         tol.energy, f"{a.potential_energy:.4g} J vs {b.potential_energy:.4g} J",
         "of initial E_p"),
        ("centre of mass", com / dp, tol.com_dp,
         "(" + ", ".join(f"{c:.4f}" for c in a.centre_of_mass) + ") m", "dp"),
        ("front", front / dp if math.isfinite(front) else math.inf, tol.front_dp,
         f"{a.front:.4f} m vs {b.front:.4f} m", "dp"),
        ("mass", abs(a.mass - b.mass) / mass_scale, tol.mass,
         f"{a.mass:.4g} kg vs {b.mass:.4g} kg", "of initial mass"),
    ]  # fmt: skip
    results = []
    for name, measured, limit, values, unit in figures:
        if unit == "dp":
            detail = f"differ by {measured:.3g} dp (limit {limit:g})"
        else:
            detail = f"differ by {measured:.3%} {unit} (limit {limit:.0%})"
        results.append(CheckResult(f"dam break: {name}", measured <= limit, f"{values}: {detail}"))
    return results


def reference_for(backend: str) -> tuple[str, int | None]:
    """The reference run: the CPU; the sequential CPU when the CPU itself is under test."""
    return ("cpu", 1) if backend == "cpu" else ("cpu", None)
