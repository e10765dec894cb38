"""What a tenant's changes tell the indexes: sent inside the change's transaction, acted on after it commits.

`tenants` sits at the bottom and imports no other app; `retrieval` (retrieval/signals.py) receives
these and schedules its index work with `transaction.on_commit`, as for memory/signals.py.
"""

from django.dispatch import Signal

# tenant_id: the tenant's isolation was set (switched, or set again to finish a move that died).
isolation_set = Signal()
