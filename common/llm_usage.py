"""Token accounting of the chat model: per tenant and step in a ledger, per step in the metrics, and
the daily budget per tenant (LLM_TOKEN_BUDGET) that refuses a call once it is spent.

The ledger lives with the tenants (tenants/llm_usage.py, a table), which this layer may not import:
TenantsConfig.ready() registers it. Without one (a script without the apps) only the metrics count.
"""

from django.conf import settings

from common import llm_scope

_ledger = None


def register_ledger(ledger) -> None:
    """`ledger` has record(tenant_id, step, prompt_tokens, completion_tokens) and spent_today(tenant_id)."""
    global _ledger
    _ledger = ledger


def tokens_of(response) -> tuple[int, int]:
    """(prompt, completion) tokens a reply's `usage` reports; (0, 0) from a server that sends none."""
    usage = getattr(response, "usage", None)
    return int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0)


def record(step: str, prompt_tokens: int, completion_tokens: int) -> None:
    tenant_id = llm_scope.current().tenant_id
    if _ledger is not None and tenant_id is not None:
        _ledger.record(tenant_id, step, prompt_tokens, completion_tokens)


def spent_budget() -> tuple[int, int] | None:
    """(spent, budget) when the current tenant has used its day's LLM_TOKEN_BUDGET, else None.

    Checked before each call, so the call that crosses the budget is still answered and counted:
    a reply's size is known only once it is in."""
    budget = settings.LLM_TOKEN_BUDGET
    tenant_id = llm_scope.current().tenant_id
    if not budget or tenant_id is None or _ledger is None:
        return None
    spent = _ledger.spent_today(tenant_id)
    return (spent, budget) if spent >= budget else None
