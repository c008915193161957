"""cfn-lint over many templates at once, in worker processes of their own.

One lint of a stack's template takes seconds of one core, and tests/infra/test_cfn_lint.py lints over a dozen:
two processes halve the wait on this project's two-core machines. Each answer is plain data (a finding's
rule, path and message), so it crosses a process boundary.
"""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Any

LINT_PROCESSES = 2

Finding = tuple[str, tuple[Any, ...], str]  # rule id, path in the template, message


def lint_findings(template: dict[str, Any], region: str) -> list[Finding]:
    from cfnlint.api import lint
    from cfnlint.config import ManualArgs

    matches = lint(json.dumps(template), config=ManualArgs(regions=[region]))
    # cfn-lint's strings are its own node classes, which do not pickle: plain ones cross back.
    plain = [(str(m.rule.id), tuple(p if isinstance(p, int) else str(p) for p in m.path), str(m.message))
             for m in matches]  # fmt: skip
    return plain


def lint_all(templates: dict[str, dict[str, Any]], region: str) -> dict[str, list[Finding]]:
    """Each template's findings, by name (spawned processes: this one runs gRPC and jsii threads)."""
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(LINT_PROCESSES, mp_context=spawn) as pool:
        runs = {name: pool.submit(lint_findings, template, region) for name, template in templates.items()}
        return {name: run.result() for name, run in runs.items()}
