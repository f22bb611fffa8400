"""`lme_official` under the name its config targets (the run fingerprint hashes `_target_`): the contestant
lives in harness/contestants/official.py."""

from harness.contestants.official import LongMemEvalOfficialMode, first_kept, session_blocks

__all__ = ["LongMemEvalOfficialMode", "first_kept", "session_blocks"]
