"""Checkpoints: the whole run state after each iteration, written atomically.

Usage: give :meth:`flowsim.Flow.run` a path; the same call resumes::

    flow = flowsim.Flow(flowsim.Vegas(f, dim=4), n_events=10**6, seed=1)
    result = flow.run(10, checkpoint="run.npz")   # written after every iteration
    # killed, Ctrl-C'd, a node lost: run the same again, in a new process
    result = flow.run(10, checkpoint="run.npz")   # resumes; the bits of an unbroken run

``flowsim run ... --checkpoint run.npz`` does the same from the command line.
``n_iter`` counts every iteration, those in the file included; a larger one
later runs on from where the file ends.  Caveats: the simulation must be the
same (see the fingerprint below: another integrand, limits, class or
attributes are refused, naming what differs), and so must the seed, events,
block size, dtype, XLA setting and generator; the backend and ``events_limit``
may change.  Bytecode differs between Python versions, so resume under the
Python that wrote the file.

A checkpoint is one ``.npz`` file (format :data:`FORMAT`): a JSON header
(configuration, finished iteration records, elapsed time), the simulation's
adaptive state arrays and a SHA-256 checksum of both.

- Written to a temporary file in the same directory, flushed to disk and
  renamed over the old one: a run killed at any moment leaves either the
  previous checkpoint or the new one, never half of one.
- Read without pickle.  A file flowsim did not write, one edited or truncated
  (checksum or zip check fails) and one of an older format are refused with a
  ``ValueError`` saying which; the file is left as it is.
- The configuration includes a fingerprint of the simulation
  (:mod:`flowsim.core.fingerprint`: the integrand's code and its values at fixed
  points, limits, histograms...): :func:`differences` names what differs when
  another simulation meets the file.
- While a run uses the file it holds an exclusive ``flock`` on ``PATH.lock``
  (:func:`lock`); a second run on the same path is refused at once.  The lock
  goes with the process, even when it is killed; the lock file is removed when
  the run ends (one left by a killed run is harmless and reused).
"""
import hashlib
import json
import os
import socket
import tempfile

import numpy as np

try:
    import fcntl
except ImportError:         # not POSIX: no lock
    fcntl = None

FORMAT = 2
#: What a file flowsim wrote starts with: a zip entry named ``header.npy``.
_ZIP_ENTRY, _FIRST_NAME = b"PK\x03\x04", b"header.npy"
#: Keys of fingerprints (:mod:`flowsim.core.fingerprint`) and what differs when they do.
_DIGESTS = {"code": "code differs (bytecode, constants, names or closure values)",
            "values": "values at the check points differ",
            "content": "content differs"}


def save(path, config, records, elapsed, state):
    """Write a checkpoint to ``path`` atomically (a temporary file renamed over it).

    ``config``: the run's configuration (JSON-able, :meth:`flowsim.Flow.config`);
    ``records``: the finished iterations (JSON-able); ``elapsed``: seconds so far;
    ``state``: the simulation's adaptive state, ``{name: numpy array}``.
    """
    path = os.fspath(path)
    header = json.dumps({"format": FORMAT, "config": config, "records": records,
                         "elapsed": elapsed})
    arrays = {f"state/{k}": np.asarray(v) for k, v in state.items()}
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".flowsim-ckpt-", suffix=".npz", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, header=np.array(header), checksum=np.array(_checksum(header, arrays)),
                     **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _checksum(header, arrays):
    h = hashlib.sha256(header.encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape};".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def check_path(path):
    """Raise a clear error now if ``path`` cannot hold a checkpoint."""
    directory = os.path.dirname(os.path.abspath(os.fspath(path)))
    where = f"checkpoint {os.fspath(path)!r}"
    if not os.path.isdir(directory):
        problem = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise ValueError(f"{where}: directory {directory!r} {problem}")
    if os.path.isdir(path):
        raise ValueError(f"{where} is a directory, not a file")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ValueError(f"{where}: directory {directory!r} is not writable")


def lock(path):
    """Lock checkpoint ``path`` for this run; return the function that releases it.

    An exclusive, non-blocking ``flock`` on ``PATH.lock``: raises ValueError at
    once if another run (another process, or another open in this one) holds it.
    """
    path = os.fspath(path)
    lock_path = path + ".lock"
    if fcntl is None:
        return lambda: None
    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ValueError(f"checkpoint {path!r}: cannot create {lock_path!r} "
                             f"({exc.strerror}); is the directory writable?") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise ValueError(f"checkpoint {path!r} is in use by another run ({holder}, "
                             f"holding {lock_path!r}); wait for it to end or pass another "
                             f"path") from None
        try:        # the holder we waited for may have removed the file: lock the new one
            current = os.stat(lock_path)
            mine = os.fstat(fd)
            if (current.st_ino, current.st_dev) == (mine.st_ino, mine.st_dev):
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    os.ftruncate(fd, 0)
    os.write(fd, f"process {os.getpid()} on {socket.gethostname()}".encode())

    def release():
        try:
            os.unlink(lock_path)       # while still locked: see the loop above
        except FileNotFoundError:
            pass
        os.close(fd)
    return release


def load(path):
    """``(config, records, elapsed, state)`` from a checkpoint, or None if absent."""
    path = os.fspath(path)
    if not os.path.exists(path):
        return None
    with open(path, "rb") as fh:
        head = fh.read(40)
    if not (head.startswith(_ZIP_ENTRY) and head[30:] == _FIRST_NAME):
        raise ValueError(f"checkpoint {path!r} is not a readable flowsim checkpoint (not a "
                         f"file flowsim wrote; it is left as it is): pass another path")
    damaged = f"checkpoint {path!r} is damaged ({{}}): delete it or pass another path"
    try:
        with np.load(path, allow_pickle=False) as data:
            text = str(data["header"])
            checksum = str(data["checksum"]) if "checksum" in data.files else None
            arrays = {k: data[k] for k in data.files if k.startswith("state/")}
        header = json.loads(text)
        version = header["format"]
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the same problem
        raise ValueError(damaged.format(f"unreadable: {type(exc).__name__}")) from None
    if checksum is None and isinstance(version, int) and version < FORMAT:
        raise ValueError(f"checkpoint {path!r} has format {version}, from an older flowsim; "
                         f"this flowsim reads format {FORMAT} only: delete it (or finish the "
                         f"run with the older flowsim) or pass another path")
    if checksum != _checksum(text, arrays):
        raise ValueError(damaged.format("checksum mismatch"))
    if version != FORMAT:
        raise ValueError(f"checkpoint {path!r} has format {version!r}; this flowsim reads "
                         f"format {FORMAT} only: pass another path")
    state = {k[len("state/"):]: v for k, v in arrays.items()}
    return header["config"], header["records"], header["elapsed"], state


def differences(saved, current, prefix=""):
    """Human-readable list of what differs between two configuration dicts."""
    out = []
    for key in sorted(set(saved) | set(current)):
        where = f"{prefix}{key}"
        if key not in current and key in saved:
            out.append(f"{where}: only in the checkpoint")
            continue
        if key not in saved:
            value = current[key]
            hint = (f" (the checkpoint's run predates it: pass {key}={not value!r} to resume it)"
                    if isinstance(value, bool) else
                    f" (the checkpoint's run predates {key} {value!r}: start a new run)"
                    if isinstance(value, str) else "")
            out.append(f"{where}: only in this run{hint}")
            continue
        a, b = saved[key], current[key]
        if isinstance(a, dict) and isinstance(b, dict):
            out += differences(a, b, prefix=f"{where}.")
        elif a != b and key in _DIGESTS and isinstance(a, str) and isinstance(b, str):
            out.append(f"{prefix[:-1] or key}: {_DIGESTS[key]}")
        elif a != b:
            out.append(f"{where}: checkpoint has {a!r}, this run has {b!r}")
    return out
