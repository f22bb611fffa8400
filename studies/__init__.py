"""Measurement studies of the harness (speed, overhead, retrieval fits, model probes): each is a module run with
`python -m studies.NAME` from the checkout, and what it prints or writes is quoted in docs/ with that command."""
