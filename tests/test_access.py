import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404

from tenants.access import permitted_scope
from tenants.models import ApiKey, Membership

pytestmark = pytest.mark.usefixtures("api_schema_check")  # every response matches the OpenAPI schema


def test_it_gives_an_owner_every_kb_of_their_tenant(world):
    scope = permitted_scope(world.alice, write=True)
    assert scope.tenant == world.acme
    assert scope.kb_ids == {world.docs.pk, world.notes.pk}
    assert scope.can_write and scope.can_manage


def test_it_refuses_writes_to_a_viewer(world):
    assert permitted_scope(world.bob).kb_ids == {world.docs.pk, world.notes.pk}
    with pytest.raises(PermissionDenied):
        permitted_scope(world.bob, write=True)


def test_it_narrows_a_member_to_granted_kbs(world):
    Membership.objects.get(user=world.bob).kb_grants.set([world.notes])
    assert permitted_scope(world.bob).kb_ids == {world.notes.pk}


def test_it_hides_other_tenants_as_not_found(world):
    with pytest.raises(Http404):
        permitted_scope(world.alice, tenant_slug="globex")
    with pytest.raises(Http404):
        permitted_scope(world.charlie, tenant_slug="acme")


def test_it_scopes_an_api_key_to_its_tenant_and_kbs(world):
    key = ApiKey.verify(world.alice_key)
    assert permitted_scope(key, write=True).kb_ids == {world.docs.pk, world.notes.pk}
    key.knowledge_bases.set([world.docs])
    assert permitted_scope(key).kb_ids == {world.docs.pk}
    with pytest.raises(Http404):
        permitted_scope(key, tenant_slug="globex")


def test_it_refuses_writes_with_a_read_only_key(world):
    with pytest.raises(PermissionDenied):
        permitted_scope(ApiKey.verify(world.acme_ro_key), write=True)


def test_a_revoked_or_forged_key_does_not_verify(world):
    key = ApiKey.verify(world.alice_key)
    assert ApiKey.verify(world.alice_key[:-2] + "xx") is None
    assert ApiKey.verify("loci_nothing_here") is None
    key.revoke()
    assert ApiKey.verify(world.alice_key) is None


def test_the_secret_is_stored_only_as_a_hash(world):
    key = ApiKey.verify(world.alice_key)
    # loci_<key id>_<secret>: the secret itself may hold "_" (token_urlsafe), so split after the key id.
    secret = world.alice_key.removeprefix(ApiKey.PREFIX).split("_", 1)[1]
    assert secret not in key.secret_hash and len(key.secret_hash) == 64


def test_anonymous_has_no_scope(world):
    from django.contrib.auth.models import AnonymousUser

    with pytest.raises(PermissionDenied):
        permitted_scope(AnonymousUser())
