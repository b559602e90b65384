"""Running every kernel the solver uses, so that each gets compiled on the running backend.

Taichi compiles a kernel when it is first called, once per distinct instantiation (argument
dtypes, template arguments, compiled-in constants), so the workload calls everything: the
building blocks and the neighbour search through the self-test's checks, then a few steps of
the quick case for each choice that changes the generated code (smoothing kernel x density
diffusion; each integrator and each boundary method with each kernel; the laminar + SPS
viscosity with each integrator), the sort a batch queues between its steps, one more step
timed phase by phase (the separate
kernels `dambreak bench` times), the benchmarks' neighbour count, and a snapshot of each, which
runs Taichi's own
copy kernels (to_numpy, from_numpy, fill) as `dambreak run` does; and the decomposed solver's
kernels (its split step, halo packing, cell keys; solver/distributed/) on one slab, as each
process of `mpiexec -n K dambreak run` runs them. Precision is f32 only: the solver refuses
f64 on Metal before anything is compiled (solver.backend.CAPABILITIES).
"""

from collections.abc import Callable

from solver.config import load_config
from solver.distributed.simulation import DistributedSimulation
from solver.distributed.world import World
from solver.neighbour_count import neighbours_per_particle
from solver.phase_timer import PhaseTimer
from solver.physics.smoothing_kernels import KERNEL_NAMES
from solver.selftest.blocks import BLOCK_CHECKS
from solver.simulation import Simulation

DIFFUSIONS = ("none", "molteni", "fourtakas")
INTEGRATORS = ("verlet", "symplectic")
BOUNDARIES = ("mdbc", "dbc")
VISCOSITIES = ("artificial", "laminar_sps")
STEPS = 3
COARSE = ("particles.dp=0.08", "time.end=0.01", "time.output_interval=0.01")


def physics_variants() -> list[tuple[str, str, str, str, str]]:
    """(kernel, density diffusion, integrator, boundary, viscosity): every kernel x diffusion
    pair once with the artificial viscosity, the integrators alternating so that each meets
    each smoothing kernel, and one boundary method per smoothing kernel (each integrator then
    meets each boundary method); then the laminar + SPS viscosity once with each integrator
    (its own interaction kernels, and the Verlet step's)."""
    variants = []
    for k, kernel in enumerate(KERNEL_NAMES):
        for d, diffusion in enumerate(DIFFUSIONS):
            integrator = INTEGRATORS[(k + d) % len(INTEGRATORS)]
            boundary = BOUNDARIES[k % len(BOUNDARIES)]
            variants.append((kernel, diffusion, integrator, boundary, VISCOSITIES[0]))
    for i, integrator in enumerate(INTEGRATORS):
        kernel = KERNEL_NAMES[i % len(KERNEL_NAMES)]
        boundary = BOUNDARIES[i % len(BOUNDARIES)]
        variants.append((kernel, DIFFUSIONS[-1], integrator, boundary, VISCOSITIES[1]))
    return variants


DISTRIBUTED_VARIANTS = (("mdbc", "artificial"), ("dbc", "laminar_sps"))
"""(boundary, viscosity) of the decomposed solver's runs: each split-step kernel once."""


def run_variant(
    kernel: str, diffusion: str, integrator: str, boundary: str, viscosity: str
) -> None:
    """A few steps and a snapshot of the coarse quick case with these physics options."""
    cfg = load_config(
        None,
        [
            *COARSE,
            f"physics.kernel={kernel}",
            f"physics.density_diffusion={diffusion}",
            f"time.integrator={integrator}",
            f"physics.boundary={boundary}",
            f"physics.viscosity={viscosity}",
        ],
    )
    sim = Simulation(cfg)
    for _ in range(STEPS):
        sim.step()
    if sim._batch_sort is not None:  # the sort a batch queues (solver/batch_sort.py)
        sim._batch_sort(sim._records, sim._stress_arrays())
    sim.phase = PhaseTimer()  # the separate kernels that `dambreak bench` times
    sim.step()
    neighbours_per_particle(sim)
    sim.snapshot()


def exercise_all(report: Callable[[str], None] = lambda _: None) -> None:
    """Call every kernel of the solver at least once on the running backend."""
    for check in BLOCK_CHECKS:
        result = check()
        if not result.passed:
            raise RuntimeError(f"{result.name} failed while compiling kernels: {result.figures}")
        report(f"ran {result.name}")
    for variant in physics_variants():
        run_variant(*variant)
        report("ran the quick case with " + ", ".join(variant))
    for boundary, viscosity in DISTRIBUTED_VARIANTS:
        cfg = load_config(
            None, [*COARSE, f"physics.boundary={boundary}", f"physics.viscosity={viscosity}"]
        )
        sim = DistributedSimulation(cfg, World.alone())
        for _ in range(STEPS):
            sim.step()
        sim.snapshot()
        report(f"ran the decomposed quick case with {boundary}, {viscosity}")
