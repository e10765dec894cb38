"""`__in` over a long list of values as one bound parameter, for every query of the project.

A database caps the parameters of one statement: SQLite builds before 3.32 at 999 (modern ones at
32,766, Debian's at 250,000), PostgreSQL's protocol at 65,535. Lists here grow with a request (a
search's document ids) or with a tenant (its knowledge bases: every scoped query filters
`kb_id__in=scope.kb_ids`; a cluster's cases; a user's memories in a delete), so a plain `IN (%s, …)`
turns a large tenant into `too many SQL variables` 500s. Batching each call site would split what
must stay one query (an ORDER BY … LIMIT, a count, an exists, a paginator's page); instead the
lookup itself sends a list longer than ONE_PARAMETER_FROM as one parameter that the database unpacks:
`IN (SELECT value FROM json_each(%s))` on SQLite (JSON1 is built in since 3.38 and in every build
Python ships) and `IN (SELECT unnest(%s::type[]))` on PostgreSQL. Shorter lists keep the plain form
and its plans. The values are those Django prepares for the column (a UUID as SQLite's 32 hex
characters), so the comparison is the one `IN (…)` made. Subqueries (`__in=queryset`) are untouched.

`install()` (LociConfig.ready) replaces the `in` lookup of every field and of every relation.
"""

import json

from django.db.models import Field, ForeignObject
from django.db.models.fields.related_lookups import RelatedIn
from django.db.models.lookups import In

# Lists up to this length keep `IN (%s, …)`: several such lists in one statement stay far under 999.
ONE_PARAMETER_FROM = 100
_JSON_SCALARS = (str, int, float)


class OneParameterList:
    def process_rhs(self, compiler, connection):
        sql, params = super().process_rhs(compiler, connection)
        if not self.rhs_is_direct_value() or len(params) <= ONE_PARAMETER_FROM:
            return sql, params
        if sql != "(" + ", ".join(["%s"] * len(params)) + ")":  # a field with placeholders of its own
            return sql, params
        if connection.vendor == "sqlite" and all(isinstance(p, _JSON_SCALARS) for p in params):
            return "(SELECT value FROM json_each(%s))", [json.dumps(list(params))]
        if connection.vendor == "postgresql":
            column = self.lhs.output_field.cast_db_type(connection)
            if column:
                return f"(SELECT unnest(%s::{column}[]))", [list(params)]
        return sql, params


class OneParameterIn(OneParameterList, In):
    pass


class OneParameterRelatedIn(OneParameterList, RelatedIn):
    pass


def install() -> None:
    Field.register_lookup(OneParameterIn)
    ForeignObject.register_lookup(OneParameterRelatedIn)
