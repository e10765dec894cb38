"""Where a webhook may point: public addresses only, unless the operator allows a host by name.

A webhook URL is user input that the server will call, so it must not reach the private network
(server-side request forgery: the metadata service, a database's HTTP port, the admin of a router).
Every address the host resolves to must be global; LOCI_WEBHOOK_ALLOWED_HOSTS names hosts (or
host:port) that are allowed anyway, such as a receiver on the same machine. Checked when an endpoint
is registered and again before every delivery, since a name can resolve elsewhere later.
"""

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings


class ForbiddenDestination(ValueError):
    """The URL may not be called: not http(s), unresolvable, or resolving to a non-public address."""


def check_destination(url: str) -> None:
    """Raise ForbiddenDestination with a reason unless `url` may receive webhooks."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ForbiddenDestination("A webhook URL must start with http:// or https://.")
    if parts.username or parts.password:
        raise ForbiddenDestination("A webhook URL may not carry credentials; the deliveries are signed instead.")
    host = (parts.hostname or "").lower()
    if not host:
        raise ForbiddenDestination("A webhook URL needs a host.")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ForbiddenDestination("The webhook URL's port is not a number from 1 to 65535.") from None
    allowed = {h.lower() for h in settings.LOCI_WEBHOOK_ALLOWED_HOSTS}
    if host in allowed or f"{host}:{port}" in allowed:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise ForbiddenDestination(f"The host {host} could not be resolved.") from None
    for info in infos:
        address = ipaddress.ip_address(info[4][0].split("%")[0])
        if not address.is_global:
            raise ForbiddenDestination(
                f"{host} resolves to {address}, which is not a public address; an operator can allow it "
                "with LOCI_WEBHOOK_ALLOWED_HOSTS.")
