"""Page-number pagination that refuses what its schema does not allow, instead of guessing.

DRF's own answers `page=abc` with a 404 and reads `page_size=-1` as the default size: a client that
sent a wrong value learns nothing, and the OpenAPI schema (integers, at least 1) and the server
disagreed (issue 30, schemathesis). Here a page or page size that is not an integer from 1 up is a 400
naming the parameter; a page size over `max_page_size` is read as the maximum, as DRF does (the
schema states no maximum, so that is no disagreement).
"""

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination


class StrictPageNumberPagination(PageNumberPagination):
    def paginate_queryset(self, queryset, request, view=None):
        self._check(request, self.page_query_param)
        if self.page_size_query_param:
            self._check(request, self.page_size_query_param)
        return super().paginate_queryset(queryset, request, view)

    @staticmethod
    def _check(request, name: str) -> None:
        raw = request.query_params.get(name)
        if raw is None or raw == "last":  # DRF's alias for the last page
            return
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 18 and int(raw) >= 1):
            raise ValidationError({name: f"'{name}' must be an integer from 1 up."})

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"]["minimum"] = 1
        return parameters
