"""Per-run claims of `saferl train`, so several processes can fill one store without training a run twice.

The claim machinery is the cube's (`cube.store.claims`): the same claims the Recorder and
`saferl import --into` take, so a run has one writer whatever writes it. A sweep's claims are process-wide
(`try_claim` / `release`); see `cube.store.claims` for the file format, the lock and when a claim is taken over.
"""

from __future__ import annotations

from cube.store.claims import (
    CLAIMS_DIR,
    ClaimState,
    claim_path,
    claim_state,
    parse_claim,
    read_claim,
    release,
    try_claim,
)

__all__ = ["CLAIMS_DIR", "ClaimState", "claim_path", "claim_state", "parse_claim", "read_claim", "release",
           "try_claim"]
