from django.urls import re_path

from portability.api.views import ExportView

urlpatterns = [re_path(r"^export/?$", ExportView.as_view(), name="export")]
