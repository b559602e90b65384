"""Safe file writing for run outputs: atomic replacement and the output folder's life cycle.

Readers (ParaView following a .pvd, a plotting script tailing probes, a second process) may
look at the output folder while a run writes it. Every whole-file write therefore goes to a
temporary file in the same folder and is moved into place with os.replace, which is atomic on
POSIX and Windows when source and target are on one file system: a reader sees the old file
or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

#: The files a run writes into its output folder: the only ones `prepare_output_dir` removes
#: when told to overwrite. Anything else there (plots, reports of other tools) is left alone.
RUN_FILE_PATTERNS: tuple[str, ...] = (
    "particles_*.vtp",
    "particles_*.npz",
    "particles.pvd",
    "probes.csv",
    "removed.csv",
    "config.toml",
    "summary.json",
    "checkpoint.npz",
)

#: Suffix of the temporary files made by `atomic_target`; their names are
#: ".<target name>.<random>.tmp", hidden, so that no glob of run files matches them.
_TEMP_SUFFIX = ".tmp"


class OutputExistsError(FileExistsError):
    """The output folder already holds results and overwriting was not asked for."""


class OutputNotWritableError(PermissionError):
    """The output folder cannot be created or written into."""


def _current_umask() -> int:
    """The process umask (read by setting and restoring it; there is no getter)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_target(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path next to `path`; on normal exit move it onto `path` atomically.

    For writers that insist on opening a file name themselves (VTK's XML writers). If the
    body raises, the temporary file is removed and `path` is untouched. The final file gets
    the permissions an ordinary `open(path, "w")` would give (0666 less the umask), not the
    0600 of mkstemp.
    """
    path = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=_TEMP_SUFFIX, dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_current_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Write `data` to `path` so that readers only ever see the old or the complete new file.

    The data is flushed and fsync'ed before the rename, so a crash leaves either the old file
    or the new one on disk, not an empty file under the new name.
    """
    with atomic_target(path) as tmp, open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def atomic_write_text(path: Path | str, text: str, encoding: str = "utf-8") -> None:
    """Write `text` to `path` atomically (see `atomic_write_bytes`); newlines are kept as given."""
    atomic_write_bytes(path, text.encode(encoding))


def is_run_file(name: str) -> bool:
    """Whether a file called `name` is one a run writes (or a leftover temporary of one)."""
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in RUN_FILE_PATTERNS):
        return True
    # A temporary ".<target>.<random>.tmp" left behind by a killed run.
    if name.startswith(".") and name.endswith(_TEMP_SUFFIX):
        target = name[1:].rsplit(".", 2)[0]
        return any(fnmatch.fnmatchcase(target, pattern) for pattern in RUN_FILE_PATTERNS)
    return False


def prepare_output_dir(path: Path, force: bool) -> None:
    """Make `path` ready to receive a run's output.

    A missing folder is created (with its parents). An existing, empty folder is used as is.
    An existing folder that holds anything is refused with `OutputExistsError` unless `force`
    is set; with `force`, only the files a run writes (`RUN_FILE_PATTERNS`, plus temporaries
    of them left by a killed run) are removed, so plots and reports made by other tools
    survive a rerun. Sub-folders are never removed.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"output path {path} exists and is not a folder")
    if path.is_dir() and any(path.iterdir()):
        if not force:
            raise OutputExistsError(
                f"output folder {path} already holds results; pass --force to start again "
                f"or --resume {path} to continue a stopped run"
            )
        for entry in path.iterdir():
            if is_run_file(entry.name) and (entry.is_file() or entry.is_symlink()):
                entry.unlink()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputNotWritableError(f"cannot create output folder {path}: {error}") from None
    check_writable(path)


def check_writable(path: Path) -> None:
    """Raise OutputNotWritableError unless a file can be made in the folder `path`.

    Tried with a real temporary file, since permission bits do not tell (root ignores them,
    a read-only mount does not show in them).
    """
    try:
        fd, name = tempfile.mkstemp(prefix=".write-test.", suffix=_TEMP_SUFFIX, dir=path)
    except OSError as error:
        raise OutputNotWritableError(f"cannot write into output folder {path}: {error}") from None
    os.close(fd)
    os.unlink(name)


def remove_temporaries(path: Path) -> None:
    """Remove the temporaries of run files that a killed run left in the folder `path`."""
    for entry in Path(path).iterdir():
        if entry.name.startswith(".") and is_run_file(entry.name) and entry.is_file():
            entry.unlink()
