"""Water-height gauges and pressure sensors, evaluated on the host from a Snapshot.

The probes reproduce what the reference codes measure, so their time series can be put next to
DualSPHysics runs and the SPHERIC test 2 experiment (Kleefsman et al. 2005; H1..H4, P1..P8):

- Height gauge, after DualSPHysics' GaugeSwl (DualSPHysics wiki, "Gauges" / MeasureTool
  documentation, https://github.com/DualSPHysics/DualSPHysics/wiki): points are sampled along
  a vertical line every dp/4; at each the kernel-weighted fluid mass sum_j m_j W(|x - x_j|, h)
  is compared with a limit of 0.5 rho0 (what a point on a flat free surface sees: half of its
  kernel support is in the water); the surface lies where the sum crosses the limit, found
  by linear interpolation between the two samples around the crossing.
- Pressure sensor: a Shepard-normalised SPH average of fluid pressure,
  sum_j p_j W_j V_j / sum_j W_j V_j with V_j = m_j / rho_j, which is PySPH's default
  interpolation (`pysph.tools.interpolator.Interpolator`, method "shepard",
  https://pysph.readthedocs.io/en/latest/reference/tools.html) and the kernel-corrected
  interpolation of DualSPHysics' MeasureTool post-processing tool.
  Normalising by the kernel sum keeps the value unbiased next to walls and the free surface,
  where the kernel support is only partly filled with fluid.

Only FLUID particles take part: boundary particles (DBC walls) carry a density and pressure of
their own that do not describe the water.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import numpy as np

from solver.output.files import atomic_write_text
from solver.particle_kind import ParticleKind
from solver.physics.smoothing_kernels import kernel_functions
from solver.snapshot import Snapshot

if TYPE_CHECKING:
    from solver.config import ProbesConfig

#: Fraction of rho0 that the kernel mass sum must reach for a gauge point to count as wet.
#: DualSPHysics' GaugeSwl uses 0.5 in 3D (0.4 in 2D).
MASS_LIMIT_FRACTION = 0.5

#: Gauge sample points per dp along the vertical line (DualSPHysics' default spacing dp/4).
SAMPLES_PER_DP = 4

#: Gauge sample points evaluated together; bounds memory to chunk x (particles near them).
_Z_CHUNK = 128


class ProbeSampler:
    """Evaluates all configured probes on a snapshot.

    `names` lists the probes, height gauges first, then pressure sensors, each group in config
    order; `sample` returns a value for each name.
    """

    def __init__(
        self,
        probes: ProbesConfig,
        *,
        smoothing_length: float,
        kernel: str,
        particle_mass: float,
        rho0: float,
        z_range: tuple[float, float],
        dp: float,
    ) -> None:
        """Set up the probes.

        smoothing_length is h (kernel support 2h), kernel a name from KERNEL_NAMES,
        particle_mass the mass of every fluid particle, rho0 the reference density, z_range the
        (floor, top) interval that height gauges scan, dp the particle spacing (gauge samples
        are dp/4 apart).
        """
        for label, value in (
            ("smoothing_length", smoothing_length),
            ("particle_mass", particle_mass),
            ("rho0", rho0),
            ("dp", dp),
        ):
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{label} must be a positive number, got {value!r}")
        z_low, z_high = float(z_range[0]), float(z_range[1])
        if not (math.isfinite(z_low) and math.isfinite(z_high) and z_high > z_low):
            raise ValueError(f"z_range must be (low, high) with high > low, got {z_range!r}")

        self._h = float(smoothing_length)
        self._support = 2.0 * self._h
        self._w, _ = kernel_functions(kernel)
        self._mass = float(particle_mass)
        self._mass_limit = MASS_LIMIT_FRACTION * float(rho0)
        self._z_low = z_low
        self._z_step = float(dp) / SAMPLES_PER_DP
        count = int(math.floor((z_high - z_low) / self._z_step + 1e-9)) + 1
        self._z_samples = z_low + self._z_step * np.arange(count, dtype=np.float64)

        self._gauges = [(g.name, float(g.x), float(g.y)) for g in probes.heights]
        self._sensors = [
            (s.name, np.asarray(s.position, dtype=np.float64).reshape(3)) for s in probes.pressures
        ]
        self.names: list[str] = [name for name, _, _ in self._gauges] + [
            name for name, _ in self._sensors
        ]
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"probe names must be unique, got {self.names}")

    def sample(self, snap: Snapshot) -> dict[str, float]:
        """The value of every probe (metres for gauges, pascals for sensors) in `snap`."""
        fluid = np.asarray(snap.kind) == ParticleKind.FLUID
        position = np.asarray(snap.position, dtype=np.float64)[fluid]
        values: dict[str, float] = {}
        for name, x, y in self._gauges:
            values[name] = self.surface_height(position, x, y)
        if self._sensors:
            pressure = np.asarray(snap.pressure, dtype=np.float64)[fluid]
            density = np.asarray(snap.density, dtype=np.float64)[fluid]
            for name, point in self._sensors:
                values[name] = self.pressure_at(position, pressure, density, point)
        return values

    def mass_profile(self, position: np.ndarray, x: float, y: float) -> np.ndarray:
        """Kernel mass sum sum_j m W(|p - x_j|, h) at every gauge sample point p on (x, y).

        `position` holds fluid particles only, (n, 3). Particles farther than 2h from the line
        horizontally are dropped first; the rest are sorted by z so each chunk of sample points
        meets only the particles within 2h of it vertically.
        """
        sums = np.zeros_like(self._z_samples)
        dx = position[:, 0] - x
        dy = position[:, 1] - y
        horizontal2 = dx * dx + dy * dy
        near = horizontal2 < self._support * self._support
        if not np.any(near):
            return sums
        z = position[near, 2]
        order = np.argsort(z, kind="stable")
        z = z[order]
        horizontal2 = horizontal2[near][order]
        for start in range(0, self._z_samples.size, _Z_CHUNK):
            points = self._z_samples[start : start + _Z_CHUNK]
            lo = int(np.searchsorted(z, points[0] - self._support, side="left"))
            hi = int(np.searchsorted(z, points[-1] + self._support, side="right"))
            if hi <= lo:
                continue
            dz = points[:, None] - z[None, lo:hi]
            r = np.sqrt(horizontal2[None, lo:hi] + dz * dz)
            sums[start : start + points.size] = self._mass * np.sum(self._w(r, self._h), axis=1)
        return sums

    def surface_height(self, position: np.ndarray, x: float, y: float) -> float:
        """Free-surface height on the vertical line (x, y), after DualSPHysics' GaugeSwl.

        The surface is the highest sample whose kernel mass sum reaches 0.5 rho0, moved up by
        linear interpolation towards the next (dry) sample to where the sum equals the limit.
        Unlike GaugeSwl, which stops at the first dry point scanning upwards, the highest wet
        point is taken, so an air pocket under an overturning wave does not hide the water
        above it. Returns z_range[0] (the floor, normally 0.0) if no sample is wet, and
        z_range[1] if the top sample is.
        """
        sums = self.mass_profile(position, x, y)
        wet = np.flatnonzero(sums >= self._mass_limit)
        if wet.size == 0:
            return self._z_low
        i = int(wet[-1])
        if i == self._z_samples.size - 1:
            return float(self._z_samples[i])
        above, below = float(sums[i]), float(sums[i + 1])
        fraction = (above - self._mass_limit) / (above - below)
        return float(self._z_samples[i] + fraction * self._z_step)

    def pressure_at(
        self,
        position: np.ndarray,
        pressure: np.ndarray,
        density: np.ndarray,
        point: np.ndarray,
    ) -> float:
        """Shepard-normalised SPH interpolation of fluid pressure at `point`.

        p(x) = sum_j p_j W_j m/rho_j / sum_j W_j m/rho_j over fluid particles within 2h
        (PySPH's Interpolator and DualSPHysics' pressure gauges use this form). Returns 0.0
        where no fluid particle is within the kernel support (a dry sensor).
        """
        d = position - point[None, :]
        r2 = np.sum(d * d, axis=1)
        near = r2 < self._support * self._support
        if not np.any(near):
            return 0.0
        weight = self._w(np.sqrt(r2[near]), self._h) * (self._mass / density[near])
        total = float(np.sum(weight))
        if not total > 0.0:
            return 0.0
        return float(np.sum(pressure[near] * weight) / total)


def _check_name(name: str) -> None:
    """Refuse names that would break the CSV layout (no quoting is used)."""
    if not name or any(c in name for c in ',"\r\n'):
        raise ValueError(f'probe name {name!r}: must be non-empty, without , " or newlines')


class ProbeWriter:
    """Writes probes.csv: header "time,<name>,...", then one row per sample.

    Numbers are written with repr(float), which reads back to the identical float. Each row is
    flushed as it is written, in one write call, so the file can be plotted while the run goes
    on and a killed run loses at most the row in progress (which `read_probes` skips).
    """

    def __init__(self, path: Path, names: list[str], written: str | None = None) -> None:
        """Create (or truncate) the CSV at `path` and write its header.

        `written`, the `text` of an earlier writer of the same probes (a resumed run), replaces
        the file atomically instead, and rows are appended after it.
        """
        for name in names:
            _check_name(name)
        if len(set(names)) != len(names) or "time" in names:
            raise ValueError(f"probe names must be unique and not 'time', got {names}")
        self.path = Path(path)
        self.names = list(names)
        header = ",".join(["time", *self.names]) + "\n"
        if written is not None and not written.startswith(header):
            raise ValueError(f"{path}: the probes to resume are not {self.names}")
        self._text = [written if written is not None else header]
        atomic_write_text(self.path, self._text[0])
        self._file = open(self.path, "a", encoding="utf-8", newline="")

    @property
    def text(self) -> str:
        """Everything written to the file so far."""
        return "".join(self._text)

    def write(self, time: float, values: Mapping[str, float]) -> None:
        """Append the row for simulated `time`; `values` must hold every probe name."""
        missing = [name for name in self.names if name not in values]
        if missing:
            raise KeyError(f"no value for probe(s) {missing} at time {time!r}")
        fields = [repr(float(time))] + [repr(float(values[name])) for name in self.names]
        row = ",".join(fields) + "\n"
        self._file.write(row)
        self._file.flush()
        self._text.append(row)

    def close(self) -> None:
        """Close the file (idempotent)."""
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> ProbeWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def read_probes(path: Path) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Read probes.csv: the times, and each probe's series by name (in header order).

    A last line without its newline is a row still being written and is skipped, so the file
    can be read while a run appends to it.
    """
    text = Path(path).read_text(encoding="utf-8")
    lines = text.split("\n")
    # split leaves "" after a final newline, or the unfinished row otherwise: drop either.
    lines = lines[:-1]
    if not lines:
        raise ValueError(f"{path}: empty probes file (no header)")
    header = lines[0].split(",")
    if header[0] != "time":
        raise ValueError(f"{path}: first column must be 'time', got {header[0]!r}")
    rows = [line.split(",") for line in lines[1:] if line]
    for number, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise ValueError(f"{path}:{number}: {len(row)} fields, header has {len(header)}")
    table = np.array([[float(v) for v in row] for row in rows], dtype=np.float64)
    table = table.reshape(len(rows), len(header))
    return table[:, 0].copy(), {name: table[:, k].copy() for k, name in enumerate(header) if k}
