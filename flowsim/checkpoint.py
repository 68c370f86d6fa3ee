"""Checkpoints: the whole run state after each iteration, written atomically.

A checkpoint is one ``.npz`` file: a JSON header (configuration, finished
iteration records, elapsed time) plus the simulation's adaptive state arrays.
It is written to a temporary file in the same directory, flushed to disk and
renamed over the old one, so a run killed at any moment leaves either the
previous checkpoint or the new one, never half of one.
"""
import json
import os
import tempfile

import numpy as np

FORMAT = 1


def save(path, config, records, elapsed, state):
    path = os.fspath(path)
    header = json.dumps({"format": FORMAT, "config": config, "records": records,
                         "elapsed": elapsed})
    arrays = {f"state/{k}": np.asarray(v) for k, v in state.items()}
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".flowsim-ckpt-", suffix=".npz", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, header=np.array(header), **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def check_path(path):
    """Raise a clear error now if ``path`` cannot hold a checkpoint (no such directory)."""
    directory = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not os.path.isdir(directory):
        raise ValueError(f"checkpoint {os.fspath(path)!r}: directory {directory!r} does not exist")
    if os.path.isdir(path):
        raise ValueError(f"checkpoint {os.fspath(path)!r} is a directory, not a file")


def load(path):
    """``(config, records, elapsed, state)`` from a checkpoint, or None if absent."""
    path = os.fspath(path)
    if not os.path.exists(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(str(data["header"]))
            state = {k[len("state/"):]: data[k] for k in data.files if k.startswith("state/")}
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the same problem
        raise ValueError(f"checkpoint {path!r} is not a readable flowsim checkpoint: {exc}") from exc
    if header.get("format") != FORMAT:
        raise ValueError(f"checkpoint {path!r} has format {header.get('format')!r}, "
                         f"this flowsim reads format {FORMAT}")
    return header["config"], header["records"], header["elapsed"], state


def differences(saved, current, prefix=""):
    """Human-readable list of what differs between two configuration dicts."""
    out = []
    for key in sorted(set(saved) | set(current)):
        a, b = saved.get(key, "<absent>"), current.get(key, "<absent>")
        if isinstance(a, dict) and isinstance(b, dict):
            out += differences(a, b, prefix=f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: checkpoint has {a!r}, this run has {b!r}")
    return out
