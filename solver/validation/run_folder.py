"""A run folder written by `dambreak run`, opened for reading; and a writer of such folders.

A run folder holds config.toml (the resolved config), particles.pvd and particles_NNNNN.vtp
(the snapshots), probes.csv (probe series, if the case has probes) and summary.json (written
when the run ends). `RunFolder` gives access to each without loading more than asked for.

`write_run_folder` builds a folder of the same layout from snapshots made elsewhere, with the
run's own writers (solver.output): tests use it for synthetic runs, and tools can use it to
turn other codes' results into something `dambreak compare` reads.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from solver.config import Config, ConfigError, config_to_toml, load_config
from solver.output.files import atomic_write_text
from solver.output.npz import read_snapshot_npz
from solver.output.probes import ProbeWriter, read_probes
from solver.output.vtk import PvdWriter, read_pvd, read_snapshot, write_snapshot
from solver.snapshot import Snapshot

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["RunFolder", "RunFolderError", "write_run_folder"]

CONFIG_FILE = "config.toml"
PVD_FILE = "particles.pvd"
PROBES_FILE = "probes.csv"
SUMMARY_FILE = "summary.json"


class RunFolderError(Exception):
    """A folder is not a readable run folder; the message names the folder and what is wrong."""


@dataclass
class RunFolder:
    """A run folder opened for reading. Open with `RunFolder.open(path)`.

    Snapshots are listed from particles.pvd (sorted by time) and read one at a time on demand,
    since a whole run does not fit in memory for large cases.
    """

    path: Path
    _snapshots: list[tuple[float, Path]] = field(default_factory=list, repr=False)

    @classmethod
    def open(cls, path: str | Path) -> RunFolder:
        """Open `path`, checking that it is a run folder (raises RunFolderError if not).

        A run folder must hold config.toml. particles.pvd is optional (a run with
        output.vtk = false writes none) but must be readable when present, and every
        snapshot it lists must exist. Without it, particles_NNNNN.npz snapshots are used.
        """
        folder = Path(path)
        if not folder.exists():
            raise RunFolderError(f"{folder}: no such folder")
        if not folder.is_dir():
            raise RunFolderError(f"{folder}: not a folder")
        if not (folder / CONFIG_FILE).is_file():
            raise RunFolderError(
                f"{folder}: not a run folder (no {CONFIG_FILE}; `dambreak run` writes one)"
            )
        snapshots: list[tuple[float, Path]] = []
        pvd = folder / PVD_FILE
        if pvd.is_file():
            try:
                snapshots = read_pvd(pvd)
            except (ValueError, OSError) as exc:
                raise RunFolderError(f"{pvd}: cannot read: {exc}") from None
            except Exception as exc:  # xml.etree.ElementTree.ParseError and the like
                raise RunFolderError(f"{pvd}: not a valid .pvd file: {exc}") from None
            missing = [p.name for _, p in snapshots if not p.is_file()]
            if missing:
                shown = ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else "")
                raise RunFolderError(
                    f"{pvd}: lists {len(missing)} snapshot file(s) that do not exist: {shown}"
                )
        else:
            snapshots = _npz_snapshots(folder)
        snapshots.sort(key=lambda entry: entry[0])
        run = cls(folder, snapshots)
        _ = run.config  # load now, so that a broken config is reported on opening
        return run

    @property
    def name(self) -> str:
        """The folder's name (e.g. "cpu_f64")."""
        return self.path.resolve().name

    @cached_property
    def config_dict(self) -> dict[str, Any]:
        """config.toml as a plain TOML dictionary (for comparing two runs' configs key by key)."""
        file = self.path / CONFIG_FILE
        try:
            return tomllib.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise RunFolderError(f"{file}: cannot read: {exc}") from None

    @cached_property
    def config(self) -> Config:
        """The run's resolved configuration."""
        try:
            return load_config(self.path / CONFIG_FILE)
        except ConfigError as exc:
            raise RunFolderError(f"{self.path}: invalid {CONFIG_FILE}: {exc}") from None

    @cached_property
    def summary(self) -> dict[str, Any]:
        """summary.json, or {} if the run has not finished (or was killed) and wrote none."""
        file = self.path / SUMMARY_FILE
        if not file.is_file():
            return {}
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RunFolderError(f"{file}: cannot read: {exc}") from None
        if not isinstance(data, dict):
            raise RunFolderError(f"{file}: expected a JSON object")
        return data

    @property
    def times(self) -> np.ndarray:
        """Simulated times of the snapshots, ascending [s]."""
        return np.array([t for t, _ in self._snapshots], dtype=np.float64)

    @property
    def snapshot_paths(self) -> list[Path]:
        """The snapshot files, in time order."""
        return [p for _, p in self._snapshots]

    @property
    def snapshot_count(self) -> int:
        """Number of snapshots."""
        return len(self._snapshots)

    def snapshot(self, index: int) -> Snapshot:
        """Read snapshot number `index` (in time order; negative counts from the end)."""
        if not self._snapshots:
            raise RunFolderError(f"{self.path}: the run has no snapshots ({PVD_FILE})")
        try:
            path = self._snapshots[index][1]
        except IndexError:
            raise IndexError(
                f"{self.path}: snapshot {index} asked for, the run has {len(self._snapshots)}"
            ) from None
        try:
            return read_snapshot_npz(path) if path.suffix == ".npz" else read_snapshot(path)
        except (OSError, ValueError, KeyError) as exc:
            raise RunFolderError(f"{path}: cannot read snapshot: {exc}") from None

    def snapshots(self, every: int = 1) -> Iterator[Snapshot]:
        """Read the snapshots one after another (every `every`-th one, the first included)."""
        for index in range(0, len(self._snapshots), max(1, int(every))):
            yield self.snapshot(index)

    @property
    def probes_file(self) -> Path | None:
        """The run's probes.csv, or probes.csv.gz where a stored run keeps it compressed;
        None if it has neither."""
        for name in (PROBES_FILE, PROBES_FILE + ".gz"):
            if (self.path / name).is_file():
                return self.path / name
        return None

    @property
    def has_probes(self) -> bool:
        """Whether the run wrote probes.csv (or keeps it compressed)."""
        return self.probes_file is not None

    def probes(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """probes.csv: times and each probe's series by name; empty if the run has none."""
        file = self.probes_file
        if file is None:
            return np.zeros(0), {}
        try:
            return read_probes(file)
        except (OSError, ValueError) as exc:
            raise RunFolderError(f"{file}: cannot read: {exc}") from None


def _npz_snapshots(folder: Path) -> list[tuple[float, Path]]:
    """(time, path) of the .npz snapshots of a run written with output.npz and no VTK."""
    entries = []
    for path in sorted(folder.glob("particles_*.npz")):
        try:
            with np.load(path) as data:
                entries.append((float(data["time"]), path))
        except (OSError, ValueError, KeyError) as exc:
            raise RunFolderError(f"{path}: cannot read snapshot: {exc}") from None
    return entries


def write_run_folder(
    path: str | Path,
    config: Config,
    snapshots: Sequence[Snapshot],
    *,
    probes: tuple[Sequence[float], Mapping[str, Sequence[float]]] | None = None,
    summary: Mapping[str, Any] | None = None,
) -> Path:
    """Write a run folder at `path` from `snapshots`, with the writers `dambreak run` uses.

    Writes config.toml (`config_to_toml(config)`), particles_NNNNN.vtp and particles.pvd,
    probes.csv when `probes` = (times, {name: series}) is given, and summary.json when
    `summary` is. The folder is created if needed; files already there are overwritten.
    """
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / CONFIG_FILE, config_to_toml(config))
    pvd = PvdWriter(folder / PVD_FILE)
    for number, snap in enumerate(snapshots):
        name = f"particles_{number:05d}.vtp"
        write_snapshot(folder / name, snap)
        pvd.add(snap.time, name)
    if probes is not None:
        times, series = probes
        names = list(series)
        with ProbeWriter(folder / PROBES_FILE, names) as writer:
            for row, time in enumerate(times):
                writer.write(float(time), {name: float(series[name][row]) for name in names})
    if summary is not None:
        atomic_write_text(folder / SUMMARY_FILE, json.dumps(dict(summary), indent=2) + "\n")
    return folder
