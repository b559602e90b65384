"""Tests of the observers' output: atomic files, the output folder, VTK snapshots and the .pvd,
probes.csv (what the probes read is tested in test_probes.py) and the progress line."""

from __future__ import annotations

import gzip
import io
import math
import os
import re
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from solver.output.files import (
    RUN_FILE_PATTERNS,
    OutputExistsError,
    atomic_target,
    atomic_write_bytes,
    atomic_write_text,
    prepare_output_dir,
)
from solver.output.probes import ProbeWriter, read_probes
from solver.output.progress import ProgressBar, format_duration
from solver.output.vtk import PvdWriter, read_pvd, read_snapshot, write_snapshot
from solver.snapshot import Snapshot

REPO_ROOT = Path(__file__).resolve().parents[1]
RHO0 = 1000.0


# --------------------------------------------------------------------------- atomic files


def test_atomic_write_replaces_content_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    atomic_write_text(target, "first\n")
    atomic_write_text(target, "second\n")
    atomic_write_bytes(tmp_path / "blob.bin", b"\x00\x01\xff")
    assert target.read_text() == "second\n"
    assert (tmp_path / "blob.bin").read_bytes() == b"\x00\x01\xff"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blob.bin", "summary.json"]


def test_atomic_write_gets_ordinary_permissions(tmp_path: Path) -> None:
    """mkstemp makes 0600 files; the replaced file must look like one made by open()."""
    atomic_write_text(tmp_path / "a.txt", "x")
    (tmp_path / "b.txt").write_text("x")
    mode_a = stat.S_IMODE((tmp_path / "a.txt").stat().st_mode)
    mode_b = stat.S_IMODE((tmp_path / "b.txt").stat().st_mode)
    assert mode_a == mode_b


def test_failed_atomic_write_keeps_old_file(tmp_path: Path) -> None:
    target = tmp_path / "probes.csv"
    atomic_write_text(target, "old")
    with pytest.raises(RuntimeError), atomic_target(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("writer died")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["probes.csv"]


# --------------------------------------------------------------------------- output folder


def test_prepare_output_dir_creates_missing_and_accepts_empty(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    prepare_output_dir(out, force=False)
    assert out.is_dir()
    prepare_output_dir(out, force=False)  # exists but empty: fine


def test_prepare_output_dir_refuses_results_without_force(tmp_path: Path) -> None:
    (tmp_path / "probes.csv").write_text("time\n")
    with pytest.raises(OutputExistsError) as info:
        prepare_output_dir(tmp_path, force=False)
    message = str(info.value)
    assert str(tmp_path) in message and "--force" in message and "results" in message
    assert (tmp_path / "probes.csv").exists()


def test_prepare_output_dir_force_clears_run_files_only(tmp_path: Path) -> None:
    run_files = [
        "particles_000000.vtp",
        "particles_000123.vtp",
        "particles_000007.npz",
        "particles.pvd",
        "probes.csv",
        "removed.csv",
        "config.toml",
        "summary.json",
        "checkpoint.npz",
        ".particles_000124.vtp.k2j3h4_x.tmp",  # temporary left by a killed run
        ".checkpoint.npz.a8b7c6_d.tmp",
    ]
    kept = ["plot.png", "report.html", "report.md", "my_particles.vtp", "notes.txt"]
    for name in run_files + kept:
        (tmp_path / name).write_text("x")
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "probes.csv").write_text("x")
    prepare_output_dir(tmp_path, force=True)
    remaining = sorted(p.name for p in tmp_path.iterdir())
    assert remaining == sorted([*kept, "figures"])
    assert (tmp_path / "figures" / "probes.csv").exists()
    assert len(RUN_FILE_PATTERNS) == 8


def test_prepare_output_dir_rejects_a_file(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("x")
    with pytest.raises(NotADirectoryError):
        prepare_output_dir(tmp_path / "out", force=True)


# --------------------------------------------------------------------------- VTK snapshots


def _random_snapshot(n: int, dtype: type, seed: int = 0) -> Snapshot:
    rng = np.random.default_rng(seed)
    pressure = rng.normal(size=n).astype(dtype)
    if n >= 2:
        pressure[0] = -0.0  # bitwise equality must keep the sign of zero ...
        pressure[1] = np.nan  # ... and NaN payloads
    return Snapshot(
        time=0.1 + 0.2,
        step=123_456,
        position=rng.random((n, 3)).astype(dtype),
        velocity=rng.normal(size=(n, 3)).astype(dtype),
        density=(RHO0 + rng.normal(size=n)).astype(dtype),
        pressure=pressure,
        kind=rng.integers(0, 3, size=n).astype(np.int32),
        id=rng.permutation(n).astype(np.int32),
    )


def _assert_bitwise_equal(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1, 500])
def test_vtk_round_trip_is_bitwise(tmp_path: Path, dtype: type, n: int) -> None:
    pytest.importorskip("vtkmodules")
    snap = _random_snapshot(n, dtype)
    path = tmp_path / "particles_000001.vtp"
    write_snapshot(path, snap)
    back = read_snapshot(path)
    assert back.time == snap.time and back.step == snap.step
    for name in ("position", "velocity", "density", "pressure", "kind", "id"):
        _assert_bitwise_equal(getattr(back, name), getattr(snap, name))
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


@pytest.mark.parametrize(
    ("compression", "compressor"),
    [("zlib", b"vtkZLibDataCompressor"), ("lz4", b"vtkLZ4DataCompressor"), ("none", None)],
)
def test_vtk_file_layout(tmp_path: Path, compression: str, compressor: bytes | None) -> None:
    """Vertex cells, speed, TIME/STEP field data; binary, raw appended data, compressed with
    the compressor asked for (none: no compressor named); the arrays read back bit for bit."""
    pytest.importorskip("vtkmodules")
    from vtkmodules.util.numpy_support import vtk_to_numpy
    from vtkmodules.vtkIOXML import vtkXMLPolyDataReader

    snap = _random_snapshot(64, np.float32)
    path = tmp_path / "s.vtp"
    write_snapshot(path, snap, compression)
    head = path.read_bytes()[:4000]
    if compressor is not None:
        assert b'compressor="' + compressor + b'"' in head
    else:
        assert b"compressor=" not in head
    assert b'encoding="raw"' in head and b'format="appended"' in head
    back = read_snapshot(path)
    for name in ("position", "velocity", "density", "pressure", "kind", "id"):
        _assert_bitwise_equal(getattr(back, name), getattr(snap, name))

    reader = vtkXMLPolyDataReader()
    reader.SetFileName(str(path))
    reader.Update()
    poly = reader.GetOutput()
    assert poly.GetNumberOfVerts() == 64 and poly.GetNumberOfCells() == 64
    point_data = poly.GetPointData()
    names = {point_data.GetArrayName(i) for i in range(point_data.GetNumberOfArrays())}
    assert names == {"id", "kind", "velocity", "speed", "pressure", "density"}
    assert point_data.GetArray("id").GetDataTypeAsString() == "int"
    speed = vtk_to_numpy(point_data.GetArray("speed"))
    np.testing.assert_allclose(speed, np.linalg.norm(snap.velocity, axis=1), rtol=1e-6)
    field = poly.GetFieldData()
    assert vtk_to_numpy(field.GetArray("TIME"))[0] == snap.time
    assert vtk_to_numpy(field.GetArray("STEP"))[0] == snap.step


def test_bad_snapshot_leaves_existing_file_alone(tmp_path: Path) -> None:
    pytest.importorskip("vtkmodules")
    path = tmp_path / "s.vtp"
    write_snapshot(path, _random_snapshot(10, np.float64))
    before = path.read_bytes()
    bad = _random_snapshot(10, np.float64)
    bad = Snapshot(**{**bad.__dict__, "density": bad.density[:5]})
    with pytest.raises(ValueError, match="density"):
        write_snapshot(path, bad)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["s.vtp"]


def test_reading_a_broken_snapshot_raises(tmp_path: Path) -> None:
    """VTK only logs read errors; read_snapshot must turn them into an exception."""
    pytest.importorskip("vtkmodules")
    path = tmp_path / "broken.vtp"
    path.write_text("<VTKFile this is not a snapshot")
    with pytest.raises(OSError, match="could not read"):
        read_snapshot(path)
    with pytest.raises(FileNotFoundError):
        read_snapshot(tmp_path / "missing.vtp")


def test_output_modules_import_without_vtk() -> None:
    """The GPU box has no vtk: importing the output package must not need it."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('vtk', 'vtkmodules'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import solver.output.vtk, solver.output.probes, solver.output.files\n"
        "import solver.output.progress\n"
        "assert not any(m.startswith(('vtk', 'vtkmodules')) for m in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


# --------------------------------------------------------------------------- .pvd collection


def test_pvd_lists_every_snapshot_with_exact_time(tmp_path: Path) -> None:
    pvd_path = tmp_path / "particles.pvd"
    pvd = PvdWriter(pvd_path)
    assert read_pvd(pvd_path) == []  # valid from the start
    times = [0.0, 0.1 + 0.2, 1.0 / 3.0, 1e-7, 1.5]
    for k, t in enumerate(times):
        pvd.add(t, f"particles_{k:06d}.vtp")
        root = ET.parse(pvd_path).getroot()  # valid after every add
        assert root.tag == "VTKFile" and root.get("type") == "Collection"
        datasets = root.find("Collection").findall("DataSet")
        assert len(datasets) == k + 1
        assert float(datasets[-1].get("timestep")) == t
    listed = read_pvd(pvd_path)
    assert [t for t, _ in listed] == times
    assert [f for _, f in listed] == [tmp_path / f"particles_{k:06d}.vtp" for k in range(5)]
    assert [p.name for p in tmp_path.iterdir()] == ["particles.pvd"]


def test_pvd_entries_point_at_readable_snapshots(tmp_path: Path) -> None:
    pytest.importorskip("vtkmodules")
    pvd = PvdWriter(tmp_path / "particles.pvd")
    for k in range(3):
        snap = _random_snapshot(20, np.float32, seed=k)
        snap = Snapshot(**{**snap.__dict__, "time": 0.01 * k, "step": 10 * k})
        name = f"particles_{k:06d}.vtp"
        write_snapshot(tmp_path / name, snap)
        pvd.add(snap.time, name)
    for k, (time, file) in enumerate(read_pvd(tmp_path / "particles.pvd")):
        back = read_snapshot(file)
        assert back.time == time and back.step == 10 * k


# --------------------------------------------------------------------------- probes


def test_probe_writer_round_trip_is_exact(tmp_path: Path) -> None:
    path = tmp_path / "probes.csv"
    names = ["H1", "P1"]
    rows = [(0.0, 0.1 + 0.2, 1.0 / 3.0), (0.01, 1e-300, -2.5e7), (0.02, float("nan"), 0.0)]
    with ProbeWriter(path, names) as writer:
        for t, h, p in rows:
            writer.write(t, {"H1": h, "P1": np.float64(p)})
            # flushed row by row: a reader sees every finished row at once
            assert len(read_probes(path)[0]) == rows.index((t, h, p)) + 1
        with pytest.raises(KeyError):
            writer.write(0.03, {"H1": 0.0})
    assert path.read_text().splitlines()[0] == "time,H1,P1"
    times, series = read_probes(path)
    assert list(series) == names
    np.testing.assert_array_equal(times, [r[0] for r in rows])
    np.testing.assert_array_equal(series["H1"], [r[1] for r in rows])  # NaN == NaN here
    np.testing.assert_array_equal(series["P1"], [r[2] for r in rows])


def test_read_probes_skips_row_being_written(tmp_path: Path) -> None:
    path = tmp_path / "probes.csv"
    path.write_text("time,H1\n0.0,0.5\n0.01,0.4")
    times, series = read_probes(path)
    assert times.tolist() == [0.0] and series["H1"].tolist() == [0.5]


def test_compressed_probes_read_as_the_csv(tmp_path: Path) -> None:
    """A stored run keeps probes.csv gzipped (validation/runs): read_probes reads the .gz
    to the same values, and a run folder holding only probes.csv.gz has those probes."""
    from solver.config import load_config
    from solver.validation.run_folder import RunFolder, write_run_folder

    rows = [(0.0, 0.25, 10.0), (0.001, 0.5, -3.5), (0.002, math.nan, 1e-7)]
    cfg = load_config(Path(__file__).resolve().parents[1] / "configs" / "quick.toml")
    folder = tmp_path / "run"
    times = np.array([r[0] for r in rows])
    series = {"H1": np.array([r[1] for r in rows]), "P1": np.array([r[2] for r in rows])}
    write_run_folder(folder, cfg, [], probes=(times, series))
    plain = folder / "probes.csv"
    expected = read_probes(plain)
    packed = folder / "probes.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    for got in (read_probes(packed), RunFolder.open(folder).probes()):
        np.testing.assert_array_equal(got[0], expected[0])
        assert list(got[1]) == ["H1", "P1"]
        for name in got[1]:
            np.testing.assert_array_equal(got[1][name], expected[1][name])
    assert RunFolder.open(folder).has_probes


# --------------------------------------------------------------------------- progress


class FakeClock:
    """Wall clock that advances `tick` seconds each time it is read."""

    def __init__(self, tick: float) -> None:
        self.now = 100.0
        self.tick = tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


class TtyStream(io.StringIO):
    def isatty(self) -> bool:
        return True


LINE = re.compile(
    r"^\[(?P<bar>[#-]{24})\] +(?P<pct>\d+\.\d)% t (?P<t>\d+\.\d{4})/1\.0000 s"
    r"  step (?P<step>\d+)  dt (?P<dt>\d\.\d\de[-+]\d\d) s"
    r"  (?P<rate>\S+) particle-steps/s  ETA (?P<eta>\d+:\d\d:\d\d|--:--:--)$"
)


def test_progress_log_prints_every_tenth_with_rate_and_eta() -> None:
    stream = io.StringIO()
    bar = ProgressBar(1.0, stream=stream, min_interval=0.5, clock=FakeClock(1.0))
    for step in range(1, 101):  # 0.01 simulated s per step, 1 wall s per step
        bar.update(step * 0.01, step, 0.01, particles=1000)
    bar.close()
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert 10 <= len(lines) <= 11
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    assert [float(m["t"]) for m in parsed] == sorted(float(m["t"]) for m in parsed)
    last = parsed[-1]
    assert last["bar"] == "#" * 24 and last["pct"] == "100.0" and last["step"] == "100"
    assert last["eta"] == "0:00:00"
    # 1000 particles x 1 step per wall second, measured between printed lines.
    assert float(parsed[3]["rate"]) == pytest.approx(1000.0)
    # Half-way: 0.5 simulated s left at 0.01 s per wall second -> 50 s.
    middle = next(m for m in parsed if m["t"] == "0.5000")
    assert middle["eta"] == "0:00:50" and middle["bar"] == "#" * 12 + "-" * 12


def test_progress_tty_rewrites_one_line_throttled() -> None:
    stream = TtyStream()
    bar = ProgressBar(1.0, stream=stream, min_interval=0.5, clock=FakeClock(0.1))
    for step in range(1, 51):  # 0.1 wall s per update, 5 s in all, half the run
        bar.update(step * 0.01, step, 1e-4, particles=10)
    text = stream.getvalue()
    assert "\n" not in text
    redraws = text.split("\r")[1:]
    assert 8 <= len(redraws) <= 12  # about one per 0.5 s, not 50
    bar.close()
    assert stream.getvalue().endswith("\n")
    final = stream.getvalue().rstrip("\n").split("\r")[-1].rstrip()
    assert LINE.match(final) and " step 50 " in final  # close shows the latest state


def test_progress_close_shows_unprinted_final_state() -> None:
    stream = io.StringIO()
    bar = ProgressBar(1.0, stream=stream, min_interval=10.0, clock=FakeClock(0.01))
    bar.update(0.01, 1, 1e-3, 5)
    bar.update(0.02, 2, 1e-3, 5)  # throttled
    bar.close()
    bar.close()  # idempotent
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and " step 2 " in lines[-1]


def test_format_duration() -> None:
    assert format_duration(0) == "0:00:00"
    assert format_duration(3725.4) == "1:02:05"
    assert format_duration(math.inf) == "--:--:--"


def test_atomic_target_with_empty_body_makes_empty_file(tmp_path: Path) -> None:
    with atomic_target(tmp_path / "x.txt"):
        pass
    assert os.listdir(tmp_path) == ["x.txt"]
    assert (tmp_path / "x.txt").read_bytes() == b""
