"""Every prompt text the harness sends, in one package; each is marked verbatim-reference (repo, file, commit,
symbol) or own in its module's `SOURCES` (harness/prompts/provenance.py says what the marks mean).

- answer.py: the answer-call system texts of the three strategies and the official LongMemEval answer prompt;
- ondemand.py: the on-demand session overview and post-tool prompt (and when the latter applies);
- summary.py: the reference default summary prompt;
- judges.py: the tRPC judge prompt and the official LongMemEval judge prompts.

The selectable summary prompts (`prompt=` group) keep their texts in configs/prompt/*.yaml, each file's header
stating its source (trpc_default, trpc_detailed: verbatim-reference; fact_keeper, state_recovery: own), so a
user can read and copy them next to the other settings; tests check trpc_default.yaml equals
summary.trpc_default_template() and trpc_detailed.yaml the vendored Go source.
"""

from __future__ import annotations

MODULES = ("answer", "ondemand", "summary", "judges")
