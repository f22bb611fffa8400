"""The Hydra config tree, installed as the `lme_configs` package (setup.py); found by harness/config_files.py."""
