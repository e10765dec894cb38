"""/api/schema/: the OpenAPI schema as YAML by default, and as JSON a browser shows with `?format=json`.

Apart from loci.api_schema, which the REST framework's settings import while drf_spectacular.views
is still loading (importing the view there would be circular).
"""

from drf_spectacular.renderers import (OpenApiJsonRenderer, OpenApiJsonRenderer2, OpenApiYamlRenderer,
                                       OpenApiYamlRenderer2)
from drf_spectacular.views import SpectacularAPIView


class SchemaView(SpectacularAPIView):
    """`?format=json` answers application/json, which a browser displays instead of downloading it;
    `Accept: application/vnd.oai.openapi+json` still gets that type."""

    renderer_classes = [OpenApiYamlRenderer, OpenApiYamlRenderer2, OpenApiJsonRenderer2, OpenApiJsonRenderer]
