"""The probes evaluated on the device (solver/output/device_probes.py) read what the host's
ProbeSampler reads from a snapshot of the same state: the mass profiles of the gauge lines and
the Shepard sums of the sensors agree to float32 rounding, the gauge heights and pressures
derived from them too, a dry sensor reads 0 on both paths, and a run writes probes.csv from
the device path with the values the host path gives on its snapshots.

Tolerances. The device sums in float32 what the host sums in float64 from the same float32
positions, densities and pressures; each term carries a relative rounding of a few 1e-7, and a
sum of a few hundred positive terms (the kernel sums, the Shepard denominator) stays within
about 1e-5 of itself. A gauge height is interpolated where the mass profile crosses 0.5 rho0;
across the free surface the profile changes by a fair part of rho0 over one sample step dp/4,
so an error of 1e-5 rho0 in the sums moves the crossing by 1e-4 of dp/4, a few 1e-7 m at these
resolutions: 1e-6 m plus 1e-5 of the height bounds it with margin. The Shepard numerator sums
pressures that may differ in sign near the free surface, so its error is relative to the
pressure scale of the neighbourhood, not to the result: 1e-4 of the reading plus 1e-4 of the
hydrostatic pressure at the bottom of the water column.
"""

from pathlib import Path

import conftest
import numpy as np
import pytest

from solver.cli import build_parser
from solver.config import Config, config_to_toml, loads_config
from solver.output.device_probes import DeviceProbes
from solver.output.npz import read_snapshot_npz
from solver.output.probes import ProbeSampler, read_probes
from solver.particle_kind import ParticleKind
from solver.run import run_command
from solver.simulation import Simulation

ROOT = Path(__file__).resolve().parents[1]

#: Sensors added to the quick case (water column 0.4 x 0.67 x 0.3 in the corner x = 0, y = 0;
#: an obstacle at x 0.9..1.02): on the floor and on the wall x = 0 under the column, inside
#: it, and one on the obstacle, far from the water (dry), read as MeasureTool does; the floor
#: and wall ones again read on the face; one more gauge where the column's front falls.
SENSORS = """
[[probes.height]]
name = "H_front"
x = 0.38
y = 0.2
surface = "first_dry"

[[probes.height]]
name = "H_front_top"
x = 0.38
y = 0.2
surface = "highest_wet"

[[probes.pressure]]
name = "P_floor"
position = [0.2, 0.335, 0.0]

[[probes.pressure]]
name = "P_wall"
position = [0.0, 0.335, 0.1]

[[probes.pressure]]
name = "P_inside"
position = [0.21, 0.31, 0.13]

[[probes.pressure]]
name = "P_dry"
position = [0.9, 0.3, 0.3]

[[probes.pressure]]
name = "P_floor_face"
position = [0.2, 0.335, 0.0]
reading = "face"

[[probes.pressure]]
name = "P_wall_face"
position = [0.0, 0.335, 0.1]
reading = "face"
"""

HEIGHT_ABS, HEIGHT_REL = 1e-6, 1e-5
PRESSURE_REL = 1e-4


def quick_with_sensors(boundary: str) -> Config:
    """The quick case with the probes above, under `boundary`, with a neighbour skin of 0.1
    (so that the probes search particles that moved since their sort)."""
    text = (ROOT / "configs" / "quick.toml").read_text() + SENSORS
    text = text.replace("[physics]\n", f'[physics]\nboundary = "{boundary}"\n')
    text = text.replace("[time]\n", "[neighbors]\nskin = 0.1\n\n[time]\n")
    return loads_config(text, source="quick+sensors.toml")


def pressure_scale(cfg: Config) -> float:
    """rho0 g H at the bottom of the case's water column [Pa]."""
    return cfg.physics.rho0 * cfg.gravity_magnitude * cfg.water_height


def assert_same_readings(cfg: Config, device: dict[str, float], host: dict[str, float]) -> None:
    """Gauges within HEIGHT_ABS + HEIGHT_REL, sensors within PRESSURE_REL of the reading and
    of the hydrostatic scale (see the module docstring)."""
    assert list(device) == list(host)
    gauges = {g.name for g in cfg.probes.heights}
    for name in host:
        if name in gauges:
            tolerance = HEIGHT_ABS + HEIGHT_REL * abs(host[name])
        else:
            tolerance = PRESSURE_REL * (abs(host[name]) + pressure_scale(cfg))
        assert abs(device[name] - host[name]) <= tolerance, (name, device[name], host[name])


@pytest.mark.parametrize("boundary", ["mdbc", "dbc"])
def test_device_probes_equal_the_host_sampler(on_backend: str, boundary: str) -> None:
    """After 40 steps of the collapsing column (particles have moved since their last sort,
    the skin spares sorts), the device's mass profiles equal the host's within 1e-5 rho0 at
    every sample point, the sensors' Shepard sums within float32 rounding with the same
    count of fluid particles, and every probe value within the tolerances above, read as
    MeasureTool does and on the face; the sensor on the obstacle is dry and reads exactly 0
    on both paths, the others are wet."""
    cfg = quick_with_sensors(boundary)
    sim = Simulation(cfg)
    for _ in range(40):
        sim.step()
    assert sim.moved > 0.0
    probes = DeviceProbes(cfg, sim)
    host = ProbeSampler.for_case(cfg)
    snap = sim.snapshot()

    profiles, sensor_sums = probes.sums()
    fluid_position = snap.position[snap.kind == ParticleKind.FLUID].astype(np.float64)
    for (x, y), profile in zip(host.lines, profiles, strict=True):
        expected = host.mass_profile(fluid_position, x, y)
        assert np.abs(profile - expected).max() <= 1e-5 * cfg.physics.rho0, (x, y)
    assert profiles[0].max() > cfg.physics.rho0 * 0.9  # the column's line is wet

    host_values = host.sample(snap)
    device_values = probes.sample()
    assert_same_readings(cfg, device_values, host_values)
    wet = ["P_floor", "P_wall", "P_inside", "P_floor_face", "P_wall_face"]
    assert all(host_values[name] > 0.1 * pressure_scale(cfg) for name in wet), host_values
    assert device_values["P_dry"] == host_values["P_dry"] == 0.0
    names = [s.name for s in cfg.probes.pressures]
    dry = names.index("P_dry")
    assert sensor_sums[dry, 2] == 0.0  # no fluid particle within 2h
    assert np.all(np.delete(sensor_sums[:, 2], dry) > 0)


def test_fresh_simulation_is_sorted_for_the_probes(on_cpu: str) -> None:
    """At t = 0 no step has sorted the particles into cells yet: the device probes sort them
    (the sort the first step would make, which then makes none) and read the still column as
    the host does; the steps after are those of a simulation never probed, bit for bit."""
    cfg = quick_with_sensors("mdbc")
    probed = Simulation(cfg)
    probes = DeviceProbes(cfg, probed)
    assert_same_readings(cfg, probes.sample(), ProbeSampler.for_case(cfg).sample(probed.snapshot()))
    assert probed.sorts == 1
    plain = Simulation(cfg)
    for _ in range(3):
        probed.step()
        plain.step()
    a, b = probed.snapshot(), plain.snapshot()
    assert probed.sorts == plain.sorts
    assert a.position.tobytes() == b.position.tobytes()
    assert a.density.tobytes() == b.density.tobytes()


def test_run_writes_device_probes_equal_to_host_values(on_cpu: str, tmp_path: Path) -> None:
    """`dambreak run` of the quick case with sensors to t = 0.03 s, probes and .npz snapshots
    every 5 ms: probes.csv has a row at each time, its values (from the device) equal the host
    sampler's on the snapshot of that time within the tolerances above."""
    cfg = quick_with_sensors("mdbc")
    case = tmp_path / "case.toml"
    case.write_text(config_to_toml(cfg))
    out = tmp_path / "run"
    args = build_parser().parse_args(
        [
            "run", str(case), "--backend=cpu", f"--out={out}", "--set=time.end=0.03",
            "--set=time.output_interval=0.005", "--set=output.vtk=false",
            "--set=output.npz=true",
        ]
    )  # fmt: skip
    try:
        assert run_command(args) == 0
    finally:
        conftest._current = None  # run_command started Taichi itself
    times, series = read_probes(out / "probes.csv")
    snapshots = sorted(out.glob("particles_*.npz"))
    assert len(times) == len(snapshots) == 7
    host = ProbeSampler.for_case(cfg)
    for row, path in enumerate(snapshots):
        snap = read_snapshot_npz(path)
        assert times[row] == snap.time
        written = {name: float(values[row]) for name, values in series.items()}
        assert_same_readings(cfg, written, host.sample(snap))


def _probed_run(cfg: Config, max_steps: int) -> tuple[Simulation, list]:
    """`cfg` advanced to t = 0.03 s toward output times every 0.01 s in batches of at most
    `max_steps` fused steps; the probe samples taken on the way, (time, values)."""
    sim = Simulation(cfg)
    probes = DeviceProbes(cfg, sim)
    samples = []
    for target in (0.01, 0.02, 0.03):
        while sim.time < target * (1.0 - 1e-12):
            sim.advance(target, max_steps)
            samples += [(t, probes.readings(sums)) for t, sums in probes.take_sums()]
            if max_steps == 1 and sim.probe_times:
                # the step just taken passed a probe time: its probe row is the probe
                # kernel's reading of the state now, bit for bit
                rows = sim.probe_points.rows.to_numpy()[0, : sim.probe_points.count]
                assert rows.tobytes() == probes.point_sums().tobytes(), sim.time
    return sim, samples


def test_batches_sample_the_probes_without_changing_the_run(on_backend: str) -> None:
    """Probes every 1 ms are sampled inside the batches of fused steps (solver/step_batch.py),
    at the end of the first step at or after each probe time: a batch's probe row equals the
    probe kernel between steps bit for bit; batches of one step and full batches sample at
    the same steps with the same bits and end in the same state; and the probes change
    nothing: the run with probes every 1 ms ends bitwise where the one with probes every
    10 ms does, with the same number of steps."""
    cfg = quick_with_sensors("mdbc")
    every_ms = loads_config(
        config_to_toml(cfg).replace("[output]\n", "[output]\nprobe_interval = 0.001\n"),
        source="quick+sensors.toml",
    )
    assert every_ms.probe_interval == 0.001
    single, single_samples = _probed_run(every_ms, 1)
    batched, batched_samples = _probed_run(every_ms, 64)
    assert len(batched_samples) == 30
    times = [t for t, _ in batched_samples]
    assert times == [t for t, _ in single_samples]
    # each sample is taken by the first step ending at or after its probe time
    assert all(k * 0.001 <= t < k * 0.001 + 2e-3 for k, t in enumerate(times, 1))
    assert [v for _, v in batched_samples] == [v for _, v in single_samples]
    a, b = single.snapshot(), batched.snapshot()
    assert (single.steps, single.time) == (batched.steps, batched.time)
    assert a.position.tobytes() == b.position.tobytes()

    every_10ms = loads_config(
        config_to_toml(cfg).replace("[output]\n", "[output]\nprobe_interval = 0.01\n"),
        source="quick+sensors.toml",
    )
    sparse, sparse_samples = _probed_run(every_10ms, 64)
    assert [t for t, _ in sparse_samples] == [0.01, 0.02, 0.03]  # on the output times
    assert (sparse.steps, sparse.time) == (batched.steps, batched.time)
    assert sparse.snapshot().position.tobytes() == b.position.tobytes()
    assert sparse.snapshot().density.tobytes() == b.density.tobytes()
