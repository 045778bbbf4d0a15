"""Files are written whole or not at all: a temporary file in the same folder, then rename."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def unwritable(folder: str | os.PathLike) -> str | None:
    """Why files cannot be written in ``folder`` (made if missing), or None when they can.

    Checked before any work starts, so a bad output path is one line, not a late traceback.
    """
    folder = Path(folder)
    existing = next(p for p in (folder, *folder.parents) if p.exists() or p == Path("."))
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"cannot write in {existing}"
    return None


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                         suffix=".tmp")
    try:
        os.fchmod(handle, 0o644)  # mkstemp makes 0600; results are meant to be shared
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)  # atomic on POSIX within one filesystem
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def write_json_atomic(path: str | os.PathLike, document: object) -> Path:
    text = json.dumps(document, indent=1, allow_nan=False, default=str)
    return write_bytes_atomic(path, text.encode())
