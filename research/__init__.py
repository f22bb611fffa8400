"""Measurement studies of the harness (speed, overhead, retrieval fits, model probes), beside the product: nothing
the wheel ships imports them (research/README.md). Each is a module run with
`python -m research.NAME` from the checkout, and what it prints or writes is quoted in docs/ with that command."""
