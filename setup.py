"""Package list for setuptools (the metadata is in pyproject.toml): the code packages, and `configs/` shipped as
the `lme_configs` package (its group folders as subpackages holding only YAML) so that a non-editable install
finds the Hydra config tree (harness/config_files.py). pyproject.toml alone cannot add a renamed folder to the
discovered packages."""

from setuptools import find_namespace_packages, find_packages, setup

CONFIG_GROUPS = [f"lme_configs.{p}" for p in find_namespace_packages(where="configs")]

setup(
    packages=[*find_packages(include=["harness*", "runners*", "commands*", "reports*"]), "lme_configs", *CONFIG_GROUPS],
    package_dir={"lme_configs": "configs"},
    # harness.memory: the HTTP contract's OpenAPI document (contract.openapi.json), served by the reference server
    package_data={"lme_configs": ["*.yaml"], **{g: ["*.yaml"] for g in CONFIG_GROUPS}, "harness.memory": ["*.json"]},
)
