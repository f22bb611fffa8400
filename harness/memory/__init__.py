"""Memory systems as contestants: the provider contract (provider.py), its HTTP form, built-in providers."""
