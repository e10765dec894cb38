"""`/api/v1/keys`: a tenant's API keys for its owners and admins (signed in; a key cannot manage keys).

POST answers the secret once (`key`); later reads show its id and name only. DELETE revokes: the
key stays listed, revoked, so what it did stays attributable.
"""

from django.core.exceptions import PermissionDenied
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from tenants import keys
from tenants.api.scoping import ScopedMixin
from tenants.models import ApiKey


class ApiKeySerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="key_id", read_only=True, help_text="the key's public id (loci_<id>_…)")
    role = serializers.SerializerMethodField()
    knowledge_bases = serializers.SerializerMethodField(help_text="slugs; empty: every KB of the tenant")
    active = serializers.BooleanField(source="is_active", read_only=True)

    class Meta:
        model = ApiKey
        fields = ["id", "name", "role", "knowledge_bases", "active", "created_at", "created_by", "last_used_at",
                  "revoked_at"]

    def get_role(self, key) -> str:
        return keys.role_of(key)

    def get_knowledge_bases(self, key) -> list[str]:
        return sorted(kb.slug for kb in key.knowledge_bases.all())


class NewApiKeySerializer(ApiKeySerializer):
    key = serializers.CharField(read_only=True, help_text="the secret: shown in this answer only, never again")

    class Meta(ApiKeySerializer.Meta):
        fields = ["key", *ApiKeySerializer.Meta.fields]


class CreateApiKeySerializer(serializers.Serializer):
    name = serializers.CharField(max_length=keys.MAX_NAME)
    role = serializers.ChoiceField(choices=keys.ROLES, default=keys.READ_ONLY)
    knowledge_bases = serializers.ListField(child=serializers.CharField(), required=False, default=list,
                                            help_text="KB slugs the key is limited to; empty: the whole tenant")


class RenameApiKeySerializer(serializers.Serializer):
    name = serializers.CharField(max_length=keys.MAX_NAME)


class _KeysView(ScopedMixin, APIView):
    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if isinstance(request.auth, ApiKey):
            raise exceptions.PermissionDenied("An API key cannot manage API keys; sign in as an owner or admin.")
        try:
            keys.require_manager(self.scope)
        except PermissionDenied as exc:
            raise exceptions.PermissionDenied(str(exc)) from None

    def _act(self, call, *args, **kwargs):
        try:
            return call(self.scope, *args, **kwargs)
        except keys.KeyRequestError as exc:
            raise exceptions.ValidationError(str(exc)) from None
        except Http404 as exc:
            raise exceptions.NotFound(str(exc)) from None


class ApiKeyListView(_KeysView):
    """The tenant's API keys, active first (owners and admins)."""

    @extend_schema(responses=ApiKeySerializer(many=True), tags=["keys"])
    def get(self, request):
        return Response(ApiKeySerializer(keys.tenant_keys(self.scope), many=True).data)

    @extend_schema(request=CreateApiKeySerializer, responses={201: NewApiKeySerializer}, tags=["keys"])
    def post(self, request):
        data = CreateApiKeySerializer(data=request.data)
        data.is_valid(raise_exception=True)
        key, secret = self._act(keys.create_key, data.validated_data["name"], role=data.validated_data["role"],
                                kb_slugs=data.validated_data["knowledge_bases"])
        key.key = secret
        return Response(NewApiKeySerializer(key).data, status=status.HTTP_201_CREATED)


class ApiKeyDetailView(_KeysView):
    """One key: read it, rename it (PATCH {"name"}), revoke it (DELETE)."""

    @extend_schema(responses=ApiKeySerializer, tags=["keys"])
    def get(self, request, key_id):
        return Response(ApiKeySerializer(self._act(keys.key_of, key_id)).data)

    @extend_schema(request=RenameApiKeySerializer, responses=ApiKeySerializer, tags=["keys"])
    def patch(self, request, key_id):
        data = RenameApiKeySerializer(data=request.data)
        data.is_valid(raise_exception=True)
        key = self._act(keys.relabel_key, self._act(keys.key_of, key_id), data.validated_data["name"])
        return Response(ApiKeySerializer(key).data)

    @extend_schema(responses={200: ApiKeySerializer}, tags=["keys"])
    def delete(self, request, key_id):
        key = self._act(keys.revoke_key, self._act(keys.key_of, key_id))
        return Response(ApiKeySerializer(key).data)
