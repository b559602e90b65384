"""The kinds of particle in a scene, as stored in the `kind` array and in VTK snapshots."""

from enum import IntEnum


class ParticleKind(IntEnum):
    """Integer codes of particle kinds; boundary kinds are all >= WALL."""

    FLUID = 0
    WALL = 1
    OBSTACLE = 2
