"""Sphinx configuration for flowsim (`make docs` builds with -W: warnings fail)."""
import os
import sys

sys.path.insert(0, os.path.abspath(".."))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

project = "flowsim"
author = "the flowsim developers"
copyright = "2026, the flowsim developers"
release = "0.1.0"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_numpy_docstring = True
html_theme = "alabaster"
html_static_path = []
exclude_patterns = ["_build"]
nitpicky = False
napoleon_use_param = False
napoleon_use_rtype = False
