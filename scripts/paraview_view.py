"""Open a dambreak run in ParaView: fluid coloured by speed, tank and obstacles see-through.

A pvpython script (ParaView 5.10 or later; it uses only paraview.simple). Run it

    pvpython scripts/paraview_view.py outputs/dambreak              # an interactive window
    pvpython scripts/paraview_view.py outputs/dambreak --screenshot view.png   # last frame
    paraview --script=scripts/paraview_view.py                       # in the GUI; the run is
                                                                     # $DAMBREAK_RUN or
                                                                     # outputs/dambreak

The run folder's particles.pvd lists the snapshots with their times. Every snapshot holds the
point arrays id, kind (0 fluid, 1 wall, 2 obstacle), velocity, speed, pressure and density.
Two Threshold filters on `kind` split the fluid (kind 0) from the boundaries (kind >= 1); the
fluid is drawn as spheres coloured by speed, over a colour range fixed over the whole run; the
boundaries in light grey at 15 % opacity. The camera looks at the tank from the front-left,
above, with z up. Press play in the GUI (or use the time controls) to animate.
"""

from __future__ import annotations

import argparse
import os
import sys

import paraview
from paraview.simple import (
    AnnotateTimeFilter,
    ColorBy,
    GetActiveViewOrCreate,
    GetAnimationScene,
    GetColorTransferFunction,
    Interact,
    PVDReader,
    Render,
    SaveScreenshot,
    Show,
    Threshold,
)

FLUID, WALL, OBSTACLE = 0, 1, 2


def kind_threshold(source, lower: int, upper: int):
    """The particles whose `kind` lies in [lower, upper] (point data; one vertex per cell)."""
    selection = Threshold(Input=source)
    selection.Scalars = ["POINTS", "kind"]
    if hasattr(selection, "LowerThreshold"):  # ParaView 5.10 and later
        selection.LowerThreshold = lower
        selection.UpperThreshold = upper
        selection.ThresholdMethod = "Between"
    else:  # older: one two-value range
        selection.ThresholdRange = [lower, upper]
    return selection


def point_size(bounds: list[float], view_pixels: int = 1200) -> float:
    """A sphere size in pixels that roughly fills the tank with the particles."""
    extent = max(bounds[1] - bounds[0], bounds[3] - bounds[2], bounds[5] - bounds[4], 1e-9)
    return max(2.0, min(12.0, view_pixels / extent * 0.006))


def main(argv: list[str]) -> int:
    """Build the pipeline for the run folder given on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "run",
        nargs="?",
        default=os.environ.get("DAMBREAK_RUN", "outputs/dambreak"),
        help="run folder holding particles.pvd",
    )
    parser.add_argument("--screenshot", help="save the last time step as this PNG and exit")
    args = parser.parse_args(argv)

    pvd = os.path.join(args.run, "particles.pvd")
    if not os.path.isfile(pvd):
        print(f"no particles.pvd in {args.run}", file=sys.stderr)
        return 2
    reader = PVDReader(FileName=pvd)
    reader.UpdatePipeline()
    bounds = reader.GetDataInformation().GetBounds()

    view = GetActiveViewOrCreate("RenderView")
    view.OrientationAxesVisibility = 1
    view.Background = [1.0, 1.0, 1.0]
    if hasattr(view, "UseColorPaletteForBackground"):  # ParaView 5.10+: use our background
        view.UseColorPaletteForBackground = 0

    boundaries = kind_threshold(reader, WALL, OBSTACLE)
    walls = Show(boundaries, view)
    walls.Representation = "Points"
    walls.PointSize = point_size(bounds)
    walls.RenderPointsAsSpheres = 1
    ColorBy(walls, None)
    walls.AmbientColor = walls.DiffuseColor = [0.8, 0.8, 0.8]
    walls.Opacity = 0.15

    fluid = kind_threshold(reader, FLUID, FLUID)
    water = Show(fluid, view)
    water.Representation = "Points"
    water.PointSize = point_size(bounds)
    water.RenderPointsAsSpheres = 1
    ColorBy(water, ("POINTS", "speed"))
    speed = GetColorTransferFunction("speed")
    speed.ApplyPreset("Viridis (matplotlib)", True)
    water.RescaleTransferFunctionToDataRangeOverTime()  # one colour range for the whole run
    water.SetScalarBarVisibility(view, True)

    clock = Show(AnnotateTimeFilter(Input=reader), view)
    clock.FontSize = 14
    clock.Color = [0.0, 0.0, 0.0]

    scene = GetAnimationScene()
    scene.UpdateAnimationUsingDataTimeSteps()

    centre = [(bounds[0] + bounds[1]) / 2, (bounds[2] + bounds[3]) / 2, (bounds[4] + bounds[5]) / 2]
    size = max(bounds[1] - bounds[0], bounds[3] - bounds[2], bounds[5] - bounds[4])
    view.CameraFocalPoint = centre
    view.CameraPosition = [centre[0] - 0.6 * size, centre[1] - 1.6 * size, centre[2] + 0.9 * size]
    view.CameraViewUp = [0.0, 0.0, 1.0]
    view.ResetCamera()  # keeps the direction, fits the tank in the view
    Render(view)

    if args.screenshot:
        scene.AnimationTime = scene.EndTime
        Render(view)
        SaveScreenshot(args.screenshot, view, ImageResolution=[1600, 900])
        print(f"saved {args.screenshot}")
    elif not getattr(paraview, "fromGUI", False):
        Interact(view)
    return 0


_IN_GUI = bool(getattr(paraview, "fromGUI", False))
if __name__ == "__main__" or _IN_GUI:
    # In the GUI, sys.argv holds the GUI's own arguments: take the run from $DAMBREAK_RUN.
    _status = main([] if _IN_GUI else sys.argv[1:])
    if _status and not _IN_GUI:
        sys.exit(_status)
