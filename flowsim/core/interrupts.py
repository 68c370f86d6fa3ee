"""Ctrl-C between TensorFlow calls, never inside one.

Python turns SIGINT into a ``KeyboardInterrupt`` at the next bytecode the main
thread runs.  While a chunk runs, that bytecode is most often inside
TensorFlow's own Python code around a C++ call (``quick_execute``, a device
scope's ``__enter__``/``__exit__``, the wrapping of the outputs), and an
exception raised there can leave TensorFlow's state half-updated: the run then
ended with ``RuntimeError: Exiting device scope without proper scope nesting``
instead of the interrupt, or died with SIGSEGV while the interpreter exited.
:class:`held` keeps the first Ctrl-C until the chunk has finished (or failed) and
raises the ``KeyboardInterrupt`` there, in flowsim's code, so a run stops at
most one chunk (``events_limit`` events) later.  A second Ctrl-C during that
chunk ends the process at once, as an uncaught SIGINT does.
"""
import signal
import threading

__all__ = ["held"]


class held:
    """Context manager: a Ctrl-C that arrives inside raises ``KeyboardInterrupt``
    when the block ends (also if it ends with an exception: that one becomes the
    interrupt's ``__context__``); a second one kills the process (SIGINT's default).

    It acts only in the main thread (the only one Python delivers signals to),
    and only while SIGINT has Python's default handler: a handler of the
    program's own, an ignored SIGINT, or a :class:`held` block around this one
    is left as it is.

    ``stopping=True``: the run is stopping already (a Ctrl-C or an error; the
    block waits for work in flight): a Ctrl-C inside ends the process.
    """

    __slots__ = ("_previous", "_pending", "_stopping")

    def __init__(self, stopping=False):
        self._previous = None
        self._pending = False
        self._stopping = bool(stopping)

    def __enter__(self):
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._previous = signal.signal(
                signal.SIGINT, signal.SIG_DFL if self._stopping else self._hold)
        return self

    def _hold(self, signum, frame):
        self._pending = True
        signal.signal(signal.SIGINT, signal.SIG_DFL)    # a second Ctrl-C ends the process

    def __exit__(self, *exc):
        if self._previous is None:
            return False
        signal.signal(signal.SIGINT, self._previous)
        self._previous = None
        if self._pending:
            self._pending = False
            raise KeyboardInterrupt
        return False
