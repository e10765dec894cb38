"""Serializer fields that take JSON as the schema states it: a string field refuses a number.

DRF's CharField turns 42 into "42", so a request the OpenAPI schema calls invalid was accepted
(schemathesis found it on the knowledge-base endpoints).
"""

from django.db import models
from rest_framework import serializers


class _Strings:
    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharField(_Strings, serializers.CharField):
    default_error_messages = {"invalid": "Not a valid string."}


class StrictSlugField(_Strings, serializers.SlugField):
    pass


# For a ModelSerializer's `serializer_field_mapping`: its text columns as strict string fields.
STRICT_TEXT_FIELDS = {
    **serializers.ModelSerializer.serializer_field_mapping,
    models.CharField: StrictCharField,
    models.TextField: StrictCharField,
    models.SlugField: StrictSlugField,
}
