"""Particle snapshots as VTK XML PolyData (.vtp) files, and the .pvd collection that lists them.

Each snapshot is one .vtp file: points at the particle positions, one VTK_VERTEX cell per point
(so ParaView draws them without a Glyph filter), and point data id, kind, velocity, speed,
pressure and density. The simulated time and step number travel as field data TIME and STEP
(TIME is the name ParaView and VisIt look for). Files are binary, with the appended block
stored raw rather than base64, and compressed as `output.vtk_compression` says: LZ4 by
default, which on seed-case snapshots (263,784 particles) wrote 6 to 10 times as fast as zlib
for files 1.3 to 1.9 times as large (docs/performance.md, "Output"); zlib for the smallest
files; or none. ParaView reads all three. `read_snapshot` gives back the arrays bit for bit.

The .pvd file (ParaView's "Collection" format, see the VTK file-format documentation,
https://docs.vtk.org/en/latest/design_documents/VTKFileFormats.html) lists the snapshots with
their times; ParaView opens it as one time series.

VTK is a large package that some machines (the GPU box) lack, so it is imported inside the
functions that need it: importing this module never requires it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from solver.output.files import atomic_target, atomic_write_text
from solver.snapshot import Snapshot

#: Point-data arrays written for every particle, in file order.
POINT_ARRAYS: tuple[str, ...] = ("id", "kind", "velocity", "speed", "pressure", "density")

#: `output.vtk_compression` choices, the default first: VTK's compressors (zlib at VTK's
#: default level, 5).
VTK_COMPRESSIONS: tuple[str, ...] = ("lz4", "zlib", "none")


class _ErrorCatcher:
    """Collects VTK ErrorEvent messages from one algorithm so they can be raised in Python.

    VTK readers and writers report problems through the output window rather than by raising;
    without this, a truncated file would read as an empty data set.
    """

    def __init__(self) -> None:
        self.messages: list[str] = []

    def __call__(self, caller: Any, event: str, call_data: Any = None) -> None:
        self.messages.append(str(call_data).strip() if call_data is not None else event)

    def attach(self, algorithm: Any) -> None:
        """Register on `algorithm`'s ErrorEvent, with the message string as call data."""
        from vtkmodules.vtkCommonCore import vtkCommand

        algorithm.AddObserver(vtkCommand.ErrorEvent, _with_string_call_data(self))


def _with_string_call_data(function: Any) -> Any:
    """Wrap `function` so that VTK passes the event's message (a string) as call data."""
    from vtkmodules.util.misc import calldata_type
    from vtkmodules.util.vtkConstants import VTK_STRING

    @calldata_type(VTK_STRING)
    def wrapper(caller: Any, event: str, call_data: Any) -> None:
        function(caller, event, call_data)

    return wrapper


def _to_vtk(array: np.ndarray, name: str) -> Any:
    """A deep-copied VTK array of `array` (1 or 2 dimensional) called `name`, same dtype."""
    from vtkmodules.util.numpy_support import numpy_to_vtk

    vtk_array = numpy_to_vtk(np.ascontiguousarray(array), deep=True)
    vtk_array.SetName(name)
    return vtk_array


def _check_shapes(snap: Snapshot) -> int:
    """Number of particles in `snap`, after checking that all its arrays agree on it."""
    n = snap.count
    expected = {
        "position": (n, 3),
        "velocity": (n, 3),
        "density": (n,),
        "pressure": (n,),
        "kind": (n,),
        "id": (n,),
    }
    for name, shape in expected.items():
        actual = np.shape(getattr(snap, name))
        if actual != shape:
            raise ValueError(f"snapshot array {name!r} has shape {actual}, expected {shape}")
    return n


def snapshot_to_polydata(snap: Snapshot) -> Any:
    """Build the vtkPolyData of `snap`: points, one vertex cell per point, point and field data."""
    from vtkmodules.util.numpy_support import numpy_to_vtkIdTypeArray
    from vtkmodules.vtkCommonCore import vtkIdTypeArray, vtkPoints
    from vtkmodules.vtkCommonDataModel import vtkCellArray, vtkPolyData

    n = _check_shapes(snap)
    poly = vtkPolyData()

    points = vtkPoints()
    points.SetData(_to_vtk(np.asarray(snap.position), "Points"))
    poly.SetPoints(points)

    # One VTK_VERTEX per point: offsets 0..n, connectivity 0..n-1.
    id_dtype = np.int64 if vtkIdTypeArray().GetDataTypeSize() == 8 else np.int32
    offsets = numpy_to_vtkIdTypeArray(np.arange(n + 1, dtype=id_dtype), deep=True)
    connectivity = numpy_to_vtkIdTypeArray(np.arange(n, dtype=id_dtype), deep=True)
    vertices = vtkCellArray()
    vertices.SetData(offsets, connectivity)
    poly.SetVerts(vertices)

    velocity = np.asarray(snap.velocity)
    speed = np.sqrt(np.sum(velocity * velocity, axis=1, dtype=velocity.dtype))
    point_data = poly.GetPointData()
    columns = {
        "id": np.asarray(snap.id, dtype=np.int32),
        "kind": np.asarray(snap.kind, dtype=np.int32),
        "velocity": velocity,
        "speed": speed,
        "pressure": np.asarray(snap.pressure),
        "density": np.asarray(snap.density),
    }
    for name in POINT_ARRAYS:
        point_data.AddArray(_to_vtk(columns[name], name))

    field_data = poly.GetFieldData()
    field_data.AddArray(_to_vtk(np.array([float(snap.time)], dtype=np.float64), "TIME"))
    field_data.AddArray(_to_vtk(np.array([int(snap.step)], dtype=np.int64), "STEP"))
    return poly


def write_snapshot(path: Path, snap: Snapshot, compression: str = VTK_COMPRESSIONS[0]) -> None:
    """Write `snap` to `path` as a binary .vtp file, atomically, compressed with `compression`
    (one of VTK_COMPRESSIONS).

    The file is written under a temporary name in the same folder and renamed into place, so a
    viewer that reloads while the run writes never sees half a file. Positions keep their dtype
    (float32 or float64); id and kind are Int32.
    """
    from vtkmodules.vtkIOXML import vtkXMLPolyDataWriter

    if compression not in VTK_COMPRESSIONS:
        raise ValueError(f"VTK compression {compression!r}: not one of {VTK_COMPRESSIONS}")
    poly = snapshot_to_polydata(snap)
    writer = vtkXMLPolyDataWriter()
    errors = _ErrorCatcher()
    errors.attach(writer)
    writer.SetInputData(poly)
    writer.SetDataModeToAppended()
    writer.EncodeAppendedDataOff()
    {
        "lz4": writer.SetCompressorTypeToLZ4,
        "zlib": writer.SetCompressorTypeToZLib,
        "none": writer.SetCompressorTypeToNone,
    }[compression]()
    writer.SetHeaderTypeToUInt64()  # block sizes beyond 4 GiB stay representable
    with atomic_target(Path(path)) as tmp:
        writer.SetFileName(str(tmp))
        ok = writer.Write()
        if ok != 1 or errors.messages:
            detail = "; ".join(errors.messages) or "vtkXMLPolyDataWriter.Write failed"
            raise OSError(f"could not write {path}: {detail}")


def _vtk_to_numpy(vtk_array: Any) -> np.ndarray:
    """A numpy copy (independent of VTK's memory) of a VTK data array."""
    from vtkmodules.util.numpy_support import vtk_to_numpy

    return np.array(vtk_to_numpy(vtk_array), copy=True)


def read_snapshot(path: Path) -> Snapshot:
    """Read a .vtp file written by `write_snapshot` back into a Snapshot, bit for bit."""
    from vtkmodules.vtkIOXML import vtkXMLPolyDataReader

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no snapshot file {path}")
    reader = vtkXMLPolyDataReader()
    errors = _ErrorCatcher()
    errors.attach(reader)
    reader.SetFileName(str(path))
    reader.Update()
    if errors.messages:
        raise OSError(f"could not read {path}: {'; '.join(errors.messages)}")
    poly = reader.GetOutput()
    n = poly.GetNumberOfPoints()

    def point_array(name: str, components: int) -> np.ndarray:
        array = poly.GetPointData().GetArray(name)
        if array is None:
            raise ValueError(f"{path}: point-data array {name!r} is missing")
        values = _vtk_to_numpy(array)
        return values.reshape((n, components)) if components > 1 else values.reshape(n)

    def field_value(name: str) -> Any:
        array = poly.GetFieldData().GetAbstractArray(name)
        if array is None:
            raise ValueError(f"{path}: field-data array {name!r} is missing")
        return _vtk_to_numpy(array)[0]

    vtk_points = poly.GetPoints()
    if vtk_points is None:  # an empty data set may come back without a points object
        position = np.zeros((0, 3), dtype=point_array("velocity", 3).dtype)
    else:
        position = _vtk_to_numpy(vtk_points.GetData()).reshape((n, 3))

    return Snapshot(
        time=float(field_value("TIME")),
        step=int(field_value("STEP")),
        position=position,
        velocity=point_array("velocity", 3),
        density=point_array("density", 1),
        pressure=point_array("pressure", 1),
        kind=point_array("kind", 1).astype(np.int32, copy=False),
        id=point_array("id", 1).astype(np.int32, copy=False),
    )


class PvdWriter:
    """Keeps a ParaView .pvd collection up to date as snapshots are written.

    After every `add` the whole file is rewritten atomically, so the .pvd on disk is a valid,
    complete collection at every moment, even if the run is killed. The file exists (empty
    collection) from construction on. Times are written with repr(), which round-trips a
    Python float exactly.
    """

    def __init__(self, path: Path, entries: Iterable[tuple[float, str]] = ()) -> None:
        """Start the collection at `path`; `entries` (time, file name) pre-fills it (resume)."""
        self.path = Path(path)
        self._entries: list[tuple[float, str]] = [(float(t), str(f)) for t, f in entries]
        self._write()

    @property
    def entries(self) -> list[tuple[float, str]]:
        """The (time, file name) pairs listed so far, in the order they were added."""
        return list(self._entries)

    def add(self, time: float, filename: str) -> None:
        """List `filename` (relative to the .pvd's folder) at simulated `time`; rewrite the file."""
        write_pvd(self.path, self.record(time, filename))

    def record(self, time: float, filename: str) -> tuple[tuple[float, str], ...]:
        """List `filename` at `time` and return the entries, for a caller that writes the file
        itself with `write_pvd`, later (the background writer, solver/output/writer.py: the
        document, which grows with the run, is then also built off the time loop)."""
        self._entries.append((float(time), str(filename)))
        return tuple(self._entries)

    def _write(self) -> None:
        """Rewrite the whole .pvd file atomically from the entries."""
        write_pvd(self.path, self._entries)


def write_pvd(path: Path, entries: Iterable[tuple[float, str]]) -> None:
    """Write the .pvd collection listing `entries` (time, file name) to `path`, atomically."""
    root = ET.Element(
        "VTKFile", {"type": "Collection", "version": "0.1", "byte_order": "LittleEndian"}
    )
    collection = ET.SubElement(root, "Collection")
    for time, filename in entries:
        ET.SubElement(
            collection,
            "DataSet",
            {"timestep": repr(time), "group": "", "part": "0", "file": filename},
        )
    ET.indent(root, space="  ")
    atomic_write_text(
        path, '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
    )


def read_pvd(path: Path) -> list[tuple[float, Path]]:
    """The (time, file) pairs of a .pvd collection, files resolved relative to the .pvd's folder."""
    path = Path(path)
    root = ET.parse(path).getroot()
    if root.tag != "VTKFile" or root.get("type") != "Collection":
        raise ValueError(f"{path} is not a VTK Collection (.pvd) file")
    result: list[tuple[float, Path]] = []
    for dataset in root.iter("DataSet"):
        timestep = dataset.get("timestep")
        filename = dataset.get("file")
        if timestep is None or filename is None:
            raise ValueError(f"{path}: DataSet entry without timestep or file")
        result.append((float(timestep), path.parent / filename))
    return result
