"""Water-height gauges and pressure sensors: their definitions, evaluated on the host from a
Snapshot (solver/output/device_probes.py computes the same sums on the device during a run).

The probes reproduce what the reference codes and the experiment measure, so their time series
can be put next to DualSPHysics runs and the SPHERIC test 2 measurements (Kleefsman et al.
2005, J. Comput. Phys. 206:363-393; gauges H1..H4, sensors P1..P8; cases.md, section 2).

Height gauges. Points are sampled along the vertical line (x, y) from the floor (z_range[0])
to the top of the tank every dp/4; at each the kernel-weighted fluid mass sum_j m W(|p - x_j|, h)
is compared with 0.5 rho0, what a point on a flat free surface sees (half of its kernel support
is in the water), as in DualSPHysics' GaugeSwl (JGaugeSwl::CalculeCpu in JGaugeItem.cpp,
https://github.com/DualSPHysics/DualSPHysics; its MassLimit is 0.5 in 3D). Samples at or above
the limit are wet. A wet run (consecutive wet samples) ends where the sum crosses the limit,
found by linear interpolation between the last wet and the first dry sample (at the top of
the line, the top sample). The mass profile is computed once per (x, y) and every gauge there
reads it, according to its `surface`:

- "wetted_length" (the default): the total length of line that is wet, the sum of the lengths
  of all wet runs, reported as z_range[0] + that length. This is what the experiment's wave
  probes give: MARIN's H1..H4 are wave probes of the resistance/capacitance type, vertical
  wires whose signal is proportional to their immersed length (Kleefsman et al. 2005). For a
  continuous column from the floor it equals "first_dry"; spray above an air gap adds only
  its own thickness, as it would on the wire.
- "first_dry": DualSPHysics' GaugeSwl: scan up from the floor and stop at the first dry sample
  after a wet one (dry samples before the first wet one are passed over, as GaugeSwl does):
  the top of the lowest wet run. An air pocket under an overturning wave hides the water
  above it.
- "highest_wet": the top of the highest wet run, what one sees looking down on the water.
  Drops and spray anywhere on the line count in full.

The floor: only fluid enters the mass sum, so within the kernel support 2h of the floor the
sum misses the part of the kernel inside the wall, and samples there read dry although water
lies on the floor (most visibly under DBC, where the first fluid layer is dp above the
innermost wall layer on the floor). The lowest wet run therefore starts at the floor, not at
its interpolated lower end, when its lowest sample lies within dp of the floor (water resting
on the floor makes the samples wet from dp/4 above it under mDBC, from about dp/2 under DBC);
a run starting higher starts where the sum crosses the limit, so a sheet of water passing
more than dp above a dry floor is not counted down to the floor. Every gauge reads z_range[0]
on a dry line.

Pressure sensors (points on a solid face, as experimenters mount them: P1..P8 on the box's
front face x = 0.8245 and top face z = 0.161). The value is a Shepard-normalised SPH average,
sum_j p_j W_j V_j / sum_j W_j V_j with V_j = m / rho_j, PySPH's default interpolation
(`pysph.tools.interpolator.Interpolator`, method "shepard",
https://pysph.readthedocs.io/en/latest/reference/tools.html) and the kernel-corrected
interpolation of DualSPHysics' MeasureTool. Where and over which particles depends on the
sensor's `reading`:

- "measuretool" (the default): DualSPHysics' way of reading a face's pressure, which the
  comparison with its runs assumes: the fluid particles alone, at the point 1.5 h in front of
  the face (solver/output/sensor_points.py), normalised where the fluid's sum_j W_j V_j is at
  least 0.5 and the plain sum sum_j p_j W_j V_j below that, as MeasureTool with
  `-kclimit:0.5 -kcusedummy:0` in DualSPHysics' examples: a sensor the water only begins to
  reach reads a fraction of the water's pressure instead of the full pressure of a few
  particles. It reads the same under mDBC and DBC, since no boundary particle enters it.
- "face": on the face itself. Under mDBC ("mdbc") fluid AND boundary particles (WALL,
  OBSTACLE) enter the average: every boundary particle's density, hence its pressure, is the
  fluid's field extrapolated to first order from the particle's mirror image in the fluid
  (English et al. 2022, Comput. Part. Mech. 9:1-15), so the boundary particles continue the
  fluid's pressure field linearly across the face, and a point on the face is the centre of a
  support filled on both sides by one linear field. With fluid alone the support at a face
  point is half empty and the average is that of the fluid's half, biased by the normal
  pressure gradient times the half-support's centroid offset (about h/2): on the floor under
  hydrostatics it reads 4 % low at 20 dp depth (tests/test_probes.py). Under DBC ("dbc")
  fluid only: DBC boundary particles get their density from the continuity equation (Crespo
  et al. 2007), which keeps them apart from the fluid but is not the fluid's pressure field.

During an impact the two readings differ, because the pressure falls steeply away from the
face within one h (validation/README.md, section 3).

A sensor with no fluid particle within its support reads 0 (dry) under every reading: the
boundary particles alone must not make a dry sensor read the wall's own (clamped or stale)
pressure.
"""

from __future__ import annotations

import gzip
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import numpy as np

from solver.output.files import atomic_write_text
from solver.output.sensor_points import sample_point
from solver.particle_kind import ParticleKind
from solver.physics.smoothing_kernels import kernel_functions
from solver.snapshot import Snapshot

if TYPE_CHECKING:
    from solver.config import Config, ProbesConfig

#: What a height gauge reports (the `surface` key of [[probes.height]]); the first is the
#: default. See the module docstring.
GAUGE_SURFACES: tuple[str, ...] = ("wetted_length", "first_dry", "highest_wet")

#: How a pressure sensor reads (the `reading` key of [[probes.pressure]]); the first is the
#: default. See the module docstring and solver/output/sensor_points.py.
SENSOR_READINGS: tuple[str, ...] = ("measuretool", "face")

#: A "measuretool" reading is Shepard-normalised where the fluid's sum_j W_j V_j reaches this,
#: and the plain sum sum_j p_j W_j V_j below it (MeasureTool's -kclimit:0.5 -kcusedummy:0).
KERNEL_SUM_LIMIT = 0.5

#: Boundary treatments (`physics.boundary`) and whether "face" sensors average boundary
#: particles too.
_SENSORS_SEE_BOUNDARY: dict[str, bool] = {"mdbc": True, "dbc": False}

#: Sums per pressure sensor (`ProbeSampler.shepard_sums`): the Shepard numerator and
#: denominator over the fluid, the fluid particles within 2h, the numerator and denominator over
#: the boundary particles.
SENSOR_SUMS = 5

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
        boundary_particle_mass: float | None = None,
        rho0: float,
        z_range: tuple[float, float],
        dp: float,
        boundary: str,
        sample_points: Mapping[str, Sequence[float]] | None = None,
    ) -> None:
        """Set up the probes.

        smoothing_length is h (kernel support 2h), kernel a name from KERNEL_NAMES,
        particle_mass the mass of a fluid particle, boundary_particle_mass that of a boundary
        particle (default: the same), rho0 the reference density, z_range the
        (floor, top) interval that height gauges scan, dp the particle spacing (gauge samples
        are dp/4 apart), boundary the `physics.boundary` treatment ("mdbc" or "dbc"), which
        decides whether "face" sensors average boundary particles too. `sample_points` maps
        a sensor's name to where it reads the field (solver/output/sensor_points.py); a
        sensor left out reads at its position.
        """
        for label, value in (
            ("smoothing_length", smoothing_length),
            ("particle_mass", particle_mass),
            ("boundary_particle_mass", boundary_particle_mass or particle_mass),
            ("rho0", rho0),
            ("dp", dp),
        ):
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{label} must be a positive number, got {value!r}")
        z_low, z_high = float(z_range[0]), float(z_range[1])
        if not (math.isfinite(z_low) and math.isfinite(z_high) and z_high > z_low):
            raise ValueError(f"z_range must be (low, high) with high > low, got {z_range!r}")
        if boundary not in _SENSORS_SEE_BOUNDARY:
            raise ValueError(
                f"boundary must be one of {list(_SENSORS_SEE_BOUNDARY)}, got {boundary!r}"
            )

        self._h = float(smoothing_length)
        self._support = 2.0 * self._h
        self._w, _ = kernel_functions(kernel)
        self._mass = float(particle_mass)
        self._boundary_mass = float(boundary_particle_mass or particle_mass)
        self._mass_limit = MASS_LIMIT_FRACTION * float(rho0)
        self._z_low = z_low
        self._z_step = float(dp) / SAMPLES_PER_DP
        count = int(math.floor((z_high - z_low) / self._z_step + 1e-9)) + 1
        self._z_samples = z_low + self._z_step * np.arange(count, dtype=np.float64)
        self._sensors_see_boundary = _SENSORS_SEE_BOUNDARY[boundary]

        # Gauges grouped by line: one mass profile serves every gauge on the same (x, y).
        self._lines: dict[tuple[float, float], list[tuple[str, str]]] = {}
        for g in probes.heights:
            if g.surface not in GAUGE_SURFACES:
                raise ValueError(
                    f"gauge {g.name!r}: surface must be one of {list(GAUGE_SURFACES)}, "
                    f"got {g.surface!r}"
                )
            self._lines.setdefault((float(g.x), float(g.y)), []).append((g.name, g.surface))
        points = dict(sample_points or {})
        self._sensors: list[tuple[str, np.ndarray, str]] = []
        for sensor in probes.pressures:
            if sensor.reading not in SENSOR_READINGS:
                raise ValueError(
                    f"sensor {sensor.name!r}: reading must be one of {list(SENSOR_READINGS)}, "
                    f"got {sensor.reading!r}"
                )
            point = points.get(sensor.name, sensor.position)
            self._sensors.append(
                (sensor.name, np.asarray(point, dtype=np.float64).reshape(3), sensor.reading)
            )
        self.names: list[str] = [g.name for g in probes.heights] + [
            name for name, _, _ in self._sensors
        ]
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"probe names must be unique, got {self.names}")

    @classmethod
    def for_case(cls, cfg: Config) -> ProbeSampler:
        """The sampler of a case's configured probes, with its kernel, mass, tank and the
        sensors' sample points."""
        return cls(
            cfg.probes,
            smoothing_length=cfg.smoothing_length,
            kernel=cfg.physics.kernel,
            particle_mass=cfg.particle_mass,
            boundary_particle_mass=cfg.boundary_particle_mass,
            rho0=cfg.physics.rho0,
            z_range=(cfg.tank.box.min[2], cfg.tank.box.max[2]),
            dp=cfg.dp,
            boundary=cfg.physics.boundary,
            sample_points={s.name: sample_point(s, cfg) for s in cfg.probes.pressures},
        )

    @property
    def lines(self) -> list[tuple[float, float]]:
        """The distinct gauge lines (x, y), in the order `readings` takes their profiles."""
        return list(self._lines)

    @property
    def z_samples(self) -> np.ndarray:
        """Heights of the sample points of every gauge line, upwards (a copy)."""
        return self._z_samples.copy()

    @property
    def sensor_points(self) -> np.ndarray:
        """Where the pressure sensors read the field, (k, 3), in the order `readings` takes
        their sums."""
        return np.array([p for _, p, _ in self._sensors], dtype=np.float64).reshape(-1, 3)

    def sample(self, snap: Snapshot) -> dict[str, float]:
        """The value of every probe (metres for gauges, pascals for sensors) in `snap`."""
        kind = np.asarray(snap.kind)
        fluid = kind == ParticleKind.FLUID
        position = np.asarray(snap.position, dtype=np.float64)
        fluid_position = position[fluid]
        profiles = [self.mass_profile(fluid_position, x, y) for x, y in self._lines]
        sensor_sums = np.zeros((len(self._sensors), SENSOR_SUMS), dtype=np.float64)
        if self._sensors:
            # Every particle takes part (fluid and boundary are summed apart); only those
            # within 2h of the sensors' bounding box can reach any of them.
            points = self.sensor_points
            lo = points.min(axis=0) - self._support
            hi = points.max(axis=0) + self._support
            used = np.all((position >= lo) & (position <= hi), axis=1)
            near = position[used]
            pressure = np.asarray(snap.pressure, dtype=np.float64)[used]
            density = np.asarray(snap.density, dtype=np.float64)[used]
            near_fluid = fluid[used]
            for k, point in enumerate(points):
                sensor_sums[k] = self.shepard_sums(near, pressure, density, near_fluid, point)
        return self.readings(profiles, sensor_sums)

    def readings(self, profiles: Sequence[np.ndarray], sensor_sums: np.ndarray) -> dict[str, float]:
        """The value of every probe, by name in `names` order, from the sums around its points.

        `profiles` holds the `mass_profile` of each line of `lines`; `sensor_sums`
        (k, SENSOR_SUMS) the `shepard_sums` of each sensor of `sensor_points`. Whether the sums
        come from a snapshot on the host (`sample`) or from the device
        (solver/output/device_probes.py), the probe values derive from them here, by one
        definition.
        """
        values: dict[str, float] = {}
        for gauges, profile in zip(self._lines.values(), profiles, strict=True):
            runs = self.wet_runs(np.asarray(profile, dtype=np.float64))
            for name, surface in gauges:
                values[name] = self.gauge_reading(runs, surface)
        for (name, _, reading), sums in zip(self._sensors, sensor_sums, strict=True):
            values[name] = self.sensor_reading(reading, *(float(value) for value in sums))
        return {name: values[name] for name in self.names}

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

    def wet_runs(self, sums: np.ndarray) -> np.ndarray:
        """The wet stretches of a gauge line, (k, 2): bottom and top z of each, upwards.

        `sums` is a `mass_profile`. A run's ends lie where the mass sum crosses 0.5 rho0,
        linearly interpolated between the wet sample and its dry neighbour; a run reaching the
        top sample ends there. The lowest run starts at the floor (z_range[0]) when its lowest
        sample is within dp of it: there the fluid-only sum is cut by the floor, so the dry
        samples below are not air (see the module docstring).
        """
        wet = np.concatenate(([False], sums >= self._mass_limit, [False])).astype(np.int8)
        change = np.diff(wet)
        first = np.flatnonzero(change == 1)  # lowest wet sample of each run
        last = np.flatnonzero(change == -1) - 1  # highest wet sample of each run
        z = self._z_samples
        runs = np.empty((first.size, 2), dtype=np.float64)
        for k, (i, j) in enumerate(zip(first, last, strict=True)):
            if k == 0 and z[i] - self._z_low <= self._z_step * SAMPLES_PER_DP:
                runs[k, 0] = self._z_low
            else:  # i > 0 here: the sample below is dry
                runs[k, 0] = z[i] - self._z_step * self._crossing(sums[i], sums[i - 1])
            if j == z.size - 1:
                runs[k, 1] = z[j]
            else:
                runs[k, 1] = z[j] + self._z_step * self._crossing(sums[j], sums[j + 1])
        return runs

    def _crossing(self, wet: float, dry: float) -> float:
        """Where, as a fraction of the step from the wet sample to the dry one, the mass sum
        falls to the limit (linear interpolation; in [0, 1) since wet >= limit > dry)."""
        return float((wet - self._mass_limit) / (wet - dry))

    def gauge_reading(self, runs: np.ndarray, surface: str) -> float:
        """A gauge's value [m] from the wet runs of its line (`wet_runs`), by `surface`:
        z_range[0] plus the total wet length ("wetted_length"), the top of the lowest run
        ("first_dry") or of the highest ("highest_wet"); z_range[0] on a dry line."""
        if runs.shape[0] == 0:
            return self._z_low
        if surface == "wetted_length":
            return self._z_low + float(np.sum(runs[:, 1] - runs[:, 0]))
        if surface == "first_dry":
            return float(runs[0, 1])
        return float(runs[-1, 1])

    def shepard_sums(
        self,
        position: np.ndarray,
        pressure: np.ndarray,
        density: np.ndarray,
        fluid: np.ndarray,
        point: np.ndarray,
    ) -> tuple[float, float, int, float, float]:
        """The sums of the Shepard interpolation of pressure at `point` (see `sensor_reading`).

        Over the given particles within 2h, `fluid` marking the fluid ones: sum_j p_j W_j V_j
        and sum_j W_j V_j (V_j = m_j / rho_j) over the fluid, the number of fluid particles, and
        the same two sums over the others (boundary particles).
        """
        d = position - point[None, :]
        r2 = np.sum(d * d, axis=1)
        near = r2 < self._support * self._support
        f = fluid[near]
        mass = np.where(f, self._mass, self._boundary_mass)
        weight = self._w(np.sqrt(r2[near]), self._h) * (mass / density[near])
        p = pressure[near]
        return (
            float(np.sum(p[f] * weight[f])),
            float(np.sum(weight[f])),
            int(np.count_nonzero(f)),
            float(np.sum(p[~f] * weight[~f])),
            float(np.sum(weight[~f])),
        )

    def sensor_reading(
        self,
        reading: str,
        fluid_numerator: float,
        fluid_denominator: float,
        fluid_near: float,
        boundary_numerator: float,
        boundary_denominator: float,
    ) -> float:
        """A sensor's pressure [Pa] from its `shepard_sums`, by its `reading` (module doc).

        "measuretool": the fluid's sum_j p_j W_j V_j / sum_j W_j V_j where the denominator
        reaches KERNEL_SUM_LIMIT, else the numerator alone. "face": the Shepard average over
        the fluid, and under mDBC the boundary particles too. 0.0 where no fluid particle is
        within the kernel support (a dry sensor), whatever boundary particles are there.
        """
        if fluid_near < 1:
            return 0.0
        if reading == "measuretool":
            if fluid_denominator >= KERNEL_SUM_LIMIT:
                return fluid_numerator / fluid_denominator
            return fluid_numerator
        numerator, denominator = fluid_numerator, fluid_denominator
        if self._sensors_see_boundary:
            numerator += boundary_numerator
            denominator += boundary_denominator
        if not denominator > 0.0:
            return 0.0
        return numerator / denominator


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
        """The header and every row recorded so far (the file catches up as rows are
        appended; see `record`). The rows are joined into one string as they are asked for,
        so that a run asking at every output time copies its text once each time rather
        than walking every row again."""
        if len(self._text) > 1:
            self._text = ["".join(self._text)]
        return self._text[0]

    def write(self, time: float, values: Mapping[str, float]) -> None:
        """Append the row for simulated `time`; `values` must hold every probe name."""
        self.append(self.record(time, values))

    def record(self, time: float, values: Mapping[str, float]) -> str:
        """Add the row for `time` to `text` and return it, for `append` later: the time loop
        records, the background writer (solver/output/writer.py) appends."""
        missing = [name for name in self.names if name not in values]
        if missing:
            raise KeyError(f"no value for probe(s) {missing} at time {time!r}")
        fields = [repr(float(time))] + [repr(float(values[name])) for name in self.names]
        row = ",".join(fields) + "\n"
        self._text.append(row)
        return row

    def append(self, row: str) -> None:
        """Write a row made by `record` to the file, in one write, and flush it."""
        self._file.write(row)
        self._file.flush()

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
    can be read while a run appends to it. A path ending in .gz is read through gzip (the
    stored runs of validation/runs keep their probes.csv so).
    """
    path = Path(path)
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8", newline="") as file:
            text = file.read()
    else:
        text = path.read_text(encoding="utf-8")
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
