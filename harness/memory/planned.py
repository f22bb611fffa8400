"""What `lme-harness plan` puts in place of a remote memory provider (a hosted service, one over HTTP): a plan
makes no call and sends nothing anywhere, so it must neither upload a case's history nor spend on the service.

The stand-in is the full-context baseline under the remote provider's name: its retrieval (the newest sessions, at
most top_k, which the contestant cuts to the context cap as it cuts any provider's items) bounds what a provider
could hand the reader, so the reader's call is planned at that bound. What the service itself spends (its own LLM
and embedding calls) is not planned, and the plan says so.
"""

from __future__ import annotations

from harness.memory.builtin import FullContextProvider
from harness.memory.provider import REQUIRED_CALLS, Capabilities


class PlannedProvider(FullContextProvider):
    """Stands in for the remote provider `name` in a plan; sends nothing."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__()

    def capabilities(self) -> Capabilities:
        return Capabilities(self.name, "planned: no request sent", REQUIRED_CALLS)
