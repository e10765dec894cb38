"""Relative dates made absolute: the resolver lives in `common.dates`, below every app, since search resolves
a question's "last Thursday" against its reference time the same way extraction resolves a message's."""

from common.dates import ResolvedDate, dated, english_day, resolve_relative_dates, resolved_dates, undated

__all__ = ["ResolvedDate", "dated", "english_day", "resolve_relative_dates", "resolved_dates", "undated"]
