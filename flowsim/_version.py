"""flowsim's version: the one place it is written (read by ``flowsim.__version__``,
``setup.py`` and the Makefile's ``dist`` target)."""
__version__ = "0.1.0"
