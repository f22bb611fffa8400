"""The `lme-harness` commands (commands/cli.py is the entry point): each parses its arguments and
drives the run pipeline (runners/) or the reports (reports/); no module below imports one."""
