"""The API keys page: owners and admins issue, rename and revoke their tenant's keys (tenants/keys.py).

The secret is in the answer to the POST that created it, and nowhere else: the page after a
redirect (or a reload) cannot show it again.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from console.shell import console_scope, render_page
from tenants import keys


def _page(request, scope, context=None, status=200):
    context = {"section": "keys", "keys": keys.tenant_keys(scope), "roles": keys.ROLES,
               "kbs": scope.knowledge_bases().order_by("name"), "form": {}, **(context or {})}
    return render_page(request, scope, "tenants/keys.html", context, status=status)


@login_required
def key_list(request):
    scope = console_scope(request, write=request.method == "POST")
    keys.require_manager(scope)
    if request.method != "POST":
        return _page(request, scope)
    form = {"name": request.POST.get("name", ""), "role": request.POST.get("role", keys.READ_ONLY),
            "kbs": request.POST.getlist("kb")}
    try:
        key, secret = keys.create_key(scope, form["name"], role=form["role"], kb_slugs=form["kbs"])
    except keys.KeyRequestError as exc:
        return _page(request, scope, {"form": form, "error": str(exc)}, status=400)
    return _page(request, scope, {"new_key": key, "secret": secret})


@login_required
@require_POST
def key_rename(request, key_id):
    scope = console_scope(request, write=True)
    key = keys.key_of(scope, key_id)
    try:
        keys.relabel_key(scope, key, request.POST.get("name", ""))
    except keys.KeyRequestError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Renamed key {key.key_id} to “{key.name}”.")
    return redirect("console:key-list")


@login_required
@require_POST
def key_revoke(request, key_id):
    scope = console_scope(request, write=True)
    key = keys.revoke_key(scope, keys.key_of(scope, key_id))
    messages.success(request, f"Revoked “{key.name}” ({key.key_id}): requests with it are refused from now on.")
    return redirect("console:key-list")
