"""Open a dambreak run in ParaView: fluid spheres coloured by speed, tank and obstacles see-through.

A pvpython script for ParaView 5.10 to 5.13 (it uses only paraview.simple). Run it

    pvpython scripts/paraview_view.py outputs/quick                      # interactive window
    xvfb-run -a -s "-noreset" pvpython scripts/paraview_view.py outputs/quick --screenshot v.png
    pvpython scripts/paraview_view.py outputs/quick --color pressure --time 0.5 --screenshot p.png
    pvpython scripts/paraview_view.py outputs/quick --animation frames/  # every snapshot
    pvpython scripts/paraview_view.py outputs/quick --state quick.pvsm   # for File > Load State
    DAMBREAK_RUN=outputs/quick paraview --script=scripts/paraview_view.py   # in the GUI

Without a screen, put `xvfb-run -a -s "-noreset"` before pvpython (`-s` replaces xvfb-run's
default server arguments, whose screen of 1280 x 1024 x 24 is also Xvfb's own default):
pvpython connects to the X server more than once, and a server that resets when its last client
leaves (the default) can drop the next connection ("bad X server connection"). In the GUI
(`--script`, or Run Script in its Python shell) there is no command line: the run folder is
$DAMBREAK_RUN (default outputs/dambreak) and further options can be given in
$DAMBREAK_VIEW_ARGS, e.g. DAMBREAK_VIEW_ARGS="--color density".

The run folder's particles.pvd lists the snapshots with their simulated times; each snapshot
holds the point arrays id, kind (0 fluid, 1 wall, 2 obstacle), velocity, speed, pressure and
density. Two Threshold filters on `kind` split the fluid from the boundaries. The fluid is
drawn as spheres of diameter dp (read from the run's config.toml) so that the water looks
like a continuum at any zoom, coloured over one range for the whole run (a colour that changes
meaning from frame to frame would make an animation lie); the boundaries as faint grey spheres,
so that the water behind walls and obstacles shows. The camera looks at the tank from the
front-left, above, with z up, as in every dambreak case.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys

from paraview.simple import (
    AnnotateTimeFilter,
    ColorBy,
    GetActiveViewOrCreate,
    GetAnimationScene,
    GetColorTransferFunction,
    GetScalarBar,
    Interact,
    PVDReader,
    Render,
    SaveScreenshot,
    SaveState,
    Show,
    Threshold,
)

FLUID, WALL, OBSTACLE = 0, 1, 2
FIELDS = {"speed": "speed (m/s)", "pressure": "pressure (Pa)", "density": "density (kg/m^3)"}
"""The colourable point arrays and the colour bar's title for each."""
BLACK = [0.0, 0.0, 0.0]


def read_dp(run: str) -> float:
    """particles.dp from the run's config.toml, the resolved config `dambreak run` writes.

    Read by a line scan rather than tomllib because the pvpython of ParaView's own binaries
    (5.10 to 5.13) is Python 3.9 or 3.10, which has no tomllib; the file is dambreak's own
    output, with `dp = <number>` on one line of its [particles] section.
    """
    path = os.path.join(run, "config.toml")
    section = None
    with open(path, encoding="utf-8") as file:
        for line in file:
            header = re.match(r"\s*\[+([^\]]+)\]+", line)
            if header:
                section = header.group(1).strip()
                continue
            value = re.match(r"\s*dp\s*=\s*([-+0-9.eE]+)", line)
            if section == "particles" and value:
                return float(value.group(1))
    raise ValueError(f"{path} has no particles.dp")


def kind_threshold(source, lower: int, upper: int):
    """The particles whose `kind` lies in [lower, upper] (point data; one vertex per cell)."""
    selection = Threshold(Input=source)
    selection.Scalars = ["POINTS", "kind"]
    selection.LowerThreshold = lower
    selection.UpperThreshold = upper
    selection.ThresholdMethod = "Between"
    return selection


def show_spheres(source, view, radius: float):
    """Show `source` as shaded spheres of `radius` in metres (not pixels, unlike PointSize)."""
    display = Show(source, view)
    display.SetRepresentationType("Point Gaussian")
    display.ShaderPreset = "Sphere"
    display.ScaleByArray = 0
    display.GaussianRadius = radius
    return display


def time_format(annotation) -> str:
    """A format for the simulated time in the syntax this ParaView's AnnotateTimeFilter takes.

    Its default tells the syntax apart: Python's ("Time: {time:f}", 5.11 and later) or printf's
    ("Time: %f", 5.9 and earlier; 5.10 is taken either way).
    """
    return "t = {time:.3f} s" if "{" in annotation.Format else "t = %.3f s"


def fixed_colour_range(display, view, field: str) -> None:
    """Colour `display` by `field` over its range across all snapshots, with a colour bar."""
    ColorBy(display, ("POINTS", field))
    lut = GetColorTransferFunction(field)
    lut.ApplyPreset("Viridis (matplotlib)", True)
    display.RescaleTransferFunctionToDataRangeOverTime()
    lut.AutomaticRescaleRangeMode = "Never"  # keep the run's range on every frame
    bar = GetScalarBar(lut, view)
    bar.Title = FIELDS[field]
    bar.ComponentTitle = ""
    bar.TitleColor = bar.LabelColor = BLACK  # the default white vanishes on our white
    bar.TitleFontSize = 18
    bar.LabelFontSize = 15
    bar.DrawTickLabels = 1
    bar.AddRangeLabels = 1
    bar.RangeLabelFormat = "%.4g"
    bar.ScalarBarLength = 0.4
    bar.Visibility = 1


def place_camera(view, bounds: list[float]) -> None:
    """Look at the particles from the front-left, above, with z up, and fit them in the view."""
    centre = [(bounds[2 * i] + bounds[2 * i + 1]) / 2 for i in range(3)]
    size = max(bounds[1] - bounds[0], bounds[3] - bounds[2], bounds[5] - bounds[4])
    view.CameraFocalPoint = centre
    view.CameraPosition = [centre[0] - 0.6 * size, centre[1] - 1.6 * size, centre[2] + 0.9 * size]
    view.CameraViewUp = [0.0, 0.0, 1.0]
    view.CameraParallelProjection = 0
    view.ResetCamera(False)  # keeps the direction and the up axis, fits the tank
    view.GetActiveCamera().Dolly(1.3)  # ResetCamera leaves a wide margin round the tank


def build(reader, first_time: float, radius: float, field: str):
    """The view and animation scene of the run `reader` reads: spheres of `radius`, coloured by
    `field`, the camera fitted to the particles at `first_time`."""
    reader.UpdatePipeline(first_time)
    bounds = reader.GetDataInformation().GetBounds()

    view = GetActiveViewOrCreate("RenderView")
    view.UseColorPaletteForBackground = 0
    view.Background = [1.0, 1.0, 1.0]
    view.OrientationAxesVisibility = 1
    view.OrientationAxesLabelColor = BLACK

    for kind, grey, opacity in ((WALL, 0.6, 0.08), (OBSTACLE, 0.35, 0.25)):
        solid = show_spheres(kind_threshold(reader, kind, kind), view, radius)
        solid.ColorArrayName = ["POINTS", ""]  # one plain colour; ColorBy(solid, None) fails
        solid.AmbientColor = solid.DiffuseColor = [grey, grey, grey]
        solid.Opacity = opacity

    water = show_spheres(kind_threshold(reader, FLUID, FLUID), view, radius)
    fixed_colour_range(water, view, field)

    annotation = AnnotateTimeFilter(Input=reader)
    annotation.Format = time_format(annotation)
    clock = Show(annotation, view)
    clock.FontSize = 18
    clock.Color = BLACK

    scene = GetAnimationScene()
    scene.UpdateAnimationUsingDataTimeSteps()
    Render(view)  # the first Render resets the camera: place ours after it
    place_camera(view, bounds)
    return view, scene


def nearest_time(times: list[float], wanted: float) -> float:
    """The snapshot time closest to `wanted`, which must lie within the run."""
    slack = (times[-1] - times[0]) / max(len(times) - 1, 1) / 2  # half a snapshot interval
    if not times[0] - slack <= wanted <= times[-1] + slack:
        raise ValueError(f"--time {wanted} is outside the run's {times[0]:g} to {times[-1]:g} s")
    return min(times, key=lambda t: abs(t - wanted))


def show_time(view, scene, time: float) -> None:
    """Go to the snapshot at `time` and render it."""
    scene.AnimationTime = time
    view.ViewTime = time
    Render(view)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line (or $DAMBREAK_VIEW_ARGS in the GUI)."""
    parser = argparse.ArgumentParser(prog="paraview_view.py", description=__doc__.splitlines()[0])
    parser.add_argument(
        "run",
        nargs="?",
        default=os.environ.get("DAMBREAK_RUN", "outputs/dambreak"),
        help="run folder holding particles.pvd and config.toml (default $DAMBREAK_RUN or "
        "outputs/dambreak)",
    )
    parser.add_argument("--color", choices=sorted(FIELDS), default="speed", help="colour by")
    parser.add_argument(
        "--time", type=float, help="show the snapshot nearest this simulated time (default last)"
    )
    parser.add_argument("--screenshot", metavar="FILE", help="save the frame as this PNG")
    parser.add_argument(
        "--animation", metavar="DIR", help="save every snapshot as DIR/frame_00000.png, ..."
    )
    parser.add_argument("--state", metavar="FILE", help="save a ParaView state (.pvsm)")
    parser.add_argument(
        "--size",
        nargs=2,
        type=int,
        default=[1600, 900],
        metavar=("WIDTH", "HEIGHT"),
        help="image size in pixels (default 1600 900)",
    )
    return parser.parse_args(argv)


def main(argv: list[str], interactive: bool = True) -> int:
    """Build the view of the run, then save what was asked; interact if nothing was asked."""
    args = parse_args(argv)
    pvd = os.path.join(args.run, "particles.pvd")
    if not os.path.isfile(pvd):
        print(f"no particles.pvd in {args.run}", file=sys.stderr)
        return 2
    # Every refusal comes before the view exists: see the note on sys.exit at the end.
    reader = PVDReader(FileName=pvd)
    times = [float(t) for t in reader.TimestepValues]
    try:
        time = times[-1] if args.time is None else nearest_time(times, args.time)
        radius = read_dp(args.run) / 2
    except (OSError, ValueError) as error:
        print(error, file=sys.stderr)
        return 2
    view, scene = build(reader, times[0], radius, args.color)
    size = list(args.size)
    view.ViewSize = size
    if args.animation:
        os.makedirs(args.animation, exist_ok=True)
        for index, frame_time in enumerate(times):
            show_time(view, scene, frame_time)
            path = os.path.join(args.animation, f"frame_{index:05d}.png")
            SaveScreenshot(path, view, ImageResolution=size)
        print(f"saved {len(times)} frames in {args.animation}")
    show_time(view, scene, time)
    if args.screenshot:
        SaveScreenshot(args.screenshot, view, ImageResolution=size)
        print(f"saved {args.screenshot} (t = {time:g} s)")
    if args.state:
        SaveState(args.state)
        print(f"saved {args.state}")
    if interactive and not (args.screenshot or args.animation or args.state):
        Interact(view)
    return 0


# pvpython puts the script's path in sys.argv[0]; the GUI (--script, or Run Script in its Python
# shell) leaves it empty and has its own event loop, so there the options come from the
# environment and the view is left to the GUI. sys.exit once a view exists makes pvpython 5.11
# under Xvfb fail at exit (GLXBadContext, status 1), so it is called for refusals only.
_EMBEDDED = not (sys.argv and sys.argv[0])
if __name__ == "__main__":
    if _EMBEDDED:
        main(shlex.split(os.environ.get("DAMBREAK_VIEW_ARGS", "")), interactive=False)
    else:
        _status = main(sys.argv[1:])
        if _status:
            sys.exit(_status)
