"""A case file (TOML) becomes a validated, frozen `Config`; every default and check lives here.

The schema is one table, `SCHEMA`: each key's section, type, unit, default, allowed range or
choices and a one-line meaning. Validation reads it, the dataclass defaults are taken from it
and scripts/gen_config_docs.py renders it into docs/configuration.md, so the three cannot drift.

TOML layout::

    [case] name                     [particles] dp
    [domain] min max                [tank] min max wall_layers open_top
    [[fluid]] min max | mesh scale rotate translate
    [[obstacle]] min max hollow | mesh scale rotate translate hollow
    [terrain] mesh scale rotate translate
    [physics] ...   [time] ...      [output] ...
    [[probes.height]] name x y surface    [[probes.pressure]] name position

Coordinates are metres with z up. Physical defaults follow DualSPHysics' CaseDambreak and the
OpenFPM SPH example (see /work/shared/reference/cases.md, section 1).
"""

from __future__ import annotations

import difflib
import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from solver.lattice import fitted_axis, fluid_index_range, surface_gap
from solver.mesh import MESH_FORMATS, MeshError, Surface, load_surface
from solver.mesh_particles import tank_axis, terrain_columns
from solver.output.npz import NPZ_COMPRESSIONS
from solver.output.probes import GAUGE_SURFACES, SENSOR_READINGS
from solver.output.sensor_points import sample_point
from solver.output.vtk import VTK_COMPRESSIONS
from solver.physics.smoothing_kernels import KERNEL_NAMES
from solver.toml_lines import key_line

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "ARRAY_SECTIONS",
    "CROSS_CHECKS",
    "QUICK_CONFIG",
    "REQUIRED",
    "SCHEMA",
    "SECTIONS",
    "Box",
    "Config",
    "ConfigError",
    "FluidBlock",
    "HeightGauge",
    "KeySpec",
    "MeshConfig",
    "ObstacleConfig",
    "NeighborsConfig",
    "OutputConfig",
    "PhysicsConfig",
    "PressureSensor",
    "ProbesConfig",
    "TankConfig",
    "TimeConfig",
    "config_to_toml",
    "default_domain",
    "geometric_tolerance",
    "load_config",
    "loads_config",
    "wall_extent",
]

Vec3 = tuple[float, float, float]

QUICK_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "quick.toml"
"""The case run when no file is given."""

BUILTIN_QUICK_SOURCE = "<built-in quick>"
"""`Config.source` of the configuration loaded when no path is given."""


class ConfigError(Exception):
    """A case file or a `--set` override is wrong; the message names file, key, value and rule."""


# --------------------------------------------------------------------------------------------
# The schema: one table that validation, dataclass defaults and the docs generator all read.
# --------------------------------------------------------------------------------------------


class _Required:
    """Marker default of a key that must be given."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
"""Default of a key without a default."""


@dataclass(frozen=True)
class KeySpec:
    """Metadata of one configuration key.

    `kind` is one of "float", "int", "bool", "str", "path", "vec3" ("path": a file, relative to
    the case file's folder). `default` is a value, `REQUIRED`,
    or None for a key whose default is derived from other keys (then `auto` says how).
    Numeric bounds are inclusive unless `lo_open`/`hi_open`.
    """

    section: str
    key: str
    kind: str
    unit: str
    default: Any
    doc: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    choices: tuple[str, ...] | None = None
    auto: str = ""

    @property
    def path(self) -> str:
        """The dotted name, e.g. "physics.kernel"."""
        return f"{self.section}.{self.key}"

    def allowed_text(self) -> str:
        """The allowed values in words, for messages and docs."""
        if self.choices is not None:
            return "one of " + ", ".join(f'"{c}"' for c in self.choices)
        if self.kind == "bool":
            return "true or false"
        if self.kind == "str":
            return "letters, digits, _ . -"
        if self.kind == "path":
            return (
                "a file path (" + ", ".join("." + f for f in MESH_FORMATS) + "), relative to "
                "the case file's folder"
            )
        bounds = self._bounds_text()
        parts = [bounds] if bounds else []
        if self.kind == "vec3":
            parts.insert(0, "3 numbers")
        elif self.kind == "int":
            parts.insert(0, "integer")
        elif not parts:
            parts.append("any number")
        return ", ".join(parts)

    def expected_text(self) -> str:
        """What a value must be, as messages say it ("a number in (0, 1]", "an integer >= 1")."""
        if self.choices is not None or self.kind == "bool":
            return self.allowed_text()
        if self.kind == "str":
            return "a string of letters, digits, _ . -"
        if self.kind == "path":
            return "a file path (a string)"
        noun = {"float": "a number", "int": "an integer", "vec3": "a list of 3 numbers"}[self.kind]
        bounds = self._bounds_text()
        if not bounds:
            return noun
        return f"{noun} in {bounds}" if bounds[0] in "([" else f"{noun} {bounds}"

    def _bounds_text(self) -> str:
        """The numeric bounds: "[1, 8]", "(0, 1]", "> 0", ">= 1", or "" when unbounded."""
        if self.lo is not None and self.hi is not None:
            left = "(" if self.lo_open else "["
            right = ")" if self.hi_open else "]"
            return f"{left}{_num(self.lo)}, {_num(self.hi)}{right}"
        if self.lo is not None:
            return (">= " if not self.lo_open else "> ") + _num(self.lo)
        if self.hi is not None:
            return ("<= " if not self.hi_open else "< ") + _num(self.hi)
        return ""


def _num(x: float) -> str:
    """A bound written compactly (7.0 -> "7", 1e-05 -> "1e-05")."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


SECTIONS: dict[str, str] = {
    "case": "What the case is called.",
    "particles": "Particle spacing and the water's lattice.",
    "domain": "The computational box; particles that leave it are removed (and counted).",
    "tank": "The tank: an axis-aligned box whose inner faces carry the innermost wall layer.",
    "fluid": "Blocks of water at rest at t = 0, each a box (min, max) or a closed surface mesh "
    "(mesh, placed as an obstacle's) whose inside the fluid lattice fills (array of tables, at "
    "least one).",
    "obstacle": "Fixed solids inside the tank, each a box (min, max) or a closed surface mesh "
    "(mesh: an STL, OBJ, PLY or OFF file, placed by scale, then rotate, then translate) "
    "(array of tables, any number).",
    "terrain": "An uneven floor from a surface mesh (e.g. a valley from a GIS tool): a height "
    "field that every vertical line through the tank crosses once, carried by boundary "
    "particles in tank.wall_layers layers below it (kind WALL); the water stays above it.",
    "physics": "Weakly compressible SPH model.",
    "neighbors": "Neighbour search.",
    "time": "Time integration and output times.",
    "output": "What is written.",
    "probes.height": "Water-height gauges: vertical lines at (x, y) (array of tables).",
    "probes.pressure": "Pressure sensors at points (array of tables).",
}
"""Every section, in file order, with its meaning."""

ARRAY_SECTIONS = frozenset({"fluid", "obstacle", "probes.height", "probes.pressure"})
"""Sections written as arrays of tables ([[fluid]]); the others are plain tables."""

# fmt: off
SCHEMA: tuple[KeySpec, ...] = (
    KeySpec("case", "name", "str", "-", None, "Case name; outputs go to outputs/<name>/.",
            auto="the file's stem"),
    KeySpec("particles", "dp", "float", "m", REQUIRED, "Initial particle spacing.",
            lo=0.0, lo_open=True),
    KeySpec("particles", "fluid_lattice", "str", "-", "dp",
            "Where the water's particles sit. dp: on the lattice tank.min + (i + 1/2) dp "
            "(mdbc; tank.min + i dp under dbc), as DualSPHysics and OpenFPM place them, which "
            "builds a block whose size is not a whole number of dp up to dp/2 longer or "
            "shorter. fitted: each axis of the one box [[fluid]] block (under dbc cut to dp/2 "
            "from the wall layers) holds round(size / dp) layers spaced evenly across it, so "
            "the water has exactly the block's size and mass (no terrain or mesh obstacle; the "
            "fluid particle mass is rho0 times the fitted cell).",
            choices=("dp", "fitted")),
    KeySpec("domain", "min", "vec3", "m", None, "Lower corner of the domain.",
            auto="tank min - (wall_layers dp + 2H)"),
    KeySpec("domain", "max", "vec3", "m", None, "Upper corner of the domain.",
            auto="tank max + (wall_layers dp + 2H); z also + tank height if open_top"),
    KeySpec("tank", "min", "vec3", "m", REQUIRED, "Lower corner of the tank's inner faces."),
    KeySpec("tank", "max", "vec3", "m", REQUIRED, "Upper corner of the tank's inner faces."),
    KeySpec("tank", "wall_layers", "int", "-", 3,
            "Layers of wall particles, the first on the inner faces; 3 cover the 2H support.",
            lo=1, hi=8),
    KeySpec("tank", "open_top", "bool", "-", True, "No lid: side walls end at tank max z."),
    KeySpec("fluid", "min", "vec3", "m", None, "Lower corner of a box of water.",
            auto="required unless mesh is given"),
    KeySpec("fluid", "max", "vec3", "m", None, "Upper corner of a box of water.",
            auto="required unless mesh is given"),
    KeySpec("fluid", "mesh", "path", "-", None,
            "A closed (watertight) surface mesh instead of a box: the fluid lattice points "
            "strictly inside it become water (docs/meshes.md).", auto="none: a box"),
    KeySpec("fluid", "scale", "vec3", "-", (1.0, 1.0, 1.0),
            "Scale factors of the mesh along x, y, z (first).", lo=0.0, lo_open=True),
    KeySpec("fluid", "rotate", "vec3", "deg", (0.0, 0.0, 0.0),
            "Rotation of the scaled mesh about the x, then the y, then the z axis."),
    KeySpec("fluid", "translate", "vec3", "m", (0.0, 0.0, 0.0),
            "Move of the rotated mesh (last)."),
    KeySpec("obstacle", "min", "vec3", "m", None, "Lower corner of a box obstacle.",
            auto="required unless mesh is given"),
    KeySpec("obstacle", "max", "vec3", "m", None, "Upper corner of a box obstacle.",
            auto="required unless mesh is given"),
    KeySpec("obstacle", "hollow", "bool", "-", False,
            "A shell tank.wall_layers thick instead of a solid."),
    KeySpec("obstacle", "mesh", "path", "-", None,
            "A closed (watertight) surface mesh instead of a box: the lattice points inside it "
            "become the obstacle's particles (docs/meshes.md).", auto="none: a box"),
    KeySpec("obstacle", "scale", "vec3", "-", (1.0, 1.0, 1.0),
            "Scale factors of the mesh along x, y, z (first; 0.001 turns millimetres into "
            "metres).", lo=0.0, lo_open=True),
    KeySpec("obstacle", "rotate", "vec3", "deg", (0.0, 0.0, 0.0),
            "Rotation of the scaled mesh about the x, then the y, then the z axis."),
    KeySpec("obstacle", "translate", "vec3", "m", (0.0, 0.0, 0.0),
            "Move of the rotated mesh (last)."),
    KeySpec("terrain", "mesh", "path", "-", None,
            "The terrain surface, open (a closed surface is crossed twice by every line).",
            auto="none: the flat tank floor"),
    KeySpec("terrain", "scale", "vec3", "-", (1.0, 1.0, 1.0),
            "Scale factors of the mesh along x, y, z (first).", lo=0.0, lo_open=True),
    KeySpec("terrain", "rotate", "vec3", "deg", (0.0, 0.0, 0.0),
            "Rotation of the scaled mesh about the x, then the y, then the z axis."),
    KeySpec("terrain", "translate", "vec3", "m", (0.0, 0.0, 0.0),
            "Move of the rotated mesh (last)."),
    KeySpec("physics", "rho0", "float", "kg/m^3", 1000.0, "Reference density.",
            lo=0.0, lo_open=True),
    KeySpec("physics", "gravity", "vec3", "m/s^2", (0.0, 0.0, -9.81), "Gravity vector."),
    KeySpec("physics", "coefsound", "float", "-", 20.0,
            "c0 = coefsound * sqrt(|g| * h_swl).", lo=0.0, lo_open=True),
    KeySpec("physics", "h_swl", "float", "m", None, "Still-water height used for c0.",
            lo=0.0, lo_open=True,
            auto="top of the highest fluid block (box or placed mesh) - tank floor"),
    KeySpec("physics", "gamma", "float", "-", 7.0,
            "Tait exponent: p = B ((rho/rho0)^gamma - 1).", lo=1.0),
    KeySpec("physics", "h_over_dp", "float", "-", math.sqrt(3.0),
            "Smoothing length H = h_over_dp * dp (kernel support 2H).", lo=1.0, hi=3.0),
    KeySpec("physics", "kernel", "str", "-", "cubic_spline", "Smoothing kernel.",
            choices=tuple(KERNEL_NAMES)),
    KeySpec("physics", "boundary", "str", "-", "mdbc",
            "Solid boundaries: modified dynamic boundary particles (mdbc: the wall surface lies "
            "dp/2 beyond the innermost particle layer, density extrapolated from the fluid, "
            "English et al. 2022) or dynamic boundary particles (dbc: the innermost layer on "
            "the surface, density from the continuity equation, Crespo et al. 2007).",
            choices=("mdbc", "dbc")),
    KeySpec("physics", "viscosity", "str", "-", "artificial",
            "Viscous term: Monaghan's artificial viscosity (artificial, strength visc_alpha) or "
            "laminar viscosity nu with the sub-particle-scale turbulence closure (laminar_sps: "
            "Smagorinsky eddy viscosity, Dalrymple and Rogers 2006, as DualSPHysics).",
            choices=("artificial", "laminar_sps")),
    KeySpec("physics", "visc_alpha", "float", "-", 0.1,
            "Monaghan artificial viscosity alpha (viscosity = artificial).", lo=0.0, hi=1.0),
    KeySpec("physics", "nu", "float", "m^2/s", 1e-6,
            "Kinematic viscosity of the laminar term (viscosity = laminar_sps); 1e-6 is water.",
            lo=0.0),
    KeySpec("physics", "density_diffusion", "str", "-", "fourtakas",
            "Density diffusion (delta-SPH) term.", choices=("none", "molteni", "fourtakas")),
    KeySpec("physics", "delta", "float", "-", 0.1,
            "Delta-SPH coefficient (0.1 is the usual value; 0.2 to 0.5 ran stably on SPHERIC "
            "test 2 at dp 0.04, 1.0 did not).",
            lo=0.0, hi=1.0),
    KeySpec("physics", "rho_min", "float", "kg/m^3", 700.0,
            "Particles below this density are removed.", lo=0.0, lo_open=True),
    KeySpec("physics", "rho_max", "float", "kg/m^3", 1300.0,
            "Particles above this density are removed.", lo=0.0, lo_open=True),
    KeySpec("physics", "max_removed", "float", "-", 0.05,
            "Stop the run (exit 3) once more than this share of the fluid particles has been "
            "removed.", lo=0.0, hi=1.0),
    KeySpec("physics", "precision", "str", "-", "f32", "Floating-point precision on the device.",
            choices=("f32", "f64")),
    KeySpec("time", "end", "float", "s", 1.5, "Simulated time.", lo=0.0, lo_open=True),
    KeySpec("time", "output_interval", "float", "s", 0.01, "Time between snapshots.",
            lo=0.0, lo_open=True),
    KeySpec("time", "integrator", "str", "-", "verlet", "Time integration scheme.",
            choices=("verlet", "symplectic")),
    KeySpec("time", "verlet_euler_every", "int", "-", 40,
            "Verlet: one Euler step every this many steps.", lo=1),
    KeySpec("time", "cfl", "float", "-", 0.2, "CFL number of the variable time step.",
            lo=0.0, hi=1.0, lo_open=True),
    KeySpec("time", "dt_min", "float", "s", 1e-5, "Smallest time step allowed.",
            lo=0.0, lo_open=True),
    KeySpec("neighbors", "skin", "float", "-", None,
            "Extra search distance, as a fraction of the support 2H: particles are re-sorted "
            "into cells only when one may have moved farther than this since the last sort "
            "(0: sort every step). The symplectic scheme also sorts before its mid-step "
            "interaction when its half step may use up the skin.",
            lo=0.0, hi=1.0, auto="0.1 on GPU backends; on the cpu backend 0.05 with neighbour "
            "lists (neighbors.lists), else 0"),
    KeySpec("neighbors", "cells_per_support", "int", "-", None,
            "Cells of the neighbour grid per kernel support 2H: smaller cells mean fewer "
            "candidates to test but more rows of cells to visit. It changes only the order in "
            "which neighbours are summed (the last bits of the results).",
            lo=1, hi=4, auto="2 on the cpu backend, 3 on GPU backends"),
    KeySpec("neighbors", "x_refinement", "int", "-", None,
            "How many times thinner than across the cells of the neighbour grid are along x: "
            "each row of cells is then cut closer to the search sphere, so fewer candidates "
            "are tested in the same rows, for that many times the cells. It changes only the "
            "order in which neighbours are summed (the last bits of the results).",
            lo=1, hi=8, auto="1 on the cpu backend, 2 on GPU backends"),
    KeySpec("neighbors", "pair_halves", "bool", "-", True,
            "On the cpu backend, in one process and with the artificial viscosity: take each "
            "fluid pair once and add its share to both particles, half the pair arithmetic "
            "(a quarter faster a step at SPHERIC test 2 on 2 cores). It changes only the order "
            "in which the sums are taken "
            "(the last bits of the results); false gathers every pair from both sides, as GPUs "
            "and several processes do, so that a one-process cpu run equals a several-process "
            "one bit for bit."),
    KeySpec("neighbors", "lists", "bool", "-", True,
            "With the pair halves (cpu): keep each particle's neighbour candidates in a list "
            "found at each sort and read it until the next, instead of walking the cells every "
            "step; about 1.3 kB a particle. Needs a skin (the cpu's default is then 0.05). The "
            "same sums in the same order as the walk at the same skin."),
    KeySpec("output", "vtk", "bool", "-", True, "Write particles_NNNNN.vtp snapshots."),
    KeySpec("output", "npz", "bool", "-", False,
            "Also write particles_NNNNN.npz snapshots (numpy; for machines without vtk)."),
    KeySpec("output", "vtk_compression", "str", "-", VTK_COMPRESSIONS[0],
            "Compressor of the .vtp files: lz4 writes fastest, zlib makes the smallest files "
            "(1.3 to 1.9 times smaller, 6 to 10 times slower to write on the seed case), none "
            "the largest.",
            choices=VTK_COMPRESSIONS),
    KeySpec("output", "npz_compression", "str", "-", NPZ_COMPRESSIONS[0],
            "Compression of the .npz files: none (stored, as numpy's savez: fastest to write) or "
            "deflate (zip's, level 1: 1.3 to 3.5 times smaller on the seed case, 7 to 20 times "
            "slower to write).",
            choices=NPZ_COMPRESSIONS),
    KeySpec("output", "probe_interval", "float", "s", None,
            "Time between probe samples. A probe is sampled at the end of the first step at or "
            "after each multiple of it (steps are not shortened to land on it, so the run does "
            "not depend on it); probes.csv gives each sample's own time.",
            lo=0.0, lo_open=True, auto="time.output_interval"),
    KeySpec("probes.height", "name", "str", "-", REQUIRED,
            "Gauge name (unique among all probes)."),
    KeySpec("probes.height", "x", "float", "m", REQUIRED, "Gauge x."),
    KeySpec("probes.height", "y", "float", "m", REQUIRED, "Gauge y."),
    KeySpec("probes.height", "surface", "str", "-", GAUGE_SURFACES[0],
            "What the gauge reads on its line (mass sum >= 0.5 rho0 is wet): the floor plus the "
            "total wet length, as the experiment's wave-probe wires (wetted_length); the first "
            "dry point above water, as DualSPHysics' GaugeSwl (first_dry); the top of the "
            "highest water (highest_wet).",
            choices=GAUGE_SURFACES),
    KeySpec("probes.pressure", "name", "str", "-", REQUIRED,
            "Sensor name (unique among all probes)."),
    KeySpec("probes.pressure", "position", "vec3", "m", REQUIRED,
            "Sensor position, on a solid face as the experiment mounts it."),
    KeySpec("probes.pressure", "reading", "str", "-", SENSOR_READINGS[0],
            "How the sensor reads: as DualSPHysics' MeasureTool in its examples, 1.5 h from the "
            "face into the water over the fluid alone (measuretool); on the face itself over the "
            "fluid and the mDBC wall particles (face).",
            choices=SENSOR_READINGS),
    KeySpec("probes.pressure", "normal", "vec3", "-", None,
            "Direction from the face into the water, along which a measuretool sensor moves.",
            auto="the normal of the tank or box-obstacle face the position lies on; none if it "
                 "lies on no such face"),
)
"""Every key of a case file, in file order."""
# fmt: on

CROSS_CHECKS: tuple[str, ...] = (
    "`min < max` on every axis of every box (domain, tank, fluid, obstacle).",
    "`domain.min` and `domain.max` are given together or not at all.",
    "Every side of the tank is at least 2 dp long, every side of an obstacle at least dp.",
    "At least one `[[fluid]]` block; every fluid block lies inside the tank, holds at least one "
    "lattice point (tank.min + (i + 1/2) dp under mdbc, tank.min + i dp under dbc; dp/2 clear "
    "of the walls) on every axis, overlaps no other fluid block (blocks may touch) and does not "
    "lie wholly inside a box obstacle (a partly covered block is carved around it; so is one "
    "inside a mesh, and a case whose water is all carved away is refused when its particles "
    "are placed). A mesh block is judged by its bounding box once placed, is at least dp thick "
    "on every axis, and must hold a lattice point strictly inside its surface (checked when "
    "the particles are placed).",
    "Every obstacle lies inside the tank in x and y and starts at or above the floor; "
    "its top may rise above an open top only. A mesh obstacle is judged by its bounding box "
    "once placed.",
    "An obstacle or a fluid block is a box (`min` and `max`) or a mesh (`mesh`, with `scale`, "
    "`rotate`, `translate`), never both; its mesh file exists, is read as STL, OBJ, PLY or OFF, "
    "holds triangles of non-zero area once scaled, is closed (every edge joins exactly two "
    "triangles) and encloses a volume.",
    '`particles.fluid_lattice = "fitted"` needs exactly one `[[fluid]]` block, a box holding at '
    "least dp/2 of water on every axis, no terrain and no mesh obstacle.",
    "The terrain's mesh lies inside the tank in z (its top may rise above an open top only) "
    "and every vertical line of the fluid lattice through the tank crosses it exactly once.",
    "The domain contains the tank walls (`wall_layers` layers, the innermost dp/2 outside the "
    "tank under mdbc) and every obstacle.",
    "Height gauges lie inside the tank in x and y; pressure sensors lie inside the tank, and so "
    "does the point a `measuretool` sensor reads (1.5 h along its normal); a `normal` is not zero.",
    "Probe names are unique across `probes.height` and `probes.pressure`.",
    "`physics.rho_min < physics.rho0 < physics.rho_max`.",
    "`physics.gravity` is not zero.",
    "`time.output_interval <= time.end`; `time.dt_min < time.output_interval`.",
    "`output.probe_interval <= time.end`.",
)
"""Checks that involve several keys, in words (rendered into the docs)."""

_SPEC: dict[tuple[str, str], KeySpec] = {(s.section, s.key): s for s in SCHEMA}
_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


def _default(section: str, key: str) -> Any:
    """The schema default of a key (for the dataclass field defaults below)."""
    return _SPEC[(section, key)].default


def _keys_of(section: str) -> list[str]:
    """The keys of a section, in schema order."""
    return [s.key for s in SCHEMA if s.section == section]


# --------------------------------------------------------------------------------------------
# The frozen configuration.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Box:
    """An axis-aligned box [min, max] in metres; min < max on every axis."""

    min: Vec3
    max: Vec3

    @property
    def size(self) -> Vec3:
        """Edge lengths (max - min) per axis."""
        return (self.max[0] - self.min[0], self.max[1] - self.min[1], self.max[2] - self.min[2])

    def contains_box(self, other: Box, tol: float = 0.0) -> bool:
        """Whether `other` lies inside this box (faces may touch, within `tol`)."""
        return all(
            other.min[a] >= self.min[a] - tol and other.max[a] <= self.max[a] + tol
            for a in range(3)
        )

    def contains_point(self, p: Sequence[float], tol: float = 0.0) -> bool:
        """Whether the point lies in the closed box (within `tol`)."""
        return all(self.min[a] - tol <= p[a] <= self.max[a] + tol for a in range(3))


@dataclass(frozen=True)
class TankConfig:
    """The tank: `box` holds its inner faces, walls are `wall_layers` particle layers outward."""

    box: Box
    wall_layers: int = _default("tank", "wall_layers")
    open_top: bool = _default("tank", "open_top")


@dataclass(frozen=True)
class MeshConfig:
    """A surface mesh file placed in the case, x' = R (S x) + t (solver/mesh.py), and what it
    holds once placed (`surface`, read when the config is loaded; left out of equality)."""

    path: str
    """The file, as an absolute path."""
    surface: Surface = field(compare=False, repr=False)
    scale: Vec3 = _default("obstacle", "scale")
    rotate: Vec3 = _default("obstacle", "rotate")
    translate: Vec3 = _default("obstacle", "translate")


@dataclass(frozen=True)
class FluidBlock(Box):
    """A block of water at rest: the box [min, max], or the fluid lattice points strictly
    inside a closed `mesh`, whose bounding box min and max then are once placed.

    A Box, so that what needs only a block's extent (h_swl, the overlap and tank checks, the
    validation of a column collapse) reads box and mesh blocks alike.
    """

    mesh: MeshConfig | None = None


@dataclass(frozen=True)
class ObstacleConfig:
    """A fixed solid: solid, or a shell `tank.wall_layers` particles thick when `hollow`.

    A box, or the solid a closed `mesh` encloses; `box` is then the mesh's bounding box.
    """

    box: Box
    hollow: bool = _default("obstacle", "hollow")
    mesh: MeshConfig | None = None


@dataclass(frozen=True)
class HeightGauge:
    """A water-height gauge on the vertical line through (x, y); `surface` says which height
    it reports (see solver/output/probes.py)."""

    name: str
    x: float
    y: float
    surface: str = _default("probes.height", "surface")


@dataclass(frozen=True)
class PressureSensor:
    """A pressure sensor at a point (typically on a wall or obstacle face); `reading` and
    `normal` say where and over which particles it samples (solver/output/sensor_points.py)."""

    name: str
    position: Vec3
    reading: str = _default("probes.pressure", "reading")
    normal: Vec3 | None = None


@dataclass(frozen=True)
class ProbesConfig:
    """All probes; names are unique across both kinds."""

    heights: tuple[HeightGauge, ...] = ()
    pressures: tuple[PressureSensor, ...] = ()


@dataclass(frozen=True)
class PhysicsConfig:
    """The weakly compressible SPH model (see SCHEMA for units and meanings)."""

    rho0: float = _default("physics", "rho0")
    gravity: Vec3 = _default("physics", "gravity")
    coefsound: float = _default("physics", "coefsound")
    h_swl: float | None = _default("physics", "h_swl")
    gamma: float = _default("physics", "gamma")
    h_over_dp: float = _default("physics", "h_over_dp")
    kernel: str = _default("physics", "kernel")
    boundary: str = _default("physics", "boundary")
    viscosity: str = _default("physics", "viscosity")
    visc_alpha: float = _default("physics", "visc_alpha")
    nu: float = _default("physics", "nu")
    density_diffusion: str = _default("physics", "density_diffusion")
    delta: float = _default("physics", "delta")
    rho_min: float = _default("physics", "rho_min")
    rho_max: float = _default("physics", "rho_max")
    max_removed: float = _default("physics", "max_removed")
    precision: str = _default("physics", "precision")


@dataclass(frozen=True)
class NeighborsConfig:
    """Neighbour search; None means the backend's default (see SCHEMA)."""

    skin: float | None = _default("neighbors", "skin")
    cells_per_support: int | None = _default("neighbors", "cells_per_support")
    x_refinement: int | None = _default("neighbors", "x_refinement")
    pair_halves: bool = _default("neighbors", "pair_halves")
    lists: bool = _default("neighbors", "lists")


@dataclass(frozen=True)
class TimeConfig:
    """Time integration and output times."""

    end: float = _default("time", "end")
    output_interval: float = _default("time", "output_interval")
    integrator: str = _default("time", "integrator")
    verlet_euler_every: int = _default("time", "verlet_euler_every")
    cfl: float = _default("time", "cfl")
    dt_min: float = _default("time", "dt_min")


@dataclass(frozen=True)
class OutputConfig:
    """What is written; `probe_interval` None means every `time.output_interval`."""

    vtk: bool = _default("output", "vtk")
    npz: bool = _default("output", "npz")
    vtk_compression: str = _default("output", "vtk_compression")
    npz_compression: str = _default("output", "npz_compression")
    probe_interval: float | None = _default("output", "probe_interval")


@dataclass(frozen=True)
class Config:
    """A complete, validated case. Derived numbers are properties, computed in one place.

    `source` (where the case came from) is left out of equality, so a config and the config
    loaded from its `config_to_toml` text compare equal.
    """

    name: str
    source: str = field(compare=False)
    dp: float
    domain: Box
    tank: TankConfig
    fluid_blocks: tuple[FluidBlock, ...]
    obstacles: tuple[ObstacleConfig, ...]
    physics: PhysicsConfig
    neighbors: NeighborsConfig
    time: TimeConfig
    output: OutputConfig
    probes: ProbesConfig
    terrain: MeshConfig | None = None
    """An uneven floor (a height-field surface over the tank floor), or None: the flat floor."""
    fluid_lattice: str = "dp"
    """particles.fluid_lattice: "dp" (the tank's lattice) or "fitted" (see `fluid_cell`)."""

    @property
    def smoothing_length(self) -> float:
        """H = h_over_dp * dp [m]."""
        return self.physics.h_over_dp * self.dp

    @property
    def support_radius(self) -> float:
        """Kernel support 2H [m]."""
        return 2.0 * self.smoothing_length

    @property
    def water_height(self) -> float:
        """h_swl resolved: given, or the top of the highest fluid block (a mesh block's: its
        placed mesh's) above the tank floor [m]."""
        if self.physics.h_swl is not None:
            return self.physics.h_swl
        return max(b.max[2] for b in self.fluid_blocks) - self.tank.box.min[2]

    @property
    def gravity_magnitude(self) -> float:
        """|g| [m/s^2]."""
        return math.sqrt(sum(g * g for g in self.physics.gravity))

    @property
    def sound_speed(self) -> float:
        """c0 = coefsound * sqrt(|g| h_swl) [m/s] (DualSPHysics' rule)."""
        return self.physics.coefsound * math.sqrt(self.gravity_magnitude * self.water_height)

    @property
    def eos_b(self) -> float:
        """Tait stiffness B = c0^2 rho0 / gamma [Pa]."""
        return self.sound_speed**2 * self.physics.rho0 / self.physics.gamma

    @property
    def fluid_cell(self) -> tuple[float, float, float]:
        """Spacing of the water's lattice per axis [m]: dp, or under `fluid_lattice` =
        "fitted" the spacing that fills the one fluid block exactly (solver/lattice.py)."""
        if self.fluid_lattice == "dp":
            return (self.dp, self.dp, self.dp)
        return tuple(axis[1] for axis in fitted_block_axes(self))

    @property
    def particle_mass(self) -> float:
        """The mass of a fluid particle: rho0 times the fluid lattice's cell (`fluid_cell`)
        [kg], rho0 dp^3 on the dp lattice."""
        return self.physics.rho0 * math.prod(self.fluid_cell)

    @property
    def boundary_particle_mass(self) -> float:
        """The mass of a wall, obstacle or terrain particle: rho0 dp^3 [kg]."""
        return self.physics.rho0 * self.dp**3

    @property
    def eta2(self) -> float:
        """0.01 H^2 [m^2], keeps the viscous terms finite as r -> 0."""
        return 0.01 * self.smoothing_length**2

    @property
    def probe_interval(self) -> float:
        """Time between probe samples, resolved [s]."""
        if self.output.probe_interval is not None:
            return self.output.probe_interval
        return self.time.output_interval

    @property
    def output_dir(self) -> Path:
        """outputs/<name> relative to the working directory."""
        return Path("outputs") / self.name


# --------------------------------------------------------------------------------------------
# Loading.
# --------------------------------------------------------------------------------------------


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> Config:
    """Read and validate a case file; `None` loads configs/quick.toml of the repository.

    `overrides` are "section.key=value" strings as given to `--set`; the value is parsed as a
    TOML value, and a bare word that is not one (e.g. wendland_c2) is taken as a string.
    """
    if path is None:
        file = QUICK_CONFIG
        source = BUILTIN_QUICK_SOURCE
    else:
        file = Path(path)
        source = str(path)
    return loads_config(
        _read_case_file(file),
        source=source,
        name=file.stem,
        overrides=overrides,
        where=str(file),
        base=file.resolve().parent,
    )


def _read_case_file(file: Path) -> str:
    """The text of a case file, or a ConfigError saying why it cannot be had."""
    if file.is_dir():
        raise ConfigError(
            f"{file}: is a folder; expected a TOML case file such as configs/quick.toml"
        )
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such case file") from None
    except PermissionError:
        raise ConfigError(f"{file}: cannot read the case file: permission denied") from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read the case file: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{file}, line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x}); "
            "a case file must be UTF-8 encoded TOML"
        ) from None


def loads_config(
    text: str,
    source: str = "<string>",
    name: str = "case",
    overrides: Sequence[str] = (),
    where: str | None = None,
    base: Path | None = None,
) -> Config:
    """Validate TOML text. `name` is the default case name; `where` labels error messages;
    relative mesh paths are taken from the folder `base` (default: the working directory)."""
    where = where or source
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(_syntax_message(where, str(exc))) from None
    overridden: set[str] = set()
    for item in overrides:
        overridden.add(_apply_override(raw, item, where))
    folder = base if base is not None else Path.cwd()
    return _Builder(raw, where, source, name, overridden, text, folder).build()


def _syntax_message(where: str, detail: str) -> str:
    """A TOML syntax error as "file, line L, column C: not valid TOML: what tomllib says"."""
    found = re.search(r"\s*\(at line (\d+), column (\d+)\)$", detail)
    if found is None:
        return f"{where}: not valid TOML: {detail}"
    what = detail[: found.start()]
    return f"{where}, line {found[1]}, column {found[2]}: not valid TOML: {what}"


def _suggestion(name: str, known: Sequence[str]) -> str:
    """ "; did you mean 'x'?" for the closest known name, or "." when none is close."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else "."


def _parse_value(text: str) -> Any:
    """A `--set` value: a TOML value, else a number, else the bare word as a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        pass
    word = text.strip()
    try:  # numbers TOML is strict about, such as ".5" or "5."
        return float(word)
    except ValueError:
        return word


def _apply_override(raw: dict[str, Any], item: str, where: str) -> str:
    """Put one "section.key=value" into the parsed TOML; returns the dotted key."""
    if "=" not in item:
        raise ConfigError(f"{where}: --set {item!r}: expected section.key=value, e.g. time.end=0.5")
    dotted, value_text = (s.strip() for s in item.split("=", 1))
    section, _, key = dotted.rpartition(".")
    plain = [s for s in SECTIONS if s not in ARRAY_SECTIONS]
    if section in ARRAY_SECTIONS:
        raise ConfigError(
            f"{where}: --set {dotted}: [[{section}]] is an array of tables and cannot be set "
            "from the command line; edit the case file"
        )
    if section not in plain:
        raise ConfigError(
            f"{where}: --set {dotted}: unknown section {section!r}"
            f"{_suggestion(section, plain)} Sections that can be set: {', '.join(plain)}"
        )
    if key not in _keys_of(section):
        raise ConfigError(
            f"{where}: --set {dotted}: unknown key {key!r} in [{section}]"
            f"{_suggestion(key, _keys_of(section))} Allowed: {', '.join(_keys_of(section))}"
        )
    if value_text == "":
        raise ConfigError(f"{where}: --set {dotted}: empty value")
    table = raw.setdefault(section, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [{section}] must be a table")
    table[key] = _parse_value(value_text)
    return dotted


class _Builder:
    """Turns the parsed TOML dict into a Config, raising ConfigError at the first problem."""

    def __init__(
        self,
        raw: dict[str, Any],
        where: str,
        source: str,
        name: str,
        overridden: set[str],
        text: str = "",
        base: Path = Path(),
    ) -> None:
        self.raw = raw
        self.where = where
        self.source = source
        self.default_name = name
        self.overridden = overridden
        self.text = text
        self.base = base

    # -- messages ---------------------------------------------------------------------------

    def located(self, section: str, key: str | None = None, index: int | None = None) -> str:
        """ "file, line N" for a key of a section (or the section), or just the file."""
        line = key_line(self.text, section, key, index)
        return self.where if line is None else f"{self.where}, line {line}"

    def at(self, key: str) -> str:
        """`located` for a dotted key as messages name it ("fluid[1].min", "tank")."""
        if re.sub(r"\[\d+\]", "", key) in self.overridden:
            return self.where
        for section in sorted(SECTIONS, key=len, reverse=True):
            rest = key.removeprefix(section)
            found = re.fullmatch(r"(?:\[(\d+)\])?(?:\.(.+))?", rest) if rest != key else None
            if found is not None:
                index = int(found[1]) if found[1] is not None else None
                return self.located(section, found[2], index)
        return self.where

    def error(self, key: str, message: str) -> ConfigError:
        """An error about `key` (dotted, with [i] for array entries)."""
        plain = re.sub(r"\[\d+\]", "", key)
        origin = " (from --set)" if plain in self.overridden else ""
        sep = " " if message.startswith("= ") else ": "
        return ConfigError(f"{self.at(key)}: {key}{origin}{sep}{message}")

    # -- raw access -------------------------------------------------------------------------

    def table(self, section: str) -> dict[str, Any]:
        """A plain section as a dict ({} when absent), unknown keys rejected."""
        value = self.raw.get(section, {})
        if not isinstance(value, dict):
            raise self.error(section, f"= {value!r} must be a table, written [{section}]")
        self.check_keys(value, section, section)
        return value

    def array(self, section: str) -> list[dict[str, Any]]:
        """An array-of-tables section ([] when absent), unknown keys rejected."""
        if "." in section:
            parent, child = section.split(".")
            value = self.raw.get(parent, {}).get(child, [])
        else:
            value = self.raw.get(section, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.error(section, f"must be an array of tables, written [[{section}]]")
        for i, entry in enumerate(value):
            self.check_keys(entry, section, f"{section}[{i}]")
        return value

    def check_keys(self, table: Mapping[str, Any], section: str, label: str) -> None:
        """Reject keys the schema does not know."""
        allowed = _keys_of(section)
        for key in table:
            if key not in allowed:
                raise ConfigError(
                    f"{self.at(f'{label}.{key}')}: unknown key {label}.{key}"
                    f"{_suggestion(key, allowed)} Allowed in [{section}]: {', '.join(allowed)}"
                )

    def check_sections(self) -> None:
        """Reject unknown top-level sections and stray values."""
        top = sorted({s.split(".")[0] for s in SECTIONS})
        for section, value in self.raw.items():
            if section in top:
                continue
            if not isinstance(value, (dict, list)):
                homes = [f"[{s.section}]" for s in SCHEMA if s.key == section]
                hint = f"; it belongs in {' or '.join(homes)}" if homes else ""
                raise ConfigError(
                    f"{self.located('', section)}: key {section!r} is outside any section{hint}. "
                    f"Every key belongs in a section: {', '.join(SECTIONS)}"
                )
            raise ConfigError(
                f"{self.located(section)}: unknown section [{section}]"
                f"{_suggestion(section, top)} Allowed: {', '.join(SECTIONS)}"
            )
        probes = self.raw.get("probes", {})
        if not isinstance(probes, dict):
            raise ConfigError(
                f"{self.where}: probes must hold [[probes.height]] and [[probes.pressure]] tables"
            )
        for sub in probes:
            if f"probes.{sub}" not in SECTIONS:
                raise ConfigError(
                    f"{self.located(f'probes.{sub}')}: unknown section probes.{sub}"
                    f"{_suggestion(sub, ['height', 'pressure'])} "
                    "Allowed: probes.height, probes.pressure"
                )

    def value(self, table: Mapping[str, Any], section: str, key: str, label: str) -> Any:
        """One key's value, type- and range-checked; default filled from the schema."""
        spec = _SPEC[(section, key)]
        dotted = f"{label}.{key}"
        if key not in table:
            if spec.default is REQUIRED:
                raise self.error(dotted, f"missing; it is required ({spec.doc})")
            return spec.default
        return self.convert(spec, table[key], dotted)

    def convert(self, spec: KeySpec, raw: Any, dotted: str) -> Any:
        """Check one value against its KeySpec; returns it in its stored type."""
        note = "" if _fits(spec.kind, raw) else f" ({_type_name(raw)})"
        bad = f"= {_shown(raw)}{note} is not allowed; expected {spec.expected_text()}"
        if spec.kind == "bool":
            if not isinstance(raw, bool):
                raise self.error(dotted, bad)
            return raw
        if spec.kind == "path":
            if not isinstance(raw, str) or not raw.strip():
                raise self.error(dotted, bad)
            return raw
        if spec.kind == "str":
            if not isinstance(raw, str):
                raise self.error(dotted, bad)
            if spec.choices is not None:
                if raw not in spec.choices:
                    raise self.error(dotted, bad)
            elif not _NAME_RE.match(raw):
                raise self.error(dotted, bad)
            return raw
        if spec.kind == "int":
            if isinstance(raw, bool) or not isinstance(raw, int):
                raise self.error(dotted, bad)
            self.check_range(spec, raw, dotted, bad)
            return raw
        if spec.kind == "float":
            return self.number(spec, raw, dotted, bad)
        if spec.kind == "vec3":
            if not isinstance(raw, list) or len(raw) != 3:
                raise self.error(dotted, bad)
            x, y, z = (self.number(spec, v, dotted, bad) for v in raw)
            return (x, y, z)
        raise AssertionError(spec.kind)  # pragma: no cover - schema error

    def number(self, spec: KeySpec, raw: Any, dotted: str, bad: str) -> float:
        """A finite float (TOML ints accepted), range-checked."""
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise self.error(dotted, bad)
        value = float(raw)
        if not math.isfinite(value):
            raise self.error(dotted, bad)
        self.check_range(spec, value, dotted, bad)
        return value

    def check_range(self, spec: KeySpec, value: float, dotted: str, bad: str) -> None:
        """Bounds of the KeySpec."""
        if spec.lo is not None and (value <= spec.lo if spec.lo_open else value < spec.lo):
            raise self.error(dotted, bad)
        if spec.hi is not None and (value >= spec.hi if spec.hi_open else value > spec.hi):
            raise self.error(dotted, bad)

    def box(self, table: Mapping[str, Any], section: str, label: str) -> Box:
        """A Box from a table's min/max, with min < max on every axis."""
        lo = self.value(table, section, "min", label)
        hi = self.value(table, section, "max", label)
        for key, corner in (("min", lo), ("max", hi)):
            if corner is None:  # an obstacle's, whose default is "required unless mesh"
                spec = _SPEC[(section, key)]
                raise self.error(
                    f"{label}.{key}",
                    f"missing; it is required ({spec.doc[:-1]}) unless mesh is given",
                )
        for a, axis in enumerate("xyz"):
            if not lo[a] < hi[a]:
                raise self.error(
                    f"{label}.min",
                    f"min {list(lo)} must be < max {list(hi)} on {axis} (the box is empty or "
                    "inverted)",
                )
        return Box(lo, hi)

    def fields(self, section: str) -> dict[str, Any]:
        """All keys of a plain section, defaults filled."""
        table = self.table(section)
        return {key: self.value(table, section, key, section) for key in _keys_of(section)}

    def mesh(self, table: Mapping[str, Any], section: str, label: str) -> MeshConfig:
        """A mesh file of a table, read and placed (scale, rotate, translate)."""
        given = self.value(table, section, "mesh", label)
        path = Path(given).expanduser()
        if not path.is_absolute():
            path = self.base / path
        scale, rotate, translate = (
            self.value(table, section, key, label) for key in ("scale", "rotate", "translate")
        )
        try:
            surface = load_surface(path, scale, rotate, translate)
        except MeshError as exc:
            raise self.error(f"{label}.mesh", f"= {_shown(given)} ({path}): {exc}") from None
        return MeshConfig(str(path), surface, scale, rotate, translate)

    def no_placement(self, table: Mapping[str, Any], label: str, what: str) -> None:
        """Refuse scale, rotate or translate in a table without a mesh (a box `what`)."""
        for key in ("scale", "rotate", "translate"):
            if key in table:
                raise self.error(
                    f"{label}.{key}",
                    f'places a mesh, and this {what} has none; give mesh = "file.stl" '
                    "or leave it out for a box",
                )

    def closed_mesh(
        self, table: Mapping[str, Any], section: str, label: str, rule: str
    ) -> tuple[Box, MeshConfig]:
        """A table's closed mesh, read and placed, and its bounding box; `rule` ends the
        messages (what the mesh must be, and how to mend it)."""
        for key in ("min", "max"):
            if key in table:
                raise self.error(
                    f"{label}.{key}",
                    "is for a box; give either min and max (a box) or mesh (a surface mesh), "
                    "not both",
                )
        mesh = self.mesh(table, section, label)
        surface = mesh.surface
        if not surface.closed:
            raise self.error(
                f"{label}.mesh",
                f"= {_shown(table['mesh'])}: the surface is not closed (watertight): "
                f"{surface.open_edges} edges do not join exactly two triangles; {rule}",
            )
        lower, upper = surface.lower, surface.upper
        box = Box(
            (float(lower[0]), float(lower[1]), float(lower[2])),
            (float(upper[0]), float(upper[1]), float(upper[2])),
        )
        if surface.volume <= 1e-9 * math.prod(max(s, 0.0) for s in box.size):
            raise self.error(
                f"{label}.mesh",
                f"= {_shown(table['mesh'])}: the surface encloses no volume (scale = "
                f"{list(mesh.scale)}); {rule}",
            )
        return box, mesh

    def obstacle(self, table: Mapping[str, Any], i: int) -> ObstacleConfig:
        """Obstacle i: a box (min, max) or a closed mesh (mesh, scale, rotate, translate)."""
        label = f"obstacle[{i}]"
        hollow = self.value(table, "obstacle", "hollow", label)
        if "mesh" not in table:
            self.no_placement(table, label, "obstacle")
            return ObstacleConfig(box=self.box(table, "obstacle", label), hollow=hollow)
        rule = (
            "an obstacle must enclose a solid (close the surface in the CAD tool; an open "
            "surface can be a [terrain])"
        )
        box, mesh = self.closed_mesh(table, "obstacle", label, rule)
        return ObstacleConfig(box=box, hollow=hollow, mesh=mesh)

    def fluid(self, table: Mapping[str, Any], i: int) -> FluidBlock:
        """Fluid block i: a box (min, max) or a closed mesh (mesh, scale, rotate, translate)."""
        label = f"fluid[{i}]"
        if "mesh" not in table:
            self.no_placement(table, label, "fluid block")
            box = self.box(table, "fluid", label)
            return FluidBlock(box.min, box.max)
        rule = "a fluid block must enclose its water (close the surface in the CAD tool)"
        box, mesh = self.closed_mesh(table, "fluid", label, rule)
        return FluidBlock(box.min, box.max, mesh)

    # -- the whole config -------------------------------------------------------------------

    def build(self) -> Config:
        """Validate everything and assemble the Config."""
        self.check_sections()
        case = self.fields("case")
        name = case["name"] if case["name"] is not None else self.default_name
        if not _NAME_RE.match(name):
            raise self.error("case.name", f"= {name!r}: use letters, digits, _ . - only")
        particles = self.table("particles")
        dp = self.value(particles, "particles", "dp", "particles")
        fluid_lattice = self.value(particles, "particles", "fluid_lattice", "particles")

        tank_t = self.table("tank")
        tank = TankConfig(
            box=self.box(tank_t, "tank", "tank"),
            wall_layers=self.value(tank_t, "tank", "wall_layers", "tank"),
            open_top=self.value(tank_t, "tank", "open_top", "tank"),
        )
        fluid = tuple(self.fluid(t, i) for i, t in enumerate(self.array("fluid")))
        obstacles = tuple(self.obstacle(t, i) for i, t in enumerate(self.array("obstacle")))
        terrain_t = self.table("terrain")
        terrain = None
        if terrain_t:
            if "mesh" not in terrain_t:
                given = ", ".join(terrain_t)
                raise self.error(
                    "terrain", f'gives {given} but no mesh; [terrain] needs mesh = "file.stl"'
                )
            terrain = self.mesh(terrain_t, "terrain", "terrain")
        physics = PhysicsConfig(**self.fields("physics"))
        neighbors = NeighborsConfig(**self.fields("neighbors"))
        time = TimeConfig(**self.fields("time"))
        output = OutputConfig(**self.fields("output"))
        probes = ProbesConfig(
            heights=tuple(
                HeightGauge(
                    **{
                        k: self.value(t, "probes.height", k, f"probes.height[{i}]")
                        for k in _keys_of("probes.height")
                    }
                )
                for i, t in enumerate(self.array("probes.height"))
            ),
            pressures=tuple(
                PressureSensor(
                    **{
                        k: self.value(t, "probes.pressure", k, f"probes.pressure[{i}]")
                        for k in _keys_of("probes.pressure")
                    }
                )
                for i, t in enumerate(self.array("probes.pressure"))
            ),
        )
        domain_t = self.table("domain")
        if ("min" in domain_t) != ("max" in domain_t):
            raise self.error(
                "domain", "give both min and max, or neither (default: around the tank)"
            )
        domain = (
            self.box(domain_t, "domain", "domain")
            if domain_t
            else default_domain(tank, dp, physics.h_over_dp)
        )
        cfg = Config(
            name=name,
            source=self.source,
            dp=dp,
            domain=domain,
            tank=tank,
            fluid_blocks=fluid,
            obstacles=obstacles,
            physics=physics,
            neighbors=neighbors,
            time=time,
            output=output,
            probes=probes,
            terrain=terrain,
            fluid_lattice=fluid_lattice,
        )
        self.cross_checks(cfg)
        return cfg

    def check_fitted_lattice(self, cfg: Config) -> None:
        """particles.fluid_lattice = "fitted" fills one box block, with no terrain and no mesh
        obstacle (whose particles sit on the dp lattice, and whose inside is found along the
        lattice's columns)."""
        key = "particles.fluid_lattice"
        problem = None
        if len(cfg.fluid_blocks) != 1:
            problem = f"needs exactly one [[fluid]] block, not {len(cfg.fluid_blocks)}"
        elif cfg.fluid_blocks[0].mesh is not None:
            problem = "needs a box [[fluid]] block (min, max), not a mesh"
        elif cfg.terrain is not None:
            problem = "cannot be used with a [terrain]"
        elif any(obstacle.mesh is not None for obstacle in cfg.obstacles):
            problem = "cannot be used with mesh obstacles"
        if problem is not None:
            raise self.error(key, f'= "fitted" {problem}; or use "dp"')
        block = cfg.fluid_blocks[0]
        for axis, (_, _, count) in zip("xyz", fitted_block_axes(cfg), strict=True):
            if count == 0:
                raise self.error(
                    "fluid[0]",
                    f"{_fluid_text(block)} holds less than dp/2 = {cfg.dp / 2:g} m of water "
                    f"on {axis} (under {cfg.physics.boundary}), the least a fitted lattice "
                    f'({key} = "fitted") fills',
                )

    def check_fluid_block(self, cfg: Config, i: int, tol: float) -> None:
        """Fluid block i lies in the tank, holds particles, overlaps no earlier block and no
        obstacle wholly; a mesh block is judged by its bounding box and is dp thick at least."""
        block = cfg.fluid_blocks[i]
        tank = cfg.tank.box
        key, what = _fluid_key(i, block), _fluid_text(block)
        if not tank.contains_box(block, tol):
            raise self.error(key, f"{what} is not inside the tank {_box_text(tank)}")
        if block.mesh is not None:
            for a, axis in enumerate("xyz"):
                if block.size[a] < cfg.dp - tol:
                    raise self.error(
                        key,
                        f"{what} is {block.size[a]:g} m on {axis}, thinner than dp = {cfg.dp:g} m",
                    )
        if cfg.fluid_lattice == "dp":  # a fitted block is checked by check_fitted_lattice
            gap = surface_gap(cfg.physics.boundary)  # the scene's lattice (solver/lattice.py)
            lattice = "tank.min + (i + 1/2) dp" if gap else "tank.min + i dp"
            for a, axis in enumerate("xyz"):
                points = fluid_index_range(
                    tank.min[a], tank.max[a], block.min[a], block.max[a], cfg.dp, tol, gap
                )
                if not points:
                    raise self.error(
                        key,
                        f"{what} holds no particle: on {axis}, no lattice point "
                        f"{lattice} (dp = {cfg.dp:g}, physics.boundary = {cfg.physics.boundary}) "
                        f"lies in ({block.min[a]:g}, {block.max[a]:g}] at least dp/2 from the "
                        "walls; make it thicker",
                    )
        for j, other in enumerate(cfg.fluid_blocks[:i]):
            if all(
                min(block.max[a], other.max[a]) - max(block.min[a], other.min[a]) > tol
                for a in range(3)
            ):
                by_box = (
                    " (a mesh block by its bounding box)"
                    if block.mesh is not None or other.mesh is not None
                    else ""
                )
                raise self.error(
                    key,
                    f"{what} overlaps fluid[{j}] {_fluid_text(other)}; fluid blocks may touch "
                    f"but not overlap{by_box}",
                )
        for k, obstacle in enumerate(cfg.obstacles):
            if obstacle.mesh is None and obstacle.box.contains_box(block, tol):
                raise self.error(
                    key,
                    f"{what} lies inside obstacle[{k}] "
                    f"{_box_text(obstacle.box)}, so it holds no water",
                )

    def check_sensor_point(
        self, cfg: Config, sensor: PressureSensor, label: str, tol: float
    ) -> None:
        """A sensor's `normal` is not zero, and the point it reads lies inside the tank."""
        if sensor.normal is not None and not any(abs(c) > 0.0 for c in sensor.normal):
            raise self.error(f"{label}.normal", "must not be [0, 0, 0]; give the face's normal")
        point = [float(c) for c in sample_point(sensor, cfg)]
        if not cfg.tank.box.contains_point(point, tol):
            raise self.error(
                label,
                f"{sensor.name!r} reads at {point} (1.5 h along its normal), outside the tank "
                f'{_box_text(cfg.tank.box)}; check `normal` or use reading = "face"',
            )

    def check_terrain(self, cfg: Config, tol: float) -> None:
        """The terrain lies in the tank and every vertical line of the fluid lattice through
        the tank crosses it exactly once (a height field covering the floor)."""
        assert cfg.terrain is not None
        surface = cfg.terrain.surface
        tank = cfg.tank.box
        low, high = float(surface.lower[2]), float(surface.upper[2])
        shown = f"mesh {Path(cfg.terrain.path).name}"
        if low < tank.min[2] - tol or (high > tank.max[2] + tol and not cfg.tank.open_top):
            raise self.error(
                "terrain.mesh",
                f"{shown}: the terrain spans z = {low:g}..{high:g}, not inside the tank "
                f"{_box_text(tank)} (only an open top may be exceeded)",
            )
        gap = surface_gap(cfg.physics.boundary)
        axes = [tank_axis(tank.min[a], tank.max[a], cfg.dp, gap, tol) for a in range(2)]
        counts = terrain_columns(surface.triangles, axes[0], axes[1], cfg.dp)
        bad = np.flatnonzero(counts != 1)
        if len(bad):
            x = axes[0][bad[0] // len(axes[1])]
            y = axes[1][bad[0] % len(axes[1])]
            problem = (
                "misses it: it does not cover the whole tank floor"
                if counts[bad[0]] == 0
                else f"crosses it {counts[bad[0]]} times: it is not a height field"
            )
            raise self.error(
                "terrain.mesh",
                f"{shown}: the vertical line at x = {x:g}, y = {y:g} {problem} "
                f"({len(bad)} of {len(counts)} lines of the lattice); a terrain must be crossed "
                "once by every vertical line through the tank",
            )

    def cross_checks(self, cfg: Config) -> None:
        """The checks that involve several keys (listed in words in CROSS_CHECKS)."""
        dp = cfg.dp
        tank = cfg.tank.box
        tol = geometric_tolerance(cfg)
        for a, axis in enumerate("xyz"):
            if tank.size[a] < 2.0 * dp - tol:
                raise self.error(
                    "tank",
                    f"the tank is {tank.size[a]:g} m long on {axis}, "
                    f"shorter than 2 dp = {2 * dp:g} m",
                )
        if not cfg.fluid_blocks:
            raise ConfigError(f"{self.where}: no [[fluid]] block; at least one is required")
        if cfg.fluid_lattice == "fitted":
            self.check_fitted_lattice(cfg)
        for i in range(len(cfg.fluid_blocks)):
            self.check_fluid_block(cfg, i, tol)
        for i, obstacle in enumerate(cfg.obstacles):
            box = obstacle.box
            inside_xy = all(
                box.min[a] >= tank.min[a] - tol and box.max[a] <= tank.max[a] + tol
                for a in range(2)
            )
            top_ok = box.max[2] <= tank.max[2] + tol or cfg.tank.open_top
            what = _obstacle_text(obstacle)
            key = f"obstacle[{i}]" if obstacle.mesh is None else f"obstacle[{i}].mesh"
            if not (inside_xy and box.min[2] >= tank.min[2] - tol and top_ok):
                raise self.error(
                    key,
                    f"{what} is not inside the "
                    f"tank {_box_text(tank)} (only an open top may be exceeded)",
                )
            for a, axis in enumerate("xyz"):
                if box.size[a] < dp - tol:
                    raise self.error(
                        key,
                        f"{what} is {box.size[a]:g} m on {axis}, thinner than dp = {dp:g} m",
                    )
            if not cfg.domain.contains_box(box, tol):
                raise self.error(
                    "domain",
                    f"{_box_text(cfg.domain)} does not contain obstacle[{i}] {_box_text(box)}",
                )
        if cfg.terrain is not None:
            self.check_terrain(cfg, tol)
        walls = wall_extent(cfg.tank, dp, cfg.physics.boundary)
        if not cfg.domain.contains_box(walls, tol):
            raise self.error(
                "domain",
                f"{_box_text(cfg.domain)} does not contain the tank "
                f"walls {_box_text(walls)} ({cfg.tank.wall_layers} layers)",
            )
        names: set[str] = set()
        for kind, probes in (("height", cfg.probes.heights), ("pressure", cfg.probes.pressures)):
            for i, probe in enumerate(probes):
                label = f"probes.{kind}[{i}]"
                if probe.name in names:
                    raise self.error(
                        f"{label}.name",
                        f"= {probe.name!r} is used twice; probe names must be unique",
                    )
                names.add(probe.name)
                if isinstance(probe, HeightGauge):
                    point: tuple[float, ...] = (probe.x, probe.y)
                    inside = all(
                        tank.min[a] - tol <= point[a] <= tank.max[a] + tol for a in range(2)
                    )
                else:
                    point = probe.position
                    inside = tank.contains_point(point, tol)
                if not inside:
                    raise self.error(
                        label,
                        f"{probe.name!r} at {list(point)} is outside the tank {_box_text(tank)}",
                    )
                if isinstance(probe, PressureSensor):
                    self.check_sensor_point(cfg, probe, label, tol)
        p = cfg.physics
        if not p.rho_min < p.rho0 < p.rho_max:
            raise self.error(
                "physics.rho_min",
                f"need rho_min < rho0 < rho_max, got {p.rho_min:g} < {p.rho0:g} < {p.rho_max:g}",
            )
        if cfg.gravity_magnitude == 0.0:
            raise self.error("physics.gravity", "must not be zero (c0 is scaled by |g|)")
        t = cfg.time
        if t.output_interval > t.end:
            raise self.error(
                "time.output_interval",
                f"{t.output_interval:g} is longer than time.end = {t.end:g}; allowed: at most "
                "time.end",
            )
        if t.dt_min >= t.output_interval:
            raise self.error(
                "time.dt_min",
                f"{t.dt_min:g} is not below time.output_interval = {t.output_interval:g}; "
                "allowed: less than time.output_interval",
            )
        if cfg.output.probe_interval is not None and cfg.output.probe_interval > t.end:
            raise self.error(
                "output.probe_interval",
                f"{cfg.output.probe_interval:g} is longer than time.end = {t.end:g}; allowed: "
                "at most time.end",
            )


def _fits(kind: str, raw: Any) -> bool:
    """Whether a TOML value has the type a key of `kind` needs (its range aside)."""
    if kind == "vec3":
        return isinstance(raw, list) and len(raw) == 3 and all(_fits("float", v) for v in raw)
    if isinstance(raw, bool):
        return kind == "bool"
    if kind == "float":
        return isinstance(raw, (int, float))
    return isinstance(raw, {"int": int, "str": str, "path": str}.get(kind, bool))


def _type_name(raw: Any) -> str:
    """A TOML value's type in words, for messages."""
    if isinstance(raw, bool):
        return "a boolean"
    if isinstance(raw, list):
        odd = [v for v in raw if isinstance(v, bool) or not isinstance(v, (int, float))]
        return f"a list of {len(raw)}" + (f" holding {_type_name(odd[0])}" if odd else "")
    names = {int: "an integer", float: "a number", str: "a string", dict: "a table"}
    return names.get(type(raw), "a date or time")


def _shown(raw: Any) -> str:
    """A TOML value written as in the file (true, "text", [1, 2])."""
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, str):
        return f'"{raw}"'
    if isinstance(raw, list):
        return "[" + ", ".join(_shown(v) for v in raw) + "]"
    if isinstance(raw, dict):
        return "{" + ", ".join(f"{k} = {_shown(v)}" for k, v in raw.items()) + "}"
    return str(raw)


def _obstacle_text(obstacle: ObstacleConfig) -> str:
    """An obstacle in words: "box [..]..[..]", or its mesh file and where it spans."""
    if obstacle.mesh is None:
        return f"box {_box_text(obstacle.box)}"
    return _mesh_text(obstacle.mesh, obstacle.box)


def _fluid_text(block: FluidBlock) -> str:
    """A fluid block in words: "block [..]..[..]", or its mesh file and where it spans."""
    if block.mesh is None:
        return f"block {_box_text(block)}"
    return _mesh_text(block.mesh, block)


def _fluid_key(i: int, block: FluidBlock) -> str:
    """The key messages about fluid block i name: the block, or its mesh key."""
    return f"fluid[{i}]" if block.mesh is None else f"fluid[{i}].mesh"


def _mesh_text(mesh: MeshConfig, box: Box) -> str:
    """A placed mesh in words: its file and the box it spans."""
    return f"mesh {Path(mesh.path).name} (placed, it spans {_box_text(box)})"


def _box_text(box: Box) -> str:
    """A box as "[x0, y0, z0]..[x1, y1, z1]"."""
    return f"{list(box.min)}..{list(box.max)}"


def fitted_block_axes(cfg: Config) -> list[tuple[float, float, int]]:
    """(first point, spacing, count) on each axis of the one fluid block's fitted lattice
    (`particles.fluid_lattice = "fitted"`, solver/lattice.py `fitted_axis`)."""
    block, tank = cfg.fluid_blocks[0], cfg.tank.box
    tol, gap = geometric_tolerance(cfg), surface_gap(cfg.physics.boundary)
    return [
        fitted_axis(tank.min[a], tank.max[a], block.min[a], block.max[a], cfg.dp, tol, gap)
        for a in range(3)
    ]


def geometric_tolerance(cfg: Config) -> float:
    """Absolute tolerance of geometric comparisons: 1e-9 of the case's length scale.

    The scale is the largest of dp, the tank's size and its corner coordinates, so lattice
    points computed as min + i dp that should sit on a face are recognised as on it.
    """
    box = cfg.tank.box
    return 1e-9 * max(cfg.dp, *map(abs, box.min + box.max), *box.size)


def wall_extent(tank: TankConfig, dp: float, boundary: str) -> Box:
    """The box that holds every wall particle: the tank grown by (wall_layers - 1 + gap) dp.

    gap is `surface_gap(boundary)`: mDBC places its innermost layer dp/2 outside the tank's
    faces (solver/scene.py), DBC on them. With an open top the side walls reach gap dp above it.
    """
    gap = surface_gap(boundary)
    t = (tank.wall_layers - 1 + gap) * dp
    lo = tuple(c - t for c in tank.box.min)
    hi = [c + t for c in tank.box.max]
    if tank.open_top:
        hi[2] = tank.box.max[2] + gap * dp
    return Box((lo[0], lo[1], lo[2]), (hi[0], hi[1], hi[2]))


def default_domain(tank: TankConfig, dp: float, h_over_dp: float) -> Box:
    """The tank grown by wall_layers dp + 2H on every side; an open top also by its height."""
    margin = tank.wall_layers * dp + 2.0 * h_over_dp * dp
    lo = tuple(c - margin for c in tank.box.min)
    hi = [c + margin for c in tank.box.max]
    if tank.open_top:
        hi[2] += tank.box.size[2]
    return Box((lo[0], lo[1], lo[2]), (hi[0], hi[1], hi[2]))


# --------------------------------------------------------------------------------------------
# Writing the resolved config back as TOML.
# --------------------------------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    """One value of this schema as TOML (bool, int, float, str, 3-tuple)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def _toml_lines(section: str, values: Mapping[str, Any], array: bool = False) -> list[str]:
    """A section header and its key lines; None values become a comment (derived default)."""
    lines = [f"[[{section}]]" if array else f"[{section}]"]
    for key, value in values.items():
        spec = _SPEC[(section, key)]
        unit = f"  # {spec.unit}" if spec.unit != "-" else ""
        if value is None:
            lines.append(f"# {key}: default, {spec.auto}")
        else:
            lines.append(f"{key} = {_toml_value(value)}{unit}")
    lines.append("")
    return lines


def _mesh_values(mesh: MeshConfig) -> dict[str, Any]:
    """The keys of a placed mesh, its path absolute (the resolved config may live elsewhere)."""
    return {
        "mesh": mesh.path,
        "scale": mesh.scale,
        "rotate": mesh.rotate,
        "translate": mesh.translate,
    }


def config_to_toml(cfg: Config) -> str:
    """The resolved config as TOML, every default written out; loading it gives an equal Config.

    Keys whose default is derived (physics.h_swl, output.probe_interval) stay unset when unset,
    with a comment, so that loading keeps deriving them.
    """
    lines = [f"# Resolved configuration of case {cfg.name!r} (source: {cfg.source})", ""]
    lines += _toml_lines("case", {"name": cfg.name})
    lines += _toml_lines("particles", {"dp": cfg.dp, "fluid_lattice": cfg.fluid_lattice})
    lines += _toml_lines("domain", {"min": cfg.domain.min, "max": cfg.domain.max})
    t = cfg.tank
    lines += _toml_lines(
        "tank",
        {"min": t.box.min, "max": t.box.max, "wall_layers": t.wall_layers, "open_top": t.open_top},
    )
    for block in cfg.fluid_blocks:
        if block.mesh is None:
            values: dict[str, Any] = {"min": block.min, "max": block.max}
        else:
            values = _mesh_values(block.mesh)
        lines += _toml_lines("fluid", values, array=True)
    for ob in cfg.obstacles:
        if ob.mesh is None:
            values = {"min": ob.box.min, "max": ob.box.max, "hollow": ob.hollow}
        else:
            values = _mesh_values(ob.mesh) | {"hollow": ob.hollow}
        lines += _toml_lines("obstacle", values, array=True)
    if cfg.terrain is not None:
        lines += _toml_lines("terrain", _mesh_values(cfg.terrain))
    for section, obj in (
        ("physics", cfg.physics),
        ("neighbors", cfg.neighbors),
        ("time", cfg.time),
        ("output", cfg.output),
    ):
        lines += _toml_lines(section, {k: getattr(obj, k) for k in _keys_of(section)})
    for gauge in cfg.probes.heights:
        lines += _toml_lines(
            "probes.height", {k: getattr(gauge, k) for k in _keys_of("probes.height")}, array=True
        )
    for sensor in cfg.probes.pressures:
        lines += _toml_lines(
            "probes.pressure",
            {k: getattr(sensor, k) for k in _keys_of("probes.pressure")},
            array=True,
        )
    return "\n".join(lines)
