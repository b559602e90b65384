"""The probes' sums evaluated on the device, instead of copying every particle to the host:
inside a batch of fused steps at the probe times it passes (solver/step_batch.py), read back
with the batch's records, or by one kernel launch between steps.

The probes (solver/output/probes.py) read two kinds of sum around fixed points: the fluid
mass sum sum_j m W(|p - x_j|, h) at the sample points of each gauge line, and at each pressure
sensor the Shepard sums of pressure sum_j p_j W_j V_j, sum_j W_j V_j (V_j = m / rho_j) over the
fluid, the number of fluid particles within 2h and the two sums over the boundary particles.
Here every point gathers them from its neighbours in the simulation's cell grid, as the mDBC
ghost nodes do (solver/physics/mdbc.py); the host then derives the probe values from the sums
with `ProbeSampler.readings`, the very code that reads the sums a snapshot gives on the host,
so both paths share one definition.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import taichi as ti

from solver.neighbors import BLOCKS, FLUID_BLOCK, block_span, row_cells, search_cells
from solver.output.probes import SENSOR_SUMS, ProbeSampler
from solver.physics.shared_formula import taichi_func
from solver.physics.smoothing_kernels import kernel_functions
from solver.step_batch import PROBE_ROWS

if TYPE_CHECKING:
    from solver.config import Config
    from solver.simulation import Simulation


SUMS = 1 + SENSOR_SUMS
"""Sums per point: the fluid mass, then a sensor's `ProbeSampler.shepard_sums`."""


def build_point_sums(cfg: "Config") -> Callable:
    """ti.func (x, position, density, pressure, removed, search_radius, lo, inv_cell, dims,
    cell_offsets) -> the SUMS sums at the point x, the constants of `cfg` compiled in.

    Candidates come from the cells of the last sort within `search_radius`, which must be 2h
    plus how far any particle may have moved since (the interaction's skin argument, with the
    simulation's bound `moved`: after a step it may exceed the skin, the next step sorting
    first); particles flagged in `removed` are skipped (a snapshot leaves them out too). The
    fluid and the boundary particles are summed apart, as `ProbeSampler.shepard_sums` does.
    The probe kernel below and the fused step (solver/fused_step.py) both call it, so a probe
    sampled inside a batch of steps is the one sampled between steps.
    """
    kernel_w = taichi_func(kernel_functions(cfg.physics.kernel)[0])
    h = cfg.smoothing_length
    support2 = cfg.support_radius**2
    mass, boundary_mass = cfg.particle_mass, cfg.boundary_particle_mass

    @ti.func
    def point_sums(
        x, position: ti.template(), density: ti.template(), pressure: ti.template(),
        removed: ti.template(), search_radius, lo, inv_cell, dims, cell_offsets: ti.template(),
    ):  # fmt: skip
        kernel_sum = 0.0  # sum_j W over fluid particles; times m at the end, as the host
        fluid_numerator = 0.0
        fluid_denominator = 0.0
        fluid_near = 0
        boundary_numerator = 0.0
        boundary_denominator = 0.0
        box = search_cells(x, search_radius, lo, inv_cell, dims)
        for cz in range(box[0, 2], box[1, 2] + 1):
            for cy in range(box[0, 1], box[1, 1] + 1):
                cells = row_cells(x, search_radius, cy, cz, lo, inv_cell, dims)
                for block in ti.static(range(BLOCKS)):
                    span = block_span(cells, block, dims, cell_offsets)
                    for j in range(span[0], span[1]):
                        r2 = (x - position[j]).norm_sqr()
                        if r2 < support2 and removed[j] == 0:
                            w = kernel_w(ti.sqrt(r2), h)
                            m_j = ti.static(mass if block == FLUID_BLOCK else boundary_mass)
                            weight = w * (m_j / density[j])
                            if ti.static(block == FLUID_BLOCK):
                                fluid_numerator += pressure[j] * weight
                                fluid_denominator += weight
                                kernel_sum += w
                                fluid_near += 1
                            else:
                                boundary_numerator += pressure[j] * weight
                                boundary_denominator += weight
        return ti.Vector(
            [
                mass * kernel_sum, fluid_numerator, fluid_denominator, fluid_near,
                boundary_numerator, boundary_denominator,
            ],
            float,
        )  # fmt: skip

    return point_sums


def build_probe_sums(point_sums: Callable) -> Callable:
    """The kernel filling sums[k] with `point_sums` (see `build_point_sums`) at each probe
    point k, between steps."""

    @ti.kernel
    def probe_sums(
        position: ti.types.ndarray(ndim=1),
        density: ti.types.ndarray(ndim=1),
        pressure: ti.types.ndarray(ndim=1),
        removed: ti.types.ndarray(ndim=1),
        points: ti.types.ndarray(ndim=1),
        n_points: ti.i32,
        search_radius: float,
        lo: ti.math.vec3,
        inv_cell: ti.math.vec3,
        dims: ti.math.ivec3,
        cell_offsets: ti.types.ndarray(ndim=1),
        sums: ti.types.ndarray(ndim=1),
    ):
        for k in range(n_points):
            sums[k] = point_sums(
                points[k], position, density, pressure, removed, search_radius, lo, inv_cell,
                dims, cell_offsets,
            )  # fmt: skip

    return probe_sums


class ProbePoints:
    """Where the probes of a case read the field, on the device, and the rows in which a batch
    of steps keeps the sums of the probe times it passes (solver/step_batch.py).

    The points are every gauge line's samples (lines in `ProbeSampler.lines` order), then the
    pressure sensors. The simulation owns them (its fused step samples them); `DeviceProbes`
    reads them back.
    """

    def __init__(self, cfg: "Config", dtype) -> None:
        """The probe points of `cfg` in the device float type `dtype`."""
        self.sampler = ProbeSampler.for_case(cfg)
        z = self.sampler.z_samples
        lines = [
            np.column_stack([np.full_like(z, x), np.full_like(z, y), z])
            for x, y in self.sampler.lines
        ]
        points = np.concatenate([*lines, self.sampler.sensor_points]).reshape(-1, 3)
        self.line_samples = z.size
        """Sample points per gauge line."""
        self.count = points.shape[0]
        """Probe points, gauge samples and sensors."""
        self.interval = cfg.probe_interval if self.sampler.names else None
        """Time between probe samples; None without probes."""
        real = np.float64 if dtype == ti.f64 else np.float32
        padded = np.zeros((max(self.count, 1), 3), dtype=real)  # no empty ndarrays
        padded[: self.count] = points
        self.points = ti.Vector.ndarray(3, dtype, shape=padded.shape[0])
        """The points on the device (at least one row)."""
        self.points.from_numpy(padded)
        self.rows = ti.Vector.ndarray(SUMS, dtype, shape=(PROBE_ROWS, padded.shape[0]))
        """The sums at every point of each probe time a batch passed, in the order passed."""
        self.point_sums = build_point_sums(cfg)
        """The ti.func of one point's sums (`build_point_sums`)."""


class DeviceProbes:
    """The probes of a case, evaluated on its simulation's device arrays.

    `sums` launches the probe kernel over every point (`ProbePoints`) and reads the sums back
    in one copy, `sample` turns them into the probe values; `take_sums` gives the sums of the
    probe times the simulation's last advance passed, `readings` their values.
    """

    def __init__(self, cfg: "Config", sim: "Simulation") -> None:
        """The probes of `cfg` on the device of `sim` (its `probe_points`); steps that `sim`
        takes alone sample them with `point_sums`."""
        self._probe_points = sim.probe_points
        self.sampler = self._probe_points.sampler
        dtype, shape = sim.particles.dtype, self._probe_points.points.shape
        self._sums = ti.Vector.ndarray(SUMS, dtype, shape=shape)
        self._kernel = build_probe_sums(self._probe_points.point_sums)
        self._sim = sim
        sim.probe_sampler = self.point_sums

    @property
    def names(self) -> list[str]:
        """The probes' names, gauges first (as `ProbeSampler.names`)."""
        return self.sampler.names

    def sums(self) -> tuple[list[np.ndarray], np.ndarray]:
        """The sums at every probe point now: the mass profile of each gauge line, and each
        sensor's `ProbeSampler.shepard_sums`; what `ProbeSampler.readings` takes.
        """
        return self._split(self.point_sums())

    def _split(self, sums: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """`sums` (points x SUMS) as `sums` gives them."""
        sums = sums.astype(np.float64)
        n = self._probe_points.line_samples
        profiles = [sums[k * n : (k + 1) * n, 0] for k in range(len(self.sampler.lines))]
        return profiles, sums[len(profiles) * n :, 1:]

    def point_sums(self) -> np.ndarray:
        """The SUMS sums at every probe point, in the device's float type (points x SUMS).

        A fresh simulation is sorted into cells first (the sort its first step makes).
        """
        sim = self._sim
        sim.ensure_sorted()
        p = sim.particles
        search_radius = sim.cfg.support_radius + sim.moved
        lo, inv_cell, dims, offsets = sim.grid.kernel_args()
        count = self._probe_points.count
        self._kernel(
            p.position, p.density, p.pressure, p.removed, self._probe_points.points, count,
            search_radius, lo, inv_cell, dims, offsets, self._sums,
        )  # fmt: skip
        return self._sums.to_numpy()[:count]

    @property
    def points(self) -> np.ndarray:
        """The probe points (gauge samples, then sensors), points x 3."""
        return self._probe_points.points.to_numpy()[: self._probe_points.count]

    def sample(self) -> dict[str, float]:
        """The value of every probe now (metres for gauges, pascals for sensors)."""
        return self.readings(self.point_sums())

    def take_sums(self) -> list[tuple[float, np.ndarray]]:
        """(time, sums) of each probe time the simulation's last advance passed, in order,
        the sums (points x SUMS) copied to the host: a batch of fused steps sampled them into
        the probe rows, steps taken alone (the symplectic scheme, processes of an MPI job)
        through `point_sums` right after the step (the simulation's `probe_sampler`)."""
        sim = self._sim
        if not sim.probe_times:
            return []
        if sim.probe_rows_filled:
            rows = self._probe_points.rows.to_numpy()[:, : self._probe_points.count]
        else:
            rows = sim.probe_sums
        return [(time, rows[r]) for r, time in enumerate(sim.probe_times)]

    def readings(self, sums: np.ndarray) -> dict[str, float]:
        """The value of every probe from the sums at every probe point (one of `take_sums`)."""
        return self.sampler.readings(*self._split(sums))
