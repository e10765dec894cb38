"""The time the throttles count by (tenants/throttle.py, tenants/rate_limits.py): wall-clock seconds.

One function to replace, so a test moves time forward instead of sleeping through a window
(tests/conftest.py: the `clock` fixture).
"""

import time


def now() -> float:
    return time.time()
