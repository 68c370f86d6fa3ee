"""The ``flowsim`` logger: quiet (WARNING) by default, ``flowsim.log.verbose()`` to see progress."""
import logging

logger = logging.getLogger("flowsim")
logger.addHandler(logging.NullHandler())


def verbose(level=logging.INFO):
    """Send flowsim's log records to stderr at ``level``."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("[flowsim] %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level)
    return logger
